"""Vakonomic simulation on the integration engine, and the comparison with Četaev's dynamics."""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from .._bundle import State
from .._checks import At, Failure, first_failure, point_scale
from .._custom_types import RealScalarLike
from .._engine import at_saves, checked_outputs, integrate
from .._frontend import (
    DEFAULT_MAX_OUTPUT_BYTES,
    check_time_interval,
    note_trace,
    prepare,
    run_checked,
    throw_failures_in_jit,
)
from .._geometry import AbstractStateParts
from .._integrate import simulate
from .._solution import Solution
from .._solver._base import AbstractSolver
from .._solver._projection import Projection
from .._stabilization import AbstractStabilization
from .._stages import stages_at
from .._system import LagrangianSystem, check_system
from ._dynamics import (
    IMPASSE_MESSAGE,
    check_omega,
    check_vakonomic_system,
    default_impasse_tol,
    multiplier_lagrangian,
    signed_margin,
    vakonomic_energy,
    vakonomic_kkt,
    vakonomic_mass_matrix,
)


class VakonomicSolution(eqx.Module):
    """The result of `simulate_vakonomic`: a `gm.Solution` of the mechanical state $(q, v)$ plus
    the multipliers.

    With a batch (leading axis `B`) every field has the leading axis `B`.

    **Fields:**

    - `solution`: the `gm.Solution` of $(q, v)$: `ts`, `states`, `result`, `outcome`, `t_final`,
        `energy` ($E_L$), `constraint_residual` ($|g|$), `position_residual`, `stats` — each
        also readable directly on the `VakonomicSolution` (`sol.ts`, `sol.states`, ...).
        `result` is `event_occurred` for a trajectory stopped at an impasse point (the only
        event of `simulate_vakonomic`; see `impasse`), else as for `gm.Solution`; `t_final` is
        where a trajectory stopped (the accepted step on which the impasse margin fell below
        `impasse_tol` or changed sign).
    - `mu`: the multipliers $\\mu(t)$, `(T, k)`.
    - `impasse`: `True` for a trajectory stopped at an impasse point ($M_\\mu$ degenerate on
        $\\ker G$), `()` (or `(B,)`); its saved states after the stop are `inf`.
    - `vakonomic_energy`: $E_{vak}$ of $L + \\mu\\cdot g$ (`vakonomic_energy`), `(T,)`.
    """

    solution: Solution
    mu: Float[Array, "*B T k"]
    impasse: Bool[Array, "*B"]
    vakonomic_energy: Float[Array, "*B T"]

    @property
    def ts(self) -> Float[Array, "*B T"]:
        return self.solution.ts

    @property
    def states(self) -> State:
        return self.solution.states

    @property
    def result(self) -> diffrax.RESULTS:
        return self.solution.result

    @property
    def failure(self) -> Failure:
        return self.solution.failure

    @property
    def outcome(self) -> Failure:
        return self.solution.outcome

    @property
    def t_final(self) -> Float[Array, "*B"]:
        return self.solution.t_final

    @property
    def energy(self) -> Float[Array, "*B T"]:
        return self.solution.energy

    @property
    def constraint_residual(self) -> Float[Array, "*B T"]:
        return self.solution.constraint_residual

    @property
    def position_residual(self) -> Float[Array, "*B T"]:
        return self.solution.position_residual

    @property
    def stats(self) -> dict:
        return self.solution.stats

    @property
    def manifold(self):
        return self.solution.manifold


class _VakonomicField(eqx.Module):
    """The right-hand side $(\\dot q, \\dot v, \\dot\\mu) = (v, a, \\dot\\mu)$ on `(State, mu)`.

    No impasse check here (it would poison trial stages): the `_Impasse` event checks the
    accepted states and stops the trajectory on the first step that reaches or crosses one."""

    system: LagrangianSystem
    omega: Callable | None
    modified: bool = eqx.field(static=True)
    stabilization: AbstractStabilization

    def __call__(self, t, y, args):
        # the stages in the chart centred at state.q (docs/lie_groups.md): on a group the
        # equations of L + μ·g in the body frame, Hamel's term included (`vakonomic_kkt`)
        state, mu = y
        stages = self.stabilization.modify_stages(stages_at(self.system, state, t, checks=False))
        a, mu_dot, _ = vakonomic_kkt(stages, mu, self.omega, self.modified)
        q_dot = self.system.manifold.velocity_of_point(state.q, state.v)  # of the stored point
        return State(q_dot, a), mu_dot


class _StateAndMultipliers(AbstractStateParts):
    """`(State, mu)`: the point, its velocity, and the multipliers beside them
    (`AbstractStateParts`)."""

    def split(self, y):
        state, mu = y
        return state.q, state.v, mu

    def join(self, q, v, extra):
        return State(q, v), extra


class _Impasse(eqx.Module):
    """A `diffrax.Event` condition on the accepted states `(State, mu)`: `crossing=False` is
    `True` where the impasse margin is at most `tol` (also at `t0`); `crossing=True` is the
    signed margin, whose sign change marks a step across an impasse point."""

    system: LagrangianSystem
    tol: float = eqx.field(static=True)
    crossing: bool = eqx.field(static=True)

    def __call__(self, t, y, args, **kwargs):
        state, mu = y
        stages = stages_at(self.system, state, t, checks=False)
        margin = signed_margin(stages, vakonomic_mass_matrix(stages, multiplier_lagrangian(stages, mu)))
        return margin if self.crossing else jnp.abs(margin) <= self.tol


class _MechanicalProjection(eqx.Module):
    """Applies a projection of `State`s to `(State, mu)`; the multipliers are not projected."""

    project: Callable

    def __call__(self, t, y, args):
        return self.project(t, y[0], args), y[1]


def simulate_vakonomic(
    system: LagrangianSystem,
    y0: State,
    mu0: Float[Array, "*B k"] | None,
    t0: RealScalarLike,
    t1: RealScalarLike,
    *,
    omega: Callable | None = None,
    modified: bool = False,
    integrator: diffrax.AbstractSolver = diffrax.Tsit5(),  # noqa: B008 (immutable modules)
    saveat: diffrax.SaveAt = diffrax.SaveAt(t1=True),  # noqa: B008
    rtol: float | None = None,
    atol: float | None = None,
    dt0=None,
    max_steps: int = 100_000,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    stabilization: None | str | AbstractStabilization = None,
    adjoint: diffrax.AbstractAdjoint = diffrax.RecursiveCheckpointAdjoint(),  # noqa: B008
    throw: bool = True,
    impasse_tol: float | None = None,
    progress: bool = False,
    sharding=None,
    max_output_bytes: int | None = DEFAULT_MAX_OUTPUT_BYTES,
) -> VakonomicSolution:
    """Integrate the vakonomic dynamics ([Talamucci] (58)) on the extended state $(q, v, \\mu)$.

    Shares `gm.simulate`'s machinery: stabilization acts on $(q, v)$ only (Baumgarte on $G a = b$,
    or projection onto $g = 0$; $\\mu$ is never projected), ensembles are one vmapped call with a
    result code per trajectory, and gradients flow through the solve.

    **Arguments:**

    - `system`: a `LagrangianSystem` with constraints and no `work_space`/`known_work`.
    - `y0`: a `State` on $g = 0$, `(n,)` or a batch `(B, n)`; on a Lie group a `jaxlie` point
        and the body velocity (integrated by Runge–Kutta–Munthe-Kaas with $\\mu$ carried
        beside, docs/lie_groups.md).
    - `mu0`: the free initial multipliers: `None` (zeros), `(k,)`, or a batch `(B, k)` (with an
        unbatched `y0` this runs a grid of $\\mu_0$ from one mechanical state).
    - `t0`, `t1`: the interval.
    - `omega`, `modified`: model B2 and the variant (60), as in `vakonomic_acceleration`.
    - `integrator`, `saveat`, `rtol`, `atol`, `dt0`, `max_steps`, `stepsize_controller`,
        `stabilization`, `adjoint`, `progress`, `sharding`, `max_output_bytes`: as in
        `gm.simulate`.
    - `throw`: if `True`, reaching an impasse point raises an error saying so, and so does any
        other integration failure or an initial state that fails a precondition (the error
        names the trajectories). If `False` a trajectory reaching an impasse point stops there
        with `sol.impasse` `True`, `sol.result == diffrax.RESULTS.event_occurred` and
        `sol.t_final` the time reached; an initial state (or $\\mu_0$) failing a precondition —
        not finite, off $g = 0$, singular $M$, $G$ not of full rank — is not integrated and is
        flagged in `sol.failure` (as in `gm.simulate`); the other trajectories are returned
        unharmed.
    - `impasse_tol`: an accepted state whose impasse margin ($\\sigma_{\\min}/\\sigma_{\\max}$ of
        $M_\\mu$ on $\\ker G$, `impasse_margin`) is at most this is an impasse point, and so is a
        step across which the margin's sign (that of $\\det Z^\\top M_\\mu Z$) changes (a
        `diffrax.Event`, checked after every accepted step and at `t0`). Default
        $\\sqrt{\\varepsilon}$ of the dtype.

    **Returns:** a `VakonomicSolution`.
    """
    check_system(system)
    check_time_interval(t0, t1)
    batched_y = system.check_state(y0, t0)
    one = jax.tree_util.tree_map(lambda x: x[0], y0) if batched_y else y0
    k = check_vakonomic_system(system, one, None, t0)
    check_omega(system, omega, modified)
    dtype = y0.v.dtype
    if mu0 is not None:
        given = mu0.dtype if hasattr(mu0, "dtype") else np.asarray(mu0).dtype
        if np.dtype(given).kind not in "iuf":
            raise TypeError(
                f"mu0 must hold real numbers (the initial multipliers), got dtype {given}."
            )
    mu0 = jnp.zeros((k,), dtype) if mu0 is None else jnp.asarray(mu0, dtype)
    if mu0.ndim not in (1, 2) or mu0.shape[-1] != k:
        raise ValueError(f"mu0 must have shape ({k},) or (B, {k}), got {mu0.shape}.")
    if mu0.ndim == 2 and mu0.shape[0] == 0:
        raise ValueError(
            f"mu0 is an empty batch (B = 0): give initial multipliers of shape ({k},) or "
            f"(B, {k}) with B >= 1."
        )
    batched = batched_y or mu0.ndim == 2
    if batched:
        B = y0.v.shape[0] if batched_y else mu0.shape[0]
        if mu0.ndim == 2 and mu0.shape[0] != B:
            raise ValueError(f"y0 has a batch of {B} states but mu0 a batch of {mu0.shape[0]}.")
        y0 = (
            y0
            if batched_y
            else jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (B, *x.shape)), y0)
        )
        mu0 = mu0 if mu0.ndim == 2 else jnp.broadcast_to(mu0, (B, k))
    run = prepare(
        system, (y0, mu0), t0, t1, name="simulate_vakonomic", batched=batched, extra=4,
        parts=_StateAndMultipliers(), integrator=integrator, saveat=saveat, rtol=rtol, atol=atol,
        dt0=dt0, max_steps=max_steps,
        stepsize_controller=stepsize_controller, stabilization=stabilization, adjoint=adjoint,
        throw=throw, progress=progress, sharding=sharding, max_output_bytes=max_output_bytes,
    )
    if impasse_tol is not None and not (
        np.ndim(impasse_tol) == 0
        and np.asarray(impasse_tol).dtype.kind in "iuf"
        and 0 <= impasse_tol < np.inf
    ):
        raise ValueError(
            f"impasse_tol must be a finite number >= 0 (or None), got {impasse_tol!r}."
        )
    tol = default_impasse_tol(dtype) if impasse_tol is None else float(impasse_tol)
    program = lambda options, given, throw_in_jit: _simulate_vakonomic(
        system, y0, mu0, run.t0, run.t1, omega, modified, run.stabilization, tol, options,
        batched=batched, throw_in_jit=throw_in_jit,
    )
    return run_checked(
        program, run.options, name="simulate_vakonomic", batch_shape=jnp.shape(mu0)[:-1]
    )


def _initial_failure(system: LagrangianSystem, state: State, mu, t) -> Failure:
    """The first precondition of `simulate_vakonomic` that `(state, mu)` fails (the conditions of
    the table in `_checks` for `"vakonomic"`: finite $(q, v)$ and $\\mu$, regular $M$ (2.6),
    $G = \\partial g/\\partial v$ of full rank (3.7), on $g = 0$); else `Failure.successful`. (An
    impasse point at $t_0$ is the `_Impasse` event's case: stopped there, `sol.impasse`.)"""
    stages = stages_at(system, state, t, checks=False)
    at = At(stages, point=state, scale=point_scale(system, state), mu=lambda: mu)
    return first_failure("vakonomic", at)


@eqx.filter_jit
def _simulate_vakonomic(
    system, y0, mu0, t0, t1, omega, modified, stabilization, impasse_tol, options, *, batched,
    throw_in_jit,
) -> VakonomicSolution:
    note_trace(
        "simulate_vakonomic",
        (system, y0, mu0, t0, t1, omega, modified, stabilization, impasse_tol, options, batched,
         throw_in_jit),
    )
    check = lambda s, m: _initial_failure(system, s, m, t0)
    failure = jax.vmap(check)(y0, mu0) if batched else check(y0, mu0)
    if throw_in_jit:
        failure = throw_failures_in_jit(failure, "simulate_vakonomic")
    skip = failure != Failure.successful
    project = stabilization.state_projection(system)
    rhs = _VakonomicField(system, omega, modified, stabilization)
    event = diffrax.Event(tuple(_Impasse(system, impasse_tol, c) for c in (False, True)))
    raw = integrate(
        rhs,
        (y0, mu0),
        t0,
        t1,
        options,
        batched=batched,
        project=None if project is None else _MechanicalProjection(project),
        event=event,
        skip=skip,
    )
    impasse = (raw.result == diffrax.RESULTS.event_occurred) & ~skip
    if options.throw:
        checked = eqx.error_if(checked_outputs(raw, options), impasse, IMPASSE_MESSAGE)
        raw = eqx.tree_at(lambda r: checked_outputs(r, options), raw, checked)
    states, mu = raw.ys
    mechanical = eqx.tree_at(lambda r: r.ys, raw, states)
    E_vak = at_saves(
        lambda t, y: vakonomic_energy(system, *y, t), raw.ts, (states, mu), batched=batched
    )
    return VakonomicSolution(
        solution=Solution.from_raw(
            system, mechanical, batched=batched, throw=options.throw, failure=failure
        ),
        mu=mu,
        impasse=impasse,
        vakonomic_energy=E_vak,
    )


# -- Četaev vs vakonomic ------------------------------------------------------------------------


class DynamicsComparison(eqx.Module):
    """The result of `compare_cetaev_vakonomic`.

    **Fields:**

    - `cetaev`: the `gm.Solution` of Četaev's dynamics ($X_R$ with $\\mathcal{W} = \\mathcal{D}$).
    - `vakonomic`: the `VakonomicSolution`, batched over the `B` values of $\\mu_0$.
    - `mu0`: the initial multipliers, `(B, k)`.
    - `max_deviation`: $\\max_t \\max_i |q^{vak}_i(t) - q^{cet}_i(t)|$ per $\\mu_0$ (on a Lie
        group of the point's parameters, e.g. the quaternion), `(B,)`
        (`inf`/`nan` for a vakonomic run that did not finish: stopped at an impasse point,
        `vakonomic.impasse`, or failed, `vakonomic.result`).
    - `max_velocity_deviation`: the same for $v$, `(B,)`.
    """

    cetaev: Solution
    vakonomic: VakonomicSolution
    mu0: Float[Array, "B k"]
    max_deviation: Float[Array, " B"]
    max_velocity_deviation: Float[Array, " B"]


def compare_cetaev_vakonomic(
    system: LagrangianSystem,
    y0: State,
    mu0: Float[Array, "*B k"] | None,
    t0: RealScalarLike,
    t1: RealScalarLike,
    *,
    saveat: diffrax.SaveAt | None = None,
    solver: AbstractSolver = Projection(),  # noqa: B008
    omega: Callable | None = None,
    modified: bool = False,
    throw: bool = False,
    **kwargs,
) -> DynamicsComparison:
    """Run Četaev's and the vakonomic dynamics from the same mechanical state and compare them.

    **Arguments:**

    - `system`: a `LagrangianSystem` with constraints (ideal: $\\mathcal{W} = \\mathcal{D}$).
    - `y0`: one `State` on $g = 0$, shape `(n,)`.
    - `mu0`: `None` (zeros), one `(k,)` or a grid `(B, k)` of initial multipliers.
    - `t0`, `t1`: the interval.
    - `saveat`: where to compare; 101 equally spaced times by default.
    - `solver`: the principle for Četaev's dynamics (all give the same $X_R$).
    - `omega`, `modified`: the vakonomic model (B1 by default), as in `vakonomic_acceleration`.
    - `throw`: passed to both integrations; by default failing vakonomic runs (impasse points)
        are flagged per $\\mu_0$ instead of raising.
    - `**kwargs`: `rtol`, `atol`, `integrator`, `max_steps`, `stabilization`, ... for both.

    **Returns:** a `DynamicsComparison`.
    """
    if y0.v.ndim != 1:
        raise ValueError(
            "compare_cetaev_vakonomic takes one mechanical state y0 (v of shape (n,)); "
            "give several initial multipliers as a grid mu0 of shape (B, k)."
        )
    k = check_vakonomic_system(system, y0, None, t0)
    mu0 = (
        jnp.zeros((1, k), y0.v.dtype)
        if mu0 is None
        else jnp.atleast_2d(jnp.asarray(mu0, y0.v.dtype))
    )
    if saveat is None:
        saveat = diffrax.SaveAt(ts=jnp.linspace(t0, t1, 101))
    cet = simulate(system, y0, t0, t1, solver=solver, saveat=saveat, throw=throw, **kwargs)
    vak = simulate_vakonomic(
        system,
        y0,
        mu0,
        t0,
        t1,
        omega=omega,
        modified=modified,
        saveat=saveat,
        throw=throw,
        **kwargs,
    )
    def dev(x_vak, x_cet):  # leaf by leaf (a group element: its parameters)
        leaves = jax.tree_util.tree_leaves(
            jax.tree_util.tree_map(lambda a, b: jnp.abs(a - b[None]).reshape(a.shape[0], -1), x_vak, x_cet)
        )
        return jnp.max(jnp.concatenate(leaves, axis=1), axis=1)

    return DynamicsComparison(
        cet, vak, mu0, dev(vak.states.q, cet.states.q), dev(vak.states.v, cet.states.v)
    )
