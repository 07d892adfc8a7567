import jax
import pytest

jax.config.update("jax_enable_x64", True)


@pytest.fixture(autouse=True, scope="module")
def _release_compiled_functions():
    """Drop JAX's compilation caches after each test module: a long single process otherwise keeps
    every compiled executable alive (the full suite compiles several hundred)."""
    yield
    jax.clear_caches()
