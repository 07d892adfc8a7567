"""Integration that stays on the group: Runge–Kutta–Munthe-Kaas in the chart centred at the
current point [MuntheKaas1999].

A step from $(q_n, v_n)$ integrates $z = (\\psi, v)$ from $(0, v_n)$ with the wrapped diffrax
Runge–Kutta tableau, $\\dot\\psi = \\mathrm{dexp}_{-\\psi}^{-1} v$ (the inverse right Jacobian of
$\\exp$), $\\dot v = a_R(q_n \\oplus \\psi, v)$, and ends at $q_n \\oplus \\psi_{n+1}$: the stored
point is a group element at every step (no renormalization), and the method has the tableau's
order. The error estimate is the difference of the stored points of the tableau's two
solutions (the same PyTree as `y`, as diffrax's controllers need); dense output evaluates the
tableau's interpolant of $z$ and maps it through the chart.

`y` may also be a tuple `(State, extra)` (`simulate_vakonomic`: the multipliers $\\mu$): `extra`
lives in a vector space and is integrated beside $(\\psi, v)$ as it is.
"""

import equinox as eqx
import jax.numpy as jnp
import jax.tree_util as jtu
from diffrax import (
    AbstractImplicitSolver,
    AbstractLocalInterpolation,
    AbstractRungeKutta,
    AbstractSolver,
    AbstractTerm,
    AbstractWrappedSolver,
    BacksolveAdjoint,
)

from ._bundle import State
from ._manifold import AbstractManifold


def _split(y):
    """`(State, extra)` of a `State` (`extra = None`) or of a tuple `(State, extra)`."""
    return (y, None) if isinstance(y, State) else y


def _join(state, extra):
    return state if extra is None else (state, extra)


class _CentredTerm(AbstractTerm):
    """The second-order field of `term` (`vf(t, State(q, v))` is `State(q̇, acceleration)`, or
    `(State, extra rate)` for `y = (State, extra)`) on $z = (\\psi, v, \\text{extra})$ in the
    chart centred at `q0`: $\\dot\\psi = \\mathrm{dexp}_{-\\psi}^{-1} v$."""

    term: AbstractTerm
    q0: object
    manifold: AbstractManifold

    def vf(self, t, y, args):
        psi, v, extra = y
        rate, extra_rate = _split(
            self.term.vf(t, _join(State(self.manifold.oplus(self.q0, psi), v), extra), args)
        )
        return self.manifold.dexp_inverse(psi, v), rate.v, extra_rate

    def contr(self, t0, t1, **kwargs):
        return self.term.contr(t0, t1, **kwargs)

    def prod(self, vf, control):
        return jtu.tree_map(lambda x: control * x, vf)


class _CentredInterpolation(AbstractLocalInterpolation):
    """The wrapped solver's interpolant of $z = (\\psi, v)$, mapped to $(q_0 \\oplus \\psi, v)$."""

    t0: object
    t1: object
    inner: AbstractLocalInterpolation
    q0: object
    manifold: AbstractManifold

    def evaluate(self, t0, t1=None, left=True):
        if t1 is not None:  # an increment: the difference of the stored points
            return jtu.tree_map(jnp.subtract, self.evaluate(t1, left=left), self.evaluate(t0, left=left))
        psi, v, extra = self.inner.evaluate(t0, left=left)
        return _join(State(self.manifold.oplus(self.q0, psi), v), extra)


class _InterpolationFactory(eqx.Module):
    manifold: AbstractManifold
    inner_cls: object = eqx.field(static=True)

    def __call__(self, *, t0, t1, q0, inner):
        interp = self.inner_cls(t0=t0, t1=t1, **inner)
        return _CentredInterpolation(t0, t1, interp, q0, self.manifold)


class MuntheKaas(AbstractWrappedSolver):
    """A diffrax Runge–Kutta `solver` made a Lie-group method on `manifold` (Runge–Kutta–
    Munthe-Kaas, [MuntheKaas1999]); `y` is a `State` whose `q` is a point of `manifold`, or a
    tuple `(State, extra)` with `extra` in a vector space.

    The last stage of an FSAL tableau is carried into the next step's chart (only its $\\psi$
    part changes: $\\dot\\psi = v$ at $\\psi = 0$), so a step costs what it costs on ℝⁿ."""

    solver: AbstractSolver
    manifold: AbstractManifold

    @property
    def term_structure(self):
        return self.solver.term_structure

    @property
    def interpolation_cls(self):  # pyright: ignore
        return _InterpolationFactory(self.manifold, self.solver.interpolation_cls)

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

    def _centred(self, terms, y):
        state, extra = _split(y)
        return _CentredTerm(terms, state.q, self.manifold), (
            jnp.zeros_like(state.v), state.v, extra
        )

    @staticmethod
    def _fsal(solver_state) -> bool:
        """Whether the state is a Runge–Kutta FSAL state `(first_step, f)` (diffrax's layout)."""
        return isinstance(solver_state, tuple) and len(solver_state) == 2 and (
            isinstance(solver_state[1], tuple) and len(solver_state[1]) == 3
        )

    def init(self, terms, t0, t1, y0, args):
        term, z0 = self._centred(terms, y0)
        return self.solver.init(term, t0, t1, z0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        term, z0 = self._centred(terms, y0)
        z1, z_error, dense_info, solver_state, result = self.solver.step(
            term, t0, t1, z0, args, solver_state, made_jump
        )
        (psi, v1, extra1), m = z1, self.manifold
        if self._fsal(solver_state):
            # the last stage f(t1, z1) = (dexp⁻¹_{-ψ1} v1, a_R, ·) becomes the first stage of
            # the next step in the chart centred at q1 = q0 ⊕ ψ1, where ψ = 0: (v1, a_R, ·)
            first_step, (_, a1, extra_rate1) = solver_state
            solver_state = first_step, (v1, a1, extra_rate1)
        q0 = _split(y0)[0].q
        y1 = _join(State(m.oplus(q0, psi), v1), extra1)
        if z_error is not None:
            psi_error, v_error, extra_error = z_error
            z_error = _join(State(m.point_error(q0, psi, psi_error), v_error), extra_error)
        return y1, z_error, dict(q0=q0, inner=dense_info), solver_state, result

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


def on_group(integrator, manifold: AbstractManifold, adjoint, name: str = "simulate") -> MuntheKaas:
    """`integrator` as a Lie-group method on `manifold` (for `name`: `simulate` or
    `simulate_vakonomic`); an error, before tracing, for an integrator that is not an explicit
    Runge–Kutta one and for `diffrax.BacksolveAdjoint`."""
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
    return MuntheKaas(integrator, manifold)
