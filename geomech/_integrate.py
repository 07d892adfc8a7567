"""Integration of the constrained dynamics $X_R$ with diffrax: constraint stabilization,
ensembles (a leading batch axis), gradients through the solve and sharding across devices.

The generic machinery (`_integrate_ode`, `_GuardedSolver`, `min_norm_newton`) takes any
right-hand side on any PyTree state, so other dynamics with an extended state (e.g. vakonomic
$(q, v, \\mu)$) share stabilization, ensembles, gradients and sharding.
"""

import importlib.util
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
import jax.tree_util as jtu
from diffrax._root_finder import use_stepsize_tol  # "tolerances from the step-size controller"
from jax.sharding import Mesh, NamedSharding, PartitionSpec, Sharding
from jaxtyping import Array, Bool, Float, PyTree

from ._bundle import State
from ._constraint import (
    AbstractConstraint,
    HolonomicConstraint,
    LinearConstraint,
    StackedConstraint,
)
from ._dynamics import _check_solver, check_on_constraint, constrained_acceleration, on_constraint
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._stages import Stages, assemble
from ._system import LagrangianSystem
from ._system_integrator import AbstractSystemIntegrator

# -- stabilization options ----------------------------------------------------------------------


class AbstractStabilization(eqx.Module):
    """How `simulate` keeps the numerical solution on the constraint manifold $\\mathcal{C}$."""


class Baumgarte(AbstractStabilization):
    """Baumgarte stabilization: the constraints on accelerations $A a = b$ (Lemma 1) become

    $A a = b - \\alpha\\,\\phi - \\beta\\,h$,

    with the $h$ term only on the rows of holonomic constraints ($\\phi = \\dot h$ there), so that
    $\\dot\\phi + \\alpha\\phi = 0$ for general rows and $\\ddot h + \\alpha\\dot h + \\beta h = 0$
    for holonomic ones. On $\\mathcal{C}$ the dynamics is unchanged.

    **Arguments:**

    - `alpha`: velocity-level gain ($1/$time); `2ω` for a critically damped $h$ with rate `ω`.
    - `beta`: position-level gain ($1/$time²), `ω²`. Gains must be large compared with the
        rates of the motion but small compared with `1/dt`, or the equations become stiff.
    """

    alpha: float | Float[Array, ""] = 20.0
    beta: float | Float[Array, ""] = 100.0


class ManifoldProjection(AbstractStabilization):
    """Projection stabilization: after every step the state is returned to $\\mathcal{C}$,
    positions first by Gauss–Newton on $h(q) = 0$ with the minimal $M$-norm correction, then
    velocities by the $M$-orthogonal projection onto $\\phi(q, v) = 0$ (Newton iterations, exact
    in one for $\\phi$ linear in $v$). Saved states are projected too (interpolated ones included).

    **Arguments:**

    - `iterations`: Newton iterations per projection; the per-step defect is of the size of the
        local error, so 2 iterations reach round-off.
    """

    iterations: int = eqx.field(default=2, static=True)


def _as_stabilization(stabilization) -> AbstractStabilization | None:
    if stabilization is None or isinstance(stabilization, AbstractStabilization):
        return stabilization
    if stabilization == "baumgarte":
        return Baumgarte()
    if stabilization == "projection":
        return ManifoldProjection()
    raise ValueError(
        "stabilization must be None, 'baumgarte', 'projection', gm.Baumgarte(alpha, beta) or "
        f"gm.ManifoldProjection(iterations); got {stabilization!r}."
    )


# -- stages of the stabilized right-hand side ---------------------------------------------------


def holonomic_rows(
    constraint: AbstractConstraint, t, q, *, time_dependent: bool
) -> Float[Array, " k"]:
    """$h$ on the rows of $\\phi$ that come from holonomic constraints ($\\phi = \\dot h$), zero on
    the other rows; `(k,)`, aligned with `constraint.residual`."""
    if isinstance(constraint, StackedConstraint):
        return jnp.concatenate(
            [holonomic_rows(c, t, q, time_dependent=time_dependent) for c in constraint.constraints]
        )
    h = constraint.position_residual(t, q, time_dependent=time_dependent)
    k = jax.eval_shape(lambda: constraint.residual(t, q, q, time_dependent=time_dependent)).shape[0]
    return h if h.shape[0] == k else jnp.zeros((k,), jnp.result_type(q))


def baumgarte_stages(stages: Stages, baumgarte: Baumgarte) -> Stages:
    """The stages with $b$ replaced by $b - \\alpha\\phi - \\beta h$ (see `Baumgarte`); every solver
    then imposes the stabilized $A a = b$ through the shared stages."""
    if stages.k == 0:
        return stages
    system, state, t = stages.system, stages.state, stages.t
    h = holonomic_rows(system.constraint, t, state.q, time_dependent=system.time_dependent)
    b = stages.b - baumgarte.alpha * stages.phi - baumgarte.beta * h
    return eqx.tree_at(lambda s: s.b, stages, b)


class _ConstrainedField(eqx.Module):
    """The right-hand side $(\\dot q, \\dot v) = (v, a_R)$ of $X_R$ as a diffrax vector field."""

    system: LagrangianSystem
    solver: AbstractSolver
    baumgarte: Baumgarte | None

    def __call__(self, t, y: State, args) -> State:
        # value checks off: a singular state gives non-finite values, which diffrax reports per
        # trajectory instead of aborting the whole ensemble
        stages = assemble(self.system, y, t, checks=False)
        if self.baumgarte is not None:
            stages = baumgarte_stages(stages, self.baumgarte)
        return State(y.v, constrained_acceleration(stages, self.solver))


# -- projection onto C --------------------------------------------------------------------------


def min_norm_newton(
    residual: Callable[[Array], Array], x: Float[Array, " n"], solve_M: Callable, iterations: int
) -> Float[Array, " n"]:
    """Gauss–Newton on `residual(x) = 0` with the minimal $M$-norm update
    $x \\leftarrow x - M^{-1}J^\\top(JM^{-1}J^\\top)^{-1} r(x)$, $J = \\partial r/\\partial x$.

    A fixed number of iterations (a `fori_loop` with static bounds), so it is reverse
    differentiable and vmaps without synchronising trajectories. `solve_M(X)` returns $M^{-1}X$.
    """

    def body(_, x):
        J, r = jax.jacfwd(lambda x_: (residual(x_), residual(x_)), has_aux=True)(x)
        MinvJT = solve_M(J.T)
        return x - MinvJT @ jnp.linalg.solve(J @ MinvJT, r)

    return jax.lax.fori_loop(0, iterations, body, x)


def _project_state(system: LagrangianSystem, state: State, t, iterations: int) -> State:
    """Positions onto $h = 0$, then velocities onto $\\phi = 0$, each with minimal $M$-norm."""
    if system.constraint is None:
        return state

    def solver_M(s):
        M_cho = jnp.linalg.cholesky(system.mass_matrix(s, t))
        return lambda X: jsl.cho_solve((M_cho, True), X)

    q, v = state.q, state.v
    if system.position_residual(state, t).shape[0] > 0:
        h = lambda q_: system.position_residual(State(q_, v), t)
        q = min_norm_newton(h, q, solver_M(state), iterations)
    phi = lambda v_: system.constraint_residual(State(q, v_), t)
    # one Newton step is exact for constraints affine in v
    v_iterations = 1 if _affine_in_v(system.constraint) else iterations
    v = min_norm_newton(phi, v, solver_M(State(q, v)), v_iterations)
    return State(q, v)


def _affine_in_v(constraint: AbstractConstraint) -> bool:
    if isinstance(constraint, StackedConstraint):
        return all(_affine_in_v(c) for c in constraint.constraints)
    return isinstance(constraint, LinearConstraint | HolonomicConstraint)


class _StateProjection(eqx.Module):
    """`(t, y, args) -> y` returning a `State` to $\\mathcal{C}$ (for `_integrate_ode`)."""

    system: LagrangianSystem
    iterations: int = eqx.field(static=True)

    def __call__(self, t, y: State, args) -> State:
        return _project_state(self.system, y, t, self.iterations)


def project_to_constraints(
    system: LagrangianSystem, state: State, t=0.0, *, iterations: int = 20, tol: float | None = None
) -> State:
    """Make initial data consistent: the nearest point of $\\mathcal{C}$ in the metric $M$.

    Positions by Gauss–Newton on $h(q) = 0$ (holonomic parts) with the minimal $M$-norm
    correction, then velocities by the $M$-orthogonal projection onto $\\phi(q, v) = 0$ (Newton
    iterations when $\\phi$ is nonlinear in $v$). For a pendulum this is $q \\mapsto l\\,q/|q|$ and
    the removal of the radial velocity.

    **Arguments:**

    - `system`: a `LagrangianSystem`.
    - `state`: a `State`, one point or a batch with a leading axis.
    - `t`: the time (for time-dependent constraints).
    - `iterations`: Newton iterations.
    - `tol`: the residual that counts as converged (default as `check_on_constraint`); an error
        is raised (`eqx.error_if`) if the iterations did not get there.

    **Returns:** the projected `State`, the shape of `state`.
    """
    batched = _check_state(system, state, t)
    return _project_to_constraints(
        system, state, jnp.asarray(t, state.q.dtype), iterations, tol, batched
    )


@eqx.filter_jit
def _project_to_constraints(system, state, t, iterations, tol, batched):
    if batched:
        return jax.vmap(lambda s: _project_to_constraints(system, s, t, iterations, tol, False))(
            state
        )
    out = _project_state(system, state, t, iterations)
    return eqx.error_if(
        out,
        ~on_constraint(system, out, t, tol=tol),
        f"project_to_constraints did not converge in {iterations} iterations (the state may be far "
        "from C or near a singular configuration): start closer to C or raise `iterations`.",
    )


# -- a diffrax solver that projects after every step and stops on non-finite values -----------


class _GuardedSolver(diffrax.AbstractWrappedSolver):
    """Wraps a diffrax solver: after each step `y1 = project(t1, y1, args)` (if `project` is
    given), and a trajectory running into a singularity stops instead of spending `max_steps`:

    - a step whose `y1` or error estimate is non-finite is rejected (error estimate `inf`,
        diffrax's convention for a failed step), so the controller retries a smaller step;
    - a step no longer than $16\\varepsilon|t|$ (the resolution of $t$, MATLAB's `hmin`; no
        smaller step makes progress) ends the trajectory with `diffrax.RESULTS.nonfinite` if it
        is non-finite, else `diffrax.RESULTS.dt_min_reached`. So does every non-finite step of
        a fixed-step integrator (always accepted). The state kept is the last one before it.

    The wrapped solver's error estimate is kept (it measures the step, not the projection);
    when projecting, FSAL solvers re-evaluate their first stage at the projected point
    (`made_jump=True`).
    """

    solver: diffrax.AbstractSolver
    project: Callable | None

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

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def init(self, terms, t0, t1, y0, args):
        return self.solver.init(terms, t0, t1, y0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        made_jump = True if self.project is not None else made_jump
        y1, y_error, dense_info, solver_state, result = self.solver.step(
            terms, t0, t1, y0, args, solver_state, made_jump
        )
        if self.project is not None:
            y1 = self.project(t1, y1, args)
        bad = jnp.invert(_all_finite((y1, y_error)))
        eps = jnp.finfo(jnp.result_type(t0, t1)).eps
        stuck = jnp.abs(t1 - t0) <= 16 * eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1))
        if y_error is not None:  # adaptive: reject, or accept the dead end to stop there
            y_error = jtu.tree_map(
                lambda e: jnp.where(stuck, 0.0, jnp.where(bad, jnp.inf, e)).astype(e.dtype),
                y_error,
            )
        y1 = jtu.tree_map(lambda a, b: jnp.where(bad | stuck, a, b), y0, y1)
        failed = diffrax.RESULTS.where(
            bad, diffrax.RESULTS.nonfinite, diffrax.RESULTS.dt_min_reached
        )
        result = diffrax.RESULTS.where(bad | stuck, failed, result)
        return y1, y_error, dense_info, solver_state, result

    def func(self, terms, t0, y0, args):
        return self.solver.func(terms, t0, y0, args)


def _all_finite(tree) -> Bool[Array, ""]:
    leaves = [
        jnp.all(jnp.isfinite(x)) for x in jtu.tree_leaves(eqx.filter(tree, eqx.is_inexact_array))
    ]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.array(True)


def _fill_implicit_tolerances(integrator, controller):
    """Give an implicit integrator's root finder the step-size tolerances (what diffrax does
    itself, done before wrapping in `_GuardedSolver` because diffrax cannot update a wrapped
    solver)."""
    if not isinstance(integrator, diffrax.AbstractImplicitSolver):
        return integrator
    if not isinstance(controller, diffrax.AbstractAdaptiveStepSizeController):
        return integrator
    rf = integrator.root_finder
    names = [a for a in ("rtol", "atol", "norm") if getattr(rf, a) is use_stepsize_tol]
    return eqx.tree_at(
        lambda s: tuple(getattr(s.root_finder, a) for a in names),
        integrator,
        tuple(getattr(controller, a) for a in names),
    )


# -- the generic integration helper -------------------------------------------------------------


class _RawSolution(eqx.Module):
    """What `_integrate_ode` returns: `ts`, `ys`, per-trajectory `result`, step `stats` and
    `t_final`, the time each trajectory reached (`t1` unless it stopped early; with
    `BacksolveAdjoint` NaN for a trajectory that stopped early)."""

    ts: Array
    ys: PyTree
    result: diffrax.RESULTS
    stats: dict
    t_final: Array


_SINGULAR_MESSAGE = (
    "a trajectory ran into a singularity: only non-finite values (NaN/inf) could be computed, or "
    "the step size fell to the resolution of t. The state reached a singular configuration (e.g. "
    "M not positive definite, or A M^-1 C^T singular (3.19)) or the solution blows up in finite "
    "time. Pass throw=False to get every other trajectory of the batch, with result == "
    "diffrax.RESULTS.nonfinite (or dt_min_reached) for this one."
)


def _save_time(t, y, args):
    return t


def _progress_meter(progress: bool):
    if not progress:
        return diffrax.NoProgressMeter()
    if importlib.util.find_spec("tqdm") is not None:
        return diffrax.TqdmProgressMeter()
    return diffrax.TextProgressMeter()


def _batch_sharding(sharding):
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


def _project_saved(project, t, y, ys):
    """`project(t, y)` for a saved value; unused slots of `SaveAt(steps=True)` (`t = inf`) stay
    `inf` (a finite stand-in goes through the projection, so gradients stay finite)."""
    used = jnp.isfinite(t)
    safe = jtu.tree_map(lambda x, x0: jnp.where(used, x, x0[0]), y, ys)
    out = project(jnp.where(used, t, 0.0), safe, None)
    return jtu.tree_map(lambda p, x: jnp.where(used, p, x), out, y)


def _shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` without replication checks (diffrax's loops are not annotated)."""
    if hasattr(jax, "shard_map"):
        return jax.shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_vma=False)
    from jax.experimental.shard_map import shard_map  # jax < 0.7

    return shard_map(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, check_rep=False)


@eqx.filter_jit
def _integrate_ode(
    rhs: Callable,
    y0: PyTree[Array],
    t0,
    t1,
    *,
    batched: bool,
    integrator: diffrax.AbstractSolver,
    saveat: diffrax.SaveAt,
    stepsize_controller: diffrax.AbstractStepSizeController,
    dt0=None,
    max_steps: int = 4096,
    adjoint: diffrax.AbstractAdjoint = diffrax.RecursiveCheckpointAdjoint(),  # noqa: B008 (immutable modules)
    throw: bool = True,
    progress: bool = False,
    project: Callable | None = None,
    sharding: Sharding | Mesh | None = None,
    event: diffrax.Event | None = None,
) -> _RawSolution:
    """Integrate $\\dot y = $ `rhs(t, y, args=None)` for one `y0` or a batch of them.

    Shared by `simulate` and other dynamics with an extended state (e.g. vakonomic).

    **Arguments:**

    - `rhs`: `(t, y, args) -> dy/dt` on ONE unbatched state `y` (any PyTree; `dy` has the same
        structure). Pass an `eqx.Module` holding the system so its arrays are traced (no
        recompilation for new parameter values, gradients flow).
    - `y0`: the initial PyTree; with `batched=True` every leaf has a leading batch axis `B`.
    - `t0`, `t1`: the time interval (scalars).
    - `batched`: whether `y0` carries a leading batch axis (vmapped, one compiled call; each
        trajectory keeps its own step-size control and result code).
    - `integrator`, `saveat`, `stepsize_controller`, `dt0`, `max_steps`, `adjoint`: as diffrax.
        `saveat` must save `y` itself (no `fn`, `subs` or `dense`).
    - `throw`: raise if any trajectory fails (`diffrax.is_okay(result)` false; an `event`
        that fires is not a failure); with `False` see `result` per trajectory.
    - `progress`: show diffrax's progress meter (tqdm if installed, text otherwise).
    - `project`: optional `(t, y, args) -> y`, applied after every step (a wrapped diffrax
        solver) and to every saved `y`; use it to return the state to a constraint manifold.
        Must be differentiable for gradients (fixed-iteration Newton: `min_norm_newton`).
        Not compatible with `diffrax.BacksolveAdjoint` (it would project the adjoint state).
    - `sharding`: `None`, a `jax.sharding.Mesh` (batch axis split over all its axes), a
        `NamedSharding` whose spec shards axis 0 (run with `shard_map`: every device integrates
        its own trajectories with no per-step synchronisation; `B` not divisible by the
        number of shards is padded), or any other `Sharding` (placement of `y0`, then XLA
        propagation). Needs `batched=True`.
    - `event`: an optional `diffrax.Event` (its `cond_fn` on ONE unbatched `y`, like `rhs`),
        passed to `diffrax.diffeqsolve` for every trajectory: a trajectory whose event fires
        stops there with `result == diffrax.RESULTS.event_occurred`.

    Every integration is guarded (`_GuardedSolver`): a step giving NaN/inf is rejected, and a
    trajectory whose step size falls to the resolution of $t$ (or a fixed-step one that
    reaches NaN/inf) stops there with `result == diffrax.RESULTS.nonfinite` (non-finite values)
    or `dt_min_reached`, keeping its last state, instead of spending `max_steps`.

    **Returns:** `_RawSolution(ts, ys, result, stats, t_final)`; with a batch every field has the
    leading axis `B` (`ts` is `(B, T)`, `ys` leaves `(B, T, ...)`, `result`, `t_final` `(B,)`).
    """
    progress_meter = _progress_meter(progress)
    # the time reached: one more saved time, `t1` unless the trajectory stopped early
    # (BacksolveAdjoint cannot save `subs`: there it is known only for finished trajectories)
    save_final = not isinstance(adjoint, diffrax.BacksolveAdjoint)
    if save_final:
        saveat = eqx.tree_at(
            lambda s: s.subs, saveat, (saveat.subs, diffrax.SubSaveAt(t1=True, fn=_save_time))
        )
    closure = (rhs, integrator, saveat, stepsize_controller, adjoint, project, t0, t1, dt0, event)
    dynamic, static = eqx.partition(closure, eqx.is_array)

    def solve_one(dynamic, y0_):
        rhs_, integrator_, saveat_, controller_, adjoint_, project_, t0_, t1_, dt0_, event_ = (
            eqx.combine(dynamic, static)
        )
        solver = _GuardedSolver(_fill_implicit_tolerances(integrator_, controller_), project_)
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs_),
            solver,
            t0_,
            t1_,
            dt0_,
            y0_,
            saveat=saveat_,
            stepsize_controller=controller_,
            adjoint=adjoint_,
            event=event_,
            max_steps=max_steps,
            throw=False,
            progress_meter=progress_meter,
        )
        if save_final:
            (ts, ts_final), (ys, _) = sol.ts, sol.ys
            t_final = ts_final[0]
        else:
            ts, ys = sol.ts, sol.ys
            t_final = jnp.where(diffrax.is_successful(sol.result), t1_, jnp.nan)
        if project_ is not None:  # interpolated saves (SaveAt(ts=...)) back onto C
            raw = ys
            ys = jax.vmap(lambda t, y: _project_saved(project_, t, y, raw))(ts, raw)
        stats = {k: sol.stats[k] for k in ("num_steps", "num_accepted_steps", "num_rejected_steps")}
        return _RawSolution(ts, ys, sol.result, stats, t_final)

    if not batched:
        out = solve_one(dynamic, y0)
    else:
        solve_batch = jax.vmap(solve_one, in_axes=(None, 0))
        mesh, spec = _batch_sharding(sharding)
        if mesh is None and spec is not None:
            y0 = jax.lax.with_sharding_constraint(y0, spec)
            out = solve_batch(dynamic, y0)
        elif mesh is not None:
            shards = 1
            for name in spec[0] if isinstance(spec[0], tuple) else (spec[0],):
                shards *= mesh.shape[name]
            B = jtu.tree_leaves(y0)[0].shape[0]
            pad = -B % shards  # pad with copies of trajectory 0, dropped afterwards
            if pad:
                y0 = jtu.tree_map(
                    lambda x: jnp.concatenate([x, jnp.repeat(x[:1], pad, axis=0)]), y0
                )
            out = _shard_map(solve_batch, mesh, (PartitionSpec(), spec), spec)(dynamic, y0)
            if pad:
                out = jtu.tree_map(lambda x: x[:B], out)
        else:
            out = solve_batch(dynamic, y0)
    if throw:  # on `result` only: a check on every output would gather them onto one device
        singular = (out.result == diffrax.RESULTS.nonfinite) | (
            out.result == diffrax.RESULTS.dt_min_reached
        )
        result = eqx.error_if(out.result, singular, _SINGULAR_MESSAGE)
        result = result.error_if(result, jnp.invert(diffrax.is_okay(result)))
        out = eqx.tree_at(lambda o: o.result, out, result)
    return out


def _solve_options(
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
) -> dict:
    """Validate the diffrax-facing options of `simulate` (before tracing) and return the keyword
    arguments of `_integrate_ode` (all but `batched`, `project` and `event`)."""
    _check_saveat(saveat)
    if not isinstance(integrator, diffrax.AbstractSolver):
        raise TypeError(
            f"integrator must be a diffrax solver such as diffrax.Tsit5(), got {integrator!r}."
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
    _batch_sharding(sharding)
    if projecting and isinstance(adjoint, diffrax.BacksolveAdjoint):
        raise ValueError(
            "stabilization='projection' cannot be used with diffrax.BacksolveAdjoint (the backward "
            "solve would project the adjoint state): use RecursiveCheckpointAdjoint or 'baumgarte'."
        )
    if stepsize_controller is None:
        if isinstance(integrator, diffrax.AbstractAdaptiveSolver):
            stepsize_controller = diffrax.PIDController(rtol=rtol, atol=atol)
        else:
            if dt0 is None:
                raise ValueError(
                    f"{type(integrator).__name__} has no error estimate: give a fixed step dt0."
                )
            stepsize_controller = diffrax.ConstantStepSize()
    return dict(
        integrator=integrator,
        saveat=saveat,
        stepsize_controller=stepsize_controller,
        dt0=None if dt0 is None else jnp.asarray(dt0, dtype),
        max_steps=max_steps,
        adjoint=adjoint,
        throw=throw,
        progress=progress,
        sharding=sharding,
    )


# -- simulate -----------------------------------------------------------------------------------


class Solution(eqx.Module):
    """The result of `simulate`.

    With a batched `y0` (leading axis `B`) every field has the leading axis `B`.

    **Fields:**

    - `ts`: the saved times, `(T,)` (or `(B, T)`).
    - `states`: a `State` with a time axis: `states.q`, `states.v` of shape `(T, n)`
        (or `(B, T, n)`).
    - `result`: `diffrax.RESULTS`, one code per trajectory
        (`sol.result == diffrax.RESULTS.successful`). A trajectory that runs into a
        singularity (a singular configuration, a finite-time blow-up) stops as soon as its
        step size falls to the resolution of $t$, $16\\varepsilon|t|$, instead of spending
        `max_steps`: with `diffrax.RESULTS.nonfinite` if only NaN/inf could be computed there,
        else `diffrax.RESULTS.dt_min_reached`; a fixed-step integrator stops at its first
        non-finite step with `nonfinite`. Saved states after the stop are `inf` (diffrax's
        convention) and `SaveAt(t1=True)` holds the last state reached. Other failures keep
        diffrax's codes (`max_steps_reached`, ...).
    - `energy`: $E_L$ (2.7) at the saved states, `(T,)`.
    - `constraint_residual`: $|\\phi(t, q, v)|$ (Euclidean norm over the $k$ rows), `(T,)`.
    - `position_residual`: $|h(t, q)|$ of the holonomic parts (zero without them), `(T,)`.
    - `stats`: diffrax's step counts per trajectory (`num_steps`, `num_accepted_steps`,
        `num_rejected_steps`).

    With `SaveAt(steps=True)` unused slots are `inf` (diffrax's convention).
    """

    ts: Float[Array, "*B T"]
    states: State
    result: diffrax.RESULTS
    energy: Float[Array, "*B T"]
    constraint_residual: Float[Array, "*B T"]
    position_residual: Float[Array, "*B T"]
    stats: dict


def _check_state(system: LagrangianSystem, y0, t0) -> bool:
    """Shape checks before tracing; returns whether `y0` is batched."""
    if not isinstance(y0, State):
        raise TypeError(f"y0 must be a gm.State(q, v), got {type(y0).__name__}.")
    if y0.q.ndim not in (1, 2):
        raise ValueError(
            f"y0 has q of shape {y0.q.shape}: give one state with q of shape (n,) or a batch with "
            "a single leading axis, (B, n)."
        )
    batched = y0.q.ndim == 2
    if batched and y0.q.shape[0] == 0:
        raise ValueError("y0 is an empty batch (B = 0).")
    one = jtu.tree_map(lambda x: x[0], y0) if batched else y0
    system.check_shapes(one, t0)
    return batched


def _check_saveat(saveat):
    if not isinstance(saveat, diffrax.SaveAt):
        raise TypeError(f"saveat must be a diffrax.SaveAt, got {type(saveat).__name__}.")
    sub = saveat.subs
    if saveat.dense or not isinstance(sub, diffrax.SubSaveAt) or sub.fn.__name__ != "save_y":
        raise ValueError(
            "simulate saves states: use diffrax.SaveAt(t0=..., t1=..., ts=..., steps=...) without "
            "fn=, subs= or dense=True (compute functions of sol.states afterwards)."
        )
    if not (sub.t0 or sub.t1 or sub.steps or sub.ts is not None):
        raise ValueError("saveat saves nothing: give t0=True, t1=True, ts=... or steps=True.")


class _Diagnostics(eqx.Module):
    system: LagrangianSystem

    def __call__(self, t, state: State):
        E = self.system.energy(state, t)
        phi = jnp.linalg.norm(self.system.constraint_residual(state, t))
        h = jnp.linalg.norm(self.system.position_residual(state, t))
        return E, phi, h


def simulate(
    system: LagrangianSystem,
    y0: State,
    t0,
    t1,
    *,
    solver: AbstractSolver = Projection(),  # noqa: B008 (immutable modules)
    integrator: diffrax.AbstractSolver | AbstractSystemIntegrator = diffrax.Tsit5(),  # noqa: B008 (immutable modules)
    saveat: diffrax.SaveAt = diffrax.SaveAt(t1=True),  # noqa: B008 (immutable modules)
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0=None,
    max_steps: int = 4096,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    stabilization: None | str | AbstractStabilization = None,
    adjoint: diffrax.AbstractAdjoint = diffrax.RecursiveCheckpointAdjoint(),  # noqa: B008 (immutable modules)
    throw: bool = True,
    progress: bool = False,
    sharding: Sharding | Mesh | None = None,
) -> Solution:
    """Integrate the constrained dynamics $X_R = (v, a_R)$ from `y0` over `[t0, t1]`.

    $a_R$ comes from the shared stages (`assemble`) and `solver`; `y0` must lie on
    $\\mathcal{C}$ (checked; use `project_to_constraints` to make it so).

    **Arguments:**

    - `system`: a `LagrangianSystem`.
    - `y0`: a `State` with `q`, `v` of shape `(n,)`, or `(B, n)` for an ensemble (one compiled,
        vmapped call; every trajectory has its own step-size control and result code).
    - `t0`, `t1`: the interval.
    - `solver`: the principle giving $a_R$ (`gm.Projection()`, `gm.Gauss()`, ...).
    - `integrator`: any diffrax ODE solver, explicit or implicit (`diffrax.Tsit5()`,
        `diffrax.Kvaerno5()`), or a geometric integrator built from the system itself
        (`gm.VariationalIntegrator()`, fixed step `dt0`; `solver` is then not used).
    - `saveat`: a `diffrax.SaveAt` (`t0`, `t1`, `ts`, `steps`).
    - `rtol`, `atol`: tolerances of the default `diffrax.PIDController`.
    - `dt0`: initial step (chosen automatically if `None`; required for fixed-step integrators).
    - `max_steps`: as diffrax.
    - `stepsize_controller`: overrides the default controller (`PIDController(rtol, atol)` for
        adaptive integrators, `ConstantStepSize()` otherwise).
    - `stabilization`: `None` (drift is reported in the diagnostics, not corrected),
        `"baumgarte"` / `gm.Baumgarte(alpha, beta)`, or `"projection"` / `gm.ManifoldProjection()`.
    - `adjoint`: `diffrax.RecursiveCheckpointAdjoint()` (default) or `diffrax.BacksolveAdjoint(...)`
        (not with projection) for gradients of losses of the `Solution`.
    - `throw`: raise if any trajectory fails (a non-finite trajectory with an error saying so);
        with `False` failures are flagged in `result` (see `Solution`) and every other
        trajectory is returned as if it ran alone.
    - `progress`: show diffrax's progress meter.
    - `sharding`: a `jax.sharding.Mesh` or `Sharding` for the batch axis (see docs/multi_device.md).

    **Returns:** a `Solution`.
    """
    batched = _check_state(system, y0, t0)
    _check_solver(system, solver)
    if isinstance(integrator, AbstractSystemIntegrator):  # its diffrax solver carries the system
        integrator = integrator.bind(
            system, dt0=dt0, stepsize_controller=stepsize_controller, stabilization=stabilization
        )
    stabilization = _as_stabilization(stabilization)
    options = _solve_options(
        integrator=integrator,
        saveat=saveat,
        rtol=rtol,
        atol=atol,
        dt0=dt0,
        max_steps=max_steps,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        throw=throw,
        progress=progress,
        sharding=sharding,
        batched=batched,
        projecting=isinstance(stabilization, ManifoldProjection),
        dtype=y0.q.dtype,
    )
    t0, t1 = jnp.asarray(t0, y0.q.dtype), jnp.asarray(t1, y0.q.dtype)
    return _simulate(system, y0, t0, t1, solver, stabilization, batched=batched, **options)


@eqx.filter_jit
def _simulate(system, y0, t0, t1, solver, stabilization, *, batched, **kwargs) -> Solution:
    check = lambda s: check_on_constraint(system, s, t0)
    y0 = jax.vmap(check)(y0) if batched else check(y0)
    baumgarte = stabilization if isinstance(stabilization, Baumgarte) else None
    project = None
    if isinstance(stabilization, ManifoldProjection):
        project = _StateProjection(system, stabilization.iterations)
    rhs = _ConstrainedField(system, solver, baumgarte)
    raw = _integrate_ode(rhs, y0, t0, t1, batched=batched, project=project, **kwargs)
    diagnostics = jax.vmap(_Diagnostics(system))
    if batched:
        diagnostics = jax.vmap(diagnostics)
    E, phi, h = diagnostics(raw.ts, raw.ys)
    return Solution(raw.ts, raw.ys, raw.result, E, phi, h, raw.stats)
