"""Shared plumbing of the benchmark scripts: device selection, machine description, timing.

Every script calls `preconfigure()` before it imports JAX (when run as a script), then
`check_device()` after, so that `--device cpu|gpu` works the same everywhere:

- `--device cpu` (the default) sets `JAX_PLATFORMS=cpu`, so the figures are CPU figures even on a
  machine with a GPU;
- `--device gpu` leaves JAX's platform choice alone and stops with a clear message unless JAX's
  default backend is a GPU (install `jax[cuda12]`, or the ROCm build, first).
"""

import argparse
import os
import platform
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)  # run from a checkout: this repository's geomech


def add_device_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=("cpu", "gpu"),
        default="cpu",
        help="run on the CPU (default) or on JAX's GPU backend (needs a CUDA/ROCm jaxlib)",
    )


def preconfigure(argv=None) -> str:
    """Read `--device` from the command line and set the environment before JAX is imported."""
    p = argparse.ArgumentParser(add_help=False)
    add_device_argument(p)
    device = p.parse_known_args(argv)[0].device
    # OpenBLAS (used by jaxlib's CPU LAPACK kernels) spawns threads for batched triangular solves;
    # on a small or busy machine that thread contention slowed one vmapped call 300x.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    if device == "cpu":
        os.environ["JAX_PLATFORMS"] = "cpu"
    return device


def check_device(device: str) -> None:
    """Stop with a message if JAX does not run on the requested device; print the device."""
    import jax

    jax.config.update("jax_enable_x64", True)
    backend = jax.default_backend()
    if device == "gpu" and backend != "gpu":
        raise SystemExit(
            f"--device gpu: JAX's default backend is {backend!r} (devices {jax.devices()}); "
            "install a GPU jaxlib (pip install -U 'jax[cuda12]') or run with --device cpu."
        )
    print(f"[bench] device: {jax.devices()[0]} (backend {backend})", file=sys.stderr, flush=True)


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):  # pragma: no cover - no `uptime` binary
        return f"load average: {os.getloadavg()}"


def git_commit() -> str:
    """The checkout's commit (`+dirty` with uncommitted changes), to say which geomech was measured."""
    try:
        run = lambda *a: subprocess.run(
            ["git", "-C", ROOT, *a], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        commit = run("rev-parse", "HEAD")
        return commit + ("+dirty" if run("status", "--porcelain", "--untracked-files=no") else "")
    except (OSError, subprocess.SubprocessError):  # pragma: no cover - no git
        return "unknown"


def machine_info() -> dict:
    import jax

    return {
        "platform": platform.platform(),
        "processor": platform.processor() or platform.machine(),
        "cpu_count": os.cpu_count(),
        "jax": jax.__version__,
        "backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
        "device_kind": jax.devices()[0].device_kind,
        "python": sys.version.split()[0],
        "uptime_at_start": uptime(),
        "loadavg_at_start": os.getloadavg(),
        "openblas_num_threads": os.environ.get("OPENBLAS_NUM_THREADS"),
    }


def finish(out: dict) -> dict:
    """Record the load at the end and print the JSON document."""
    import json

    out["machine"]["uptime_at_end"] = uptime()
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    return out


def block(x):
    import jax

    return jax.block_until_ready(x)


def timed(fn, *args):
    """`(seconds, result)` of one call, waiting for the result."""
    t = time.perf_counter()
    out = block(fn(*args))
    return time.perf_counter() - t, out


def best_time(fn, *args, repeat=3, long_s=5.0):
    """The best of `repeat` timed calls (stops early once a call takes over `long_s` seconds)."""
    out, times = None, []
    for _ in range(repeat):
        dt, out = timed(fn, *args)
        times.append(dt)
        if dt > long_s:
            break
    return min(times), out


def fit_exponent(sizes, times) -> float:
    """Least-squares slope $p$ of $\\log t = p \\log n + c$ (the cost exponent)."""
    import numpy as np

    x, y = np.log(np.asarray(sizes, float)), np.log(np.asarray(times, float))
    return float(np.polyfit(x, y, 1)[0])
