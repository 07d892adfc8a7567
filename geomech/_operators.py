"""The structure of $M$, $A$ and $C$ found at trace time, as small operator types.

`assemble` reads the structural nonzero patterns of $M$, $A$ and $C$ (`_sparsity`) and picks one
operator type for each, once; the type decides the algorithm, so `Stages` writes the thesis
formulas only:

- $M$: `DiagonalMass` (solved by a division) or `DenseMass` (by its Cholesky factor);
- $A$, $C$: `EllRows` ($A u$ from the nonzeros of each row), `EllColumns` ($C^\\top z$ from the
  nonzeros of each column) or `DenseRows`;
- $A M^{-1} C^\\top$: `SparseGram` (its structurally nonzero terms, for a diagonal $M$) or
  `DenseGram`.

`weighted_solve` is the one $M$-weighted Schur-complement solve (Lemma 1, (3.20), (3.32)) that the
stages, the projection onto $\\mathcal{C}$, the Udwadia–Kalaba split and the vakonomic
conditions share.
"""

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _linalg as la

# -- the mass matrix ----------------------------------------------------------------------------


class AbstractMass(eqx.Module):
    """$M$ (symmetric positive definite where $L$ is regular) and $M^{-1}$."""

    matrix: eqx.AbstractVar[Float[Array, "n n"]]
    cholesky: eqx.AbstractVar[Float[Array, "n n"]]  # lower factor (what the regularity check reads)

    @abc.abstractmethod
    def solve(self, x: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
        """$M^{-1} x$."""

    @abc.abstractmethod
    def gram(self, A_pattern: np.ndarray, C_pattern: np.ndarray) -> "AbstractGram":
        """How to form $A M^{-1} C^\\top$ for rows of $A$ and $C$ with these structural nonzero
        patterns."""


class DenseMass(AbstractMass):
    """$M$ with its Cholesky factor computed once."""

    matrix: Float[Array, "n n"]
    cholesky: Float[Array, "n n"]

    @classmethod
    def factor(cls, matrix: Float[Array, "n n"]) -> "DenseMass":
        return cls(matrix, la.cholesky(matrix))

    def solve(self, x):
        return la.spd_solve(self.matrix, self.cholesky, x)

    def gram(self, A_pattern, C_pattern):
        return DenseGram()


class DiagonalMass(AbstractMass):
    """A structurally diagonal $M$: solved by a division."""

    matrix: Float[Array, "n n"]
    cholesky: Float[Array, "n n"]

    @classmethod
    def factor(cls, matrix: Float[Array, "n n"]) -> "DiagonalMass":
        return cls(matrix, jnp.diag(jnp.sqrt(jnp.diagonal(matrix))))

    @property
    def diagonal(self) -> Float[Array, " n"]:
        return jnp.diagonal(self.matrix)

    def solve(self, x):
        return x / self.diagonal.reshape((-1,) + (1,) * (x.ndim - 1))

    def gram(self, A_pattern, C_pattern):
        """`SparseGram` when the index triples $(i, j, l)$ with $A_{il} C_{jl}$ not structurally
        zero are fewer than a dense product's terms / 4, else `DenseGram`."""
        k, n = A_pattern.shape
        i, j, l = np.nonzero(A_pattern[:, None, :] & C_pattern[None, :, :])
        if 4 * i.size > k * k * n:
            return DenseGram()
        return SparseGram((tuple(i.tolist()), tuple(j.tolist()), tuple(l.tolist())))


def mass_operator(matrix: Float[Array, "n n"], pattern: np.ndarray) -> AbstractMass:
    """`DiagonalMass` when the structural nonzero `pattern` of $M$ is diagonal, else `DenseMass`."""
    if np.any(pattern & ~np.eye(pattern.shape[0], dtype=bool)):
        return DenseMass.factor(matrix)
    return DiagonalMass.factor(matrix)


# -- rows of A and C ----------------------------------------------------------------------------


class AbstractRows(eqx.Module):
    """A $k \\times n$ matrix (rows of $A$ or of $C$) with its products $X u$ and $X^\\top z$."""

    matrix: eqx.AbstractVar[Float[Array, "k n"]]

    @abc.abstractmethod
    def mv(self, u: Float[Array, "n ..."]) -> Float[Array, "k ..."]:
        """`matrix @ u`."""

    @abc.abstractmethod
    def rmv(self, z: Float[Array, "k ..."]) -> Float[Array, "n ..."]:
        """`matrix.T @ z`."""


class DenseRows(AbstractRows):
    matrix: Float[Array, "k n"]

    def mv(self, u):
        return self.matrix @ u

    def rmv(self, z):
        return self.matrix.T @ z


class EllRows(AbstractRows):
    """Sparse rows: `mv` from the nonzero entries of each row (`index`, `mask` of `_ell`)."""

    matrix: Float[Array, "k n"]
    index: tuple = eqx.field(static=True)
    mask: tuple = eqx.field(static=True)

    def mv(self, u):
        return _ell_times(self.matrix, self.index, self.mask, u)

    def rmv(self, z):
        return self.matrix.T @ z


class EllColumns(AbstractRows):
    """Sparse columns: `rmv` from the nonzero entries of each column (`index`, `mask` of `_ell`)."""

    matrix: Float[Array, "k n"]
    index: tuple = eqx.field(static=True)
    mask: tuple = eqx.field(static=True)

    def mv(self, u):
        return self.matrix @ u

    def rmv(self, z):
        return _ell_times(self.matrix.T, self.index, self.mask, z)


def rows_operator(matrix: Float[Array, "k n"], pattern: np.ndarray) -> AbstractRows:
    """`EllRows` when the rows of the structural nonzero `pattern` are sparse, else `DenseRows`."""
    ell = _ell(pattern)
    return DenseRows(matrix) if ell is None else EllRows(matrix, *ell)


def columns_operator(matrix: Float[Array, "k n"], pattern: np.ndarray) -> AbstractRows:
    """`EllColumns` when the columns of the structural nonzero `pattern` are sparse, else
    `DenseRows`."""
    ell = _ell(pattern.T)
    return DenseRows(matrix) if ell is None else EllColumns(matrix, *ell)


def _ell(pattern: np.ndarray) -> tuple | None:
    """For each row of a structural nonzero `pattern`, the columns of its nonzeros, padded to the
    longest row (`(indices, mask)`, nested tuples), or None when a row is more than half full
    (then a dense product is as cheap)."""
    counts = pattern.sum(axis=1)
    width = int(counts.max(initial=0))
    if 2 * width > pattern.shape[1]:
        return None
    idx = np.zeros((pattern.shape[0], width), np.intp)
    for i, row in enumerate(pattern):
        cols = np.flatnonzero(row)
        idx[i, : cols.size] = cols
    mask = np.arange(width)[None, :] < counts[:, None]
    return tuple(map(tuple, idx.tolist())), tuple(map(tuple, mask.tolist()))


def _ell_times(X: Array, index: tuple, mask: tuple, u: Array) -> Array:
    """`X @ u` for `u` (n, ...) from the nonzeros of each row of `X` (`index`, `mask` of `_ell`):
    $\\sum_p$ `X[i, idx[i, p]] u[idx[i, p]]`."""
    idx, mask = np.asarray(index), np.asarray(mask)
    values = jnp.where(mask, X[np.arange(X.shape[0])[:, None], idx], 0.0)
    values = values.reshape(values.shape + (1,) * (u.ndim - 1))
    return jnp.sum(values * u[idx], axis=1)


# -- the Gram matrix A M⁻¹ Cᵀ -------------------------------------------------------------------


class AbstractGram(eqx.Module):
    """How $S = A M^{-1} C^\\top$ is formed."""

    @abc.abstractmethod
    def __call__(self, mass: AbstractMass, A: AbstractRows, C: AbstractRows) -> Float[Array, "k k"]:
        """$A M^{-1} C^\\top$."""


class DenseGram(AbstractGram):
    def __call__(self, mass, A, C):
        return A.matrix @ mass.solve(C.matrix.T)


class SparseGram(AbstractGram):
    """For a diagonal $M$: only the structurally nonzero terms $(i, j, l)$ of
    $(A M^{-1} C^\\top)_{ij} = \\sum_l A_{il} C_{jl} / M_{ll}$ are formed."""

    entries: tuple = eqx.field(static=True)

    def __call__(self, mass: DiagonalMass, A, C):
        i, j, l = (np.asarray(x, dtype=np.intp) for x in self.entries)  # () when none
        terms = A.matrix[i, l] * C.matrix[j, l] / mass.diagonal[l]
        k = A.matrix.shape[0]
        return jnp.zeros((k, k), mass.matrix.dtype).at[i, j].add(terms)


# -- the M-weighted Schur-complement solve ------------------------------------------------------


def weighted_solve(
    mass: AbstractMass,
    A: AbstractRows,
    C: AbstractRows,
    y: Float[Array, "k ..."],
    *,
    gram: AbstractGram = DenseGram(),
    symmetric: bool = True,
) -> tuple[Float[Array, "k ..."], Float[Array, "n ..."]]:
    """$\\lambda = S^{-1} y$ with $S = A M^{-1} C^\\top$, and the correction $M^{-1} C^\\top \\lambda$.

    The saddle system $M x - C^\\top\\lambda = 0$, $A x = y$ by its Schur complement
    (Lemma 1, (3.20)): $x = M^{-1}C^\\top(AM^{-1}C^\\top)^{-1} y$, the $M$-least-norm solution of
    $A x = y$ when $C = A$. `symmetric`: $S$ is symmetric positive definite ($C = A$, or
    $\\mathcal{W} = \\mathcal{D}$), solved by Cholesky; otherwise by LU (invertible by (3.19)).
    """
    S = gram(mass, A, C)
    lam = la.spd_solve(S, la.cholesky(S), y) if symmetric else jnp.linalg.solve(S, y)
    return lam, mass.solve(C.rmv(lam))
