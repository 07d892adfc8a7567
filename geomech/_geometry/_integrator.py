r"""Integration that stays on the manifold: Runge–Kutta–Munthe-Kaas in the chart centred at the
current point [MuntheKaas1999].

A step from $(q_n, v_n)$ integrates $z = (\psi, v)$ from $(0, v_n)$ with the wrapped diffrax
Runge–Kutta tableau, $\dot\psi = \mathrm{dexp}_{-\psi}^{-1} v$ (the inverse right Jacobian of
$\exp$), $\dot v = a_R(q_n \oplus \psi, v)$, and ends at $q_n \oplus \psi_{n+1}$: the stored
point is a group element at every step (no renormalization), and the method has the tableau's
order. The error estimate is the difference of the stored points of the tableau's two
solutions (the same PyTree as `y`, as diffrax's controllers need); dense output evaluates the
tableau's interpolant of $z$ and maps it through the chart.

The caller says how its state splits into the point, the velocity and anything else integrated
beside them in a vector space (`AbstractStateParts`: `simulate`'s `gm.State`, the vakonomic
`(State, mu)`).
"""

import abc

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
from diffrax import (
    AbstractAdjoint,
    AbstractERK,
    AbstractImplicitSolver,
    AbstractLocalInterpolation,
    AbstractRungeKutta,
    AbstractSolver,
    AbstractTerm,
    AbstractWrappedSolver,
    BacksolveAdjoint,
)
from jaxtyping import Array, ArrayLike, Float, PyTree

from ._manifold import AbstractManifold

# the diffrax releases whose Runge–Kutta solver state `MuntheKaas` re-centres (`_recentre`), as
# checked by tests/test_geometry.py::test_munthe_kaas_knows_diffrax_solver_state
DIFFRAX_SOLVER_STATE = ("0.6", "0.7")


class AbstractStateParts(eqx.Module):
    """How an integrated state `y` is made of a point `q`, its velocity `v` and `extra` values in
    a vector space (`None` when there are none)."""

    @abc.abstractmethod
    def split(self, y: PyTree) -> tuple[PyTree, PyTree, PyTree]:
        """`(q, v, extra)` of `y` (and of a rate of `y`, whose first part is then $\\dot q$)."""

    @abc.abstractmethod
    def join(self, q: PyTree, v: PyTree, extra: PyTree) -> PyTree:
        """The state (or rate) made of `q`, `v` and `extra`."""


class _CentredTerm(AbstractTerm):
    """The second-order field of `term` on $z = (\\psi, v, \\text{extra})$ in the chart centred
    at `q0`: $\\dot\\psi = \\mathrm{dexp}_{-\\psi}^{-1} v$, $\\dot v$ and the extra rate as `term`
    gives them at $q_0 \\oplus \\psi$."""

    term: AbstractTerm
    q0: PyTree
    manifold: AbstractManifold
    parts: AbstractStateParts

    def vf(self, t: ArrayLike, y: PyTree, args: PyTree) -> PyTree:
        psi, v, extra = y
        state = self.parts.join(self.manifold.oplus(self.q0, psi), v, extra)
        _, a, extra_rate = self.parts.split(self.term.vf(t, state, args))
        return self.manifold.dexp_inverse(psi, v), a, extra_rate

    def contr(self, t0: ArrayLike, t1: ArrayLike, **kwargs) -> PyTree:
        return self.term.contr(t0, t1, **kwargs)

    def prod(self, vf: PyTree, control: PyTree) -> PyTree:
        return jtu.tree_map(lambda x: control * x, vf)


class _CentredInterpolation(AbstractLocalInterpolation):
    """The wrapped solver's interpolant of $z = (\\psi, v, \\text{extra})$, mapped to the state at
    $q_0 \\oplus \\psi$."""

    t0: object
    t1: object
    inner: AbstractLocalInterpolation
    q0: PyTree
    manifold: AbstractManifold
    parts: AbstractStateParts

    def evaluate(self, t0: ArrayLike, t1: ArrayLike | None = None, left: bool = True) -> PyTree:
        if t1 is not None:  # an increment: the difference of the stored points
            return jtu.tree_map(jnp.subtract, self.evaluate(t1, left=left), self.evaluate(t0, left=left))
        psi, v, extra = self.inner.evaluate(t0, left=left)
        return self.parts.join(self.manifold.oplus(self.q0, psi), v, extra)


class _InterpolationFactory(eqx.Module):
    manifold: AbstractManifold
    parts: AbstractStateParts
    inner_cls: object = eqx.field(static=True)

    def __call__(self, *, t0: ArrayLike, t1: ArrayLike, q0: PyTree, inner: dict) -> _CentredInterpolation:
        interp = self.inner_cls(t0=t0, t1=t1, **inner)
        return _CentredInterpolation(t0, t1, interp, q0, self.manifold, self.parts)


def _recentre(solver_state: PyTree, v1: Float[Array, " n"]) -> PyTree:
    """An FSAL Runge–Kutta state `(first_step, f1)` with its last stage moved into the chart
    centred at the step's end point: $f_1 = (\\mathrm{dexp}^{-1}_{-\\psi_1} v_1, a_1, \\cdot)$ in
    the old chart is $(v_1, a_1, \\cdot)$ at $\\psi = 0$ in the new one (only the $\\psi$ rate
    changes). The layout `(first_step, f)` is diffrax's (`DIFFRAX_SOLVER_STATE`); non-FSAL
    tableaus carry `None`."""
    if solver_state is None:
        return None
    first_step, (_, a1, extra_rate1) = solver_state
    return first_step, (v1, a1, extra_rate1)


class MuntheKaas(AbstractWrappedSolver):
    """A diffrax Runge–Kutta `solver` made a method on `manifold` (Runge–Kutta–Munthe-Kaas,
    [MuntheKaas1999]) for states split by `parts`.

    The last stage of an FSAL tableau is carried into the next step's chart (`_recentre`), so a
    step costs what it costs on ℝⁿ."""

    solver: AbstractSolver
    manifold: AbstractManifold
    parts: AbstractStateParts

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        return _InterpolationFactory(self.manifold, self.parts, self.solver.interpolation_cls)

    @property
    def term_compatible_contr_kwargs(self):
        return self.solver.term_compatible_contr_kwargs

    @property
    def scan_kind(self):  # set through this by diffrax's adjoints and `ForwardMode` (`_engine`)
        return self.solver.scan_kind

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def _centred(self, terms: AbstractTerm, y: PyTree) -> tuple[PyTree, _CentredTerm, PyTree]:
        q, v, extra = self.parts.split(y)
        term = _CentredTerm(terms, q, self.manifold, self.parts)
        return q, term, (jnp.zeros_like(v), v, extra)

    def init(self, terms: AbstractTerm, t0: ArrayLike, t1: ArrayLike, y0: PyTree, args: PyTree) -> PyTree:
        _, term, z0 = self._centred(terms, y0)
        return self.solver.init(term, t0, t1, z0, args)

    def step(
        self, terms: AbstractTerm, t0: ArrayLike, t1: ArrayLike, y0: PyTree, args: PyTree,
        solver_state: PyTree, made_jump: ArrayLike,
    ) -> tuple:
        q0, term, z0 = self._centred(terms, y0)
        z1, z_error, dense_info, solver_state, result = self.solver.step(
            term, t0, t1, z0, args, solver_state, made_jump
        )
        psi, v1, extra1 = z1
        m = self.manifold
        y1 = self.parts.join(m.oplus(q0, psi), v1, extra1)
        if z_error is not None:
            psi_error, v_error, extra_error = z_error
            z_error = self.parts.join(m.point_error(q0, psi, psi_error), v_error, extra_error)
        return y1, z_error, dict(q0=q0, inner=dense_info), _recentre(solver_state, v1), result

    def func(self, terms: AbstractTerm, t0: ArrayLike, y0: PyTree, args: PyTree) -> PyTree:
        return terms.vf(t0, y0, args)

    def end_rate(self, solver_state: PyTree) -> PyTree | None:
        """The right-hand side at the end point of the step that left `solver_state` (an FSAL
        tableau's last stage, re-centred there by `_recentre`), joined by `parts` from the
        velocity $v$ (not $\\dot q$ of the stored point), its rate and the extra rates; `None`
        for tableaus that do not keep it."""
        return None if solver_state is None else self.parts.join(*solver_state[1])


def end_rate(solver: AbstractSolver, solver_state: PyTree) -> PyTree | None:
    """What `solver` keeps of the right-hand side at the end of the step that left
    `solver_state`: an explicit FSAL Runge–Kutta method's last stage, $f(t_1, y_1)$ (diffrax's
    layout `(first_step, f1)`, `DIFFRAX_SOLVER_STATE`), also through `MuntheKaas` (whose point
    part is the velocity); `None` for any other solver."""
    if isinstance(solver, MuntheKaas):
        return solver.end_rate(solver_state)
    if isinstance(solver, AbstractERK) and solver_state is not None:
        return solver_state[1]
    return None


def munthe_kaas(
    integrator: AbstractSolver, manifold: AbstractManifold, *, adjoint: AbstractAdjoint,
    parts: AbstractStateParts, name: str,
) -> MuntheKaas:
    """`integrator` as a method on `manifold` (for `name`: `simulate` or `simulate_vakonomic`); an
    error, before tracing, for an integrator that is not an explicit Runge–Kutta one and for
    `diffrax.BacksolveAdjoint`."""
    if not isinstance(integrator, AbstractRungeKutta) or isinstance(
        integrator, AbstractImplicitSolver
    ):
        raise ValueError(
            f"on a Lie group {name} integrates with an explicit diffrax Runge–Kutta method "
            f"(Runge–Kutta–Munthe-Kaas), e.g. diffrax.Tsit5(); got {type(integrator).__name__}."
        )
    if isinstance(adjoint, BacksolveAdjoint):
        raise ValueError(
            f"diffrax.BacksolveAdjoint is not available on Lie groups ({name}): it integrates "
            "the adjoint equations backwards in a vector space, not on the group. Use the "
            "default diffrax.RecursiveCheckpointAdjoint() (reverse mode) or "
            "diffrax.ForwardMode() (jax.jacfwd)."
        )
    return MuntheKaas(integrator, manifold, parts)


