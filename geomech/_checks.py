"""The conditions on a state, as one table: each defined once, with its predicate, tolerance,
message and fix, validate code and `gm.Failure`.

Four consumers loop over `CONDITIONS`: `assemble`'s `eqx.error_if` checks (the first failing
condition raises), the per-trajectory preconditions of `simulate` and `simulate_vakonomic` (the
first failing condition is the trajectory's `gm.Failure`), and `gm.validate` (every failing
condition that does not follow from an earlier one is reported). Adding a condition is adding a
row.

A condition measures a `At` (one state with its unchecked stages) and is of one of three kinds:
`"finite"` (the named arrays are finite), `"margin"` (`(value, tolerance)`, holds when
`value > tolerance`) or `"residual"` (holds when `value <= tolerance`); both comparisons are
written so that NaN fails. Every measure is invariant under a change of units of lengths,
masses and time (rescaled $q$, $v$, $t$, $L$ and constraints): margins are taken on Jacobi-scaled
matrices, residuals relative to the size of the terms they are made of.
"""

import dataclasses
import functools
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from . import _linalg as la
from ._contact import contact_tolerance, relative_normal_force
from ._linalg import min_singular_value, rank_tolerance, unit_rows

Margin = tuple[Float[Array, ""], Float[Array, ""]]


def concrete(x) -> np.ndarray | None:
    """`x` as a NumPy value if it is known before tracing, else `None` (a tracer): values are
    checked before tracing only where they are concrete."""
    return None if isinstance(x, jax.core.Tracer) else np.asarray(x)


def as_real_array(x) -> Array:
    """`x` as a JAX array of a real floating-point dtype (integers become the default float)."""
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(float, x))


def check_time(t, name: str) -> None:
    """A `ValueError`/`TypeError` naming `name` unless `t` is a real scalar (before tracing;
    whether it is finite is checked where the value is used)."""
    if np.ndim(t) != 0:
        raise ValueError(f"{name} must be a scalar time, got shape {np.shape(t)}.")
    dtype = t.dtype if hasattr(t, "dtype") else np.asarray(t).dtype
    if np.dtype(dtype).kind not in "iuf":
        raise TypeError(f"{name} must be a real number, got {t!r:.60} (dtype {dtype}).")


# -- predicates and scale-free measures ----------------------------------------------------------


def holds(margin: Margin) -> Bool[Array, ""]:
    """Whether a margin condition holds: `value > tolerance` (False for NaN)."""
    value, tolerance = margin
    return value > tolerance


def within(value: Float[Array, ""], tolerance) -> Bool[Array, ""]:
    """Whether a residual is small enough: `value <= tolerance` (False for NaN)."""
    return value <= tolerance


def _all_finite(x) -> Bool[Array, ""]:
    return jnp.all(jnp.stack([jnp.all(jnp.isfinite(leaf)) for leaf in jax.tree_util.tree_leaves(x)]))


def jacobi_scales(M: Float[Array, "n n"]) -> Float[Array, " n"]:
    """The diagonal $D$ of $M$ where it is positive and finite, else 1: the scales of the
    coordinates that the Jacobi scaling $D^{-1/2} M D^{-1/2}$ removes (van der Sluis)."""
    d = jnp.diagonal(M)
    return jnp.where(jnp.isfinite(d) & (d > 0), d, 1.0)


def mass_matrix_margin(M: Float[Array, "n n"], M_cho: Float[Array, "n n"]) -> Margin:
    """Regularity of $L$ (2.6): $M = LL^\\top$ is positive definite iff every pivot of its
    Cholesky factor is positive. Measured on the Jacobi-scaled $\\hat M = D^{-1/2} M D^{-1/2}$
    ($D = \\operatorname{diag} M$), whose Cholesky factor is $D^{-1/2} L$: the value
    $\\min_i L_{ii}^2 / M_{ii}$ does not change when a coordinate changes its unit (diag(1e-7,
    1e7) is as regular as the identity); NaN when the factorization broke down or a diagonal
    entry is not positive (indefinite)."""
    d = jnp.diagonal(M)
    value = jnp.min(jnp.diagonal(M_cho) ** 2 / jnp.where(d > 0, d, jnp.nan))
    value = jnp.where(jnp.all(jnp.isfinite(M_cho)), value, jnp.nan)
    return value, jnp.asarray(rank_tolerance(M.dtype, M.shape[0]), M.dtype)


def full_row_rank_margin(X: Float[Array, "k n"], scale=None) -> Margin:
    """Full row rank of `X`, free of units: $\\sigma_{\\min}$ of `X` with its columns multiplied by
    `scale` (the coordinates' scales) and then unit rows."""
    if scale is not None:
        X = X * scale[None, :]
    return min_singular_value(unit_rows(X)), jnp.asarray(
        rank_tolerance(X.dtype, X.shape[1]), X.dtype
    )


def admissibility_margin(A: Float[Array, "k n"], M=None) -> Margin:
    """Admissibility (3.7): $\\operatorname{rank} \\partial\\phi/\\partial v = k$, on the covector
    rows $A D^{-1/2}$ ($D$ the Jacobi scales of $M$, when given)."""
    return full_row_rank_margin(A, None if M is None else 1 / jnp.sqrt(jacobi_scales(M)))


def work_space_margin(work_space, t, q, v, M=None) -> Margin:
    """A work space of full rank: its `basis` columns (vectors, scaled by $D^{1/2}$) or
    `annihilator` rows (covectors, scaled by $D^{-1/2}$) independent."""
    s = None if M is None else jnp.sqrt(jacobi_scales(M))
    if work_space.basis is not None:
        return full_row_rank_margin(work_space.basis_matrix(t, q, v).T, s)
    return full_row_rank_margin(work_space.annihilator_matrix(t, q, v), None if s is None else 1 / s)


def condition_3_19_margin(
    A: Float[Array, "k n"], C: Float[Array, "k n"], M_cho: Float[Array, "n n"]
) -> Margin:
    """Condition (3.19), $T_qQ = \\mathcal{D} \\oplus \\mathcal{W}^\\perp$, i.e. $AM^{-1}C^\\top$
    invertible. Free of coordinates and units: $\\sigma_{\\min}(\\hat A \\hat C^\\top)$ with
    $\\hat A$, $\\hat C$ the unit rows of $AL^{-\\top}$, $CL^{-\\top}$ ($M = LL^\\top$)."""
    whiten = lambda X: unit_rows(la.solve_lower(M_cho, X.T).T)
    value = min_singular_value(whiten(A) @ whiten(C).T)
    return value, jnp.asarray(rank_tolerance(A.dtype, A.shape[1]), A.dtype)


def constraint_tolerance(dtype) -> float:
    """The relative tolerance of the on-$\\mathcal{C}$ check: `1e-8` in float64, `1e-4` in
    float32."""
    return 1e-8 if jnp.dtype(dtype) == jnp.float64 else 1e-4


def _relative(residual, size) -> Float[Array, ""]:
    """$\\max_i |r_i| / s_i$ with $0/0 = 0$ (an exact zero is on $\\mathcal{C}$ at any scale) and
    $r/0 = \\infty$; NaN stays NaN."""
    r = jnp.abs(residual)
    ratio = jnp.where(size > 0, r / jnp.where(size > 0, size, 1.0), jnp.where(r == 0, 0.0, jnp.inf))
    return jnp.max(jnp.where(jnp.isnan(r) | jnp.isnan(size), jnp.nan, ratio), initial=0.0)


def term_sizes(X: Float[Array, "k n"], x: Float[Array, " n"], d: Float[Array, " n"]):
    """$|X_i D^{-1/2}|\\,|D^{1/2} x|$ per row: the size of the terms of $X_i x$ in the kinetic
    metric's own scales ($D$ the Jacobi scales of $M$), the same in any units of the
    coordinates, of $L$ and of the rows."""
    s = jnp.sqrt(d)
    return jnp.linalg.norm(X / s[None, :], axis=1) * jnp.linalg.norm(s * x)


def velocity_residual(
    phi: Float[Array, " k"], A: Float[Array, "k n"], v: Float[Array, " n"], M: Float[Array, "n n"]
) -> Float[Array, ""]:
    """$\\max_i |\\phi_i| / (|A_i D^{-1/2}|\\,|D^{1/2} v| + |\\phi_i - (Av)_i|)$: each
    constraint's residual relative to the size of its terms (its velocity terms, $A =
    \\partial\\phi/\\partial v$, and the rest, e.g. $\\partial_t h$), which rounding leaves at a
    few $\\varepsilon$ on $\\mathcal{C}$ whatever the units of $q$, $v$, $t$, $L$ and $\\phi$."""
    return _relative(phi, term_sizes(A, v, jacobi_scales(M)) + jnp.abs(phi - A @ v))


def position_residual(
    h: Float[Array, " m"], H: Float[Array, "m n"], q: Float[Array, " n"], M: Float[Array, "n n"]
) -> Float[Array, ""]:
    """$\\max_i |h_i| / |\\partial h_i/\\partial q\\, D^{-1/2}|\\,|D^{1/2} q|$: the holonomic
    residual relative to the size of its terms (zero without holonomic constraints)."""
    return _relative(h, term_sizes(H, q, jacobi_scales(M)))


def position_jacobian(system, state, t) -> Float[Array, "m n"]:
    """$\\partial h/\\partial q$ of the holonomic constraints, `(m, n)`."""
    return jax.jacfwd(lambda q: system.position_residual(type(state)(q, state.v), t))(state.q)


def constraint_residuals(system, state, t) -> tuple[Float[Array, ""], Float[Array, ""]]:
    """`(velocity_residual, position_residual)` of `state` (for use without stages; on a Lie
    group in the chart centred at `state.q`)."""
    scale = point_scale(system, state)
    system, state = system.localized(state)
    q, v = state.q, state.v
    t = jnp.asarray(t, v.dtype)
    phi = system.constraint_residual(state, t)
    A = jax.jacfwd(lambda v_: system.constraint_residual(type(state)(q, v_), t))(v)
    h = system.position_residual(state, t)
    M = system.mass_matrix(state, t)
    H = position_jacobian(system, state, t)
    return velocity_residual(phi, A, v, M), position_residual(h, H, scale, M)


def point_scale(system, state) -> Float[Array, " n"]:
    """The size of each coordinate of the chart centred at `state.q` (`q` itself on ℝⁿ)."""
    return system.manifold.point_scale(state.q)


# -- one state, its quantities computed once -----------------------------------------------------


class At:
    """A state at which the conditions are evaluated: the system, the state, the time and the
    unchecked stages (`assemble(..., checks=False)`), plus what a consumer supplies beyond them
    (`extra`: `"acceleration"`, `"mu"`, `"impasse"`, each a function computing it). Quantities
    are computed once, at trace time, on first use."""

    def __init__(self, stages, *, point=None, scale=None, **extra: Callable[[], object]):
        self.stages = stages
        self.system, self.state, self.t = stages.system, stages.state, stages.t
        self.q, self.v, self.k = stages.state.q, stages.state.v, stages.k
        # on a Lie group the stages are in the chart centred at the point (where q = 0): the
        # point itself (`point`, a State; by default read back from the chart, so a NaN
        # quaternion is "not finite" rather than "off the manifold") and the size of its
        # coordinates (`scale`, what the holonomic residual is measured against)
        if point is None:
            point = type(stages.state)(stages.chart.point(self.q), self.v)
        self.point = point
        self.scale = self.q if scale is None else scale
        self._extra = extra
        self._values = {}

    def has(self, name: str) -> bool:
        return name in self._extra

    def get(self, name: str):
        if name not in self._values:
            self._values[name] = self._extra[name]()
        return self._values[name]

    @functools.cached_property
    def h(self):
        return self.system.position_residual(self.state, self.t)

    @functools.cached_property
    def H(self):
        return position_jacobian(self.system, self.state, self.t)


# -- the table ------------------------------------------------------------------------------------

CONSUMERS = frozenset({"assemble", "simulate", "vakonomic", "validate"})
_always = lambda at: True
_constrained = lambda at: at.k > 0


@dataclasses.dataclass(frozen=True)
class Condition:
    """One condition on a state.

    - `name`: unique; `failure`, where set, is the `gm.Failure` of a trajectory failing it.
    - `code`: `gm.validate`'s `Problem.code`.
    - `message`, `fix`: what is wrong and how to fix it (the error reads `"{message}: {fix}."`).
    - `kind`, `measure`: `"finite"` (`measure(at)` is a dict of named arrays that must be
        finite), `"margin"` (`(value, tolerance)`, holds when `value > tolerance`) or
        `"residual"` (holds when `value <= tolerance`).
    - `detail`: what `value` is, in `gm.validate`'s report.
    - `applies(at)`: whether it applies to this system (static); `needs`: what a consumer must
        supply (`At.extra`); `consumers`: which of `CONSUMERS` check it.
    - `after`: `gm.validate` does not report it when one of these failed (it follows from them);
        `blocking`: `gm.validate` reports nothing after it when it failed.
    """

    name: str
    code: str
    message: str
    fix: str
    kind: str
    measure: Callable
    detail: str = ""
    failure: str | None = None
    applies: Callable = _always
    needs: tuple[str, ...] = ()
    consumers: frozenset = CONSUMERS
    after: tuple[str, ...] = ()
    blocking: bool = False

    def text(self) -> str:
        return f"{self.message}: {self.fix}"

    def used_by(self, consumer: str, at: At) -> bool:
        return consumer in self.consumers and all(map(at.has, self.needs)) and self.applies(at)

    def holds(self, measured) -> Bool[Array, ""]:
        if self.kind == "finite":
            return _all_finite(measured)
        if self.kind == "margin":
            return holds(measured)
        return within(*measured)


def _finite(name, what, fix, get, *, after=(), applies=_always, consumers=CONSUMERS):
    """A user function's or derived quantity's value must be finite."""
    return Condition(
        f"finite_{name}", "nonfinite", f"{what} is not finite at this state", fix, "finite",
        lambda at: {name: get(at)}, applies=applies, consumers=consumers, after=after,
    )


_ASSEMBLE_VALIDATE = frozenset({"assemble", "validate"})
_OFF_C = "the state is off the constraint manifold C"
_OFF_C_FIX = (
    "make it consistent with gm.consistent_state(system, state, fixed_q=..., fixed_v=...) or "
    "gm.project_to_constraints(system, state)"
)

CONDITIONS: tuple[Condition, ...] = (
    Condition(
        "nonfinite_state", "nonfinite", "the state has NaN or inf entries in q or v",
        "give finite q and v", "finite", lambda at: {"q": at.point.q, "v": at.point.v},
        failure="nonfinite_state", blocking=True,
    ),
    Condition(
        "off_manifold", "off_manifold",
        "the configuration q is not a point of the manifold (the stored parameters are off it: "
        "a unit quaternion or unit complex number whose norm is not 1)",
        "normalize it with system.manifold.normalize(q) (e.g. gm.SO3().normalize(q) for a "
        "quaternion built by hand), or build it with jaxlie (jaxlie.SO3.exp, from_matrix, ...)",
        "residual", lambda at: (at.stages.chart.centre_defect(), constraint_tolerance(at.v.dtype)),
        detail="||q| − 1| of the unit quaternion or complex number", failure="off_manifold",
        after=("nonfinite_state",), blocking=True,
    ),
    Condition(
        "nonfinite_time", "nonfinite", "the time t is NaN or inf", "give a finite t", "finite",
        lambda at: {"t": at.t}, consumers=_ASSEMBLE_VALIDATE, blocking=True,
    ),
    _finite(
        "L", "the Lagrangian L",
        "check it for divisions by zero, logarithms or square roots of non-positive numbers at "
        "this state",
        lambda at: at.system.L(at.t, at.q, at.v), consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "force", "the force F^e", "check the force function at this state",
        lambda at: at.system.external_force(at.t, at.q, at.v), consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "known_work", "known_work F^0", "check the known_work function at this state",
        lambda at: at.stages.F0, consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "phi", "the constraint φ", "check the constraint function at this state",
        lambda at: at.stages.phi, applies=_constrained, consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "h", "the holonomic constraint h", "check h at this state", lambda at: at.h,
        applies=_constrained, consumers=frozenset({"validate"}),
    ),
    _finite(
        "M", "the mass matrix M = ∂²L/∂v∂v (second velocity derivatives of the Lagrangian)",
        "L is not twice differentiable in v here (e.g. |v| or sqrt at zero)",
        lambda at: at.stages.M, after=("finite_L",), consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        # a non-finite ∂L/∂v makes both M and Q non-finite: M is reported
        "Q", "the generalized force Q = ∂L/∂q − (∂²L/∂v∂q) v − ∂_t ∂L/∂v + F^e",
        "the first or mixed derivatives of L are not finite here",
        lambda at: at.stages.Q, after=("finite_L", "finite_force", "finite_M"),
        consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "A", "∂φ/∂v of the constraint", "the constraint is not differentiable in v here",
        lambda at: at.stages.A, after=("finite_phi",), applies=_constrained,
        consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "b", "∂φ/∂q v + ∂_t φ of the constraint",
        "the constraint is not differentiable in q (or t) here",
        lambda at: at.stages.b, after=("finite_phi",), applies=_constrained,
        consumers=_ASSEMBLE_VALIDATE,
    ),
    _finite(
        "C", "the work space W", "check the work_space basis or annihilator at this state",
        lambda at: at.stages.C, applies=lambda at: at.k > 0 and at.system.work_space is not None,
        consumers=_ASSEMBLE_VALIDATE,
    ),
    Condition(
        "mass_matrix", "mass_matrix",
        "the mass matrix M = ∂²L/∂v∂v is not positive definite at this state (singular or "
        "indefinite)",
        "L must be regular (2.6) with a positive kinetic energy in every velocity", "margin",
        lambda at: mass_matrix_margin(at.stages.M, at.stages.M_cho),
        detail="smallest pivot² of the Jacobi-scaled M", failure="mass_matrix",
        after=("finite_M",),
    ),
    Condition(
        "admissibility", "admissibility",
        "the constraints are not admissible (3.7): ∂φ/∂v has rank < k at this state",
        "remove redundant constraint rows or write the constraint so that its velocity "
        "Jacobian has full rank", "margin",
        lambda at: admissibility_margin(at.stages.A, at.stages.M),
        detail="σ_min of ∂φ/∂v, Jacobi-scaled, with unit rows", failure="admissibility",
        applies=_constrained, after=("finite_A",),
    ),
    Condition(
        "work_space", "work_space",
        "the work space W is rank deficient at this state: its basis columns (or annihilator "
        "rows) are linearly dependent",
        "give dim W = n − k independent vectors (or k independent rows)", "margin",
        lambda at: work_space_margin(at.system.work_space, at.t, at.q, at.v, at.stages.M),
        detail="σ_min, Jacobi-scaled, with unit vectors", failure="work_space",
        applies=lambda at: at.k > 0 and at.system.work_space is not None, after=("finite_C",),
    ),
    Condition(
        "condition_3_19", "condition_3_19",
        "condition (3.19) T_qQ = D ⊕ W^⊥ fails at this state (A M⁻¹ Cᵀ is singular)",
        "the work space W must have dim W = dim D and W^⊥ ∩ D = {0}; choose another W",
        "margin", lambda at: condition_3_19_margin(at.stages.A, at.stages.C, at.stages.M_cho),
        detail="σ_min of Â Ĉᵀ", failure="condition_3_19", applies=_constrained,
        after=("mass_matrix", "admissibility", "work_space", "finite_A", "finite_C"),
    ),
    Condition(
        "off_constraint_velocity", "off_constraint", _OFF_C, _OFF_C_FIX, "residual",
        lambda at: (
            velocity_residual(at.stages.phi, at.stages.A, at.v, at.stages.M),
            constraint_tolerance(at.q.dtype),
        ),
        detail="with D = diag M, max_i |φ_i| / (|A_i D^-½| |D^½ v| + |φ_i − A_i v|)",
        failure="off_constraint", applies=_constrained,
        consumers=CONSUMERS - {"assemble"}, after=("finite_phi", "finite_A"),
    ),
    Condition(
        "off_constraint_position", "off_constraint", _OFF_C, _OFF_C_FIX, "residual",
        lambda at: (position_residual(at.h, at.H, at.scale, at.stages.M), constraint_tolerance(at.q.dtype)),
        detail="with D = diag M, max_i |h_i| / (|∂h_i/∂q D^-½| |D^½ q|)", failure="off_constraint",
        applies=_constrained, consumers=CONSUMERS - {"assemble"}, after=("finite_h",),
    ),
    Condition(
        "nonfinite_multipliers", "nonfinite",
        "the initial multipliers mu0 of gm.simulate_vakonomic have NaN or inf entries",
        "give finite mu0", "finite", lambda at: {"mu0": at.get("mu")},
        failure="nonfinite_multipliers", needs=("mu",),
    ),
    Condition(
        "nonfinite_acceleration", "nonfinite",
        "the acceleration a_R of the solver is NaN or inf at the initial state although M, (3.7) "
        "and (3.19) hold",
        "L, a force or a constraint is not finite there (gm.validate(system, state, t) names "
        "the function), or a condition of the solver itself fails (gm.NonholonomicMomentum: the "
        "action must leave L invariant, (4.13))",
        "finite", lambda at: {"a_R": at.get("acceleration")}, failure="nonfinite_acceleration",
        needs=("acceleration",), consumers=frozenset({"simulate"}),
    ),
    # a unilateral contact held as bilateral (`_contact`): checked at the initial state here and
    # watched along the run by `simulate`'s events, which stop a trajectory with these failures
    Condition(
        "contact_undefined", "contact_undefined",
        "the point of contact with the plane is not defined (a thin disk lying flat touches the "
        "plane with its whole face): the rolling model ends here, the body has fallen",
        "start where the body leans on the plane; a run stopped with this failure reached it at "
        "sol.t_final", "margin", lambda at: at.get("contact_margin"),
        detail="the contact's margin (a thin disk: the sine of its tilt to the plane)",
        failure="contact_undefined", needs=("contact_margin",),
        consumers=frozenset({"simulate", "validate"}), after=("nonfinite_state", "off_manifold"),
    ),
    Condition(
        "lift_off", "lift_off",
        "the plane would have to pull the body down (its normal force is negative): the body "
        "lifts off the plane, which the rolling constraint holds it on",
        "start where the plane pushes (e.g. a slower spin); a run stopped with this failure lifts "
        "off at sol.t_final, where the model needs a flight phase", "residual",
        lambda at: at.get("normal_force"),
        detail="−N relative to m(g + |z̈| + |ω|²ℓ), the forces it balances",
        failure="lift_off", needs=("normal_force",), consumers=frozenset({"simulate", "validate"}),
        after=("nonfinite_state", "off_manifold", "contact_undefined", "nonfinite_acceleration"),
    ),
)


def contact_measures(system, state, t, acceleration: Callable[[], object]) -> dict:
    """The `At` extras of a system with a contact (`_contact`): its margin against the tolerance
    and its relative normal force at `state` (a point of the system's own manifold) when
    accelerating with `acceleration()`; empty without a contact."""
    contact = system.contact
    if contact is None:
        return {}

    def lift():
        N = relative_normal_force(contact, t, state, acceleration())
        return -N, jnp.asarray(constraint_tolerance(state.v.dtype), N.dtype)

    def margin():
        value = contact.margin(t, state)
        return value, jnp.asarray(contact_tolerance(state.v.dtype), value.dtype)

    return {
        "contact_margin": margin,
        "normal_force": lift,
    }


def failure_enumeration(conditions) -> type:
    """The `gm.Failure` enumeration of a table: diffrax's `RESULTS` extended by one item per
    distinct `failure` of the table (`successful` for a trajectory that failed none)."""
    items = {}
    for c in conditions:
        if c.failure is not None:
            items.setdefault(c.failure, c.text())
    namespace = {
        "__module__": __name__,
        "__qualname__": "Failure",
        "__doc__": (
            "Why a trajectory of `gm.simulate` (or `gm.simulate_vakonomic`) was not integrated: "
            "the precondition its initial state failed (`Solution.failure`, one per trajectory; "
            "`Failure.successful` for the others), with its message (`gm.Failure[sol.failure]`); "
            "for a system with a contact, also why it stopped during the run (`lift_off`, "
            "`contact_undefined`, at `sol.t_final`). It extends `diffrax.RESULTS` (whose items it "
            "has too), so that `sol.outcome` says in one enumeration how each trajectory ended. "
            "One item per condition of the table in `geomech/_checks.py`, in its order:\n\n"
            + "\n".join(f"- `{name}`: {message}" for name, message in items.items())
            + "\n\n`Failure.none` is `Failure.successful` (its name before it extended diffrax's)."
        ),
        **items,
    }
    enum = type(eqx.Enumeration)("Failure", (diffrax.RESULTS,), namespace)
    type.__setattr__(enum, "none", enum.successful)  # the earlier name, kept for old code
    return enum


Failure = failure_enumeration(CONDITIONS)
FAILURES = tuple(
    getattr(Failure, name) for name in dict.fromkeys(c.failure for c in CONDITIONS if c.failure)
)


def first_failure(consumer: str, at: At):
    """The `Failure` of the first condition of `consumer` that fails at `at` (`successful` if
    every one holds)."""
    enum = Failure
    failure = enum.successful
    for c in reversed([c for c in CONDITIONS if c.failure and c.used_by(consumer, at)]):
        failure = enum.where(c.holds(c.measure(at)), failure, getattr(enum, c.failure))
    return failure


def checked(at: At, values):
    """`values` carrying an `eqx.error_if` that raises the message of the first condition of
    `assemble` that fails at `at` (`"{message}: {fix}."`)."""
    used = [c for c in CONDITIONS if c.used_by("assemble", at)]
    ok = jnp.stack([c.holds(c.measure(at)) for c in used])
    messages = tuple(c.text() + "." for c in used)
    return eqx.branched_error_if(values, ~jnp.all(ok), jnp.argmin(ok), messages)
