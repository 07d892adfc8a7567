import atexit
import ctypes.util
import gc
import os
import shutil
import tempfile

# OpenBLAS (behind jaxlib's CPU LAPACK kernels) starts threads in every batched factorization; with
# the other xdist worker busy on the second core they spin against it, and one vmapped `lu_solve`
# took 250x as long (docs/performance.md). Set before jaxlib loads its LAPACK; inherited by the
# subprocesses (the CLI, notebook kernels).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
# The compiled programs carry no Python tracebacks as source locations (debug information only;
# results and error messages are the same): about 4 % less of the time XLA compiles, which is
# most of the suite's time (docs/performance.md). Read by JAX when it is imported, here and in the
# subprocesses.
os.environ.setdefault("JAX_INCLUDE_FULL_TRACEBACKS_IN_LOCATIONS", "false")
os.environ.setdefault("JAX_TRACEBACK_IN_LOCATIONS_LIMIT", "0")

import jax  # noqa: E402
import jaxtyping  # noqa: E402
import pytest  # noqa: E402

# XLA:CPU's older code generator (docs/performance.md): the same programs at about 60 % of the
# compile time, which is most of the suite's time; results agree to round-off. Set before the
# first computation (the backend reads XLA_FLAGS once) and inherited by the subprocesses (the
# CLI, notebook kernels). An XLA_FLAGS that names the flag itself is left as it is.
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        os.environ.get("XLA_FLAGS", "") + " --xla_cpu_use_fusion_emitters=false"
    ).strip()
jax.config.update("jax_enable_x64", True)
# implicit rank promotion (a (n,) array against an (n, 1) one) is an error in the tests, as in diffrax's
jax.config.update("jax_numpy_rank_promotion", "raise")
# Python's cyclic garbage collector, at its default thresholds, ran about 10,000 times in one test
# file (test_variational_lie.py: 14.7 s of its 231 s), each young collection triggered by the
# objects JAX's tracing allocates and the full ones walking a heap that grows over a worker's
# hundreds of tests. Collected rarely instead, and fully after each module
# (`_release_compiled_functions`) so that memory stays bounded: 1.9 s in 38 collections (the file
# in 196 s; its time varies by ±15 s from run to run on a 2-core machine). Not `gc.freeze()`: it
# gained nothing measurable and hides the frozen objects from `gc.get_objects()`, which a test reads.
gc.set_threshold(100_000, 50, 1_000)
# the `geomech` command keeps compiled programs in the user's cache directory: never in the tests
os.environ["GEOMECH_CACHE_DIR"] = tempfile.mkdtemp(prefix="geomech-test-cache-")
atexit.register(shutil.rmtree, os.environ["GEOMECH_CACHE_DIR"], True)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Two xdist workers (CI has 2 cores), whole files per worker so module fixtures and compiled
    functions are reused — unless `-n` is given or xdist is off (`-p no:xdist`). Only in the
    controlling process: a worker must not start workers of its own."""
    worker = hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ
    if (
        not worker
        and config.pluginmanager.hasplugin("xdist")
        and config.option.numprocesses is None
    ):
        config.option.numprocesses = 2
        config.option.dist = "loadfile"
        _preload_jemalloc()


def _preload_jemalloc():
    """jemalloc instead of glibc's malloc in the workers and the processes they start (notebook
    kernels, the CLI), where the system has it (Debian's `libjemalloc2`, installed by `.ci/run`):
    XLA's compiler allocates heavily, and a first `simulate` compiled 10-17 % faster with it
    (docs/performance.md). Set before xdist starts the workers, which inherit it; a given
    `LD_PRELOAD` is left as it is."""
    library = ctypes.util.find_library("jemalloc")
    if library and "LD_PRELOAD" not in os.environ:
        os.environ["LD_PRELOAD"] = library


@pytest.fixture
def no_typecheck():
    """Run a test without the jaxtyping/beartype annotation checks of the test suite: tests of
    geomech's own error messages for arguments of the wrong type (which users, who run without
    the checker, see)."""
    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", False)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Drop JAX's compilation caches after each test module: a long single process otherwise keeps
    every compiled executable alive (the full suite compiles several hundred). Then a full garbage
    collection: the thresholds above make the collector's own full passes rare."""
    yield
    jax.clear_caches()
    gc.collect()


def _memory_maps() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def _max_memory_maps() -> int:
    try:
        with open("/proc/sys/vm/max_map_count") as f:
            return int(f.read())
    except OSError:
        return 65530


MAX_MAPS = _max_memory_maps() if os.path.exists("/proc/self/maps") else None


@pytest.fixture(autouse=True)
def _bounded_memory_maps():
    """Keep the process below the kernel's limit on memory maps (`vm.max_map_count`, 65530 by
    default). XLA:CPU maps about three regions per compiled kernel — 800 to 1100 for one
    `simulate` program — and keeps them while the executable lives; a single-process run of the
    suite reached the limit halfway, and LLVM then fails with "Cannot allocate memory" and the
    process aborts (reproduced by filling the maps and compiling one simulation). Past half the
    limit the caches are dropped after the test."""
    yield
    if MAX_MAPS is not None and _memory_maps() > MAX_MAPS // 2:
        jax.clear_caches()
        gc.collect()


def pytest_runtest_teardown(item):
    """With GEOMECH_TEST_RESOURCES=<file>, log the process's resources after every test (RSS, virtual
    size, memory maps, threads): the record used to find why a long single-process run aborted."""
    path = os.environ.get("GEOMECH_TEST_RESOURCES")
    if not path:
        return
    status = dict(
        line.split(":", 1) for line in open("/proc/self/status").read().splitlines() if ":" in line
    )
    maps = sum(1 for _ in open("/proc/self/maps"))
    with open(path, "a") as f:
        f.write(
            f"{item.nodeid}\tRSS={status['VmRSS'].strip()}\tVM={status['VmSize'].strip()}"
            f"\tmaps={maps}\tthreads={status['Threads'].strip()}\n"
        )
