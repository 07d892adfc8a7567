"""`simulate`: the constrained dynamics $X_R$ integrated by the engine (`_engine.py`) behind the
shared front end (`_frontend.py`), with a stabilization (`_stabilization.py`), per-trajectory
results and diagnostics (`Solution`, `_solution.py`).
"""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.sharding import Mesh, Sharding

from ._bundle import State
from ._checks import At, Failure, contact_measures, first_failure, point_scale
from ._contact import ContactWatch
from ._custom_types import RealScalarLike
from ._dynamics import check_solver, constrained_acceleration
from ._engine import integrate
from ._frontend import (
    DEFAULT_MAX_OUTPUT_BYTES,
    check_time_interval,
    note_trace,
    prepare,
    run_checked,
    throw_failures_in_jit,
)
from ._geometry import AbstractStateParts
from ._solution import Solution
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
        failed = given != Failure.successful
        failure = jax.tree_util.tree_map(lambda a, b: jnp.where(failed, a, b), given, failure)
    if throw_in_jit:
        failure = throw_failures_in_jit(failure, "simulate")
    rhs = ConstrainedField(system, solver, stabilization)
    project = stabilization.state_projection(system)
    skip = failure != Failure.successful
    event = admissible = holds = None
    if system.contact is not None:  # watched along the run (`_contact`)
        watch = ContactWatch(rhs, system.contact)
        event, admissible, holds = watch.event(y0.v.dtype), system.contact.same_contact, watch.holds
    raw = integrate(
        rhs, y0, t0, t1, options, batched=batched, project=project, event=event,
        admissible=admissible, holds=holds, skip=skip,
    )
    if event is not None:
        undefined = raw.event_mask & ~skip
        lift_off = (raw.result == diffrax.RESULTS.event_occurred) & ~raw.event_mask & ~skip
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
    (3.19), on $\\mathcal{C}$, and with `acceleration` a finite $a_R$), or `Failure.successful`."""
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
