from collections.abc import Callable
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from .. import _linalg as la
from .._linalg import min_singular_value, rank_tolerance, unit_rows
from .._stages import Stages
from ._base import AbstractSolver

_CONSTRUCTIONS = ("orthonormal", "bracket")


def kane_rows(
    stages: Stages, E: Float[Array, "n m"]
) -> tuple[Float[Array, "m n"], Float[Array, " m"]]:
    """Kane's equations along the columns $e_i$ of `E` (vectors of $\\mathcal{W}$) as rows
    $R a = r$: $\\bar\\lambda_i(X) - \\bar f^e_i - \\bar f^c_i = e_i \\cdot (M a - Q - F^0) = 0$
    (4.28), (5.47)."""
    return E.T @ stages.M, E.T @ (stages.Q + stages.F0)


def orthonormal_basis(stages: Stages) -> Float[Array, "n n"]:
    """An $M$-orthonormal basis $\\bar{\\mathcal{B}}$ of $T_qQ$ (4.22) whose first $n - k$
    vectors span $\\mathcal{W}$ (4.23) and whose last $k$ span
    $\\mathcal{W}^\\perp = M^{-1}\\mathcal{W}^0$ (Lemma 2)."""
    E = stages.M_orthonormalize(stages.W_basis)
    beta = stages.M_orthonormalize(stages.solve_M(stages.C.T))
    return jnp.concatenate([E, beta], axis=1)


def bracket_basis(stages: Stages) -> tuple[Float[Array, "n m"], Float[Array, "n n"]]:
    """The $[,]$-orthogonal construction (4.34)–(4.35).

    **Returns:** `(b, B)`: `b` a $[,]$-orthonormal basis $b_1, \\dots, b_{n-k}$ of
    $\\mathcal{D}$ (4.34), and `B` the basis $\\tilde{\\mathcal{B}} = \\{\\Gamma(b_1), \\dots,
    \\Gamma(b_{n-k}), \\beta_1, \\dots, \\beta_k\\}$ of $T_qQ$ (4.35), with
    $\\Gamma = (\\Pi_{\\mathcal{D}}|_{\\mathcal{W}})^{-1}$ (Observation 13) and $\\beta_j$ a basis
    of $\\mathcal{W}^\\perp$.
    """
    b = stages.M_orthonormalize(stages.D_basis)  # [,] = <,>_M on D, (4.1)
    E = stages.W_basis
    # Π_D|_W : W -> D is an isomorphism (Observation 13); Γ(b_i) ∈ W with Π_D Γ(b_i) = b_i
    Qf, Rf = la.qr(stages.project_D(E))
    gamma_b = E @ la.solve_upper(Rf, Qf.T @ b)
    beta = stages.solve_M(stages.C.T)  # W^⊥ = M⁻¹ W^0 (Lemma 2)
    return b, jnp.concatenate([gamma_b, beta], axis=1)


class Kane(AbstractSolver):
    """Kane's equations for generalized nonholonomic systems (Lemma 3, Lemma 3').

    $e_i \\cdot (M a - Q - F^0) = 0$ for a basis $e_1, \\dots, e_{n-k}$ of $\\mathcal{W}$ (4.28),
    (5.47),
    together with the constraints $A a = b$ (4.29).

    **Arguments:**

    - `basis`: optional user basis of $\\mathcal{W}$, `fn(q, v) -> (n, n - k)` (`fn(t, q, v)` for a
        time-dependent system); on a Lie group `q` is the point and the columns are velocities
        in the manifold's convention (body velocities). It is checked to span $\\mathcal{W}$ (an
        error is raised otherwise).
    - `construction`: the automatic basis when `basis` is not given: `"orthonormal"`, an
        $M$-orthonormal basis of $\\mathcal{W}$ (Observation 12); `"bracket"`, the basis
        $\\Gamma(b_i)$ of $\\mathcal{W}$ built from a $[,]$-orthonormal basis $b_i$ of
        $\\mathcal{D}$ (4.34)–(4.37). It inverts $\\Pi_{\\mathcal{D}}|_{\\mathcal{W}}$, so its
        round-off grows with $\\|\\Pi_{\\mathcal{D}}\\|$, which is large where $\\mathcal{D}$ and
        $\\mathcal{W}^\\perp$ meet at a small angle: at a random state with
        $\\|\\Pi_{\\mathcal{D}}\\| \\approx 10^3$ it agreed with the projection to 2e-11 relative,
        the orthonormal construction to 2e-13. Use it to follow the thesis's construction.
    """

    basis: Callable | None = None
    construction: str = eqx.field(default="orthonormal", static=True)

    supports_known_work: ClassVar[bool] = True

    def __check_init__(self):
        if self.construction not in _CONSTRUCTIONS:
            raise ValueError(
                "Kane(construction=...) must be 'orthonormal' or 'bracket', "
                f"got {self.construction!r}."
            )
        if self.basis is not None and not callable(self.basis):
            raise TypeError(
                "Kane(basis=...) must be a function fn(q, v) -> (n, n - k) whose columns span W."
            )
        if self.basis is not None and self.construction != "orthonormal":
            raise ValueError("give either Kane(basis=fn) or Kane(construction=...), not both.")

    def W_basis(self, stages: Stages) -> Float[Array, "n m"]:
        """The basis $e_1, \\dots, e_{n-k}$ of $\\mathcal{W}$ used by Kane's equations."""
        if self.basis is None:
            if self.construction == "bracket":
                return bracket_basis(stages)[1][:, : stages.n - stages.k]
            return orthonormal_basis(stages)[:, : stages.n - stages.k]
        return _user_basis(self.basis, stages)

    def acceleration(self, stages: Stages):
        return stages.solve_with_constraints(*kane_rows(stages, self.W_basis(stages)))


def _user_basis(fn, stages: Stages):
    # fn(q, v) at the chart's point, columns in the velocity convention (body velocities)
    s = stages.state
    E = jnp.asarray(stages.system.in_tqv_form(stages.chart.pull(fn, stages.system.time_dependent))(stages.t, s.q, s.v))
    n, k = stages.n, stages.k
    if E.shape != (n, n - k):
        raise ValueError(
            f"Kane(basis=fn): fn must return an (n, n - k) = ({n}, {n - k}) matrix whose columns "
            f"span W, got shape {E.shape}."
        )
    tol = 10 * rank_tolerance(E.dtype, n)
    scale = jnp.linalg.norm(stages.C) * jnp.linalg.norm(E)
    off_W = jnp.linalg.norm(stages.C @ E) > tol * scale
    degenerate = min_singular_value(unit_rows(E.T)) <= tol
    return eqx.error_if(
        E, off_W | degenerate,
        "Kane(basis=fn): the columns of fn(q, v) do not form a basis of W at this state (some "
        "column is not in W = ker C, or the columns are linearly dependent). Return n - k "
        "independent vectors of W.",
    )
