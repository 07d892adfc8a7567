"""JAX's persistent compilation cache: compiled programs kept on disk, so that a new process running
the same simulation (same shapes, options and library versions) loads its programs instead of
compiling them again. The `geomech` command uses it by default.

JAX is imported only when the cache is enabled, so that `geomech --help` can show where it is.
"""

import collections
import contextlib
import os
import pathlib
import sys

ENV = "GEOMECH_CACHE_DIR"
_EVENTS = {
    "/jax/compilation_cache/compile_requests_use_cache": "requests",
    "/jax/compilation_cache/cache_hits": "hits",
}
_counts: collections.Counter = collections.Counter()
_listening = False


def default_cache_dir() -> pathlib.Path:
    """Where compiled programs are kept by default: `$GEOMECH_CACHE_DIR` if set, else
    `$XDG_CACHE_HOME/geomech/jax`, else `~/.cache/geomech/jax` (on Windows
    `%LOCALAPPDATA%\\geomech\\jax`)."""
    if os.environ.get(ENV):
        return pathlib.Path(os.environ[ENV]).expanduser()
    if sys.platform == "win32" and os.environ.get("LOCALAPPDATA"):
        base = pathlib.Path(os.environ["LOCALAPPDATA"])
    elif os.environ.get("XDG_CACHE_HOME"):
        base = pathlib.Path(os.environ["XDG_CACHE_HOME"])
    else:
        base = pathlib.Path.home() / ".cache"
    return base / "geomech" / "jax"


def _count(event: str, **kwargs) -> None:
    if event in _EVENTS:
        _counts[_EVENTS[event]] += 1


def enable_compilation_cache(path=None) -> pathlib.Path:
    """Keep compiled programs on disk, so that the next process (a notebook restarted, the
    `geomech` command run again) loads them instead of compiling: JAX's persistent compilation
    cache, for every program however small.

    **Arguments:**

    - `path`: the directory (created if missing); default `$GEOMECH_CACHE_DIR`, else
        `$XDG_CACHE_HOME/geomech/jax`, else `~/.cache/geomech/jax`, the directory `geomech`
        uses too.

    **Returns:** the directory, as a `pathlib.Path`.

    Call it once, best before the first compilation: programs compiled earlier in the process are
    not stored. Like any compiled code, the cache is trusted: do not use a directory that others
    can write to. Programs with host callbacks (e.g. `progress=True`) are compiled every time.
    """
    import jax
    from jax.experimental.compilation_cache import compilation_cache

    global _listening
    path = default_cache_dir() if path is None else pathlib.Path(path).expanduser()
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ValueError(
            f"cannot create the compilation cache directory {path}: {e.strerror}."
        ) from None
    jax.config.update("jax_compilation_cache_dir", str(path))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    compilation_cache.reset_cache()  # JAX reads the setting once per process: read it again
    if not _listening:
        jax.monitoring.register_event_listener(_count)
        _listening = True
    return path


_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
)


@contextlib.contextmanager
def compilation_cache(path=None):
    """`enable_compilation_cache(path)` for the duration of a `with` block (JAX's settings are
    restored after it); yields the directory."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache as jax_cache

    saved = {k: getattr(jax.config, k) for k in _SETTINGS}
    try:
        yield enable_compilation_cache(path)
    finally:
        for k, value in saved.items():
            jax.config.update(k, value)
        jax_cache.reset_cache()


def cache_counts() -> dict[str, int]:
    """Since the cache was first enabled: compilations that asked the cache (`requests`) and those
    it answered (`hits`)."""
    return {"requests": _counts["requests"], "hits": _counts["hits"]}
