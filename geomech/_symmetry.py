"""Symmetry (thesis §4.3): Lie algebra actions on $Q$ by infinitesimal generators, their lift to
$TQ$, the subalgebra $\\mathfrak{g}_{\\mathcal{W}}$ and the nonholonomic momentum map $J^{nh}$."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._bundle import State
from ._custom_types import RealScalarLike
from ._linalg import rank_tolerance
from ._stages import Stages
from ._system import LagrangianSystem


class _GroupGenerators(eqx.Module):
    phi: Callable
    dim: int = eqx.field(static=True)

    def __call__(self, q):
        g0 = jnp.zeros((self.dim,), jnp.result_type(q))
        # ξ_Q(q) = d/ds φ(exp(sξ), q)|_{s=0}, one jvp per basis vector of the Lie algebra
        xi_Q = lambda xi: jax.jvp(lambda g: self.phi(g, q), (g0,), (xi,))[1]
        return jax.vmap(xi_Q, out_axes=1)(jnp.eye(self.dim, dtype=g0.dtype))


class LieAlgebraAction(eqx.Module):
    """An action of a Lie algebra $\\mathfrak{g}$ ($\\dim \\mathfrak{g} = r$) on $Q$, given by its
    infinitesimal generators: $\\xi_Q(q) = \\Xi(q)\\,\\xi$ for
    $\\xi \\in \\mathfrak{g} \\cong \\mathbb{R}^r$.

    **Arguments:**

    - `generators`: `q -> (n, r)`, whose columns are $\\xi_Q$ for a basis of $\\mathfrak{g}$.

    Build one from a group action with `LieAlgebraAction.from_group_action(phi, dim)`.
    """

    generators: Callable

    @classmethod
    def from_group_action(cls, phi: Callable, dim: int) -> "LieAlgebraAction":
        """The infinitesimal action of a Lie group action $\\varphi(g, q)$, by `jax.jvp`.

        **Arguments:**

        - `phi`: `(g, q) -> q'`, with `g` of shape `(dim,)` in exponential coordinates (identity
            at `g = 0`, $\\exp(s\\xi) = s\\xi$), so
            $\\xi_Q(q) = \\tfrac{d}{ds}\\varphi(s\\xi, q)|_{s=0}$.
        - `dim`: $\\dim G$.
        """
        return cls(_GroupGenerators(phi, dim))

    def __call__(self, q: Float[Array, " n"]) -> Float[Array, "n r"]:
        """$\\Xi(q)$: the generators $\\xi_Q(q)$ as columns."""
        X = jnp.asarray(self.generators(q))
        if X.ndim != 2 or X.shape[0] != q.shape[0]:
            raise ValueError(
                "the generators of a LieAlgebraAction must return an (n, r) = "
                f"({q.shape[0]}, dim g) matrix, got shape {X.shape}."
            )
        return X

    def lifted(self, q, v) -> tuple[Float[Array, "n r"], Float[Array, "n r"]]:
        """The generators of the lifted action on $TQ$:
        $\\xi_{TQ}(q, v) = (\\xi_Q(q), D\\xi_Q(q)\\,v)$."""
        return jax.jvp(self, (q,), (v,))

    def g_W_projector(self, stages: Stages) -> Float[Array, "r r"]:
        """The orthogonal projector of $\\mathfrak{g} \\cong \\mathbb{R}^r$ onto
        $\\mathfrak{g}_{\\mathcal{W}} = \\{\\xi : \\xi_Q(q) \\in \\mathcal{W}\\}
        = \\ker(C\\,\\Xi(q))$ (§4.3); its columns span $\\mathfrak{g}_{\\mathcal{W}}$, whose
        dimension may vary with the state."""
        X = self(stages.state.q)
        K = stages.C @ X
        scale = jnp.linalg.norm(stages.C) * jnp.linalg.norm(X)
        return jnp.eye(K.shape[1], dtype=K.dtype) - row_space_projector(K, scale)


def row_space_projector(K: Float[Array, "m r"], scale) -> Float[Array, "r r"]:
    """$K^+ K$, the orthogonal projector onto the row space of $K$, ignoring round-off: entries
    below a tolerance times `scale` (an estimate of $|K|$ before cancellation) count as zero,
    and so do relatively small singular values."""
    tol = rank_tolerance(K.dtype, max(K.shape))
    K = jnp.where(jnp.abs(K) <= tol * scale, 0.0, K)
    return jnp.linalg.pinv(K, rtol=tol) @ K


def momentum_components(
    system: LagrangianSystem, t, q, v, action: LieAlgebraAction
) -> Float[Array, " r"]:
    """$J^{nh}(e_i) = \\partial L/\\partial v \\cdot \\Xi(q) e_i$ for the basis $e_i$ of
    $\\mathfrak{g}$ (§4.3)."""
    return jax.grad(system.L, argnums=2)(t, q, v) @ action(q)


@eqx.filter_jit
def nonholonomic_momentum(
    system: LagrangianSystem, state: State, action: LieAlgebraAction, xi=None, t: RealScalarLike = 0.0
) -> Float[Array, "..."]:
    """The nonholonomic momentum $J^{nh}(\\xi) = \\partial L/\\partial v \\cdot \\xi_Q(q)$
    (§4.3, (4.16)).

    **Arguments:**

    - `system`, `state`, `t`: as in `gm.acceleration`.
    - `action`: a `LieAlgebraAction`.
    - `xi`: an element of $\\mathfrak{g}$ (shape `(r,)`); `None` gives the components on the
        basis.

    **Returns:** a scalar $J^{nh}(\\xi)$, or the `(r,)` vector $(J^{nh}(e_i))_i$ if `xi` is
    `None`.
    """
    system.check_shapes(state, t)
    J = momentum_components(system, jnp.asarray(t, state.q.dtype), state.q, state.v, action)
    return J if xi is None else J @ jnp.asarray(xi)


def invariance_defect(system: LagrangianSystem, t, q, v, action: LieAlgebraAction):
    """Whether $dL(\\xi_{TQ}) \\ne 0$ (beyond round-off) for a generator: the lifted action does
    not leave $L$ invariant at $(t, q, v)$ (hypothesis of Prop. 6, (4.13))."""
    X, DXv = action.lifted(q, v)
    dLdq, dLdv = jax.grad(system.L, argnums=(1, 2))(t, q, v)
    dL = dLdq @ X + dLdv @ DXv  # dL(ξ_Q, Dξ_Q v) for each generator, (4.13)
    scale = jnp.abs(dLdq) @ jnp.abs(X) + jnp.abs(dLdv) @ jnp.abs(DXv)
    tol = 10 * rank_tolerance(q.dtype, q.shape[0])
    return jnp.any(jnp.abs(dL) > tol * scale + jnp.finfo(q.dtype).tiny)


NOT_INVARIANT_MESSAGE = (
    "the Lagrangian is not invariant under the lifted action (dL(ξ_Q, Dξ_Q v) ≠ 0 at this "
    "state), so the nonholonomic momentum equation (4.11) does not hold: use generators of a "
    "symmetry of L."
)


@eqx.filter_jit
def check_invariance(
    system: LagrangianSystem, state: State, action: LieAlgebraAction, t: RealScalarLike = 0.0
) -> State:
    """Return `state` unchanged if $L$ is invariant under the lifted action at `state`
    (Prop. 6); raise an error otherwise (`eqx.error_if`, so it also works under `jit`)."""
    system.check_shapes(state, t)
    bad = invariance_defect(system, jnp.asarray(t, state.q.dtype), state.q, state.v, action)
    return eqx.error_if(state, bad, NOT_INVARIANT_MESSAGE)
