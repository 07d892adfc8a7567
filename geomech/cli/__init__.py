"""The `geomech` command: list the models, run and compare simulations, and a short demo.

    geomech list
    geomech run MODEL [--solver NAME] [--batch N] [--t1 T] [--param k=v ...] [--out DIR] ...
    geomech compare MODEL [--states N] [--param k=v ...]
    geomech demo

float64 is enabled unless `--float32`. Parsing and every check of the arguments (`_parse`, the
model catalog `_catalog`) import neither JAX nor the models, so `--help`, `list` and argument
errors answer at once; a command that simulates imports them, and keeps its compiled programs in
JAX's persistent compilation cache (`gm.enable_compilation_cache`; `--no-cache` to skip it), so a
second run of the same simulation starts at once. Exit status: 0 success, 1 failed
trajectories (or solvers that disagree, for `compare`), 2 bad input, with a one-line message and
no traceback, 130 interrupted (Ctrl-C).
"""

import contextlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Sequence

from ._parse import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USER_ERROR,
    UsageError,
    model_info,
    parse_params,
    parser,
)

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "EXIT_USER_ERROR", "main"]


def _check(args) -> None:
    """Every check of the arguments that needs no JAX, before any command runs."""
    from . import _catalog

    if args.command in ("run", "compare"):
        info = model_info(_catalog.load(), args.model)
        args.params = parse_params(args.model, info, args.param)
    if args.command == "run":
        t0 = info["time_span"][0]
        if args.t1 is not None and not args.t1 > t0:
            raise UsageError(f"--t1 must be after the start time t0 = {t0:g}, got {args.t1:g}.")
        if args.animate and args.out is None:
            raise UsageError("--animate writes MODEL.html into --out: give --out DIR.")
        if args.animate and not info.get("scene"):
            drawn = ", ".join(n for n, i in _catalog.load().items() if i.get("scene"))
            raise UsageError(f"model {args.model} has no 3-D scene to animate; these do: {drawn}.")
        args.out_dir = None
        if args.out is not None:
            from ._output import prepare

            args.out_dir = prepare(args.out, args.overwrite, args.model)


def _command(name: str):
    if name == "list":
        from ._catalog import cmd_list

        return lambda args, argv: cmd_list(args)
    if name == "run":
        from ._run import cmd_run

        return cmd_run
    if name == "compare":
        from ._compare import cmd_compare

        return cmd_compare
    from ._demo import cmd_demo

    return cmd_demo


def _enter_cache(stack: contextlib.ExitStack):
    """JAX's persistent compilation cache for this command (restored after it, for a caller in the
    same process); a directory that cannot be created is a warning, not an error."""
    from .. import _cache

    try:
        return stack.enter_context(_cache.compilation_cache())
    except ValueError as e:
        print(f"geomech: warning: {e} Running without it (--no-cache).", file=sys.stderr)
        return None


def _show_warning(message, category, filename, lineno, file=None, line=None):
    """A warning during a command (the compilation cache's, a model's): one line, no source."""
    print(f"geomech: warning: {message}", file=sys.stderr if file is None else file)


def _one_line(e: BaseException) -> str:
    for line in str(e).strip().splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line
    return type(e).__name__


def _interrupted(signum, frame):
    """Ctrl-C in the `geomech` process: exit 130 at once. Leaving through Python's shutdown while
    JAX's threads (compilation, the runtime) are still working can crash the interpreter. A run
    being written into `--out` is removed first (the files already moved in are complete: the
    move holds Ctrl-C back until its end)."""
    if "geomech.cli._output" in sys.modules:
        sys.modules["geomech.cli._output"].abandon()
    print("geomech: interrupted", file=sys.stderr, flush=True)
    os._exit(130)


def _checks_as_nans() -> None:
    """Equinox's run-time checks (`eqx.error_if`, diffrax's among them) as NaNs instead of host
    callbacks, `EQX_ON_ERROR=nan`: JAX's persistent cache does not keep a program with a host
    callback, and the main integration program has some (diffrax checks `SaveAt(ts=...)` at run
    time). None of them can fire in `geomech run`, which checks its inputs before tracing and
    reports each trajectory's result; a check that did fire would show as non-finite values,
    reported as a failure. Equinox reads the variable once, on import: it is set for that import
    only (a user's own setting is kept, and child processes see the environment unchanged)."""
    if "equinox" in sys.modules or "EQX_ON_ERROR" in os.environ:
        return
    os.environ["EQX_ON_ERROR"] = "nan"
    try:
        import equinox  # noqa: F401
    finally:
        del os.environ["EQX_ON_ERROR"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `geomech` command with `argv`; returns the exit status.

    Without `argv` this is the process's own command (`sys.argv[1:]`, the `geomech` script and
    `python -m geomech`): Ctrl-C then ends the process with status 130 (a run's files are moved in
    completely or not at all)."""
    process = argv is None
    if process:
        argv = sys.argv[1:]
        if threading.current_thread() is threading.main_thread():
            signal.signal(signal.SIGINT, _interrupted)
    argv = list(argv)
    args = None
    try:
        args = parser().parse_args(argv)
        _check(args)
        if args.command != "list":
            if process and not getattr(args, "no_cache", False):
                _checks_as_nans()
            import jax

            float32 = args.float32 or getattr(args, "float32_sub", False)
            jax.config.update("jax_enable_x64", not float32)
        with contextlib.ExitStack() as stack:
            stack.enter_context(warnings.catch_warnings())  # restores showwarning afterwards
            warnings.showwarning = _show_warning
            args.cache_dir = None
            if args.command != "list" and not getattr(args, "no_cache", False):
                args.cache_dir = _enter_cache(stack)
            return _command(args.command)(args, argv)
    except UsageError as e:
        print(f"geomech: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (ValueError, TypeError) as e:  # configuration errors raised by geomech before tracing
        print(f"geomech: error: {_one_line(e)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # e.g. `geomech list | head`
        return 0
    except KeyboardInterrupt:
        print("geomech: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except Exception as e:  # a runtime failure (e.g. an error raised inside a compiled call)
        if os.environ.get("GEOMECH_TRACEBACK"):
            raise
        print(
            f"geomech: error: {type(e).__name__}: {_one_line(e)} "
            "(set GEOMECH_TRACEBACK=1 for the traceback)",
            file=sys.stderr,
        )
        return EXIT_FAILED
    finally:
        if getattr(args, "out_dir", None) is not None:
            args.out_dir.release()  # the claim on --out (a no-op once the files are written)
        if process and threading.current_thread() is threading.main_thread():
            # the command is done: a Ctrl-C while the interpreter shuts down (JAX's teardown can
            # take seconds) changes nothing; Python would restore the default handler there and
            # the process would die by the signal instead of returning its status
            signal.signal(signal.SIGINT, signal.SIG_IGN)
