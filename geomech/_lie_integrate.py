"""Integration that stays on the group: Runge–Kutta–Munthe-Kaas in the chart centred at the
current point [MuntheKaas1999].

A step from $(q_n, v_n)$ integrates $z = (\\psi, v)$ from $(0, v_n)$ with the wrapped diffrax
Runge–Kutta tableau, $\\dot\\psi = \\mathrm{dexp}_{-\\psi}^{-1} v$ (the inverse right Jacobian of
$\\exp$), $\\dot v = a_R(q_n \\oplus \\psi, v)$, and ends at $q_n \\oplus \\psi_{n+1}$: the stored
point is a group element at every step (no renormalization), and the method has the tableau's
order. The error estimate is the difference of the stored points of the tableau's two
solutions (the same PyTree as `y`, as diffrax's controllers need); dense output evaluates the
tableau's interpolant of $z$ and maps it through the chart.
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
)

from ._bundle import State
from ._manifold import AbstractManifold


class _CentredTerm(AbstractTerm):
    """The second-order field of `term` (`vf(t, State(q, v))` is `State(q̇, acceleration)`) on
    $z = (\\psi, v)$ in the chart centred at `q0`: $\\dot\\psi = \\mathrm{dexp}_{-\\psi}^{-1} v$."""

    term: AbstractTerm
    q0: object
    manifold: AbstractManifold

    def vf(self, t, y, args):
        psi, v = y
        a = self.term.vf(t, State(self.manifold.oplus(self.q0, psi), v), args).v
        return self.manifold.dexp_inverse(psi, v), a

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
        psi, v = self.inner.evaluate(t0, left=left)
        return State(self.manifold.oplus(self.q0, psi), v)


class _InterpolationFactory(eqx.Module):
    manifold: AbstractManifold
    inner_cls: object = eqx.field(static=True)

    def __call__(self, *, t0, t1, q0, inner):
        interp = self.inner_cls(t0=t0, t1=t1, **inner)
        return _CentredInterpolation(t0, t1, interp, q0, self.manifold)


class MuntheKaas(AbstractWrappedSolver):
    """A diffrax Runge–Kutta `solver` made a Lie-group method on `manifold` (Runge–Kutta–
    Munthe-Kaas, [MuntheKaas1999]); `y` is a `State` whose `q` is a point of `manifold`.

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

    def order(self, terms):
        return self.solver.order(terms)

    def strong_order(self, terms):
        return self.solver.strong_order(terms)

    def error_order(self, terms):
        return self.solver.error_order(terms)

    def _centred(self, terms, y):
        return _CentredTerm(terms, y.q, self.manifold), (jnp.zeros_like(y.v), y.v)

    @staticmethod
    def _fsal(solver_state) -> bool:
        """Whether the state is a Runge–Kutta FSAL state `(first_step, f)` (diffrax's layout)."""
        return isinstance(solver_state, tuple) and len(solver_state) == 2 and (
            isinstance(solver_state[1], tuple) and len(solver_state[1]) == 2
        )

    def init(self, terms, t0, t1, y0, args):
        term, z0 = self._centred(terms, y0)
        return self.solver.init(term, t0, t1, z0, args)

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        term, z0 = self._centred(terms, y0)
        z1, z_error, dense_info, solver_state, result = self.solver.step(
            term, t0, t1, z0, args, solver_state, made_jump
        )
        (psi, v1), m = z1, self.manifold
        if self._fsal(solver_state):
            # the last stage f(t1, z1) = (dexp⁻¹_{-ψ1} v1, a_R) becomes the first stage of the
            # next step in the chart centred at q1 = q0 ⊕ ψ1, where ψ = 0: (v1, a_R)
            first_step, (_, a1) = solver_state
            solver_state = first_step, (v1, a1)
        y1 = State(m.oplus(y0.q, psi), v1)
        if z_error is not None:
            z_error = State(m.point_error(y0.q, psi, z_error[0]), z_error[1])
        return y1, z_error, dict(q0=y0.q, inner=dense_info), solver_state, result

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)


def on_group(integrator, manifold: AbstractManifold, stabilization) -> MuntheKaas:
    """`integrator` as a Lie-group method on `manifold` (for `simulate`); errors for what does
    not run on groups yet."""
    if not isinstance(integrator, AbstractRungeKutta) or isinstance(
        integrator, AbstractImplicitSolver
    ):
        raise ValueError(
            f"on a Lie group simulate integrates with an explicit diffrax Runge–Kutta method "
            f"(Runge–Kutta–Munthe-Kaas), e.g. diffrax.Tsit5(); got {type(integrator).__name__}."
        )
    if stabilization is not None:
        raise ValueError(
            "stabilization is not available on Lie groups yet: pass stabilization=None (the "
            "constraint drift is reported in sol.constraint_residual)."
        )
    return MuntheKaas(integrator, manifold)
