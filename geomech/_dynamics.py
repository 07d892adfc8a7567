"""Public functions: $X_U$, $X_R$, the constraint force and the multipliers at one state."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._bundle import State, TangentVector
from ._checks import constraint_residuals, constraint_tolerance, within
from ._custom_types import RealScalarLike
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._stages import Stages, assemble
from ._system import LagrangianSystem, check_system


def check_solver(system: LagrangianSystem, solver: AbstractSolver):
    check_system(system)
    if not isinstance(solver, AbstractSolver):
        raise TypeError(f"solver must be a geomech solver such as gm.Projection(), got {solver!r}.")
    if system.known_work is not None and not solver.supports_known_work:
        raise ValueError(
            f"{type(solver).__name__} does not generalize to non-ideal constraints with known work "
            "(thesis §5.2: Gauss's principle with [,] and G_D need zero work on W). Use Projection(), "
            "GibbsAppell(metric='W'), Kane() or NonholonomicMomentum(...)."
        )


def constrained_acceleration(stages: Stages, solver: AbstractSolver) -> Float[Array, " n"]:
    """$a_R$ from assembled stages (the unconstrained $a_U$ when there are no constraints)."""
    if stages.k == 0:
        return stages.a_Ubar
    return solver.acceleration(stages)


@eqx.filter_jit
def unconstrained_acceleration(system: LagrangianSystem, state: State, t: RealScalarLike = 0.0) -> Float[Array, " n"]:
    """The acceleration of $X_U$, $\\omega_L(X_U, \\cdot) = -dE_L + F^e$ (2.9), ignoring constraints."""
    return assemble(system, state, t).a_U


@eqx.filter_jit
def acceleration(
    system: LagrangianSystem, state: State, solver: AbstractSolver = Projection(), t: RealScalarLike = 0.0
) -> Float[Array, " n"]:
    """The acceleration $a_R$ of the constrained dynamics $X_R = (v, a_R)$ at `state`.

    **Arguments:**

    - `system`: a `LagrangianSystem`.
    - `state`: one point `State(q, v)` of $TQ$ (batch with `jax.vmap`).
    - `solver`: the principle used; all solvers give the same $X_R$ where (3.19) holds.
    - `t`: the time (used by time-dependent systems).

    **Returns:** an `(n,)` array.
    """
    check_solver(system, solver)
    return constrained_acceleration(assemble(system, state, t), solver)


@eqx.filter_jit
def constrained_field(
    system: LagrangianSystem, state: State, solver: AbstractSolver = Projection(), t: RealScalarLike = 0.0
) -> TangentVector:
    """The special vector field $X_R(q, v) = (v, a_R)$."""
    return TangentVector(state.v, acceleration(system, state, solver, t))


@eqx.filter_jit
def constraint_force(
    system: LagrangianSystem, state: State, solver: AbstractSolver = Projection(), t: RealScalarLike = 0.0
) -> Float[Array, " n"]:
    """The constraint force $F^c = M(a_R - a_U)$, the covector with $M a = Q + F^c$.

    It lies in $\\mathcal{W}^0$ for ideal or generalized constraints, and satisfies
    $F^c(u) = F^0(u)$ on $\\mathcal{W}$ with known work.
    """
    check_solver(system, solver)
    stages = assemble(system, state, t)
    return stages.M @ (constrained_acceleration(stages, solver) - stages.a_U)


@eqx.filter_jit
def multipliers(
    system: LagrangianSystem, state: State, solver: AbstractSolver = Projection(), t: RealScalarLike = 0.0
) -> Float[Array, " k"]:
    """Multipliers $\\lambda$ with $F^c - F^0 = C^\\top \\lambda$ ($C = A = \\partial\\phi/\\partial v$ when
    $\\mathcal{W} = \\mathcal{D}$, which recovers the documents' $+A^\\top\\lambda$ convention)."""
    check_solver(system, solver)
    stages = assemble(system, state, t)
    Fc = stages.M @ (constrained_acceleration(stages, solver) - stages.a_U)
    C = stages.C
    return jnp.linalg.solve(C @ C.T, C @ (Fc - stages.F0))


def on_constraint(system: LagrangianSystem, state: State, t: RealScalarLike = 0.0, *, tol: float | None = None):
    """Whether each $|\\phi_i| \\le$ `tol` times the size of its terms
    ($\\sum_j |A_{ij} v_j| + |\\phi_i - (Av)_i|$, $A = \\partial\\phi/\\partial v$) and each
    $|h_i| \\le$ `tol` $\\sum_j |\\partial h_i/\\partial q_j\\, q_j|$ (False for NaN states): relative
    residuals, so the verdict does not depend on the units (`_checks.velocity_residual`).

    The default `tol` is `1e-8` in float64 and `1e-4` in float32.
    """
    tol = constraint_tolerance(state.v.dtype) if tol is None else tol
    phi, h = constraint_residuals(system, state, t)
    return within(phi, tol) & within(h, tol)  # NaN counts as off C


def check_on_constraint(
    system: LagrangianSystem, state: State, t: RealScalarLike = 0.0, *, tol: float | None = None
) -> State:
    """Return `state` if it lies on $\\mathcal{C}$ (see `on_constraint`), else raise an error naming
    the problem (`eqx.error_if`, so it also works under `jit`)."""
    system.check_shapes(state, t)
    shown = "1e-8 (float64) / 1e-4 (float32)" if tol is None else f"{tol:g}"
    return eqx.error_if(
        state, ~on_constraint(system, state, t, tol=tol),
        f"the state is off the constraint manifold C (|φ| or |h| above tol = {shown} relative to "
        "the size of their terms; NaN counts as "
        "off C): make the initial data consistent, e.g. with gm.project_to_constraints(system, state).",
    )
