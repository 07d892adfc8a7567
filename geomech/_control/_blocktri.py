"""Symmetric block-tridiagonal linear algebra for the stage-structured KKT systems of an optimal
control transcription.

Ordered stage by stage, the Newton (KKT) matrix of a transcription whose equations couple only
neighbouring stages is block tridiagonal: diagonal blocks $D_k$ and sub-diagonal blocks $L_k$
(rows of stage $k+1$, columns of stage $k$). Its block factorization
$S_0 = D_0$, $S_k = D_k - L_{k-1}S_{k-1}^{-1}L_{k-1}^\\top$ costs $O(N b^3)$ for $N$ stages of
size $b$ (a dense factorization $O(N^3b^3)$): the Riccati-type recursion of structured
interior-point methods for optimal control ([RaoWrightRawlings1998]). Each Schur complement
$S_k$ is factored by LU with partial pivoting. The transcription orders each stage so that its
equations have their pivots inside the stage (the equations of an interval with the
configuration and momentum they determine), which keeps every $S_k$ nonsingular.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float, Int


class BlockTridiagonal(eqx.Module):
    """A symmetric block-tridiagonal matrix: `diag` $(N, b, b)$, `lower` $(N-1, b, b)$ with
    `lower[k]` the block in the rows of stage $k+1$ and the columns of stage $k$."""

    diag: Float[Array, "N b b"]
    lower: Float[Array, "Nm1 b b"]

    def matvec(self, x: Float[Array, "N b"]) -> Float[Array, "N b"]:
        """$K x$ for `x` of shape $(N, b)$."""
        out = jnp.einsum("kij,kj->ki", self.diag, x)
        below = jnp.einsum("kij,kj->ki", self.lower, x[:-1])  # L_k x_k into the rows of k + 1
        above = jnp.einsum("kji,kj->ki", self.lower, x[1:])  # L_k^T x_{k+1} into the rows of k
        zero = jnp.zeros_like(x[:1])
        return out + jnp.concatenate([zero, below]) + jnp.concatenate([above, zero])


class BlockFactorization(eqx.Module):
    """The block factors of a `BlockTridiagonal`: LU factors of the Schur complements $S_k$ and
    the gains $G_k = L_kS_k^{-1}$."""

    lu: Float[Array, "N b b"]
    pivots: Int[Array, "N b"]
    gains: Float[Array, "Nm1 b b"]

    def solve(self, rhs: Float[Array, "N b"]) -> Float[Array, "N b"]:
        """$K^{-1}$ `rhs`: forward $z_k = r_k - G_{k-1}z_{k-1}$, backward
        $x_k = S_k^{-1}z_k - G_k^\\top x_{k+1}$."""

        def forward(z_prev, inputs):
            r, G = inputs
            z = r - G @ z_prev
            return z, z

        _, z_rest = jax.lax.scan(forward, rhs[0], (rhs[1:], self.gains))
        z = jnp.concatenate([rhs[:1], z_rest])
        x_last = jsl.lu_solve((self.lu[-1], self.pivots[-1]), z[-1])

        def backward(x_next, inputs):
            lu, piv, zk, G = inputs
            x = jsl.lu_solve((lu, piv), zk) - G.T @ x_next
            return x, x

        _, x_rest = jax.lax.scan(
            backward, x_last, (self.lu[:-1], self.pivots[:-1], z[:-1], self.gains), reverse=True
        )
        return jnp.concatenate([x_rest, x_last[None]])


def factor(K: BlockTridiagonal) -> BlockFactorization:
    """The block factorization of `K` (no pivoting across blocks, partial pivoting inside)."""
    lu0, piv0 = jsl.lu_factor(K.diag[0])

    def step(carry, inputs):
        lu, piv = carry
        D, L = inputs
        G = jsl.lu_solve((lu, piv), L.T, trans=1).T  # L S^{-1} = (S^{-T} L^T)^T
        lu_new, piv_new = jsl.lu_factor(D - G @ L.T)
        return (lu_new, piv_new), (G, lu_new, piv_new)

    _, (gains, lus, pivots) = jax.lax.scan(step, (lu0, piv0), (K.diag[1:], K.lower))
    return BlockFactorization(
        jnp.concatenate([lu0[None], lus]), jnp.concatenate([piv0[None], pivots]), gains
    )
