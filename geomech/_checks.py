"""The value conditions on a state, as small pure functions: one definition of each tolerance.

`gm.validate` (which collects every problem at a state), the `eqx.error_if` checks of `assemble`
and the on-$\\mathcal{C}$ check of `simulate` all call these. Each condition is a *margin*
`(value, tolerance)` that holds when `value > tolerance`, or a *residual* that holds when
`value <= tolerance`; both comparisons are written so that NaN fails (`NaN > x` and
`NaN <= x` are both false).
"""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from . import _linalg as la
from ._linalg import min_singular_value, rank_tolerance, unit_rows

Margin = tuple[Float[Array, ""], Float[Array, ""]]

# What each failed condition means and how to fix it (shared by `validate` and the runtime errors).
MASS_MATRIX = (
    "the mass matrix M = ∂²L/∂v∂v is not positive definite at this state (singular or "
    "indefinite): L must be regular (2.6) with a positive kinetic energy in every velocity"
)
ADMISSIBILITY = (
    "the constraints are not admissible (3.7): ∂φ/∂v has rank < k at this state; remove "
    "redundant constraint rows or write the constraint so that its velocity Jacobian has full rank"
)
CONDITION_3_19 = (
    "condition (3.19) T_qQ = D ⊕ W^⊥ fails at this state (A M⁻¹ Cᵀ is singular): the work "
    "space W must have dim W = dim D and W^⊥ ∩ D = {0}; choose another W"
)

OFF_CONSTRAINT = (
    "the state is off the constraint manifold C (|φ|/(1 + |v|∞) or |h| above 1e-8 in float64, "
    "1e-4 in float32; NaN counts as off C): make it consistent with "
    "gm.consistent_state(system, state, fixed_q=..., fixed_v=...) or "
    "gm.project_to_constraints(system, state)"
)


# The values computed at a state, what produced each and how to fix it when it is not finite
# (`validate` names them all, `assemble`'s runtime checks the first):
# (name, what produced it, the inputs it is computed from, how to fix)
NONFINITE = (
    (
        "L",
        "the Lagrangian L",
        (),
        "check it for divisions by zero, logarithms or square roots of "
        "non-positive numbers at this state",
    ),
    ("force", "the force F^e", (), "check the force function at this state"),
    ("known_work", "known_work F^0", (), "check the known_work function at this state"),
    ("phi", "the constraint φ", (), "check the constraint function at this state"),
    ("h", "the holonomic constraint h", (), "check h at this state"),
    (
        "M",
        "the mass matrix M = ∂²L/∂v∂v (second velocity derivatives of the Lagrangian)",
        ("L",),
        "L is not twice differentiable in v here (e.g. |v| or sqrt at zero)",
    ),
    (
        "Q",
        "the generalized force Q = ∂L/∂q − (∂²L/∂v∂q) v − ∂_t ∂L/∂v + F^e",
        ("L", "force", "M"),  # a non-finite ∂L/∂v makes both M and Q non-finite: report M
        "the first or mixed derivatives of L are not finite here",
    ),
    ("A", "∂φ/∂v of the constraint", ("phi",), "the constraint is not differentiable in v here"),
    (
        "b",
        "∂φ/∂q v + ∂_t φ of the constraint",
        ("phi",),
        "the constraint is not differentiable in q (or t) here",
    ),
    ("C", "the work space W", (), "check the work_space basis or annihilator at this state"),
)

NONFINITE_STATE = "the state has NaN or inf entries in q or v: give finite q and v"
NONFINITE_TIME = "the time t is NaN or inf: give a finite t"
WORK_SPACE = (
    "the work space W is rank deficient at this state: its basis columns (or annihilator rows) "
    "are linearly dependent; give dim W = n − k independent vectors (or k independent rows)"
)


class Failure(eqx.Enumeration):
    """Why a trajectory of `gm.simulate` was not integrated: the precondition its initial state
    failed (`Solution.failure`, one per trajectory; `Failure.none` for the others). The checks
    are those of `gm.validate`, in this order."""

    none = "no failed precondition"
    nonfinite_state = NONFINITE_STATE
    off_constraint = OFF_CONSTRAINT
    mass_matrix = MASS_MATRIX
    admissibility = ADMISSIBILITY
    work_space = WORK_SPACE
    condition_3_19 = CONDITION_3_19
    nonfinite_acceleration = (
        "the acceleration a_R of the solver is NaN or inf at the initial state although M, (3.7) "
        "and (3.19) hold: L, a force or a constraint is not finite there (gm.validate(system, "
        "state, t) names the function), or a condition of the solver itself fails "
        "(gm.NonholonomicMomentum: the action must leave L invariant, (4.13))"
    )
    nonfinite_multipliers = (
        "the initial multipliers mu0 of gm.simulate_vakonomic have NaN or inf entries: give "
        "finite mu0"
    )


FAILURES = (
    Failure.nonfinite_state,
    Failure.off_constraint,
    Failure.mass_matrix,
    Failure.admissibility,
    Failure.work_space,
    Failure.condition_3_19,
    Failure.nonfinite_acceleration,
    Failure.nonfinite_multipliers,
)


def check_time(t, name: str) -> None:
    """A `ValueError`/`TypeError` naming `name` unless `t` is a real scalar (before tracing;
    whether it is finite is checked where the value is used)."""
    if np.ndim(t) != 0:
        raise ValueError(f"{name} must be a scalar time, got shape {np.shape(t)}.")
    dtype = t.dtype if hasattr(t, "dtype") else np.asarray(t).dtype
    if np.dtype(dtype).kind not in "iuf":
        raise TypeError(f"{name} must be a real number, got {t!r:.60} (dtype {dtype}).")


def holds(margin: Margin) -> Bool[Array, ""]:
    """Whether a margin condition holds: `value > tolerance` (False for NaN)."""
    value, tolerance = margin
    return value > tolerance


def within(value: Float[Array, ""], tolerance) -> Bool[Array, ""]:
    """Whether a residual is small enough: `value <= tolerance` (False for NaN)."""
    return value <= tolerance


def mass_matrix_margin(M: Float[Array, "n n"], M_cho: Float[Array, "n n"]) -> Margin:
    """Regularity of $L$ (2.6): $M = LL^\\top$ is positive definite iff every pivot of its
    Cholesky factor is positive. Scale-free value: $\\min_i L_{ii}^2 / \\max_i |M_{ii}|$, NaN when
    the factorization broke down (an indefinite $M$ takes the square root of a negative pivot)."""
    d = jnp.diagonal(M_cho)
    value = jnp.min(d) ** 2 / jnp.max(jnp.abs(jnp.diagonal(M)))
    value = jnp.where(jnp.all(jnp.isfinite(M_cho)), value, jnp.nan)
    return value, jnp.asarray(rank_tolerance(M.dtype, M.shape[0]), M.dtype)


def full_row_rank_margin(X: Float[Array, "k n"]) -> Margin:
    """Full row rank of `X`, scale-free: $\\sigma_{\\min}$ of `X` with unit rows."""
    return min_singular_value(unit_rows(X)), jnp.asarray(
        rank_tolerance(X.dtype, X.shape[1]), X.dtype
    )


def work_space_margin(work_space, t, q, v) -> Margin:
    """A work space of full rank: its `basis` columns (or `annihilator` rows) independent."""
    if work_space.basis is not None:
        return full_row_rank_margin(work_space.basis_matrix(t, q, v).T)
    return full_row_rank_margin(work_space.annihilator_matrix(t, q, v))


def admissibility_margin(A: Float[Array, "k n"]) -> Margin:
    """Admissibility (3.7): $\\operatorname{rank} \\partial\\phi/\\partial v = k$."""
    return full_row_rank_margin(A)


def condition_3_19_margin(
    A: Float[Array, "k n"], C: Float[Array, "k n"], M_cho: Float[Array, "n n"]
) -> Margin:
    """Condition (3.19), $T_qQ = \\mathcal{D} \\oplus \\mathcal{W}^\\perp$, i.e. $AM^{-1}C^\\top$
    invertible. Scale-free: $\\sigma_{\\min}(\\hat A \\hat C^\\top)$ with $\\hat A$, $\\hat C$
    the unit rows of $AL^{-\\top}$, $CL^{-\\top}$ ($M = LL^\\top$)."""
    whiten = lambda X: unit_rows(la.solve_lower(M_cho, X.T).T)
    value = min_singular_value(whiten(A) @ whiten(C).T)
    return value, jnp.asarray(rank_tolerance(A.dtype, A.shape[1]), A.dtype)


def constraint_tolerance(dtype) -> float:
    """The tolerance of the on-$\\mathcal{C}$ check: `1e-8` in float64, `1e-4` in float32."""
    return 1e-8 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def velocity_residual(phi: Float[Array, " k"], v: Float[Array, " n"]) -> Float[Array, ""]:
    """$\\max|\\phi| / (1 + |v|_\\infty)$: the constraint residual relative to the speed."""
    return jnp.max(jnp.abs(phi), initial=0.0) / (1.0 + jnp.max(jnp.abs(v)))


def position_residual(h: Float[Array, " m"]) -> Float[Array, ""]:
    """$\\max|h|$ of the holonomic constraints (zero without them)."""
    return jnp.max(jnp.abs(h), initial=0.0)
