"""JAX's persistent compilation cache: compiled programs kept on disk, so that a new process running
the same simulation (same shapes, options and library versions) loads its programs instead of
compiling them again. The `geomech` command uses it by default.

Three things are added to JAX's own cache (`jax._src.compilation_cache`, `jax._src.lru_cache`):

- the key does not depend on the directory's path: JAX's default
    `jax_persistent_cache_enable_xla_caches` writes the directory into XLA's compile options
    (GPU autotuning caches), and the compile options are hashed into every key, so a cache
    reached through a symlink, copied or moved would load none of its programs; it is turned off
    (`"none"`) while the cache is enabled;
- an entry is written to a temporary file and renamed into place (an interrupted write leaves no
    truncated entry), and a damaged one (truncated, corrupted: it does not decompress) is a miss
    whose program, compiled again, replaces it; JAX would warn about it, once per program, and
    keep it for ever (`LRUCache.put` skips an existing key); a sound entry that another process
    sharing the directory wrote meanwhile is kept, and is not reported;
- a directory that cannot be written to (read-only, full) is still read, and reported once;
    every problem is one `UserWarning` per directory with its remedy (`cache_counts()` counts
    them), instead of one JAX warning per program.

JAX is imported only when the cache is enabled, so that `geomech --help` can show where it is.
"""

import collections
import contextlib
import os
import pathlib
import sys
import time
import uuid
import warnings

ENV = "GEOMECH_CACHE_DIR"
_EVENTS = {
    "/jax/compilation_cache/compile_requests_use_cache": "requests",
    "/jax/compilation_cache/cache_hits": "hits",
}
_counts: collections.Counter = collections.Counter()
_listening = False
_TMP = ".geomech-tmp-"  # the prefix of an entry being written (renamed into place when complete)
_STALE_TMP_S = 3600.0  # a temporary entry this old was left by an interrupted process
_warned: set = set()
_installed: pathlib.Path | None = None  # the directory of the cache `_install` made JAX's


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


def _problem(path, kind: str, message: str) -> None:
    """Count a problem of the cache `path`; one warning per directory and message."""
    _counts[kind] += 1
    if (str(path), message) not in _warned:
        _warned.add((str(path), message))
        warnings.warn(message, UserWarning, stacklevel=4)


def _damaged(path, *, replaced: bool) -> str:
    what = (
        "their programs were compiled again and the entries replaced"
        if replaced
        else "their programs were compiled again; delete the directory to rebuild it"
    )
    return (
        f"damaged entries in the compilation cache {path} (truncated or corrupted, e.g. by an "
        f"interrupted write) could not be read: {what}."
    )


def _write_problem(path, error: OSError) -> str:
    reason = error.strerror or type(error).__name__
    return (
        f"the compilation cache {path} cannot be written ({reason}): programs are loaded from it "
        "but new ones are not kept. Make it writable (or free space), set "
        f"${ENV} to another directory, or run without it (geomech --no-cache)."
    )


def _atomic_cache(path: pathlib.Path, max_size: int):
    """JAX's file cache (`LRUCache`) whose `put` writes atomically, replaces an entry that exists
    (JAX writes only after a read that found nothing usable: the entry is damaged) and reports a
    directory it cannot write to once, instead of raising (JAX would warn for every program)."""
    from jax._src.compilation_cache import decompress_executable
    from jax._src.lru_cache import _CACHE_SUFFIX, LRUCache

    class AtomicCache(LRUCache):
        def get(self, key: str) -> bytes | None:
            # read and decompressed as JAX does next: an entry that fails is a miss (JAX would
            # warn), and its program, compiled again, replaces it (`put`)
            try:
                value = super().get(key)
                if value is not None:
                    decompress_executable(value)
            except Exception:
                return None
            return value

        def put(self, key: str, value: bytes) -> None:
            if not key:
                raise ValueError("key cannot be empty")
            if self.get(key) is not None:
                # written since JAX's read missed, by another process sharing the directory
                # (two test workers, parallel runs compiling the same program): kept
                return
            entry = self.path / f"{key}{_CACHE_SUFFIX}"
            tmp = self.path / f"{_TMP}{uuid.uuid4().hex}"
            damaged = False
            try:
                if self.eviction_enabled:
                    self.lock.acquire(timeout=self.lock_timeout_secs)
                try:
                    damaged = entry.exists()
                    self._evict_if_needed(additional_size=len(value))
                    tmp.write_bytes(value)
                    os.replace(tmp, entry)
                    if self.eviction_enabled:
                        stamp = time.time_ns().to_bytes(8, "little")
                        (self.path / f"{key}-atime").write_bytes(stamp)
                finally:
                    if self.eviction_enabled:
                        self.lock.release()
            except OSError as e:
                with contextlib.suppress(OSError):
                    tmp.unlink(missing_ok=True)
                _problem(path, "unwritable", _write_problem(path, e))
                if damaged:
                    _problem(path, "damaged", _damaged(path, replaced=False))
                return
            if damaged:
                _problem(path, "damaged", _damaged(path, replaced=True))

    return AtomicCache(str(path), max_size=max_size)


def _install(path: pathlib.Path) -> bool:
    """Make `_atomic_cache(path)` JAX's persistent cache (after `reset_cache`); `False` if this
    JAX's internals differ from those expected (its own cache is then used as it is)."""
    import jax

    try:
        from jax._src import compilation_cache as jax_cache
        from jax._src.lru_cache import LRUCache  # noqa: F401
    except ImportError:
        return False
    names = ("_cache", "_cache_initialized", "_cache_initialized_mutex")
    if not all(hasattr(jax_cache, name) for name in names):
        return False
    global _installed
    cache = _atomic_cache(path, jax.config.jax_compilation_cache_max_size)
    with jax_cache._cache_initialized_mutex:
        jax_cache._cache = cache
        jax_cache._cache_initialized = True
    _installed = path
    return True


def _remove_stale_writes(path: pathlib.Path) -> None:
    """Temporary entries left by a process interrupted while writing (older than an hour)."""
    now = time.time()
    with contextlib.suppress(OSError):
        for tmp in path.glob(f"{_TMP}*"):
            with contextlib.suppress(OSError):
                if now - tmp.stat().st_mtime > _STALE_TMP_S:
                    tmp.unlink()


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

    The directory can be reached through a symlink, copied or moved: its programs do not depend
    on its path. Entries are written atomically; a damaged one (truncated, corrupted) is compiled
    again and replaced. A directory that cannot be written to (read-only, full) is still read.
    Each of these problems is reported once per directory (a `UserWarning` with the remedy).
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
    if hasattr(jax.config, "jax_persistent_cache_enable_xla_caches"):
        # XLA's GPU caches in subdirectories of `path` put `path` into every key (the compile
        # options are hashed): off, so that a symlinked, copied or moved cache still loads
        jax.config.update("jax_persistent_cache_enable_xla_caches", "none")
    compilation_cache.reset_cache()  # JAX reads the setting once per process: read it again
    _install(path)
    _remove_stale_writes(path)
    if not _listening:
        jax.monitoring.register_event_listener(_count)
        _listening = True
    return path


_SETTINGS = (
    "jax_compilation_cache_dir",
    "jax_persistent_cache_min_compile_time_secs",
    "jax_persistent_cache_min_entry_size_bytes",
    "jax_persistent_cache_enable_xla_caches",
)


@contextlib.contextmanager
def compilation_cache(path=None):
    """`enable_compilation_cache(path)` for the duration of a `with` block (JAX's settings are
    restored after it); yields the directory."""
    import jax
    from jax.experimental.compilation_cache import compilation_cache as jax_cache

    saved = {k: getattr(jax.config, k) for k in _SETTINGS if hasattr(jax.config, k)}
    enclosing = _installed if saved["jax_compilation_cache_dir"] == str(_installed) else None
    try:
        yield enable_compilation_cache(path)
    finally:
        for k, value in saved.items():
            jax.config.update(k, value)
        jax_cache.reset_cache()
        if enclosing is not None:  # an enclosing geomech cache is given back as it was
            _install(enclosing)


def cache_counts() -> dict[str, int]:
    """Since the cache was first enabled: compilations that asked the cache (`requests`), those
    it answered (`hits`), entries that could not be read (`damaged`, found when their program is
    written again) and programs that could not be written (`unwritable`)."""
    return {k: _counts[k] for k in ("requests", "hits", "damaged", "unwritable")}
