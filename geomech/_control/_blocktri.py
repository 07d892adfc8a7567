"""Symmetric block-tridiagonal linear algebra for the stage-structured KKT systems of an optimal
control transcription.

Ordered stage by stage, the Newton (KKT) matrix of a transcription whose equations couple only
neighbouring stages is block tridiagonal: diagonal blocks $D_i$ and sub-diagonal blocks $L_i$
(rows of stage $i+1$, columns of stage $i$). It is factored by block cyclic reduction
([Heller1976]; for the KKT systems of optimal control, [Wright1991]): each level eliminates the
odd-numbered blocks, $x_j = D_j^{-1}(r_j - L_{j-1}x_{j-1} - L_j^\\top x_{j+1})$, which leaves a
block-tridiagonal system of half the size for the even ones,
$D'_i = D_i - L_{i-1}D_{i-1}^{-1}L_{i-1}^\\top - L_i^\\top D_{i+1}^{-1}L_i$,
$L'_i = -L_{i+1}D_{i+1}^{-1}L_i$. $\\lceil\\log_2 N\\rceil$ levels of batched $b \\times b$ LU
factorizations (partial pivoting inside a block) and products cost $O(N b^3)$ work, like the
sequential (Riccati) recursion of [RaoWrightRawlings1998], in $O(\\log N)$ sequential steps,
which is what matters on a CPU where every small LAPACK call has a fixed cost. The blocks
eliminated at each level are the KKT matrices of contiguous chains of stages; the transcription
orders each stage so that its equations have their pivots inside the stage, which keeps them
nonsingular (`_transcription.py`). The reduction runs on the stages in reverse order, so that
the last stage, whose terminal conditions can be met only through all the stages before it
(controllability), is the block that is factored last, when every other stage has been condensed
into it.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.scipy.linalg as jsl
from jaxtyping import Array, Float

_lu_factor = jax.vmap(jsl.lu_factor)
_lu_solve = jax.vmap(lambda lu, piv, b: jsl.lu_solve((lu, piv), b))
_mm = jnp.matmul


class BlockTridiagonal(eqx.Module):
    """A symmetric block-tridiagonal matrix: `diag` $(N, b, b)$, `lower` $(N-1, b, b)$ with
    `lower[i]` the block in the rows of stage $i+1$ and the columns of stage $i$."""

    diag: Float[Array, "N b b"]
    lower: Float[Array, "Nm1 b b"]

    def matvec(self, x: Float[Array, "N b"]) -> Float[Array, "N b"]:
        """$K x$ for `x` of shape $(N, b)$."""
        out = jnp.einsum("kij,kj->ki", self.diag, x)
        below = jnp.einsum("kij,kj->ki", self.lower, x[:-1])  # L_i x_i into the rows of i + 1
        above = jnp.einsum("kji,kj->ki", self.lower, x[1:])  # L_i^T x_{i+1} into the rows of i
        zero = jnp.zeros_like(x[:1])
        return out + jnp.concatenate([zero, below]) + jnp.concatenate([above, zero])


class _Level(eqx.Module):
    """One level of cyclic reduction on $M$ blocks ($M$ even): the LU factors of the odd blocks,
    the couplings of each odd block to its even neighbours, and the gains that reduce the
    right-hand side: $r'_i = r_{2i} - G^-_i r_{2i-1} - G^+_i r_{2i+1}$."""

    lu: Array  # (M/2, b, b) LU of D_{2i+1}
    piv: Array
    left: Array  # (M/2, b, b) L_{2i}: rows 2i+1, columns 2i
    right: Array  # (M/2, b, b) L_{2i+1}^T: rows 2i+1, columns 2i+2 (zero for the last)
    gain_minus: Array  # (M/2, b, b) L_{2i-1} D_{2i-1}^{-1} (zero for i = 0)
    gain_plus: Array  # (M/2, b, b) L_{2i}^T D_{2i+1}^{-1}


class BlockFactorization(eqx.Module):
    """The cyclic-reduction factors of a `BlockTridiagonal` (padded to a power of two blocks)."""

    levels: tuple[_Level, ...]
    top_lu: Array
    top_piv: Array
    size: int = eqx.field(static=True)

    def solve(self, rhs: Float[Array, "N b"]) -> Float[Array, "N b"]:
        """$K^{-1}$ `rhs`."""
        M = 2 ** len(self.levels)
        r = rhs[::-1]  # the reduction runs on the reversed stages
        r = jnp.concatenate([r, jnp.zeros((M - r.shape[0], r.shape[1]), r.dtype)])
        saved = []
        for lev in self.levels:  # reduce the right-hand side level by level
            even, odd = r[0::2], r[1::2]
            prev_odd = jnp.concatenate([jnp.zeros_like(odd[:1]), odd[:-1]])
            saved.append(odd)
            r = even - jnp.einsum("kij,kj->ki", lev.gain_minus, prev_odd)
            r = r - jnp.einsum("kij,kj->ki", lev.gain_plus, odd)
        x = jsl.lu_solve((self.top_lu, self.top_piv), r[0])[None]
        for lev, odd in zip(reversed(self.levels), reversed(saved), strict=True):
            next_even = jnp.concatenate([x[1:], jnp.zeros_like(x[:1])])
            b = odd - jnp.einsum("kij,kj->ki", lev.left, x)
            b = b - jnp.einsum("kij,kj->ki", lev.right, next_even)
            x_odd = _lu_solve(lev.lu, lev.piv, b)
            x = jnp.stack([x, x_odd], axis=1).reshape(-1, x.shape[-1])
        return x[: self.size][::-1]


def factor(K: BlockTridiagonal) -> BlockFactorization:
    """The block cyclic-reduction factorization of `K`."""
    N, b = K.diag.shape[0], K.diag.shape[1]
    L = max(1, (N - 1).bit_length())
    M = 2**L
    eye = jnp.broadcast_to(jnp.eye(b, dtype=K.diag.dtype), (M - N, b, b))
    # the stages in reverse order: block (i + 1, i) of the reversed matrix is lower[N - 2 - i]^T
    D = jnp.concatenate([K.diag[::-1], eye])
    reversed_lower = jnp.swapaxes(K.lower[::-1], 1, 2)
    low = jnp.concatenate(
        [reversed_lower, jnp.zeros((M - N + 1, b, b), K.diag.dtype)]
    )  # last unused
    levels = []
    for _ in range(L):
        lu, piv = _lu_factor(D[1::2])
        left = low[0::2]  # L_{2i}: rows 2i + 1, columns 2i
        right_T = low[1::2]  # L_{2i+1}: rows 2i + 2, columns 2i + 1
        right = jnp.swapaxes(right_T, 1, 2)  # rows 2i + 1, columns 2i + 2
        # D_{2i+1}^{-1} L_{2i} and D_{2i+1}^{-1} L_{2i+1}^T, as one batched solve: two independent
        # batched LAPACK solves can deadlock XLA:CPU's intra-op thread pool (docs/performance.md)
        inv_left, inv_right = jnp.split(
            _lu_solve(lu, piv, jnp.concatenate([left, right], axis=-1)), 2, axis=-1
        )
        # gains: G^+_i = L_{2i}^T D_{2i+1}^{-1} = (D^{-1} L_{2i})^T (D symmetric);
        # G^-_i = L_{2i-1} D_{2i-1}^{-1} = (D_{2i-1}^{-1} L_{2i-1}^T)^T of the previous odd block
        gain_plus = jnp.swapaxes(inv_left, 1, 2)
        prev = jnp.swapaxes(inv_right, 1, 2)
        gain_minus = jnp.concatenate([jnp.zeros_like(prev[:1]), prev[:-1]])
        right_prev = jnp.concatenate([jnp.zeros_like(right[:1]), right[:-1]])
        D_new = D[0::2] - _mm(jnp.swapaxes(left, 1, 2), inv_left)
        D_new = D_new - _mm(
            jnp.swapaxes(right_prev, 1, 2),
            jnp.concatenate([jnp.zeros_like(inv_right[:1]), inv_right[:-1]]),
        )
        # L'_i (rows 2i + 2, columns 2i) = -L_{2i+1} D_{2i+1}^{-1} L_{2i}
        low_new = -_mm(right_T, inv_left)
        levels.append(_Level(lu, piv, left, right, gain_minus, gain_plus))
        D, low = D_new, low_new
    top_lu, top_piv = jsl.lu_factor(D[0])
    return BlockFactorization(tuple(levels), top_lu, top_piv, N)
