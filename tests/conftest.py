import os

import jax
import jaxtyping
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config):
    """Two xdist workers (CI has 2 cores), whole files per worker so module fixtures and compiled
    functions are reused — unless `-n` is given or xdist is off (`-p no:xdist`). Only in the
    controlling process: a worker must not start workers of its own."""
    worker = hasattr(config, "workerinput") or "PYTEST_XDIST_WORKER" in os.environ
    if not worker and config.pluginmanager.hasplugin("xdist") and config.option.numprocesses is None:
        config.option.numprocesses = 2
        config.option.dist = "loadfile"


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
    every compiled executable alive (the full suite compiles several hundred)."""
    yield
    jax.clear_caches()


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
