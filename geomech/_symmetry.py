"""Symmetry (thesis §4.3): Lie algebra actions on $Q$ by infinitesimal generators, their lift to
$TQ$, the subalgebra $\\mathfrak{g}_{\\mathcal{W}}$ and the nonholonomic momentum map $J^{nh}$."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from ._bundle import State
from ._custom_types import RealScalarLike
from ._geometry import AbstractChart, AbstractManifold, point_difference, point_shape
from ._linalg import rank_tolerance
from ._stages import Stages
from ._system import LagrangianSystem


class _GroupGenerators(eqx.Module):
    phi: Callable
    dim: int = eqx.field(static=True)

    def __call__(self, q):
        g0 = jnp.zeros((self.dim,), jax.tree_util.tree_leaves(q)[0].dtype)
        # ξ_Q(q) = d/ds φ(exp(sξ), q)|_{s=0}, one jvp per basis vector of the Lie algebra, in the
        # velocity convention: d/ds ψ(s) with φ(exp(sξ), q) = q ⊕ ψ(s) (ψ = φ - q on coordinates)
        moved = lambda g: point_difference(q, self.phi(g, q))
        xi_Q = lambda xi: jax.jvp(moved, (g0,), (xi,))[1]
        return jax.vmap(xi_Q, out_axes=1)(jnp.eye(self.dim, dtype=g0.dtype))


class LieAlgebraAction(eqx.Module):
    """An action of a Lie algebra $\\mathfrak{g}$ ($\\dim \\mathfrak{g} = r$) on $Q$, given by its
    infinitesimal generators: $\\xi_Q(q) = \\Xi(q)\\,\\xi$ for
    $\\xi \\in \\mathfrak{g} \\cong \\mathbb{R}^r$.

    **Arguments:**

    - `generators`: `q -> (n, r)`, whose columns are $\\xi_Q$ for a basis of $\\mathfrak{g}$;
        on a Lie group `q` is the point (a `jaxlie` element, or a tuple for a product) and the
        columns are velocities in the manifold's convention (body velocities: for SO(3) and
        rotations about the spatial $e_3$, $\\xi_Q(R) = R^\\top e_3$).

    Build one from a group action with `LieAlgebraAction.from_group_action(phi, dim)`.
    """

    generators: Callable

    @classmethod
    def from_group_action(cls, phi: Callable, dim: int) -> "LieAlgebraAction":
        """The infinitesimal action of a Lie group action $\\varphi(g, q)$, by `jax.jvp`.

        **Arguments:**

        - `phi`: `(g, q) -> q'`, with `g` of shape `(dim,)` in exponential coordinates (identity
            at `g = 0`, $\\exp(s\\xi) = s\\xi$), so
            $\\xi_Q(q) = \\tfrac{d}{ds}\\varphi(s\\xi, q)|_{s=0}$; on a Lie group `q'` is a
            point (e.g. `jaxlie.SO3.exp(g) @ q`) and $\\xi_Q$ its velocity in the manifold's
            convention.
        - `dim`: $\\dim G$.
        """
        return cls(_GroupGenerators(phi, dim))

    def __call__(self, q: Float[Array, " n"] | PyTree) -> Float[Array, "n r"]:
        """$\\Xi(q)$: the generators $\\xi_Q(q)$ as columns (`q` a point of a group, or a tuple
        of points, on a Lie group)."""
        X = jnp.asarray(self.generators(q))
        n = point_shape(q)[1]
        if X.ndim != 2 or X.shape[0] != n:
            raise ValueError(
                "the generators of a LieAlgebraAction must return an (n, r) = "
                f"({n}, dim g) matrix, got shape {X.shape}."
            )
        return X

    def on(self, chart: AbstractChart) -> "LieAlgebraAction":
        """This action in `chart`, the chart a system's stages are written in
        (`Stages.chart`): generators of the chart coordinates, $\\xi_Q(\\mathrm{point}(x))$,
        whose columns keep the velocity convention (body velocities on a group)."""
        return LieAlgebraAction(chart.pull(self.generators))

    def lifted(
        self, q, v, manifold: AbstractManifold
    ) -> tuple[Float[Array, "n r"], Float[Array, "n r"]]:
        """The generators of the lifted action on $TQ$: $\\xi_{TQ}(q, v) = (\\xi_Q(q),
        D\\xi_Q(q)\\,v + [v, \\xi_Q(q)])$ with the bracket of `manifold`'s velocity frame (zero
        for coordinate velocities; on a group the velocity of the moved curve $g_s(t)$ is
        $g_s^{-1}\\dot g_s$, whose variation adds $\\mathrm{ad}_v\\xi_Q$ [Bloch2003, §5.2])."""
        X, DXv, ad = self._lift_terms(q, v, manifold)
        return X, DXv + ad

    def _lift_terms(self, q, v, manifold: AbstractManifold):
        """$\\xi_Q(q)$, $D\\xi_Q(q)\\,v$ and $[v, \\xi_Q(q)]$ (`lifted`)."""
        X, DXv = jax.jvp(self, (q,), (v,))
        return X, DXv, jax.vmap(lambda x: manifold.bracket(v, x), in_axes=1, out_axes=1)(X)

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
    # on a Lie group: ∂L/∂v and the generators in the velocity convention, at the point itself
    J = momentum_components(system, jnp.asarray(t, state.v.dtype), state.q, state.v, action)
    return J if xi is None else J @ jnp.asarray(xi)


def invariance_defect(system: LagrangianSystem, t, q, v, action: LieAlgebraAction):
    """Whether $dL(\\xi_{TQ}) \\ne 0$ (beyond round-off) for a generator: the lifted action does
    not leave $L$ invariant at $(t, q, v)$ (hypothesis of Prop. 6, (4.13))."""
    X, DXv, ad = action._lift_terms(q, v, system.manifold)
    dLdq, dLdv = jax.grad(system.L, argnums=(1, 2))(t, q, v)
    dL = dLdq @ X + dLdv @ (DXv + ad)  # dL(ξ_TQ) for each generator, (4.13)
    scale = jnp.abs(dLdq) @ jnp.abs(X) + jnp.abs(dLdv) @ (jnp.abs(DXv) + jnp.abs(ad))
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
    chart = system.manifold.chart(state.q)  # on a Lie group: the body frame at state.q
    local, x = chart.system(system), chart.origin
    bad = invariance_defect(local, jnp.asarray(t, state.v.dtype), x, state.v, action.on(chart))
    return eqx.error_if(state, bad, NOT_INVARIANT_MESSAGE)
