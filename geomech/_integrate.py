"""`simulate`: the constrained dynamics $X_R$ integrated by the engine (`_engine.py`) behind the
shared front end (`_frontend.py`), with a stabilization (`_stabilization.py`), per-trajectory
results and diagnostics.
"""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, Sharding
from jaxtyping import Array, Float

from ._bundle import State
from ._checks import At, Failure, contact_measures, first_failure, point_scale
from ._contact import ContactEvents
from ._custom_types import RealScalarLike
from ._dynamics import check_solver, constrained_acceleration
from ._engine import RawSolution, at_saves, integrate, results_where
from ._frontend import (
    DEFAULT_MAX_OUTPUT_BYTES,
    check_time_interval,
    note_trace,
    prepare,
    run_checked,
    throw_failures_in_jit,
)
from ._geometry import AbstractManifold, AbstractStateParts, Euclidean
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._stabilization import AbstractStabilization
from ._stages import stages_at
from ._system import LagrangianSystem, check_system
from ._system_integrator import AbstractSystemIntegrator


class ConstrainedField(eqx.Module):
    """The right-hand side $(\\dot q, \\dot v) = (v, a_R)$ of $X_R$ as a diffrax vector field."""

    system: LagrangianSystem
    solver: AbstractSolver
    stabilization: AbstractStabilization

    def __call__(self, t, y: State, args) -> State:
        # value checks off: a singular state gives non-finite values, which the engine reports per
        # trajectory instead of aborting the whole ensemble; shapes were checked before tracing
        stages = self.stabilization.modify_stages(stages_at(self.system, y, t, checks=False))
        q_dot = self.system.manifold.velocity_of_point(y.q, y.v)  # of the stored point
        return State(q_dot, constrained_acceleration(stages, self.solver))


class StateParts(AbstractStateParts):
    """A `gm.State` is its point and its velocity (`AbstractStateParts`)."""

    def split(self, y: State):
        return y.q, y.v, None

    def join(self, q, v, extra) -> State:
        return State(q, v)


class Diagnostics(eqx.Module):
    """$E_L$, $|\\phi|$ and $|h|$ at one saved state."""

    system: LagrangianSystem

    def __call__(self, t, state: State):
        E = self.system.energy(state, t)
        phi = jnp.linalg.norm(self.system.constraint_residual(state, t))
        h = jnp.linalg.norm(self.system.position_residual(state, t))
        return E, phi, h

    def along(self, ts, states, *, batched: bool):
        """The diagnostics at every saved state (`(T,)` each, `(B, T)` with a batch; NaN where
        the state is not finite, with a zero derivative there: `at_saves`)."""
        return at_saves(self, ts, states, batched=batched)


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
        diffrax's codes (`max_steps_reached`, ...). A trajectory whose initial state fails a
        precondition is not integrated: `diffrax.RESULTS.singular`, and `failure` says which.
    - `failure`: a `gm.Failure` per trajectory, `gm.Failure.none` unless the initial state
        failed a precondition (`nonfinite_state`, `off_constraint`, `mass_matrix`,
        `admissibility`, `work_space`, `condition_3_19`, `nonfinite_acceleration`, and for
        `simulate_vakonomic` `nonfinite_multipliers`); such a
        trajectory keeps its `y0` at `t0` and `inf` at the later saved times, and `t_final == t0`.
        For a system with a `contact` (a rolling body) also `lift_off` and `contact_undefined`,
        at the start (not integrated, as above) or during the run: then the trajectory stopped
        at `t_final`, the time its normal force fell through zero or its contact point became
        undefined (`result` is `diffrax.RESULTS.event_occurred`; an error if `throw`).
    - `t_final`: the time each trajectory reached, `()` (or `(B,)`): `t1`, or, where it stopped
        early, the time of the last state kept (a failed step does not count; later saved times
        are `inf`); NaN for a trajectory stopped early under `diffrax.BacksolveAdjoint`.
    - `energy`: $E_L$ (2.7) at the saved states, `(T,)`.
    - `constraint_residual`: $|\\phi(t, q, v)|$ (Euclidean norm over the $k$ rows), `(T,)`.
    - `position_residual`: $|h(t, q)|$ of the holonomic parts (zero without them), `(T,)`.
    - `stats`: diffrax's step counts per trajectory (`num_steps`, `num_accepted_steps`,
        `num_rejected_steps`).
    - `manifold`: the system's configuration manifold (what the points `states.q` are points of:
        `manifold.parameters(states.q)` gives their stored parameters).

    With `SaveAt(steps=True)` unused slots are `inf` (diffrax's convention).
    """

    ts: Float[Array, "*B T"]
    states: State
    result: diffrax.RESULTS
    failure: Failure
    t_final: Float[Array, "*B"]
    energy: Float[Array, "*B T"]
    constraint_residual: Float[Array, "*B T"]
    position_residual: Float[Array, "*B T"]
    stats: dict
    manifold: AbstractManifold = Euclidean()

    @classmethod
    def from_raw(
        cls,
        system: LagrangianSystem,
        raw: RawSolution,
        *,
        batched: bool,
        throw: bool,
        failure: Failure | None = None,
        skip=None,
    ) -> "Solution":
        """The `Solution` of an engine result whose saved values are `State`s. A trajectory whose
        energy is non-finite at a saved state is not successful (`nonfinite`; an error if
        `throw`); one with a `failure` (not integrated) is `singular`."""
        if failure is None:
            shape = raw.t_final.shape  # Failure.none for every trajectory
            failure = jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, shape), Failure.none)
        failed = failure != Failure.none
        if skip is not None:  # the others failed along the run: stopped where they failed
            stopped, failed = failed & ~skip, skip
            if throw:  # on every output a caller may read (an unused check is dropped)
                read = lambda r: (r.ts, r.ys, r.result, r.t_final)
                raw = eqx.tree_at(read, raw, eqx.error_if(read(raw), stopped, STOPPED_MESSAGE))
        raw = eqx.tree_at(
            lambda r: r.result, raw, results_where(failed, diffrax.RESULTS.singular, raw.result)
        )
        E, phi, h = Diagnostics(system).along(raw.ts, raw.ys, batched=batched)
        bad = diffrax.is_okay(raw.result) & jnp.any(
            ~jnp.isfinite(E) & jnp.isfinite(raw.ts), axis=-1
        )
        result = results_where(bad, diffrax.RESULTS.nonfinite, raw.result)
        if throw:  # threaded onto the energy too (a check whose value is unused is dropped)
            result, E = eqx.error_if((result, E), bad, NONFINITE_ENERGY_MESSAGE)
        return cls(
            ts=raw.ts, states=raw.ys, result=result, failure=failure, t_final=raw.t_final, energy=E,
            constraint_residual=phi, position_residual=h, stats=raw.stats,
            manifold=system.manifold,
        )


STOPPED_MESSAGE = (
    "a trajectory of a rolling body was stopped where its model ends: the plane would have to pull "
    "the body down (gm.Failure.lift_off) or the contact point is no longer defined, a disk lying "
    "flat (gm.Failure.contact_undefined). Pass throw=False: sol.failure says which, sol.t_final "
    "when, and the other trajectories run on."
)


NONFINITE_ENERGY_MESSAGE = (
    "the energy E_L = dL/dv . v - L is NaN or inf at a saved state although the state is finite: "
    "the Lagrangian (or its derivative in v) is not finite there. Check L's domain (e.g. sqrt or "
    "log of a negative number, division by zero); with throw=False the trajectory is flagged "
    "result == diffrax.RESULTS.nonfinite."
)


def simulate(
    system: LagrangianSystem,
    y0: State,
    t0: RealScalarLike,
    t1: RealScalarLike,
    *,
    solver: AbstractSolver = Projection(),  # noqa: B008 (immutable modules)
    integrator: diffrax.AbstractSolver | AbstractSystemIntegrator = diffrax.Tsit5(),  # noqa: B008
    saveat: diffrax.SaveAt = diffrax.SaveAt(t1=True),  # noqa: B008 (immutable modules)
    rtol: float | None = None,
    atol: float | None = None,
    dt0=None,
    max_steps: int = 100_000,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    stabilization: None | str | AbstractStabilization = None,
    adjoint: diffrax.AbstractAdjoint = diffrax.RecursiveCheckpointAdjoint(),  # noqa: B008 (immutable modules)
    throw: bool = True,
    progress: bool = False,
    sharding: Sharding | Mesh | None = None,
    max_output_bytes: int | None = DEFAULT_MAX_OUTPUT_BYTES,
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
    - `rtol`, `atol`: tolerances of the default `diffrax.PIDController` (`1e-8` each when not
        given); an error together with `stepsize_controller`.
    - `dt0`: initial step (chosen automatically if `None`; required for fixed-step integrators).
    - `max_steps`: as diffrax; the bound on the number of steps of each trajectory (it costs
        memory only with `SaveAt(steps=True)`, which keeps `max_steps` slots).
    - `stepsize_controller`: instead of the default controller (`PIDController(rtol, atol)` for
        adaptive integrators, `ConstantStepSize()` otherwise); not together with `rtol`/`atol`.
    - `stabilization`: `None` (drift is reported in the diagnostics, not corrected),
        `"baumgarte"` / `gm.Baumgarte(alpha, beta)`, or `"projection"` / `gm.ManifoldProjection()`.
    - `adjoint`: how derivatives pass the solve. The default,
        `diffrax.RecursiveCheckpointAdjoint()`, is chosen anew before tracing from the
        transformations `simulate` is traced under: `diffrax.ForwardMode()` under
        `jax.jvp`/`jax.jacfwd`, the checkpointed adjoint under `jax.grad`/`jax.vjp`, and where the
        mode is not known yet (inside `jax.jit`; a function optimistix traces once and then
        linearizes or transposes, such as `optx.least_squares` with its default options) a solve
        that serves both (docs/performance.md). Any other adjoint is used as given:
        `diffrax.ForwardMode()`, or `diffrax.BacksolveAdjoint(...)` (not with projection).
    - `throw`: raise if any trajectory fails (a non-finite trajectory with an error saying so);
        with `False` failures are flagged in `result` (see `Solution`) and every other
        trajectory is returned as if it ran alone.
    - `progress`: show diffrax's progress meter.
    - `sharding`: a `jax.sharding.Mesh` or `Sharding` for the batch axis (see docs/multi_device.md).
    - `max_output_bytes`: refuse (before allocating) a run whose saved output would be larger
        (4 GiB by default; `None` for no limit).

    **Returns:** a `Solution`.
    """
    check_system(system)
    check_time_interval(t0, t1)  # before the state's checks, which take t0 as their time
    batched = system.check_state(y0, t0)
    check_solver(system, solver)
    if system.contact is not None and isinstance(adjoint, diffrax.BacksolveAdjoint):
        raise ValueError(
            "adjoint=diffrax.BacksolveAdjoint() cannot differentiate through the events that "
            "watch the system's contact (lift-off, a disk lying flat): use the default adjoint, "
            "or build the system without them (gm.RollingBody(...).system(contact=None))."
        )
    run = prepare(
        system, y0, t0, t1, name="simulate", batched=batched, extra=3, parts=StateParts(),
        integrator=integrator,
        saveat=saveat, rtol=rtol, atol=atol, dt0=dt0, max_steps=max_steps,
        stepsize_controller=stepsize_controller, stabilization=stabilization, adjoint=adjoint,
        throw=throw, progress=progress, sharding=sharding, max_output_bytes=max_output_bytes,
    )
    program = lambda options, given, throw_in_jit: _simulate(
        system, y0, run.t0, run.t1, solver, run.stabilization, options, given,
        batched=batched, throw_in_jit=throw_in_jit,
    )
    recheck = lambda: _initial_failures(system, solver, y0, run.t0, batched=batched)
    return run_checked(
        program, run.options, name="simulate", batch_shape=jnp.shape(y0.v)[:-1], recheck=recheck
    )


@eqx.filter_jit
def _simulate(
    system, y0, t0, t1, solver, stabilization, options, given, *, batched, throw_in_jit
) -> Solution:
    # `given`: the full preconditions of each trajectory computed beforehand (then the program
    # checks all but a finite a_R itself, see `run_checked`), or None (then all of them are
    # checked here)
    note_trace("simulate", (system, y0, t0, t1, solver, stabilization, options, given, throw_in_jit))
    failure = initial_failures(system, solver, y0, t0, batched=batched, acceleration=given is None)
    if given is not None:
        failed = given != Failure.none
        failure = jax.tree_util.tree_map(lambda a, b: jnp.where(failed, a, b), given, failure)
    if throw_in_jit:
        failure = throw_failures_in_jit(failure, "simulate")
    rhs = ConstrainedField(system, solver, stabilization)
    project = stabilization.state_projection(system)
    skip = failure != Failure.none
    event = admissible = None
    if system.contact is not None:  # watched along the run (`_contact`)
        event = ContactEvents(rhs, system.contact).event(y0.v.dtype)
        admissible = system.contact.same_contact
    raw = integrate(
        rhs, y0, t0, t1, options, batched=batched, project=project, event=event,
        admissible=admissible, skip=skip,
    )
    if event is not None:
        lift_off, undefined = (m & ~skip for m in raw.event_mask)
        pick = lambda when, item, f: jax.tree_util.tree_map(
            lambda a, b: jnp.where(when, a, b), item, f
        )
        failure = pick(lift_off, Failure.lift_off, pick(undefined, Failure.contact_undefined, failure))
    return Solution.from_raw(
        system, raw, batched=batched, throw=options.throw, failure=failure, skip=skip
    )


def initial_failure(
    system: LagrangianSystem, solver: AbstractSolver, state: State, t, *, acceleration: bool = True
) -> Failure:
    """The first precondition of `simulate` that `state` fails (the conditions of the table in
    `_checks` for `"simulate"`: finite, regular $M$ (2.6), (3.7), a work space of full rank,
    (3.19), on $\\mathcal{C}$, and with `acceleration` a finite $a_R$), or `Failure.none`."""
    stages = stages_at(system, state, t, checks=False)
    a_R = functools.cache(lambda: constrained_acceleration(stages, solver))
    extra = {"acceleration": a_R} if acceleration else {}
    extra |= contact_measures(system, state, t, a_R)
    at = At(stages, point=state, scale=point_scale(system, state), **extra)
    return first_failure("simulate", at)


def initial_failures(
    system: LagrangianSystem, solver: AbstractSolver, y0: State, t0, *, batched: bool,
    acceleration: bool = True,
) -> Failure:
    """`initial_failure` of each initial state (`()` or `(B,)`)."""
    check = lambda s: initial_failure(system, solver, s, t0, acceleration=acceleration)
    return jax.vmap(check)(y0) if batched else check(y0)


_initial_failures = eqx.filter_jit(initial_failures)
