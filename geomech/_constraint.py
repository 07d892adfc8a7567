"""Kinematic constraints $\\phi(q, v) = 0$ (thesis (3.6)) and the work space $\\mathcal{W}$ (§3.2).

User functions take `(q, v)` (or `(t, q, v)` when the system is `time_dependent`); holonomic
constraints `h(q)` (or `h(t, q)`); linear constraints `A(q)` (or `A(t, q)`).
"""

import abc
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._linalg import null_space


def call(fn: Callable, t, *args, time_dependent: bool):
    """Call a user function with `t` first if the system is time dependent."""
    return fn(t, *args) if time_dependent else fn(*args)


class AbstractConstraint(eqx.Module):
    """A set of $k$ kinematic constraints $\\phi^i(t, q, v) = 0$, admissible in the sense of (3.7)."""

    @abc.abstractmethod
    def residual(self, t, q, v, *, time_dependent: bool) -> Float[Array, " k"]:
        """$\\phi(t, q, v)$, shape `(k,)`."""

    def position_residual(self, t, q, *, time_dependent: bool) -> Float[Array, " m"]:
        """$h(t, q)$ for the holonomic part (shape `(0,)` when there is none)."""
        return jnp.zeros((0,), jnp.result_type(q))

    # -- discrete constraint of the variational integrators (geomech/_variational.py) -----------

    def discrete_residual(self, t0, q0, dt, dq, *, time_dependent: bool) -> Float[Array, " k"]:
        """The discrete constraint $\\phi_d = 0$ imposed on a step $(t_0, q_0) \\to
        (t_0 + \\Delta t, q_0 + \\Delta q)$ of `gm.VariationalIntegrator`, shape `(k,)`, aligned
        with `residual`.

        Constraints linear in $v$ and holonomic ones define it; others raise `TypeError`.
        """
        raise TypeError(
            f"{type(self).__name__} may be nonlinear in the velocities, and the variational "
            "integrator has no discretization for constraints nonlinear in v (the discrete "
            "Lagrange-d'Alembert equations need constraints affine in v): write phi as "
            "gm.LinearConstraint(A_of_q, c_of_q) or gm.HolonomicConstraint(h) if it is one, or use "
            "a diffrax integrator."
        )

    @staticmethod
    def stack(constraints: Sequence["AbstractConstraint"]) -> "StackedConstraint":
        """Combine several constraints into one; their rows are concatenated in order."""
        return StackedConstraint(tuple(constraints))

    def __and__(self, other: "AbstractConstraint") -> "StackedConstraint":
        return StackedConstraint((self, other))


def _as_rows(x, name):
    x = jnp.asarray(x)
    if x.ndim > 1:
        raise ValueError(f"{name} must return a scalar or a 1-D array of constraints, got shape {x.shape}.")
    return jnp.atleast_1d(x)


class Constraint(AbstractConstraint):
    """General constraints $\\phi(q, v) = 0$, possibly nonlinear in the velocities (3.6).

    **Arguments:**

    - `phi`: `(q, v) -> (k,)` (or `(t, q, v) -> (k,)` for a time-dependent system).
    """

    phi: Callable

    def residual(self, t, q, v, *, time_dependent):
        return _as_rows(call(self.phi, t, q, v, time_dependent=time_dependent), "phi")


class HolonomicConstraint(AbstractConstraint):
    """Holonomic constraints $h(q) = 0$, imposed as $\\phi = Dh(q)\\,v + \\partial_t h = 0$.

    **Arguments:**

    - `h`: `q -> (k,)` (or `(t, q) -> (k,)`); kept for position-level use (stabilization).
    """

    h: Callable

    def position_residual(self, t, q, *, time_dependent):
        return _as_rows(call(self.h, t, q, time_dependent=time_dependent), "h")

    def residual(self, t, q, v, *, time_dependent):
        # d/dt h(t, q(t)) = ∂h/∂q v + ∂h/∂t  (thesis §3.1, holonomic case of (3.6))
        f = lambda t_, q_: self.position_residual(t_, q_, time_dependent=time_dependent)
        t = jnp.asarray(t, jnp.result_type(q))
        return jax.jvp(f, (t, q), (jnp.ones_like(t), v))[1]

    def discrete_residual(self, t0, q0, dt, dq, *, time_dependent):
        # h(q_{k+1}) = 0 at the end of the step (Marsden & West 2001 §3.5; RATTLE)
        return self.position_residual(t0 + dt, q0 + dq, time_dependent=time_dependent)


class LinearConstraint(AbstractConstraint):
    """Constraints linear (affine) in the velocities: $A(q)\\,v + c(q) = 0$.

    **Arguments:**

    - `A_of_q`: `q -> (k, n)` (or `(t, q) -> (k, n)`).
    - `c_of_q`: optional free term `q -> (k,)` (or `(t, q) -> (k,)`); zero by default.
    """

    A_of_q: Callable
    c_of_q: Callable | None = None

    def residual(self, t, q, v, *, time_dependent):
        A = jnp.asarray(call(self.A_of_q, t, q, time_dependent=time_dependent))
        if A.ndim == 1:
            A = A[None, :]
        if A.ndim != 2:
            raise ValueError(f"A_of_q must return a (k, n) matrix, got shape {A.shape}.")
        r = A @ v
        if self.c_of_q is not None:
            r = r + _as_rows(call(self.c_of_q, t, q, time_dependent=time_dependent), "c_of_q")
        return r

    def discrete_residual(self, t0, q0, dt, dq, *, time_dependent):
        # ω_d(q_k, q_{k+1}) = A(q_{k+1/2}) (q_{k+1} - q_k)/h + c(q_{k+1/2}) at the midpoint
        # (discrete constraint of McLachlan & Perlmutter 2006, with Cortés & Martínez 2001's DLA)
        return self.residual(t0 + dt / 2, q0 + dq / 2, dq / dt, time_dependent=time_dependent)


class StackedConstraint(AbstractConstraint):
    """Several constraints imposed together (rows concatenated)."""

    constraints: tuple[AbstractConstraint, ...]

    def __check_init__(self):
        if not self.constraints or not all(isinstance(c, AbstractConstraint) for c in self.constraints):
            raise TypeError("Constraint.stack takes a non-empty sequence of constraints.")

    def residual(self, t, q, v, *, time_dependent):
        return jnp.concatenate(
            [c.residual(t, q, v, time_dependent=time_dependent) for c in self.constraints]
        )

    def position_residual(self, t, q, *, time_dependent):
        return jnp.concatenate(
            [c.position_residual(t, q, time_dependent=time_dependent) for c in self.constraints]
        )

    def discrete_residual(self, t0, q0, dt, dq, *, time_dependent):
        td = time_dependent
        return jnp.concatenate(
            [c.discrete_residual(t0, q0, dt, dq, time_dependent=td) for c in self.constraints]
        )


class Subspace(eqx.Module):
    """A subspace $\\mathcal{W}_{(q,v)} \\subset T_qQ$ on which the constraint force does no work.

    Give exactly one of:

    - `basis`: `(q, v) -> (n, n - k)` whose columns span $\\mathcal{W}$ (or a constant array);
    - `annihilator`: `(q, v) -> (k, n)` matrix $C$ with $\\mathcal{W} = \\ker C$ (or a constant array).

    With `time_dependent=True` systems the functions take `t` first.
    """

    basis: Callable | Array | None = None
    annihilator: Callable | Array | None = None

    def __check_init__(self):
        if (self.basis is None) == (self.annihilator is None):
            raise ValueError("Subspace needs exactly one of basis=... or annihilator=....")

    @staticmethod
    def _eval(x, t, q, v, time_dependent, one_vector_as_column):
        out = call(x, t, q, v, time_dependent=time_dependent) if callable(x) else x
        out = jnp.asarray(out, jnp.result_type(q))
        if out.ndim == 1:  # a single vector (basis) or a single row (annihilator)
            out = out[:, None] if one_vector_as_column else out[None, :]
        return out

    def annihilator_matrix(self, t, q, v, *, time_dependent) -> Float[Array, "k n"]:
        """$C$ with $\\mathcal{W} = \\ker C$ (rows span $\\mathcal{W}^0$)."""
        if self.annihilator is not None:
            return self._eval(self.annihilator, t, q, v, time_dependent, False)
        E = self.basis_matrix(t, q, v, time_dependent=time_dependent)
        return null_space(E.T).T

    def basis_matrix(self, t, q, v, *, time_dependent) -> Float[Array, "n m"]:
        """A matrix whose columns form a basis of $\\mathcal{W}$."""
        if self.basis is not None:
            return self._eval(self.basis, t, q, v, time_dependent, True)
        return null_space(self.annihilator_matrix(t, q, v, time_dependent=time_dependent))
