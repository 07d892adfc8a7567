"""The integration engine: a guarded diffrax solve of $\\dot y = f(t, y)$ for one initial PyTree
or a batch of them, with per-trajectory results, optional projection after every step and
sharding of the batch across devices.

It knows nothing of Lagrangians: `simulate` (the constrained dynamics $X_R$) and
`simulate_vakonomic` (the extended state $(q, v, \\mu)$) both run on it.
"""

import importlib.util
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import optimistix as optx
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding
from jaxtyping import Array, Bool, PyTree

from ._custom_types import Args, RealScalarLike, VectorField
from ._geometry import end_rate

# diffrax's marker "take this tolerance from the step-size controller", through its public API
_USE_STEPSIZE_TOL = diffrax.with_stepsize_controller_tols(optx.Chord)().rtol
# the default `fn` of a `SubSaveAt`: save `y` itself
_SAVE_Y = diffrax.SubSaveAt(t1=True).fn


class StopTime(eqx.Module):
    """The guarded solver's record of its last accepted step: whether it ended the trajectory
    (`stopped`), `time`, the (internal, diffrax's sign-flipped) time of the state kept, and
    whether it ended it because the model fails next (`failing`, see `holds`)."""

    stopped: Bool[Array, ""]
    time: Array
    failing: Bool[Array, ""]


class GuardedSolver(diffrax.AbstractWrappedSolver):
    """Wraps a diffrax solver: after each step `y1 = project(t1, y1, args)` (if `project` is
    given), and a trajectory running into a singularity stops instead of spending `max_steps`:

    - a step whose `y1` or error estimate is non-finite, or that `admissible(y0, y1)` (if given)
        refuses, is rejected (error estimate `inf`, diffrax's convention for a failed step), so
        the controller retries a smaller step (an event then finds where the trajectory stops,
        e.g. a disk about to lie flat, `gm.Failure.contact_undefined`);
    - a step that ends where the model no longer `holds(t1, y1, args, rate)` (if given; a
        rolling body whose plane would have to pull, `_contact.ContactWatch`; `rate` the
        right-hand side at `y1` when the wrapped solver kept it, `_geometry.end_rate`, else
        `None`) is refused likewise, so
        the steps shrink towards the time it fails; once such a step is no longer than
        $\\varepsilon^{3/4}(1 + |t|)$ (1.8e-12 in float64) the trajectory stops at its start, the
        last time the model held (`StopTime.failing`; `integrate` reports it as
        `diffrax.RESULTS.event_occurred`). With a `fixed` step size (no step is refused) it
        stops at the start of the first step that ends where the model fails;
    - a step no longer than $16\\varepsilon|t|$ (the resolution of $t$, MATLAB's `hmin`; no
        smaller step makes progress) ends the trajectory with `diffrax.RESULTS.nonfinite` if it
        is non-finite, else `diffrax.RESULTS.dt_min_reached`. So does every non-finite step of
        a fixed-step integrator (always accepted), and any step whose inner solve failed. The
        state kept is the last one before it; its time is recorded (`StopTime`, in the solver
        state), since diffrax's clock has moved past the accepted failing step (see
        `_honest_times`).

    The wrapped solver's error estimate is kept (it measures the step, not the projection);
    when projecting, FSAL solvers re-evaluate their first stage at the projected point
    (`made_jump=True`).
    """

    solver: diffrax.AbstractSolver
    project: Callable | None
    admissible: Callable | None = None
    holds: Callable | None = None
    fixed: bool = eqx.field(static=True, default=False)

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        return self.solver.interpolation_cls

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    @property
    def root_finder(self):  # implicit solvers (isinstance is forwarded by diffrax)
        return self.solver.root_finder

    @property
    def root_find_max_steps(self):
        return self.solver.root_find_max_steps

    @property
    def scan_kind(self):  # read by diffrax's adjoints (see `_forward_mode_ready`)
        return getattr(self.solver, "scan_kind", None)

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        time = jnp.asarray(t0, jnp.result_type(t0, t1))
        no = jnp.array(False)
        return self.solver.init(terms, t0, t1, y0, args), StopTime(no, time, no)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        made_jump = True if self.project is not None else made_jump
        y1, y_error, dense_info, inner_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state[0], made_jump
        )
        if self.project is not None:
            y1 = self.project(t1, y1, args)
        bad = jnp.invert(all_finite((y1, y_error)))
        refused = bad if self.admissible is None else bad | ~self.admissible(y0, y1)
        if self.holds is None:
            failing = jnp.array(False)
        else:  # with the right-hand side at y1 where the solver kept it (FSAL), not again
            rate = None if self.project is not None else end_rate(self.solver, inner_state)
            failing = ~bad & ~self.holds(t1, y1, args, rate)
        refused = refused | failing
        eps = jnp.finfo(jnp.result_type(t0, t1)).eps
        t_max = jnp.maximum(jnp.abs(t0), jnp.abs(t1))
        stuck = jnp.abs(t1 - t0) <= 16 * eps * t_max
        # where the model fails: refused steps shrink towards that time (as a root finder's
        # bracket would, to the same tolerance), a fixed step stops at once
        close = jnp.abs(t1 - t0) <= eps**0.75 * (1 + t_max)
        stuck_failing = failing & (True if self.fixed or y_error is None else close)
        end = stuck | stuck_failing
        if y_error is not None:  # adaptive: reject, or accept the dead end to stop there
            y_error = jtu.tree_map(
                lambda e: jnp.where(end, 0.0, jnp.where(refused, jnp.inf, e)).astype(e.dtype),
                y_error,
            )
        # a step that ends the trajectory (accepted: a fixed step, a dead end, a failed inner
        # solve) keeps `y0`, whose time is `t0`
        stop = bad | end | jnp.invert(diffrax.is_okay(result))
        y1 = jtu.tree_map(lambda a, b: jnp.where(stop, a, b), y0, y1)
        # (a stop for the model is `dt_min_reached` here, a code that ends diffrax's loop, and
        # `event_occurred` once read from `StopTime.failing` by `integrate`)
        failed = diffrax.RESULTS.where(
            bad, diffrax.RESULTS.nonfinite, diffrax.RESULTS.dt_min_reached
        )
        result = diffrax.RESULTS.where(bad | end, failed, result)
        time = jnp.where(stop, t0, t1).astype(solver_state[1].time.dtype)
        record = StopTime(stop, time, stuck_failing)
        return y1, y_error, dense_info, (inner_state, record), result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


class _Frozen(eqx.Module):
    """`rhs` (or a projection, `identity=True`) of a trajectory that is not integrated: zero
    (resp. the identity) where `frozen`, so the trajectory stays at its (finite) start state."""

    fn: Callable
    frozen: Bool[Array, ""]
    identity: bool = eqx.field(static=True)

    def __call__(self, t, y, args):
        out = self.fn(t, y, args)
        keep = y if self.identity else jtu.tree_map(jnp.zeros_like, out)
        return jtu.tree_map(lambda a, b: jnp.where(self.frozen, a, b), keep, out)


class _Holding(eqx.Module):
    """`holds(t, y, args)` of the guarded solver, `True` where `frozen` (a trajectory not
    integrated), and a decision: no derivative flows through it."""

    fn: Callable
    frozen: Bool[Array, ""] | bool = False

    def __call__(self, t, y, args, rate):
        t, y, rate = jax.lax.stop_gradient((t, y, rate))
        return self.fn(t, y, args, rate) | self.frozen


def _apply(fn, t, y, args):
    return fn(t, y, args)


_call_discardable = eqx.filter_custom_jvp(_apply)


@_call_discardable.def_jvp
def _call_discardable_jvp(primals, tangents):
    """The derivative of an evaluation at a non-finite point, or with a non-finite value, is
    zero (so is its transpose). The guarded solver discards such a value (a rejected trial step,
    a stop that keeps the state before it; unreached saves are `inf`), but the chain rule would
    still multiply its zero cotangent by the non-finite partial derivatives there, and
    0 · NaN = NaN would reach every input: the parameters, and through them the gradient of the
    whole batch. Both the tangents in and the tangent out are selected (the "double where"), so
    neither the tangent nor its transpose (the cotangent, in reverse mode) multiplies by a
    non-finite partial derivative. A finite evaluation is differentiated as it is."""
    _, t, y, _ = primals
    out = _apply(*primals)
    ok = all_finite((t, y, out))
    keep = lambda x: jnp.where(ok, x, jnp.zeros_like(x))
    _, t_out = eqx.filter_jvp(_apply, primals, jtu.tree_map(keep, tangents))
    return out, jtu.tree_map(keep, t_out)


class _Discardable(eqx.Module):
    """`fn(t, y, args)` (the right-hand side, a projection, a diagnostic) whose derivative is zero
    where its point or value is not finite (`_call_discardable_jvp`): NaN/inf in a step the
    guarded solver discards does not reach the gradient of the trajectory kept, nor, through
    `vmap`, that of the other members of the batch. Its value is `fn`'s. `fn` is
    closure-converted at the example point `(t, y)` (closed-over tracers, e.g. a parameter a
    user's function closes over, become explicit inputs of the custom derivative)."""

    fn: Callable

    def __init__(self, fn, t, y):
        self.fn = eqx.filter_closure_convert(fn, t, y, None)

    def __call__(self, t, y, args):
        return _call_discardable(self.fn, t, y, args)


def at_saves(fn: Callable, ts, ys, *, batched: bool):
    """`fn(t, y)` at every saved time and value (`ts`: `(T,)`, or `(B, T)` with a batch; `ys` with
    the same leading axes), with a zero derivative wherever the saved value or the result is not
    finite (the `inf` of times not reached, `_Discardable`): a loss that masks such slots out
    has a finite gradient. The values are `fn`'s."""
    lead = (0,) * jnp.ndim(ts)
    f = _Discardable(lambda t, y, args: fn(t, y), ts[lead], jtu.tree_map(lambda x: x[lead], ys))
    along = jax.vmap(lambda t, y: f(t, y, None))
    return jax.vmap(along)(ts, ys) if batched else along(ts, ys)


def _stand_in(y0, skip, batched: bool):
    """`y0` with every skipped trajectory replaced by a finite stand-in: the first trajectory that
    is not skipped (zeros if there is none, or unbatched), so nothing non-finite is evaluated."""
    if not batched:
        return jtu.tree_map(lambda x: jnp.where(skip, jnp.zeros_like(x), x), y0)
    first = jnp.argmin(skip)  # the first False (0 if all are skipped)
    fallback = jtu.tree_map(
        lambda x: jnp.where(jnp.all(skip), jnp.zeros_like(x[0]), x[first]), y0
    )
    mask = lambda x: skip.reshape(skip.shape + (1,) * (x.ndim - 1))
    return jtu.tree_map(lambda x, f: jnp.where(mask(x), f, x), y0, fallback)


def _as_not_reached(raw: "RawSolution", y0, skip, t0) -> "RawSolution":
    """A skipped trajectory's output: its own `y0` saved at `t0`, `inf` at every other saved time
    (diffrax's convention for times not reached), `t_final = t0`."""
    at_t0 = raw.ts == t0
    ts = jnp.where(skip[..., None] & ~at_t0, jnp.inf, raw.ts)

    def saved(y, y_start):  # y: (*B, T, ...), y_start: (*B, ...)
        start = jnp.broadcast_to(jnp.expand_dims(y_start, skip.ndim), y.shape)
        new = jnp.where(at_t0.reshape(at_t0.shape + (1,) * (y.ndim - at_t0.ndim)), start, jnp.inf)
        return jnp.where(skip.reshape(skip.shape + (1,) * (y.ndim - skip.ndim)), new, y)

    ys = jtu.tree_map(saved, raw.ys, y0)
    return eqx.tree_at(
        lambda r: (r.ts, r.ys, r.t_final), raw, (ts, ys, jnp.where(skip, t0, raw.t_final))
    )


def all_finite(tree) -> Bool[Array, ""]:
    """Whether every inexact array in `tree` is finite."""
    leaves = [
        jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(eqx.filter(tree, eqx.is_inexact_array))
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _fill_implicit_tolerances(integrator, controller):
    """Give an implicit integrator's root finder the step-size tolerances (what diffrax does
    itself, done before wrapping in `GuardedSolver` because diffrax cannot update a wrapped
    solver)."""
    if not isinstance(integrator, diffrax.AbstractImplicitSolver):
        return integrator
    if not isinstance(controller, diffrax.AbstractAdaptiveStepSizeController):
        return integrator
    rf = integrator.root_finder
    names = [a for a in ("rtol", "atol", "norm") if getattr(rf, a) is _USE_STEPSIZE_TOL]
    return eqx.tree_at(
        lambda s: tuple(getattr(s.root_finder, a) for a in names),
        integrator,
        tuple(getattr(controller, a) for a in names),
    )


def _forward_mode_ready(integrator, adjoint):
    """What `diffrax.ForwardMode` does to an unwrapped Runge-Kutta solver so that forward-mode
    differentiation (`jax.jvp`, `jax.jacfwd`) can pass its stage loop: a stage scan of kind
    `"lax"`. Done here because diffrax cannot update a wrapped solver."""
    if not isinstance(adjoint, diffrax.ForwardMode):
        return integrator
    if not isinstance(integrator, diffrax.AbstractRungeKutta) or integrator.scan_kind is not None:
        return integrator
    return eqx.tree_at(lambda s: s.scan_kind, integrator, "lax", is_leaf=lambda x: x is None)


class SolveOptions(eqx.Module):
    """The diffrax-facing options of a solve, validated by `solve_options` (`_frontend.py`)
    before tracing."""

    integrator: diffrax.AbstractSolver
    saveat: diffrax.SaveAt
    stepsize_controller: diffrax.AbstractStepSizeController
    dt0: Array | None
    max_steps: int = eqx.field(static=True)
    adjoint: diffrax.AbstractAdjoint
    throw: bool = eqx.field(static=True)
    progress: bool = eqx.field(static=True)
    sharding: Sharding | Mesh | None = eqx.field(static=True)


def _progress_meter(progress: bool):
    if not progress:
        return diffrax.NoProgressMeter()
    if importlib.util.find_spec("tqdm") is not None:
        return diffrax.TqdmProgressMeter()
    return diffrax.TextProgressMeter()


def batch_sharding(sharding):
    """`(mesh, spec)` for shard_map, `(None, sharding)` for other shardings, or `(None, None)`."""
    if sharding is None:
        return None, None
    if isinstance(sharding, Mesh):
        return sharding, PartitionSpec(sharding.axis_names)
    if isinstance(sharding, NamedSharding):
        batch_axes = sharding.spec[0] if len(sharding.spec) else None
        if batch_axes is None:
            raise ValueError(
                f"the NamedSharding {sharding} does not shard the leading (batch) axis: use e.g. "
                "NamedSharding(mesh, PartitionSpec('batch'))."
            )
        return sharding.mesh, PartitionSpec(batch_axes)
    if isinstance(sharding, Sharding):
        return None, sharding
    raise TypeError(
        f"sharding must be a jax.sharding.Sharding or a jax.sharding.Mesh, got {sharding!r}."
    )


def _shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` without replication checks (diffrax's loops are not annotated)."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # jax < 0.7

    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


# -- the solve ------------------------------------------------------------------------------------


class RawSolution(eqx.Module):
    """What `integrate` returns: `ts`, `ys`, per-trajectory `result`, step `stats`,
    `t_final`, the time each trajectory reached (`t1`, or the time of the state kept where it
    stopped early; with `BacksolveAdjoint` NaN for a trajectory that stopped early), and with an
    `event` diffrax's `event_mask` (which of its `cond_fn` stopped the trajectory)."""

    ts: Array
    ys: PyTree
    result: diffrax.RESULTS
    stats: dict
    t_final: Array
    event_mask: PyTree = None


SINGULAR_MESSAGE = (
    "a trajectory ran into a singularity: only non-finite values (NaN/inf) could be computed, or "
    "the step size fell to the resolution of t. The state reached a singular configuration (e.g. "
    "M not positive definite, or A M^-1 C^T singular (3.19)) or the solution blows up in finite "
    "time. Pass throw=False to get every other trajectory of the batch, with result == "
    "diffrax.RESULTS.nonfinite (or dt_min_reached) for this one."
)


def _project_saved(project, t, y, ys):
    """`project(t, y)` for a saved value; unused slots of `SaveAt(steps=True)` (`t = inf`) stay
    `inf` (a finite stand-in goes through the projection, so gradients stay finite)."""
    used = jnp.isfinite(t)
    safe = jtu.tree_map(lambda x, x0: jnp.where(used, x, x0[0]), y, ys)
    out = project(jnp.where(used, t, 0.0), safe, None)
    return jtu.tree_map(lambda p, x: jnp.where(used, p, x), out, y)


def _final_save_in_its_slot(ts, ys, sub: diffrax.SubSaveAt, written=None):
    """`(ts, ys)` with the `t1` save of `SaveAt(t0=..., ts=..., t1=True)` in its own, last slot.
    Such a layout is fixed (slot `i` is the `i`-th requested time, the last one `t1`), but diffrax
    writes the final state into the slot after the last one used: for a trajectory that stopped
    early, the slot of the next requested time. There it becomes `inf` (not reached) and the
    final state moves to the last slot. (With `steps=True` the slots are the steps taken, in order:
    nothing moves.) `written`: the slot diffrax wrote it into, if `ts` was changed since."""
    if sub.steps or not sub.t1:
        return ts, ys
    if written is None:
        written = jnp.sum(jnp.isfinite(ts)) - 1
    moved = (jnp.arange(ts.shape[0]) == written) & (written != ts.shape[0] - 1)

    def move(x):
        cleared = jnp.where(moved.reshape(moved.shape + (1,) * (x.ndim - 1)), jnp.inf, x)
        return cleared.at[-1].set(jnp.where(written >= 0, x[written], x[-1]))

    return move(ts), jtu.tree_map(move, ys)


def _honest_times(ts, ys, t_reached, stop: StopTime, sub: diffrax.SubSaveAt, t0, t1):
    """`(ts, ys, t_final)` with the times of the state kept. A trajectory ended by an accepted
    failing step (`GuardedSolver`) keeps the state before it, but diffrax's clock has moved to
    that step's end: its `t1` save is labelled with the later time, `SaveAt(steps=True)` holds
    the kept state a second time under it, and `SaveAt(ts=...)` interpolates inside the failed
    step. Here every save after the time of the state kept becomes `inf` (diffrax's convention
    for times not reached), except the `t1` save, relabelled with the time kept (unless
    `steps=True` already saved that state); `t_final` is the time kept. With `steps=True` the
    saves kept come first, in their order; otherwise every save stays in its slot, the `t1` save
    in the last one (`_final_save_in_its_slot`)."""
    direction = jnp.where(t0 < t1, 1, -1).astype(ts.dtype)
    t_kept = jnp.where(stop.stopped, direction * stop.time, t_reached)
    used = jnp.isfinite(ts)
    late = stop.stopped & used & (direction * (ts - t_kept) > 0)
    last = jnp.arange(ts.shape[0]) == jnp.sum(used) - 1
    if sub.t1:  # diffrax writes the final state (t1=True) into the last used slot
        saved = jnp.any(used & ~late & (ts == t_kept)) if sub.steps == 1 else jnp.asarray(False)
        relabel = late & last & ~saved
    else:
        relabel = jnp.zeros_like(late)
    drop = late & ~relabel
    if sub.steps:
        order = jnp.argsort(drop | ~used, stable=True)  # the kept saves first, in their order
    else:
        order = jnp.arange(ts.shape[0])  # every save in its slot
    gone = (drop | ~used)[order]
    ts = jnp.where(gone, jnp.inf, jnp.where(relabel, t_kept, ts)[order])

    def move(y):
        mask = gone.reshape(gone.shape + (1,) * (y.ndim - 1))
        return jnp.where(mask, jnp.inf, y[order])

    ts, ys = _final_save_in_its_slot(ts, jtu.tree_map(move, ys), sub, jnp.sum(used) - 1)
    return ts, ys, t_kept


def results_where(pred, result_if_true: diffrax.RESULTS, result: diffrax.RESULTS) -> diffrax.RESULTS:
    """`diffrax.RESULTS.where` for a batch of results (`pred` of any shape, like `result`)."""
    where = lambda p, r: diffrax.RESULTS.where(p, result_if_true, r)
    for _ in range(jnp.ndim(pred)):
        where = jax.vmap(where)
    return where(pred, result)


def _never_nonfinite_success(result: diffrax.RESULTS, ts, ys) -> diffrax.RESULTS:
    """`nonfinite` for a trajectory reported as finished whose saved values (at the used slots,
    finite `ts`) are not all finite: a non-finite result is never a success."""
    used = jnp.isfinite(ts)
    finite = jnp.all(
        jnp.stack(
            [
                jnp.all(jnp.isfinite(y) | ~used.reshape(used.shape + (1,) * (y.ndim - used.ndim)))
                for y in jtu.tree_leaves(eqx.filter(ys, eqx.is_inexact_array))
            ]
        )
    )
    return diffrax.RESULTS.where(
        diffrax.is_okay(result) & ~finite, diffrax.RESULTS.nonfinite, result
    )


@eqx.filter_jit
def integrate(
    rhs: VectorField,
    y0: PyTree[Array],
    t0: RealScalarLike,
    t1: RealScalarLike,
    options: SolveOptions,
    *,
    batched: bool,
    project: Callable[[RealScalarLike, PyTree, Args], PyTree] | None = None,
    event: diffrax.Event | None = None,
    admissible: Callable[[PyTree, PyTree], Bool[Array, ""]] | None = None,
    holds: Callable[[RealScalarLike, PyTree, Args], Bool[Array, ""]] | None = None,
    skip: Bool[Array, "*B"] | None = None,
) -> RawSolution:
    """Integrate $\\dot y = $ `rhs(t, y, args=None)` for one `y0` or a batch of them.

    **Arguments:**

    - `rhs`: `(t, y, args) -> dy/dt` on ONE unbatched state `y` (any PyTree; `dy` has the same
        structure). Pass an `eqx.Module` holding the system so its arrays are traced (no
        recompilation for new parameter values, gradients flow).
    - `y0`: the initial PyTree; with `batched=True` every leaf has a leading batch axis `B`.
    - `t0`, `t1`: the time interval (scalars).
    - `options`: `SolveOptions` from `solve_options` (integrator, saveat, step-size controller,
        dt0, max_steps, adjoint, throw, progress, sharding).
    - `batched`: whether `y0` carries a leading batch axis (vmapped, one compiled call; each
        trajectory keeps its own step-size control and result code).
    - `project`: optional `(t, y, args) -> y`, applied after every step (`GuardedSolver`) and
        to every saved `y`; must be differentiable for gradients (fixed-iteration Newton).
    - `event`: an optional `diffrax.Event` (its `cond_fn` on ONE unbatched `y`, like `rhs`): a
        trajectory whose event fires stops there with `result == diffrax.RESULTS.event_occurred`
        (`RawSolution.event_mask` says which).
    - `admissible`: optional `(y0, y1) -> bool` on ONE unbatched step: a step it refuses is
        rejected like a non-finite one (`GuardedSolver`).
    - `holds`: optional `(t, y, args, rate) -> bool` on ONE unbatched state: where the model
        holds, given the right-hand side `rate` at `(t, y)` when the integrator kept it (an FSAL
        Runge–Kutta method's last stage), else `None`. A
        trajectory stops at the last time it holds, with `result ==
        diffrax.RESULTS.event_occurred` (`GuardedSolver`); no derivative flows through it.
    - `skip`: optional booleans (`()` or `(B,)`): trajectories not to integrate (a failed
        precondition). Each is run as a constant stand-in (a finite state, zero right-hand side),
        and returned with its `y0` saved at `t0`, `inf` after and `t_final = t0`; the others are
        computed exactly as without it. The caller sets their `result`.

    Every integration is guarded (`GuardedSolver`): a step giving NaN/inf is rejected, and a
    trajectory whose step size falls to the resolution of $t$ (or a fixed-step one that
    reaches NaN/inf) stops there with `result == diffrax.RESULTS.nonfinite` (non-finite values)
    or `dt_min_reached`, keeping its last state, instead of spending `max_steps`.

    With `options.throw` an error is raised if any trajectory failed (an `event` that fires is
    not a failure); otherwise see `result` per trajectory. With `options.sharding` (a `Mesh`,
    or a `NamedSharding` sharding axis 0) every device integrates its own trajectories with
    `shard_map` and no per-step synchronisation (a batch not divisible by the number of
    shards is padded); any other `Sharding` places `y0` and lets XLA propagate.

    **Returns:** `RawSolution(ts, ys, result, stats, t_final)`; with a batch every field has the
    leading axis `B` (`ts` is `(B, T)`, `ys` leaves `(B, T, ...)`, `result`, `t_final` `(B,)`).
    """
    saveat, adjoint = options.saveat, options.adjoint
    t0 = eqx.error_if(
        t0, ~(jnp.isfinite(t0) & jnp.isfinite(t1)), "t0 and t1 must be finite real numbers."
    )
    progress_meter = _progress_meter(options.progress)
    # the time reached: one more saved time, `t1` unless the trajectory stopped early, and the
    # guarded solver's `StopTime` (BacksolveAdjoint cannot save `subs` or the solver state:
    # there it is known only for finished trajectories)
    save_final = not isinstance(adjoint, diffrax.BacksolveAdjoint)
    if holds is not None and not save_final:
        raise ValueError("integrate: `holds` needs the solver state, which BacksolveAdjoint drops.")
    if save_final:
        # the time reached is this sub's `ts`; it saves `y` with diffrax's own function, which
        # diffrax does not wrap in a closure over the direction of time (a tracer): a solve that
        # closes over no tracer leaves its forward-mode twin untraced (`_adjoint._Deferred`)
        saveat = diffrax.SaveAt(
            subs=(saveat.subs, diffrax.SubSaveAt(t1=True)), solver_state=True
        )
    closure = (rhs, options, saveat, project, t0, t1, event, admissible, holds)
    dynamic, static = eqx.partition(closure, eqx.is_array)
    y0_given = y0
    if skip is not None:
        y0 = _stand_in(y0, skip, batched)

    def solve_one(dynamic, y0_, skip_):
        rhs_, options_, saveat_, project_, t0_, t1_, event_, admissible_, holds_ = eqx.combine(
            dynamic, static
        )
        if holds_ is not None:
            holds_ = _Holding(holds_, False if skip_ is None else skip_)
        if skip_ is not None:
            rhs_ = _Frozen(rhs_, skip_, identity=False)
            project_ = None if project_ is None else _Frozen(project_, skip_, identity=True)
        rhs_ = _Discardable(rhs_, t0_, y0_)
        project_ = None if project_ is None else _Discardable(project_, t0_, y0_)
        controller = options_.stepsize_controller
        integrator = _forward_mode_ready(options_.integrator, options_.adjoint)
        solver = GuardedSolver(
            _fill_implicit_tolerances(integrator, controller), project_, admissible_, holds_,
            fixed=isinstance(controller, (diffrax.ConstantStepSize, diffrax.StepTo)),
        )
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs_),
            solver,
            t0_,
            t1_,
            options_.dt0,
            y0_,
            saveat=saveat_,
            stepsize_controller=controller,
            adjoint=options_.adjoint,
            event=event_,
            max_steps=options_.max_steps,
            throw=False,
            progress_meter=progress_meter,
        )
        result = sol.result
        if save_final:
            (ts, ts_final), (ys, _) = sol.ts, sol.ys
            stop = sol.solver_state[1]
            ts, ys, t_final = _honest_times(ts, ys, ts_final[0], stop, saveat_.subs[0], t0_, t1_)
            result = results_where(stop.failing, diffrax.RESULTS.event_occurred, result)
        else:
            ts, ys = _final_save_in_its_slot(sol.ts, sol.ys, saveat_.subs)
            t_final = jnp.where(diffrax.is_successful(sol.result), t1_, jnp.nan)
        if project_ is not None:  # interpolated saves (SaveAt(ts=...)) back onto C
            raw = ys
            ys = jax.vmap(lambda t, y: _project_saved(project_, t, y, raw))(ts, raw)
        stats = {k: sol.stats[k] for k in ("num_steps", "num_accepted_steps", "num_rejected_steps")}
        result = _never_nonfinite_success(result, ts, ys)
        return RawSolution(ts, ys, result, stats, t_final, sol.event_mask)

    if not batched:
        out = solve_one(dynamic, y0, skip)
    else:
        solve_batch = jax.vmap(solve_one, in_axes=(None, 0, 0))
        mesh, spec = batch_sharding(options.sharding)
        if mesh is None and spec is not None:
            y0 = jax.lax.with_sharding_constraint(y0, spec)
            out = solve_batch(dynamic, y0, skip)
        elif mesh is not None:
            shards = 1
            for name in spec[0] if isinstance(spec[0], tuple) else (spec[0],):
                shards *= mesh.shape[name]
            B = jtu.tree_leaves(y0)[0].shape[0]
            pad = -B % shards  # pad with copies of trajectory 0, dropped afterwards
            skip_all = jnp.zeros((B,), bool) if skip is None else skip
            if pad:
                y0, skip_all = jtu.tree_map(
                    lambda x: jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]), (y0, skip_all)
                )
            specs = (PartitionSpec(), spec, spec)
            out = _shard_map(solve_batch, mesh, specs, spec)(dynamic, y0, skip_all)
            if pad:
                out = jtu.tree_map(lambda x: x[:B], out)
        else:
            out = solve_batch(dynamic, y0, skip)
    if skip is not None:
        out = _as_not_reached(out, y0_given, skip, t0)
    if options.throw:
        singular = (out.result == diffrax.RESULTS.nonfinite) | (
            out.result == diffrax.RESULTS.dt_min_reached
        )
        checked = eqx.error_if(checked_outputs(out, options), singular, SINGULAR_MESSAGE)
        checked = out.result.error_if(checked, jnp.invert(diffrax.is_okay(out.result)))
        out = eqx.tree_at(lambda o: checked_outputs(o, options), out, checked)
    return out


def checked_outputs(raw: RawSolution, options: SolveOptions):
    """The outputs a run-time check (`eqx.error_if`) is threaded onto: every one a caller may
    read (`ts`, `ys`, `result`, `t_final`), because XLA drops a check whose value is unused (under
    the caller's `jax.jit` a check on `result` alone never fires when only the states are read);
    with a sharded batch `result` only (a check on the sharded outputs would gather them onto
    one device)."""
    if options.sharding is not None:
        return raw.result
    return raw.ts, raw.ys, raw.result, raw.t_final
