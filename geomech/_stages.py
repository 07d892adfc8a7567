"""The stages every solver shares, computed once per state: $M$, $Q$, $A$, $b$, $C$, projections.

For a special field $X = (v, a)$, $d\\phi(X) = 0 \\iff A a = b$ with $A = \\partial\\phi/\\partial v$ and
$b = -(\\partial\\phi/\\partial q) v - \\partial_t\\phi$ (Lemma 1). $\\mathcal{W} = \\ker C$, with
$C = A$ for ideal constraints ($\\mathcal{W} = \\mathcal{D}$).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float

from ._custom_types import RealScalarLike
from ._bundle import State
from . import _linalg as la
from ._checks import (
    ADMISSIBILITY,
    CONDITION_3_19,
    MASS_MATRIX,
    admissibility_margin,
    condition_3_19_margin,
    holds,
    mass_matrix_margin,
)
from ._linalg import null_space
from ._system import LagrangianSystem


class Stages(eqx.Module):
    """Everything about one state $(t, q, v)$ that the solvers need, computed once.

    `M a_U = Q`; `F0` is the known-work covector ($0$ for ideal constraints); `phi` is
    $\\phi(t, q, v)$; `A a = b` are the constraints on accelerations; `C` annihilates $\\mathcal{W}$.
    """

    system: LagrangianSystem
    state: State
    t: Float[Array, ""]
    M: Float[Array, "n n"]
    M_cho: Float[Array, "n n"]
    Q: Float[Array, " n"]
    F0: Float[Array, " n"]
    phi: Float[Array, " k"]
    A: Float[Array, "k n"]
    b: Float[Array, " k"]
    C: Float[Array, "k n"]
    ideal: bool = eqx.field(static=True)

    @property
    def n(self) -> int:
        return self.M.shape[0]

    @property
    def k(self) -> int:
        return self.A.shape[0]

    def solve_M(self, x):
        """$M^{-1} x$ by the Cholesky factor computed once."""
        return la.cho_solve(self.M_cho, x)

    @property
    def a_U(self) -> Float[Array, " n"]:
        """Acceleration of $X_U$ (2.9)."""
        return self.solve_M(self.Q)

    @property
    def a_Ubar(self) -> Float[Array, " n"]:
        """Acceleration of $X_{\\bar U} = X_U + X_{F^0}$ (5.41); equal to $a_U$ for ideal constraints."""
        return self.solve_M(self.Q + self.F0)

    @property
    def a_0(self) -> Float[Array, " n"]:
        """An $X_0 \\in \\mathcal{S}(\\mathcal{C})$ (Lemma 1): $a_0 = M^{-1}A^\\top(AM^{-1}A^\\top)^{-1} b$."""
        MinvAT = self.solve_M(self.A.T)
        return MinvAT @ la.cho_solve(la.cholesky(self.A @ MinvAT), self.b)

    def _Wperp_from(self, y: Float[Array, "k ..."]) -> Float[Array, "n ..."]:
        """$M^{-1}C^\\top(AM^{-1}C^\\top)^{-1} y$, the common factor of (3.20) and (3.32)."""
        MinvCT = self.solve_M(self.C.T)
        S = self.A @ MinvCT  # invertible by (3.19); symmetric positive definite when W = D
        z = la.cho_solve(la.cholesky(S), y) if self.ideal else jnp.linalg.solve(S, y)
        return MinvCT @ z

    def project_Wperp(self, u: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
        """$\\Pi_{\\mathcal{W}^\\perp} u = M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}A u$ (3.20)."""
        return self._Wperp_from(self.A @ u)

    def project_Wperp_residual(self, a: Float[Array, " n"]) -> Float[Array, " n"]:
        """$\\Pi_{\\mathcal{W}^\\perp}(a - a_0) = M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}(A a - b)$ for any
        $X_0 \\in \\mathcal{S}(\\mathcal{C})$ (Lemma 1: $A a_0 = b$), without computing $a_0$."""
        return self._Wperp_from(self.A @ a - self.b)

    def project_D(self, u: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
        """$\\Pi_{\\mathcal{D}} u = u - \\Pi_{\\mathcal{W}^\\perp} u$ (3.20)."""
        return u - self.project_Wperp(u)

    @property
    def Pi_D(self) -> Float[Array, "n n"]:
        return self.project_D(jnp.eye(self.n, dtype=self.M.dtype))

    @property
    def Pi_Wperp(self) -> Float[Array, "n n"]:
        return self.project_Wperp(jnp.eye(self.n, dtype=self.M.dtype))

    @property
    def bracket(self) -> Float[Array, "n n"]:
        """The Gram matrix $G$ of $[\\cdot,\\cdot]$ (4.1): $\\Pi_D^\\top M \\Pi_D + (I-\\Pi_D)^\\top M (I-\\Pi_D)$."""
        P, R = self.Pi_D, self.Pi_Wperp
        return P.T @ self.M @ P + R.T @ self.M @ R

    @property
    def D_basis(self) -> Float[Array, "n m"]:
        """An orthonormal basis of the virtual displacements $\\mathcal{D} = \\ker A$ (3.10)."""
        return null_space(self.A)

    @property
    def W_basis(self) -> Float[Array, "n m"]:
        """A basis of $\\mathcal{W}$ (the user's basis if one was given, else $\\ker C$)."""
        ws = self.system.work_space
        if ws is None:
            return self.D_basis
        return ws.basis_matrix(self.t, self.state.q, self.state.v)

    def M_orthonormalize(self, E: Float[Array, "n m"]) -> Float[Array, "n m"]:
        """Columns spanning the same subspace as the (independent) columns of `E`, $M$-orthonormal:
        $E L^{-\\top}$ with $E^\\top M E = L L^\\top$."""
        return la.solve_lower(la.cholesky(E.T @ self.M @ E), E.T).T

    def solve_with_constraints(self, R: Float[Array, "m n"], r: Float[Array, " m"]) -> Float[Array, " n"]:
        """The $a$ with $R a = r$ and $A a = b$ (Lemma 1), for rows $R$ that complete $A$ to rank $n$.

        Solved in the least-squares sense by a QR factorisation, so $R$ may contain redundant rows
        as long as the stacked system is consistent (used by Kane-type and Gibbs–Appell solvers).
        """
        Qf, Rf = jnp.linalg.qr(jnp.concatenate([R, self.A]))
        return jsl.solve_triangular(Rf, Qf.T @ jnp.concatenate([r, self.b]), lower=False)

    def solve_saddle(
        self, H: Float[Array, "n n"], P: Float[Array, "k n"], r: Float[Array, " n"]
    ) -> tuple[Float[Array, " n"], Float[Array, " k"]]:
        """The saddle-point (KKT) system $\\begin{pmatrix} H & -P^\\top \\\\ A & 0\\end{pmatrix}
        \\begin{pmatrix} a \\\\ \\lambda \\end{pmatrix} = \\begin{pmatrix} r \\\\ b \\end{pmatrix}$; returns $(a, \\lambda)$."""
        n, k = self.n, self.k
        K = jnp.block([[H, -P.T], [self.A, jnp.zeros((k, k), H.dtype)]])
        x = jnp.linalg.solve(K, jnp.concatenate([r, self.b]))
        return x[:n], x[n:]


def _check_mass_matrix(M, M_cho):
    return eqx.error_if(M_cho, ~holds(mass_matrix_margin(M, M_cho)), MASS_MATRIX + ".")


def _check_constraints(A, C, M_cho):
    """Admissibility (3.7) and condition (3.19), scale-free (see `_checks`)."""
    A = eqx.error_if(A, ~holds(admissibility_margin(A)), ADMISSIBILITY + ".")
    return eqx.error_if(A, ~holds(condition_3_19_margin(A, C, M_cho)), CONDITION_3_19 + ".")


def assemble(system: LagrangianSystem, state: State, t: RealScalarLike = 0.0, *, checks: bool = True) -> Stages:
    """Compute the shared stages at `(t, state)`; shape errors raise before tracing.

    With `checks=True` the value conditions (regular $L$, admissibility (3.7), condition (3.19))
    are checked with `eqx.error_if`; simulations may turn them off and rely on non-finite values.
    """
    system.check_shapes(state, t)
    q, v = state.q, state.v
    t = jnp.asarray(t, q.dtype)
    M = system.mass_matrix(state, t)
    M_cho = la.cholesky(M)
    if checks:
        M_cho = _check_mass_matrix(M, M_cho)
    Q = system.generalized_force(state, t)
    F0 = system.known_work_force(t, q, v)
    if system.constraint is None:
        A = jnp.zeros((0, q.shape[0]), q.dtype)
        b = jnp.zeros((0,), q.dtype)
        return Stages(
            system=system, state=state, t=t, M=M, M_cho=M_cho, Q=Q, F0=F0, phi=b, A=A, b=b, C=A,
            ideal=True,
        )
    phi = system.constraint.residual
    k = jax.eval_shape(phi, t, q, v).shape[0]
    jac = jax.jacrev if 2 * k < q.shape[0] else jax.jacfwd  # fewer passes: k reverse or n forward
    A = jac(phi, argnums=2)(t, q, v)  # A = ∂φ/∂v
    # b = -(∂φ/∂q v + ∂_t φ), so that dφ(v, a) = 0 ⇔ A a = b (Lemma 1)
    phi_value, dphi = jax.jvp(lambda t_, q_: phi(t_, q_, v), (t, q), (jnp.ones_like(t), v))
    b = -dphi
    ideal = system.work_space is None
    C = A if ideal else system.work_space.annihilator_matrix(t, q, v)
    if checks:
        A = _check_constraints(A, C, M_cho)
        if ideal:
            C = A
    return Stages(
        system=system, state=state, t=t, M=M, M_cho=M_cho, Q=Q, F0=F0, phi=phi_value, A=A, b=b, C=C,
        ideal=ideal,
    )
