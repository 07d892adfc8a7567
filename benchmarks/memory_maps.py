"""Memory maps per compiled program, and the crash at the kernel's limit.

XLA:CPU maps about three memory regions (code, read-only data, data) per compiled kernel and keeps
them while the executable lives. A long process that compiles many programs — the test suite run
in one process — reaches `vm.max_map_count` (65530 by default); LLVM then fails with "Cannot
allocate memory" and the process dies (SIGSEGV/SIGABRT). `jax.clear_caches()` releases them.

    python benchmarks/memory_maps.py            # maps per simulate program, and after clearing
    python benchmarks/memory_maps.py --exhaust  # fill the maps up to the limit in a subprocess,
                                                # then compile one simulation: it crashes

Measured (2 cores, jax 0.10.2): one `simulate` of a library model adds 800-1100 maps; twelve
models 4000, back to the baseline after `jax.clear_caches()`; with the maps filled to 300 below
the limit, compiling the pendulum's simulation printed "LLVM compilation error: Cannot allocate
memory" and the process died with SIGSEGV (exit 139).
"""

import argparse
import ctypes
import gc
import json
import subprocess
import sys


def maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def limit() -> int:
    with open("/proc/sys/vm/max_map_count") as f:
        return int(f.read())


def per_program():
    import jax

    jax.config.update("jax_enable_x64", True)
    import geomech as gm

    out = {"start": maps(), "limit": limit(), "models": {}}
    for name, model in gm.models.MODELS.items():
        m = model()
        before = maps()
        jax.block_until_ready(gm.simulate(m.system(), m.initial_state(), m.t0, m.t0 + 0.1))
        out["models"][name] = maps() - before
    out["all"] = maps()
    jax.clear_caches()
    gc.collect()
    out["after_clear_caches"] = maps()
    return out


def exhaust(margin: int = 300):
    """Fill the address space with alternating-protection pages up to `margin` below the limit,
    then compile one simulation."""
    import jax

    jax.config.update("jax_enable_x64", True)
    import geomech as gm

    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    page, n = 4096, limit() - maps() - margin
    base = libc.mmap(None, n * page, 3, 0x22, -1, 0)  # PROT_READ|WRITE, MAP_PRIVATE|ANONYMOUS
    for i in range(1, n, 2):  # every other page PROT_NONE: regions that cannot merge
        libc.mprotect(base + i * page, page, 0)
    print(f"maps: {maps()} of {limit()}", flush=True)
    m = gm.models.MODELS["pendulum"]()
    jax.block_until_ready(gm.simulate(m.system(), m.initial_state(), m.t0, m.t0 + 0.1))
    print("compiled without crashing", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exhaust", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        exhaust()
    elif args.exhaust:
        proc = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True)
        llvm = proc.stderr.count("Cannot allocate memory")
        print(json.dumps({"exit_code": proc.returncode, "llvm_allocation_errors": llvm,
                          "stdout": proc.stdout.strip().splitlines()}, indent=1))
    else:
        print(json.dumps(per_program(), indent=1))
