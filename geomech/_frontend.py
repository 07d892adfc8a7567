"""The front end shared by `simulate` and `simulate_vakonomic`: everything between the user's call
and the compiled program.

- the arguments and options, validated before tracing (`prepare`, `solve_options`);
- the precision guard (`warn_if_imprecise`) and the output-size estimate (`check_output_size`);
- system integrators (`AbstractSystemIntegrator.bind`);
- the one traced/host decision (`values_are_concrete`), and with it how a failed precondition
  is reported (`run_checked`): named per trajectory on the host, an in-program error otherwise;
- the lazy finite-$a_R$ check of `simulate` (`run_checked(..., recheck=...)`);
- the adjoint for the enclosing differentiation (`_adjoint.automatic_adjoint`);
- the warning against silent recompilation (`note_trace`).

The engine (`_engine.py`) then runs the guarded, batched, sharded solve.
"""

import dataclasses
import functools
import warnings
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
from jax._src.core import trace_state_clean
from jaxtyping import ArrayLike, PyTree

from ._adjoint import automatic_adjoint
from ._checks import FAILURES, Failure, check_time, concrete
from ._engine import SolveOptions, batch_sharding
from ._geometry import AbstractStateParts
from ._precision import warn_if_imprecise
from ._stabilization import AbstractStabilization, as_stabilization
from ._system_integrator import AbstractSystemIntegrator

# the default `fn` of a `SubSaveAt`: save `y` itself
_SAVE_Y = diffrax.SubSaveAt(t1=True).fn

# -- the traced/host decision ---------------------------------------------------------------------


def values_are_concrete() -> bool:
    """Whether the outputs of a program compiled and run here are concrete arrays in this process,
    so that the front end may read them (`np.asarray`) to name failing trajectories.

    Decided from JAX's trace state, not from the arguments: under any transformation of the
    caller's (`jax.jit`, `jax.vmap`, `jax.grad`, `jax.jacfwd`, `eqx.filter_jit`, ...) a traced
    value can hide anywhere — in a closure (`force=lambda q, v: -c * v` with `c` traced), a
    `functools.partial`, a global — where no inspection of the pytree leaves sees it, and then the
    program's outputs are tracers. With a clean trace state nothing can be traced (a tracer that
    escaped its own transformation is JAX's `UnexpectedTracerError` anyway). A batch spread over
    several processes is not held here either. Everything else then takes the in-program path
    (`eqx.error_if`), which is correct everywhere, only less specific."""
    return trace_state_clean() and jax.process_count() == 1


# -- arguments and options ------------------------------------------------------------------------


def _check_saveat(saveat, t0, t1):
    if not isinstance(saveat, diffrax.SaveAt):
        raise TypeError(f"saveat must be a diffrax.SaveAt, got {type(saveat).__name__}.")
    sub = saveat.subs
    if saveat.dense or not isinstance(sub, diffrax.SubSaveAt) or sub.fn is not _SAVE_Y:
        raise ValueError(
            "saveat must save states: use diffrax.SaveAt(t0=..., t1=..., ts=..., steps=...) "
            "without fn=, subs= or dense=True (compute functions of sol.states afterwards)."
        )
    if not (sub.t0 or sub.t1 or sub.steps or sub.ts is not None):
        raise ValueError("saveat saves nothing: give t0=True, t1=True, ts=... or steps=True.")
    ts, start, end = concrete(sub.ts), concrete(t0), concrete(t1)
    if sub.ts is None or ts is None:
        return
    if ts.ndim != 1:
        raise ValueError(f"saveat.ts must be a 1-D array of times, got shape {ts.shape}.")
    if not np.all(np.isfinite(ts)):
        raise ValueError(f"saveat.ts has NaN or inf entries: {ts}.")
    if start is None or end is None:
        return
    low, high = min(start, end), max(start, end)
    if np.any((ts < low) | (ts > high)):
        shown = [float(x) for x in (start, end, ts.min(), ts.max())]
        if len({f"{x:g}" for x in shown}) < len(set(shown)):  # distinct values that print alike
            shown = [repr(x) for x in shown]
        a, b, lo, hi = (x if isinstance(x, str) else f"{x:g}" for x in shown)
        mixed = {np.result_type(start), np.result_type(end)} - {np.result_type(ts)}
        hint = (
            f" t0/t1 are {', '.join(sorted(d.name for d in mixed))} and saveat.ts "
            f"{np.result_type(ts).name}: give the times in one dtype." if mixed else ""
        )
        raise ValueError(
            f"saveat.ts must lie in [t0, t1] = [{a}, {b}], got times from {lo} to {hi}.{hint}"
        )
    steps = np.diff(ts) * np.sign(end - start)
    if np.any(steps < 0):
        raise ValueError(
            "saveat.ts must be sorted in the direction of integration (increasing for t1 > t0), "
            f"got {ts}."
        )


def _term_kind(structure) -> str:
    if isinstance(structure, tuple):
        return f"a split system of {len(structure)} terms (e.g. (dq/dt, dv/dt) separately)"
    return "several terms (an IMEX split or a stochastic differential equation)"


def check_time_interval(t0, t1, dtype=None) -> None:
    """`t0`, `t1` must be finite real scalars, and (with the state's `dtype`) `t1 - t0` must not
    be below the resolution of $t$ there, $16\\varepsilon|t|$ (the guarded solver's smallest step:
    no step could make progress). Checked before tracing where they are concrete; `integrate`
    checks traced values with `eqx.error_if`."""
    for name, t in (("t0", t0), ("t1", t1)):
        check_time(t, name)
        value = concrete(t)
        if value is not None and not np.isfinite(value):
            raise ValueError(f"{name} must be a finite real number, got {value!r}.")
    start, end = concrete(t0), concrete(t1)
    if dtype is None or start is None or end is None:
        return
    start, end = np.asarray(start, dtype), np.asarray(end, dtype)
    resolution = 16 * np.finfo(dtype).eps * max(abs(float(start)), abs(float(end)))
    if start != end and abs(float(end) - float(start)) <= resolution:
        raise ValueError(
            f"t1 - t0 = {float(end) - float(start):g} is below the resolution of t at "
            f"t0 = {float(start):g} in {np.dtype(dtype).name} (16 eps |t| = {resolution:.3g}): no "
            "step can make progress. Shift the time origin (e.g. t0 = 0, t1 = t1 - t0)."
        )


def _check_options(*, rtol, atol, dt0, max_steps, t0, t1):
    for name, tol in (("rtol", rtol), ("atol", atol)):
        value = None if tol is None else concrete(tol)
        if value is not None and (
            value.ndim != 0 or value.dtype.kind not in "iuf" or not np.isfinite(value) or value < 0
        ):
            raise ValueError(f"{name} must be a finite number >= 0, got {tol!r}.")
    r, a = (None if x is None else concrete(x) for x in (rtol, atol))
    if r is not None and a is not None and r == 0 and a == 0:
        raise ValueError(
            "rtol and atol are both 0: the step-size controller could never accept a step. "
            "Give a positive tolerance, e.g. rtol=atol=1e-8."
        )
    if isinstance(max_steps, bool) or not isinstance(max_steps, int | np.integer) or max_steps < 1:
        raise ValueError(f"max_steps must be a positive integer, got {max_steps!r}.")
    dt = None if dt0 is None else concrete(dt0)
    if dt is not None:
        if dt.ndim != 0 or dt.dtype.kind not in "iuf" or not np.isfinite(dt) or dt == 0:
            raise ValueError(f"dt0 must be a finite, nonzero step, got {dt0!r}.")
        start, end = concrete(t0), concrete(t1)
        if start is not None and end is not None and end != start and np.sign(dt) != np.sign(end - start):
            raise ValueError(
                f"dt0 = {float(dt):g} points away from t1: integrating from t0 = {float(start):g} to "
                f"t1 = {float(end):g} needs a step of the sign of t1 - t0."
            )


DEFAULT_MAX_OUTPUT_BYTES = 4 * 2**30


def check_output_size(
    y0: PyTree[ArrayLike], saveat: diffrax.SaveAt, max_steps: int, *, batched: bool, extra: int,
    max_output_bytes: int | None,
) -> int:
    """The bytes the saved output will take — `B × T × (size of y + extra + 1)` values, with `T`
    the saved times (`max_steps` slots for `SaveAt(steps=True)`) — and an error before
    allocating if that exceeds `max_output_bytes` (`None`: no limit)."""
    if max_output_bytes is not None and (
        isinstance(max_output_bytes, bool)
        or not isinstance(max_output_bytes, int | np.integer)
        or max_output_bytes <= 0
    ):
        raise ValueError(f"max_output_bytes must be a positive integer or None, got {max_output_bytes!r}.")
    sub = saveat.subs
    T = int(bool(sub.t0)) + int(bool(sub.t1)) + 1  # + the time reached
    T += 0 if sub.ts is None else int(np.size(sub.ts))
    T += max_steps if sub.steps else 0
    leaves = jtu.tree_leaves(y0)
    B = leaves[0].shape[0] if batched else 1
    per_save = sum(int(np.prod(x.shape[1:] if batched else x.shape)) for x in leaves) + extra + 1
    size = B * T * per_save * jnp.dtype(leaves[0].dtype).itemsize
    if max_output_bytes is not None and size > max_output_bytes:
        steps = f" (SaveAt(steps=True) keeps max_steps = {max_steps} slots per trajectory)" if sub.steps else ""
        raise ValueError(
            f"the saved output would take {size / 2**30:.2f} GiB ({B} trajectories x {T} saved times "
            f"x {per_save} values){steps}, above max_output_bytes = {max_output_bytes / 2**30:.2f} "
            "GiB. Save fewer times (SaveAt(ts=...) with fewer points, or t1=True), split the "
            "batch, lower max_steps, or raise the limit with max_output_bytes=... (None: no limit)."
        )
    return size


def solve_options(
    *,
    integrator,
    saveat,
    rtol,
    atol,
    dt0,
    max_steps,
    stepsize_controller,
    adjoint,
    throw,
    progress,
    sharding,
    batched: bool,
    projecting: bool,
    dtype,
    t0,
    t1,
) -> SolveOptions:
    """Validate the options of `simulate` (before tracing) and return them as `SolveOptions`.

    `rtol`, `atol` (default `1e-8`) make the default `diffrax.PIDController` of an adaptive
    integrator; giving them together with a `stepsize_controller` is an error.
    """
    check_time_interval(t0, t1, dtype)
    _check_saveat(saveat, t0, t1)
    for name, flag in (("throw", throw), ("progress", progress)):
        if not isinstance(flag, bool | np.bool_):
            raise TypeError(f"{name} must be True or False, got {flag!r}.")
    _check_options(rtol=rtol, atol=atol, dt0=dt0, max_steps=max_steps, t0=t0, t1=t1)
    if not isinstance(integrator, diffrax.AbstractSolver):
        raise TypeError(
            f"integrator must be a diffrax solver such as diffrax.Tsit5(), got {integrator!r}."
        )
    if integrator.term_structure is not diffrax.AbstractTerm:
        raise TypeError(
            f"integrator {type(integrator).__name__} is not supported: it steps "
            f"{_term_kind(integrator.term_structure)}, while geomech integrates one ODE term "
            "dy/dt = f(t, y). Supported: diffrax's ODE solvers of one term (explicit Runge-Kutta: "
            "Tsit5, Dopri5, Dopri8, Bosh3, Heun, Midpoint, Ralston, Euler; implicit: Kvaerno3/4/5, "
            "ImplicitEuler; ReversibleHeun, LeapfrogMidpoint) and gm.VariationalIntegrator()."
        )
    if not isinstance(adjoint, diffrax.AbstractAdjoint):
        raise TypeError(
            "adjoint must be a diffrax adjoint such as diffrax.RecursiveCheckpointAdjoint(), "
            f"got {adjoint!r}."
        )
    if sharding is not None and not batched:
        raise ValueError(
            "sharding splits the batch axis: give y0 with a leading batch axis (B, n)."
        )
    batch_sharding(sharding)
    if projecting and isinstance(adjoint, diffrax.BacksolveAdjoint):
        raise ValueError(
            "stabilization='projection' cannot be used with diffrax.BacksolveAdjoint (the backward "
            "solve would project the adjoint state): use RecursiveCheckpointAdjoint or 'baumgarte'."
        )
    if stepsize_controller is not None:
        if rtol is not None or atol is not None:
            raise ValueError(
                "give either rtol/atol (for the default diffrax.PIDController) or a "
                "stepsize_controller, not both: set the tolerances on the controller itself, e.g. "
                "stepsize_controller=diffrax.PIDController(rtol=..., atol=..., pcoeff=...)."
            )
        if not isinstance(stepsize_controller, diffrax.AbstractStepSizeController):
            raise TypeError(
                "stepsize_controller must be a diffrax step-size controller such as "
                f"diffrax.PIDController(rtol=..., atol=...), got {stepsize_controller!r}."
            )
    elif isinstance(integrator, diffrax.AbstractAdaptiveSolver):
        stepsize_controller = diffrax.PIDController(
            rtol=1e-8 if rtol is None else rtol, atol=1e-8 if atol is None else atol
        )
    else:
        if dt0 is None:
            raise ValueError(
                f"{type(integrator).__name__} has no error estimate: give a fixed step dt0."
            )
        if rtol is not None or atol is not None:
            raise ValueError(
                f"rtol/atol control adaptive steps, but {type(integrator).__name__} has no error "
                "estimate and takes fixed steps dt0: drop rtol/atol or use an adaptive integrator."
            )
        stepsize_controller = diffrax.ConstantStepSize()
    return SolveOptions(
        integrator=integrator,
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        dt0=None if dt0 is None else jnp.asarray(dt0, dtype),
        max_steps=max_steps,
        adjoint=adjoint,
        throw=bool(throw),  # a NumPy bool too, held as a Python bool (a static field)
        progress=bool(progress),
        sharding=sharding,
    )



class Prepared(eqx.Module):
    """The validated options of a run (`prepare`): `options` for the engine, the stabilization,
    and `t0`, `t1` as arrays of the state's dtype (so a new time does not recompile; NumPy ones
    where they are concrete)."""

    options: SolveOptions
    stabilization: AbstractStabilization
    t0: jax.Array | np.ndarray
    t1: jax.Array | np.ndarray


def prepare(
    system, saved: PyTree[ArrayLike], t0, t1, *, name: str, batched: bool, extra: int,
    parts: AbstractStateParts, integrator, saveat, rtol, atol, dt0, max_steps, stepsize_controller,
    stabilization, adjoint,
    throw, progress, sharding, max_output_bytes,
) -> Prepared:
    """Validate the options of `name` (`simulate` or `simulate_vakonomic`) before tracing.

    `saved`: the (possibly batched) initial value of what is saved at every time, for the size
    estimate, with `extra` diagnostics per saved time. A system integrator
    (`AbstractSystemIntegrator`) is bound to `system` here (`simulate` only: it integrates
    `gm.State`s); a diffrax solver is made one that steps on the system's manifold
    (`AbstractManifold.integrator`, for a state made of `parts`). Warns (`gm.PrecisionWarning`)
    when the tolerances are below what the dtype can deliver."""
    dtype = jtu.tree_leaves(saved)[0].dtype
    if isinstance(integrator, AbstractSystemIntegrator):  # its diffrax solver carries the system
        if name != "simulate":
            raise TypeError(
                f"{type(integrator).__name__} integrates the mechanical state gm.State(q, v) "
                f"only; {name} integrates the multipliers too: use a diffrax integrator such as "
                "diffrax.Tsit5()."
            )
        integrator = integrator.bind(
            system, dt0=dt0, stepsize_controller=stepsize_controller, stabilization=stabilization
        )
    else:  # itself on coordinates, Runge–Kutta–Munthe-Kaas on a group (docs/lie_groups.md)
        integrator = system.manifold.integrator(integrator, adjoint=adjoint, parts=parts, name=name)
    stabilization = as_stabilization(stabilization)
    options = solve_options(
        integrator=integrator, saveat=saveat, rtol=rtol, atol=atol, dt0=dt0, max_steps=max_steps,
        stepsize_controller=stepsize_controller, adjoint=adjoint, throw=throw, progress=progress,
        sharding=sharding, batched=batched,
        projecting=stabilization.state_projection(system) is not None, dtype=dtype, t0=t0, t1=t1,
    )
    check_output_size(
        saved, options.saveat, max_steps, batched=batched, extra=extra,
        max_output_bytes=max_output_bytes,
    )
    if isinstance(options.stepsize_controller, diffrax.PIDController):
        controller = options.stepsize_controller
        warn_if_imprecise(dtype, controller.rtol, controller.atol)
    return Prepared(options, stabilization, _as_time(t0, dtype), _as_time(t1, dtype))


def _as_time(t, dtype):
    """`t` as an array of `dtype`: a NumPy one where it is concrete (no JAX dispatch on the
    host, about 90 µs per scalar), else the traced value converted."""
    return jnp.asarray(t, dtype) if isinstance(t, jax.core.Tracer) else np.asarray(t, dtype)


def codes(item: PyTree) -> np.ndarray:
    """The integer codes of an (array of) `eqx.Enumeration` item(s), read as NumPy: comparisons
    of concrete results on the host without dispatching a JAX operation for each."""
    return np.asarray(jtu.tree_leaves(item)[0])


# -- throw, host or jit ---------------------------------------------------------------------------


def raise_failures(failure: Failure, name: str = "simulate") -> None:
    """Raise a `ValueError` naming the trajectories that failed a precondition of `name` and why
    (concrete `failure` only)."""
    lines, failure = [], codes(failure)
    for item in FAILURES:
        failed = failure == codes(item)
        (index,) = np.nonzero(np.atleast_1d(failed))
        if index.size:
            shown = ", ".join(map(str, index[:20].tolist())) + (", ..." if index.size > 20 else "")
            which = f"trajectories [{shown}] ({index.size} of {failed.size})" if failed.ndim else "the trajectory"
            lines.append(f"- {which}: {Failure[item]}.")
    if lines:
        raise ValueError(
            f"{name}: initial states fail a precondition and were not integrated:\n"
            + "\n".join(lines)
            + "\nPass throw=False to integrate the others (sol.failure flags these)."
        )


def throw_failures_in_jit(failure: Failure, name: str) -> Failure:
    """`failure` with an error for any failed precondition, naming the condition but not the
    indices (under the caller's jit or across processes they are not known here). One check for
    all conditions: across a batch it names the first of `FAILURES` that any trajectory fails."""
    messages = [
        f"{name}: an initial state fails a precondition ({Failure[item]}) (the indices of the "
        f"failing trajectories are named when {name} is called outside jax.jit; or pass "
        "throw=False and read sol.failure)."
        for item in reversed(FAILURES)  # `branched_error_if` names the largest index
    ]
    index = jnp.select(
        [failure == item for item in FAILURES], list(range(len(FAILURES) - 1, -1, -1)), 0
    )
    return eqx.branched_error_if(failure, failure != Failure.successful, index, messages)


def run_checked(
    program: Callable, options: SolveOptions, *, name: str, batch_shape: tuple[int, ...],
    recheck: Callable[[], Failure] | None = None,
):
    """Run the compiled program `program(options, given, throw_in_jit)` and report failed
    preconditions (`options.throw`: raise).

    The default adjoint (`diffrax.RecursiveCheckpointAdjoint`, a `custom_vjp`) serves reverse
    mode only: it is replaced before tracing by the one the enclosing transformations need
    (`_adjoint.automatic_adjoint`: `diffrax.ForwardMode()` under `jax.jvp`/`jax.jacfwd`, a solve
    differentiable in both modes where the caller's later use is unknown, e.g. optimistix's
    least-squares solvers, which trace the residual function once and then linearize it).

    `given`: `None` (the program checks every precondition itself) or the preconditions of each
    trajectory computed beforehand (the program then checks all but the costliest, see below).
    Where the outputs cannot be read here (`values_are_concrete`) the program raises on a failed
    precondition itself (`throw_in_jit`, without the indices); else the front end reads
    `sol.failure` and, with `throw`, raises a `ValueError` naming the trajectories.

    `recheck` (`simulate`): the full preconditions, a separate program. Outside jit, `run` is
    first called without the costliest one, a finite $a_R$ at `y0` (it needs $Q$: a full copy of
    the right-hand side beside the integrator's, about a third of the compile time of a large
    Lagrangian). A trajectory failing it is caught by the integrator, which stops it at `t0`
    (non-finite), or raises with `throw`; only then is `recheck` computed and, if any trajectory
    fails it, the batch is run again (the same compiled program) with those trajectories given
    as failed: not integrated, flagged, and the others as if they ran alone. The result is the
    same as with the full check in the program."""
    throw = options.throw

    # the default adjoint serves reverse mode only: chosen here from the transformations that
    # trace this call (`_adjoint.automatic_adjoint`)
    options = dataclasses.replace(options, adjoint=automatic_adjoint(options.adjoint))

    def run(given, throw_in_jit):
        return program(options, given, throw_in_jit)

    if not values_are_concrete():
        return run(None, throw)
    if recheck is None:
        sol = run(None, False)
    else:
        none = jtu.tree_map(lambda x: np.broadcast_to(x, batch_shape), Failure.successful)
        try:
            sol, error = run(none, False), None
            suspect = np.any(
                (codes(sol.result) == codes(diffrax.RESULTS.nonfinite))
                & (codes(sol.failure) == codes(Failure.successful))
            )
        except eqx.EquinoxRuntimeError as e:
            sol, error, suspect = None, e, True
        if suspect:
            failure = recheck()
            if np.any(codes(failure) != codes(Failure.successful)):
                sol, error = run(failure, False), None
        if error is not None:
            raise error
    if throw:
        raise_failures(sol.failure, name)
    return sol


# -- silent recompilation -------------------------------------------------------------------------


class RecompilationWarning(UserWarning):
    """`gm.simulate` (or another geomech program) was compiled three times in one process for the
    same shapes: a part of the system JAX treats as static, typically a closure over a parameter,
    is new on every call. Issued once per program; the message names the fix (parameters as
    arrays in an `eqx.Module`, or one `jax.jit` around the whole loss). Silence it with
    `warnings.filterwarnings("ignore", category=gm.RecompilationWarning)`."""


RECOMPILATION_LIMIT = 3  # compilations of one program for one signature before the warning
_traces: dict = {}
_warned: set = set()


def _kind(leaf):
    """What of a pytree leaf decides the compiled program, short of its identity: shape and dtype
    of an array; the code of a function (a closure rebuilt on every call keeps its code); the
    value of a configuration flag (bool, int, str); else the type."""
    if isinstance(leaf, jax.Array | np.ndarray | np.generic):
        return ("array", jnp.shape(leaf), jnp.result_type(leaf))
    if isinstance(leaf, bool | int | str | type(None)):
        return leaf
    if isinstance(leaf, functools.partial):
        return ("partial", _kind(leaf.func), len(leaf.args), tuple(sorted(leaf.keywords)))
    code = getattr(leaf, "__code__", None)
    return ("code", code) if code is not None else type(leaf)


def note_trace(name: str, args: PyTree) -> None:
    """Count a trace of the program `name` (call it inside the traced function: Python runs only
    while JAX traces) by the signature of its arguments, and warn once per program when one
    signature has been compiled `RECOMPILATION_LIMIT` times: the program is being rebuilt for
    the same shapes, almost always because a static part (a closure over a parameter, a Python
    float field) is new on every call."""
    leaves, treedef = jtu.tree_flatten(args)
    try:
        key = (name, treedef, tuple(_kind(x) for x in leaves))
        count = _traces[key] = _traces.get(key, 0) + 1
    except TypeError:  # an unhashable static field: nothing to compare
        return
    if count >= RECOMPILATION_LIMIT and name not in _warned:
        _warned.add(name)
        warnings.warn(
            f"{name} has been compiled {count} times in this process for the same shapes: its "
            "program is traced again on every call because a part of the system that JAX treats "
            "as static is new each time, typically a function rebuilt per call that closes over "
            "a parameter (force=lambda q, v: -c * v) or a parameter held as a Python float. "
            "Each compilation takes seconds. Fix: hold parameters as arrays in an eqx.Module "
            "(e.g. a force module with a field c; arrays are traced, not compiled in), or jit the "
            "whole loss (jax.jit / eqx.filter_jit) so it is compiled once.",
            RecompilationWarning,
            stacklevel=2,
        )
