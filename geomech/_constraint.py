"""Kinematic constraints $\\phi(q, v) = 0$ (thesis (3.6)) and the work space $\\mathcal{W}$ (§3.2).

User functions take `(q, v)`, or `(t, q, v)` when the system is `time_dependent`; holonomic
constraints `h(q)` (or `h(t, q)`); linear constraints `A(q)` (or `A(t, q)`). A
`LagrangianSystem` binds its `time_dependent` flag into its constraints and work space once, when
it is built (`bind_time`), so every method below takes `t` first and no call site passes the flag.
"""

import abc
import dataclasses
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._custom_types import RealScalarLike
from ._geometry import AbstractChart, as_point
from ._linalg import null_space, rank_tolerance


def call(fn: Callable, t, *args, time_dependent: bool):
    """Call a user function with `t` first if it is time dependent (the one place that knows
    both conventions).

    The call is a nested `jit` (`_traced_once`): JAX traces the user function once per argument
    shapes and caches the jaxpr and its transformations (JVP, transpose, vmap), so the many
    derivative passes of the stages (M, Q, A, b, ...) in every stage of an integrator do not
    re-trace a large Lagrangian; XLA inlines the call, so the compiled program is the same."""
    args = (t, *args) if time_dependent else args
    return _traced_once(fn, *(_as_argument(x) for x in args))


def _as_argument(x):
    """An array, or a point of a Lie group (or a tuple of points) with array leaves."""
    return as_point(x, jnp.asarray)


@eqx.filter_jit
def _traced_once(fn, *args):
    return fn(*args)


class TimeForm(eqx.Module):
    """A user function in the normalized form `f(t, *args)`, whichever form the user wrote."""

    fn: Callable
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, t, *args):
        return call(self.fn, t, *args, time_dependent=self.time_dependent)


def _as_rows(x, name):
    x = jnp.asarray(x)
    if x.ndim > 1:
        raise ValueError(f"{name} must return a scalar or a 1-D array of constraints, got shape {x.shape}.")
    return jnp.atleast_1d(x)


class _AbstractTimeBound(eqx.Module):
    """Holds user functions that take `t` first when `time_dependent` (a field of each concrete
    class, set by the `LagrangianSystem` it is given to)."""

    time_dependent: eqx.AbstractVar[bool]

    def bind_time(self, time_dependent: bool) -> "_AbstractTimeBound":
        """This object with its user functions read as `f(t, ...)` if `time_dependent`."""
        return dataclasses.replace(self, time_dependent=time_dependent)


# a point or velocity in coordinates: constraints see arrays only (on a Lie group, the chart
# coordinates psi of `localized`, never a group element)
Vector = Float[Array, " n"]


def _check_callable(owner: str, name: str, fn, form: str, optional: bool = False):
    """A `TypeError` naming the argument if `fn` is not a function (before any tracing)."""
    if (fn is None and optional) or callable(fn):
        return
    raise TypeError(
        f"{owner}: {name} must be a function {form} (a constant wrapped as e.g. "
        f"lambda q: value), got {type(fn).__name__} {fn!r:.60}."
    )


class AbstractConstraint(eqx.Module):
    """A set of $k$ kinematic constraints $\\phi^i(t, q, v) = 0$, admissible in the sense of (3.7).

    What the dynamics and the integrators need to know of a constraint is asked through these
    methods, never by testing its class.
    """

    @abc.abstractmethod
    def residual(self, t: RealScalarLike, q: Vector, v: Vector) -> Float[Array, " k"]:
        """$\\phi(t, q, v)$, shape `(k,)`."""

    @abc.abstractmethod
    def position_residual(self, t: RealScalarLike, q: Vector) -> Float[Array, " m"]:
        """$h(t, q)$ of the holonomic part, shape `(m,)` (`(0,)` when there is none)."""

    @abc.abstractmethod
    def holonomic_rows(self, t: RealScalarLike, q: Vector) -> Float[Array, " k"]:
        """$h$ on the rows of $\\phi$ that come from holonomic constraints ($\\phi = \\dot h$
        there), zero on the other rows; shape `(k,)`, aligned with `residual`."""

    @abc.abstractmethod
    def affine_in_v(self) -> bool:
        """Whether $\\phi$ is affine in $v$ (then one Newton step projects velocities exactly)."""

    @abc.abstractmethod
    def bind_time(self, time_dependent: bool) -> "AbstractConstraint":
        """This constraint with its user functions read as `f(t, ...)` if `time_dependent`."""

    @abc.abstractmethod
    def discrete_residual(
        self, t0: RealScalarLike, q0: Vector, dt: RealScalarLike, dq: Vector
    ) -> Float[Array, " k"]:
        """The discrete constraint $\\phi_d = 0$ imposed on a step $(t_0, q_0) \\to
        (t_0 + \\Delta t, q_0 + \\Delta q)$ of `gm.VariationalIntegrator`, shape `(k,)`, aligned
        with `residual`; `TypeError` for constraints that have none (nonlinear in $v$)."""

    @abc.abstractmethod
    def localized(self, chart: AbstractChart) -> "AbstractConstraint":
        """This constraint written in `chart` (`AbstractChart.system`): its functions read at
        the chart's point, a constraint on the chart coordinates and the same velocities."""

    @abc.abstractmethod
    def closed_form(self) -> Callable | None:
        """`(t, q, v) -> (phi, A, b)`: $\\phi$, $A = \\partial\\phi/\\partial v$ and
        $b = -(\\partial\\phi/\\partial q\\, v + \\partial_t\\phi)$ (Lemma 1) without
        differentiation, where the constraint knows them; else `None` (the stages then
        differentiate `residual`)."""

    @staticmethod
    def stack(constraints: Sequence["AbstractConstraint"]) -> "StackedConstraint":
        """Combine several constraints into one; their rows are concatenated in order."""
        return StackedConstraint(tuple(constraints))

    def __and__(self, other: "AbstractConstraint") -> "StackedConstraint":
        return StackedConstraint((self, other))


NO_DISCRETE_FORM = (
    "gm.Constraint may be nonlinear in the velocities, and the variational integrator has "
    "no discretization for constraints nonlinear in v (the discrete Lagrange-d'Alembert "
    "equations need constraints affine in v): write phi as gm.LinearConstraint(A_of_q, "
    "c_of_q) or gm.HolonomicConstraint(h) if it is one, or use a diffrax integrator."
)


class _AbstractUserConstraint(_AbstractTimeBound, AbstractConstraint):
    """A constraint given by user functions (`bind_time` from `_AbstractTimeBound`)."""


def _no_holonomic_rows(constraint: AbstractConstraint, t, q) -> Float[Array, " k"]:
    k = jax.eval_shape(constraint.residual, t, q, q).shape[0]
    return jnp.zeros((k,), jnp.result_type(q))


class Constraint(_AbstractUserConstraint):
    """General constraints $\\phi(q, v) = 0$, possibly nonlinear in the velocities (3.6).

    **Arguments:**

    - `phi`: `(q, v) -> (k,)` (or `(t, q, v) -> (k,)` for a time-dependent system).

    `time_dependent` is set from the `LagrangianSystem` the constraint is given to.
    """

    phi: Callable
    time_dependent: bool = eqx.field(default=False, static=True)

    def __check_init__(self):
        _check_callable("Constraint", "phi", self.phi, "phi(q, v) -> (k,)")

    def residual(self, t: RealScalarLike, q: Vector, v: Vector) -> Float[Array, " k"]:
        return _as_rows(call(self.phi, t, q, v, time_dependent=self.time_dependent), "phi")

    def position_residual(self, t: RealScalarLike, q: Vector) -> Float[Array, " m"]:
        return jnp.zeros((0,), jnp.result_type(q))

    def holonomic_rows(self, t: RealScalarLike, q: Vector) -> Float[Array, " k"]:
        return _no_holonomic_rows(self, t, q)

    def affine_in_v(self) -> bool:
        return False

    def closed_form(self) -> None:
        return None

    def localized(self, chart: AbstractChart) -> AbstractConstraint:
        td = self.time_dependent
        return Constraint(chart.pull(self.phi, td), time_dependent=td)

    def discrete_residual(
        self, t0: RealScalarLike, q0: Vector, dt: RealScalarLike, dq: Vector
    ) -> Float[Array, " k"]:
        raise TypeError(NO_DISCRETE_FORM)


class HolonomicConstraint(_AbstractUserConstraint):
    """Holonomic constraints $h(q) = 0$, imposed as $\\phi = Dh(q)\\,v + \\partial_t h = 0$.

    **Arguments:**

    - `h`: `q -> (k,)` (or `(t, q) -> (k,)`); kept for position-level use (stabilization).

    `time_dependent` is set from the `LagrangianSystem` the constraint is given to.
    """

    h: Callable
    time_dependent: bool = eqx.field(default=False, static=True)

    def __check_init__(self):
        _check_callable("HolonomicConstraint", "h", self.h, "h(q) -> (k,)")

    def position_residual(self, t: RealScalarLike, q: Vector) -> Float[Array, " m"]:
        return _as_rows(call(self.h, t, q, time_dependent=self.time_dependent), "h")

    def residual(self, t: RealScalarLike, q: Vector, v: Vector) -> Float[Array, " k"]:
        # d/dt h(t, q(t)) = ∂h/∂q v + ∂h/∂t  (thesis §3.1, holonomic case of (3.6))
        t = jnp.asarray(t, jnp.result_type(q))
        return jax.jvp(self.position_residual, (t, q), (jnp.ones_like(t), v))[1]

    def holonomic_rows(self, t: RealScalarLike, q: Vector) -> Float[Array, " k"]:
        return self.position_residual(t, q)

    def affine_in_v(self) -> bool:
        return True

    def closed_form(self) -> None:
        return None

    def localized(self, chart: AbstractChart) -> AbstractConstraint:
        return _HolonomicInChart(self.h, chart, self.time_dependent)

    def discrete_residual(
        self, t0: RealScalarLike, q0: Vector, dt: RealScalarLike, dq: Vector
    ) -> Float[Array, " k"]:
        # h(q_{k+1}) = 0 at the end of the step ([MW] §3.5; RATTLE)
        return self.position_residual(t0 + dt, q0 + dq)


class _HolonomicInChart(AbstractConstraint):
    """`HolonomicConstraint(h)` written in `chart` (`localized`): $h$ at the chart's points, and
    $\\phi(t, x, v) = \\frac{d}{ds} h(t + s, \\mathrm{point}(x) \\oplus s v)$, the derivative
    along the manifold's own velocity $v$ at every point of the chart (the body frame on a
    group, docs/lie_groups.md), so that $\\phi$ is a function on $TQ$ and its derivatives in
    $x$ (the vakonomic force of $\\mu\\cdot\\phi$, $b$) are those of Hamel's form."""

    h: Callable
    chart: AbstractChart
    time_dependent: bool = eqx.field(static=True)

    def _h(self, t, point):
        return _as_rows(call(self.h, t, point, time_dependent=self.time_dependent), "h")

    def position_residual(self, t: RealScalarLike, q: Vector) -> Float[Array, " m"]:
        return self._h(t, self.chart.point(q))

    def residual(self, t: RealScalarLike, q: Vector, v: Vector) -> Float[Array, " k"]:
        t = jnp.asarray(t, jnp.result_type(q))
        s = jnp.zeros((), t.dtype)
        moved = lambda t_, s_: self._h(t_, self.chart.moved(q, s_ * v))
        return jax.jvp(moved, (t, s), (jnp.ones_like(t), jnp.ones_like(s)))[1]

    def holonomic_rows(self, t: RealScalarLike, q: Vector) -> Float[Array, " k"]:
        return self.position_residual(t, q)

    def affine_in_v(self) -> bool:
        return True

    def closed_form(self) -> None:
        return None

    def bind_time(self, time_dependent: bool) -> "_HolonomicInChart":
        return self  # bound when written in the chart

    def localized(self, chart: AbstractChart) -> AbstractConstraint:
        return self  # written in a chart already (a system in a chart is its own localization)

    def discrete_residual(
        self, t0: RealScalarLike, q0: Vector, dt: RealScalarLike, dq: Vector
    ) -> Float[Array, " k"]:
        # h(q_{k+1}) = 0 at the end of the step ([MW] §3.5; RATTLE), q_{k+1} = q_k ⊕ Δq
        return self.position_residual(t0 + dt, q0 + dq)


class AbstractRatedField(eqx.Module):
    """A function of the point, $F(q)$ — a `LinearConstraint`'s $A(q)$ or $c(q)$ — that also
    knows its rate $\\dot F$ along the motion through $q$ with the manifold's velocity $v$
    (`rate`). A `LinearConstraint` of such fields (time-independent) has its $b = -(\\dot A v +
    \\dot c)$ in closed form (`AbstractConstraint.closed_form`), e.g. rolling
    (`gm.rolling_constraint`)."""

    @abc.abstractmethod
    def __call__(self, q: Vector) -> Float[Array, "..."]:
        """$F(q)$."""

    @abc.abstractmethod
    def rate(self, q: Vector, v: Vector) -> Float[Array, "..."]:
        """$\\dot F$ along the motion through `q` with velocity `v`, shaped like $F(q)$."""


class _RatedInChart(AbstractRatedField):
    """An `AbstractRatedField` read at the points of `chart` (`LinearConstraint.localized`)."""

    field: AbstractRatedField
    chart: AbstractChart

    def __call__(self, x: Vector) -> Float[Array, "..."]:
        return self.field(self.chart.point(x))

    def rate(self, x: Vector, v: Vector) -> Float[Array, "..."]:
        return self.field.rate(self.chart.point(x), v)


class LinearConstraint(_AbstractUserConstraint):
    """Constraints linear (affine) in the velocities: $A(q)\\,v + c(q) = 0$.

    **Arguments:**

    - `A_of_q`: `q -> (k, n)` (or `(t, q) -> (k, n)`).
    - `c_of_q`: optional free term `q -> (k,)` (or `(t, q) -> (k,)`); zero by default.

    `time_dependent` is set from the `LagrangianSystem` the constraint is given to.
    """

    A_of_q: Callable
    c_of_q: Callable | None = None
    time_dependent: bool = eqx.field(default=False, static=True)

    def __check_init__(self):
        _check_callable("LinearConstraint", "A_of_q", self.A_of_q, "A_of_q(q) -> (k, n)")
        _check_callable("LinearConstraint", "c_of_q", self.c_of_q, "c_of_q(q) -> (k,)", True)

    def residual(self, t: RealScalarLike, q: Vector, v: Vector) -> Float[Array, " k"]:
        A = jnp.asarray(call(self.A_of_q, t, q, time_dependent=self.time_dependent))
        if A.ndim == 1:
            A = A[None, :]
        if A.ndim != 2:
            raise ValueError(f"A_of_q must return a (k, n) matrix, got shape {A.shape}.")
        r = A @ v
        if self.c_of_q is not None:
            r = r + _as_rows(call(self.c_of_q, t, q, time_dependent=self.time_dependent), "c_of_q")
        return r

    def position_residual(self, t: RealScalarLike, q: Vector) -> Float[Array, " m"]:
        return jnp.zeros((0,), jnp.result_type(q))

    def holonomic_rows(self, t: RealScalarLike, q: Vector) -> Float[Array, " k"]:
        return _no_holonomic_rows(self, t, q)

    def affine_in_v(self) -> bool:
        return True

    def localized(self, chart: AbstractChart) -> AbstractConstraint:
        # A(q ⊕ ψ) acting on the velocity itself (ψ̇ = v at ψ = 0, docs/lie_groups.md)
        td = self.time_dependent
        pull = (lambda f: _RatedInChart(f, chart)) if self._rated() else (
            lambda f: chart.pull(f, td)
        )
        c = None if self.c_of_q is None else pull(self.c_of_q)
        return LinearConstraint(pull(self.A_of_q), c, time_dependent=td)

    def _rated(self) -> bool:
        rated = lambda f: isinstance(f, AbstractRatedField)
        return not self.time_dependent and rated(self.A_of_q) and (
            self.c_of_q is None or rated(self.c_of_q)
        )

    def closed_form(self) -> Callable | None:
        return self._rated_stages if self._rated() else None

    def _rated_stages(self, t: RealScalarLike, q: Vector, v: Vector):
        # φ = A v + c, ∂φ/∂q v = Ȧ v + ċ along the motion (Lemma 1)
        A, rate = self.A_of_q(q), self.A_of_q.rate(q, v) @ v
        phi = A @ v
        if self.c_of_q is not None:
            phi, rate = phi + self.c_of_q(q), rate + self.c_of_q.rate(q, v)
        return phi, A, -rate

    def discrete_residual(
        self, t0: RealScalarLike, q0: Vector, dt: RealScalarLike, dq: Vector
    ) -> Float[Array, " k"]:
        # ω_d(q_k, q_{k+1}) = A(q_{k+1/2}) (q_{k+1} - q_k)/h + c(q_{k+1/2}) at the midpoint
        # (discrete constraint of [MP], with the DLA of [CM])
        return self.residual(t0 + dt / 2, q0 + dq / 2, dq / dt)


class StackedConstraint(AbstractConstraint):
    """Several constraints imposed together (rows concatenated)."""

    constraints: tuple[AbstractConstraint, ...]

    def __check_init__(self):
        if not self.constraints or not all(isinstance(c, AbstractConstraint) for c in self.constraints):
            raise TypeError("Constraint.stack takes a non-empty sequence of constraints.")

    def residual(self, t: RealScalarLike, q: Vector, v: Vector) -> Float[Array, " k"]:
        return jnp.concatenate([c.residual(t, q, v) for c in self.constraints])

    def position_residual(self, t: RealScalarLike, q: Vector) -> Float[Array, " m"]:
        return jnp.concatenate([c.position_residual(t, q) for c in self.constraints])

    def holonomic_rows(self, t: RealScalarLike, q: Vector) -> Float[Array, " k"]:
        return jnp.concatenate([c.holonomic_rows(t, q) for c in self.constraints])

    def affine_in_v(self) -> bool:
        return all(c.affine_in_v() for c in self.constraints)

    def closed_form(self) -> None:
        return None

    def bind_time(self, time_dependent):
        return StackedConstraint(tuple(c.bind_time(time_dependent) for c in self.constraints))

    def localized(self, chart: AbstractChart) -> AbstractConstraint:
        return StackedConstraint(tuple(c.localized(chart) for c in self.constraints))

    def discrete_residual(
        self, t0: RealScalarLike, q0: Vector, dt: RealScalarLike, dq: Vector
    ) -> Float[Array, " k"]:
        return jnp.concatenate([c.discrete_residual(t0, q0, dt, dq) for c in self.constraints])


def _check_constant_subspace(name: str, x) -> None:
    """A constant `basis` (columns) or `annihilator` (rows) must be a finite real matrix of full
    rank (checked when the `Subspace` is built; functions are checked per state by `gm.validate`
    and the runtime checks)."""
    if x is None or callable(x) or isinstance(x, jax.core.Tracer):
        return
    try:
        X = np.asarray(x)
    except (TypeError, ValueError):
        X = np.asarray(None)
    if X.dtype.kind not in "iuf":
        raise TypeError(
            f"Subspace {name} must be a function (q, v) -> matrix or a constant real array, got "
            f"{type(x).__name__} {x!r:.60}."
        )
    if X.ndim not in (1, 2) or X.size == 0:
        raise ValueError(f"Subspace {name} must be a vector or a matrix, got shape {X.shape}.")
    if not np.all(np.isfinite(X)):
        raise ValueError(f"Subspace {name} has NaN or inf entries.")
    vectors = np.atleast_2d(X.T if (name == "basis" and X.ndim == 2) else X).astype(float)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    # the scale-free rank test of `_checks.full_row_rank_margin`: σ of the unit vectors
    sigma = np.linalg.svd(vectors / np.where(norms > 0, norms, 1.0), compute_uv=False)
    rank = int(np.sum(sigma > float(rank_tolerance(np.float64, vectors.shape[1]))))
    if rank < vectors.shape[0]:
        what = "columns" if name == "basis" else "rows"
        raise ValueError(
            f"Subspace {name} is rank deficient: its {vectors.shape[0]} {what} span only {rank} "
            f"dimension(s). Give linearly independent {what} (a basis of W needs n - k independent "
            "columns, an annihilator k independent rows)."
        )


class Subspace(_AbstractTimeBound):
    """A subspace $\\mathcal{W}_{(q,v)} \\subset T_qQ$ on which the constraint force does no work.

    Give exactly one of:

    - `basis`: `(q, v) -> (n, n - k)` whose columns span $\\mathcal{W}$ (or a constant array);
    - `annihilator`: `(q, v) -> (k, n)` matrix $C$ with $\\mathcal{W} = \\ker C$ (or a constant array).

    With `time_dependent=True` systems the functions take `t` first (`time_dependent` is set
    from the `LagrangianSystem` the subspace is given to).
    """

    basis: Callable | Array | None = None
    annihilator: Callable | Array | None = None
    time_dependent: bool = eqx.field(default=False, static=True)

    def __check_init__(self):
        if (self.basis is None) == (self.annihilator is None):
            raise ValueError("Subspace needs exactly one of basis=... or annihilator=....")
        for name in ("basis", "annihilator"):
            _check_constant_subspace(name, getattr(self, name))

    def localized(self, chart: AbstractChart) -> "Subspace":
        """This subspace written in `chart` (`AbstractChart.system`): functions read at the
        chart's point (vectors and covectors of the same velocities); constants as they are."""
        local = lambda x: chart.pull(x, self.time_dependent) if callable(x) else x
        return Subspace(local(self.basis), local(self.annihilator), self.time_dependent)

    def _eval(self, x, t, q, v, one_vector_as_column):
        out = call(x, t, q, v, time_dependent=self.time_dependent) if callable(x) else x
        if jnp.iscomplexobj(out) or jnp.asarray(out).dtype == bool:
            raise TypeError(
                f"work_space returns values of dtype {jnp.asarray(out).dtype}: it must return real "
                "floating-point values (a basis or annihilator of real vectors)."
            )
        out = jnp.asarray(out, jnp.result_type(q))
        if out.ndim == 1:  # a single vector (basis) or a single row (annihilator)
            out = out[:, None] if one_vector_as_column else out[None, :]
        return out

    def annihilator_matrix(self, t, q, v) -> Float[Array, "k n"]:
        """$C$ with $\\mathcal{W} = \\ker C$ (rows span $\\mathcal{W}^0$)."""
        if self.annihilator is not None:
            return self._eval(self.annihilator, t, q, v, False)
        return null_space(self.basis_matrix(t, q, v).T).T

    def basis_matrix(self, t, q, v) -> Float[Array, "n m"]:
        """A matrix whose columns form a basis of $\\mathcal{W}$."""
        if self.basis is not None:
            return self._eval(self.basis, t, q, v, True)
        return null_space(self.annihilator_matrix(t, q, v))
