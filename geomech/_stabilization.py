"""Keeping a numerical solution on the constraint manifold $\\mathcal{C}$: Baumgarte's method and
projection, behind one interface (`AbstractStabilization`), and the projection of a state onto
$\\mathcal{C}$ (`project_to_constraints`).
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from ._bundle import State
from ._custom_types import RealScalarLike
from ._dynamics import on_constraint
from ._geometry import AbstractManifold, Euclidean
from ._operators import AbstractMass, DenseMass, DenseRows, weighted_solve
from ._stages import Stages
from ._system import LagrangianSystem


class AbstractStabilization(eqx.Module):
    """How `simulate` keeps the numerical solution on the constraint manifold $\\mathcal{C}$.

    A stabilization may change the stages the right-hand side is computed from
    (`modify_stages`) and may return states to $\\mathcal{C}$ after every step
    (`state_projection`).
    """

    @abc.abstractmethod
    def modify_stages(self, stages: Stages) -> Stages:
        """The stages the constrained right-hand side uses at this state."""

    @abc.abstractmethod
    def state_projection(self, system: LagrangianSystem) -> "StateProjection | None":
        """`(t, state, args) -> state` applied after every step and to saved states, or `None`."""


class NoStabilization(AbstractStabilization):
    """No stabilization: drift off $\\mathcal{C}$ is reported in the diagnostics, not corrected."""

    def modify_stages(self, stages: Stages) -> Stages:
        return stages

    def state_projection(self, system: LagrangianSystem) -> None:
        return None


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

    alpha: RealScalarLike = 20.0
    beta: RealScalarLike = 100.0

    def __check_init__(self):
        for name in ("alpha", "beta"):
            gain = getattr(self, name)
            if isinstance(gain, jax.core.Tracer):
                continue
            if jnp.ndim(gain) != 0 or not (np.isfinite(gain) and gain > 0):
                raise ValueError(f"Baumgarte gain {name} must be a finite number > 0, got {gain!r}.")

    def modify_stages(self, stages: Stages) -> Stages:
        if stages.k == 0:
            return stages
        h = stages.system.constraint.holonomic_rows(stages.t, stages.state.q)
        b = stages.b - self.alpha * stages.phi - self.beta * h
        return eqx.tree_at(lambda s: s.b, stages, b)

    def state_projection(self, system: LagrangianSystem) -> None:
        return None


class ManifoldProjection(AbstractStabilization):
    """Projection stabilization: after every step the state is returned to $\\mathcal{C}$,
    positions first by Gauss–Newton on $h(q) = 0$ with the minimal $M$-norm correction, then
    velocities by the $M$-orthogonal projection onto $\\phi(q, v) = 0$ (Newton iterations, exact
    in one for $\\phi$ affine in $v$). Saved states are projected too (interpolated ones included).

    **Arguments:**

    - `iterations`: Newton iterations per projection; the per-step defect is of the size of the
        local error, so 2 iterations reach round-off.
    """

    iterations: int = eqx.field(default=2, static=True)

    def __check_init__(self):
        _check_iterations(self.iterations)

    def modify_stages(self, stages: Stages) -> Stages:
        return stages

    def state_projection(self, system: LagrangianSystem) -> "StateProjection":
        return StateProjection(system, self.iterations)


def _check_iterations(iterations):
    if isinstance(iterations, bool) or not isinstance(iterations, int) or iterations < 1:
        raise ValueError(f"iterations must be a positive integer, got {iterations!r}.")


def as_stabilization(stabilization) -> AbstractStabilization:
    """`None`, `"baumgarte"`, `"projection"` or an `AbstractStabilization`, as the latter."""
    if stabilization is None:
        return NoStabilization()
    if isinstance(stabilization, AbstractStabilization):
        return stabilization
    if stabilization == "baumgarte":
        return Baumgarte()
    if stabilization == "projection":
        return ManifoldProjection()
    raise ValueError(
        "stabilization must be None, 'baumgarte', 'projection', gm.Baumgarte(alpha, beta) or "
        f"gm.ManifoldProjection(iterations); got {stabilization!r}."
    )


# -- projection onto C --------------------------------------------------------------------------


def min_norm_newton(
    residual: Callable, x, mass: AbstractMass, iterations: int, space: AbstractManifold
):
    """Gauss–Newton on `residual(x) = 0` with the minimal $M$-norm update, each step in the chart
    of `space` centred at the current point (docs/lie_groups.md): $J = \\partial r(x \\oplus
    \\psi)/\\partial\\psi$ at $\\psi = 0$ and $x \\leftarrow x \\oplus
    (-M^{-1}J^\\top(JM^{-1}J^\\top)^{-1} r(x))$ ($x - \\ldots$ on coordinates).

    A fixed number of iterations (a `fori_loop` with static bounds), so it is reverse
    differentiable and vmaps without synchronising trajectories. `mass` is $M$ (`_operators`).
    """
    zero = jnp.zeros(mass.matrix.shape[0], mass.matrix.dtype)

    def body(_, x):
        local = lambda psi: residual(space.oplus(x, psi))
        J, r = jax.jacfwd(lambda psi: (local(psi), local(psi)), has_aux=True)(zero)
        _, step = weighted_solve(mass, DenseRows(J), DenseRows(J), r)
        return space.oplus(x, -step)

    return jax.lax.fori_loop(0, iterations, body, x)


def project_state(system: LagrangianSystem, state: State, t, iterations: int) -> State:
    """Positions onto $h = 0$, then velocities onto $\\phi = 0$, each with minimal $M$-norm."""
    if system.constraint is None:
        return state

    def solver_M(s):
        return DenseMass.factor(system.mass_matrix(s, t))

    q, v = state.q, state.v
    if system.position_residual(state, t).shape[0] > 0:
        h = lambda q_: system.position_residual(State(q_, v), t)
        q = min_norm_newton(h, q, solver_M(state), iterations, system.manifold)
    phi = lambda v_: system.constraint_residual(State(q, v_), t)
    # one Newton step is exact for constraints affine in v
    v_iterations = 1 if system.constraint.affine_in_v() else iterations
    v = min_norm_newton(phi, v, solver_M(State(q, v)), v_iterations, Euclidean())
    return State(q, v)


class StateProjection(eqx.Module):
    """`(t, state, args) -> state` returning a `State` to $\\mathcal{C}$ (`project_state`)."""

    system: LagrangianSystem
    iterations: int = eqx.field(static=True)

    def __call__(self, t, y: State, args) -> State:
        return project_state(self.system, y, t, self.iterations)


def project_to_constraints(
    system: LagrangianSystem, state: State, t: RealScalarLike = 0.0, *, iterations: int = 20, tol: float | None = None
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
    batched = system.check_state(state, t)
    _check_iterations(iterations)
    return _project_to_constraints(
        system, state, jnp.asarray(t, state.v.dtype), iterations, tol, batched
    )


@eqx.filter_jit
def _project_to_constraints(system, state, t, iterations, tol, batched):
    if batched:
        return jax.vmap(lambda s: _project_to_constraints(system, s, t, iterations, tol, False))(
            state
        )
    out = project_state(system, state, t, iterations)
    return eqx.error_if(
        out,
        ~on_constraint(system, out, t, tol=tol),
        f"project_to_constraints did not converge in {iterations} iterations (the state may be far "
        "from C or near a singular configuration): start closer to C or raise `iterations`.",
    )
