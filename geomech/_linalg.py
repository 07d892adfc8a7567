"""Small dense linear-algebra stages shared by the constraint machinery and the solvers."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def null_space(A: Float[Array, "k n"]) -> Float[Array, "n n-k"]:
    """An orthonormal basis of $\\ker A$ for a full-row-rank $A$, differentiable in $A$.

    The last $n - k$ columns of the complete QR factor of $A^\\top$ (Householder, smooth in $A$).
    """
    k, n = A.shape
    Qf, _ = qr(A.T, complete=True)
    return Qf[:, k:]


def rank_tolerance(dtype, n: int):
    """Relative singular-value tolerance below which a matrix counts as rank deficient."""
    return 100.0 * max(n, 1) * jnp.finfo(dtype).eps


def unit_rows(X: Float[Array, "k m"]) -> Float[Array, "k m"]:
    """`X` with each row scaled to unit Euclidean length (zero rows stay zero)."""
    norms = jnp.linalg.norm(X, axis=-1, keepdims=True)
    return X / jnp.where(norms > 0, norms, 1.0)


def min_singular_value(S: Float[Array, "k m"]) -> Float[Array, ""]:
    """$\\sigma_{\\min}(S)$, without gradient (used only by checks)."""
    return jnp.linalg.svd(jax.lax.stop_gradient(S), compute_uv=False)[-1]


# Dense kernels for small matrices, written in plain jnp ops and unrolled. Under `vmap` they become
# elementwise work over the batch, whereas XLA on CPU runs a batch of LAPACK calls (cholesky,
# triangular_solve, geqrf) one matrix at a time; for n <= _SMALL they are faster (`qr`: Kane's
# and Gibbs–Appell's rattleback steps 1.6x faster, docs/performance.md; an LU solve replaced by
# `qr` was not, so `jnp.linalg.solve` stays). Larger matrices use LAPACK.
_SMALL = 8


def cholesky(M: Float[Array, "n n"]) -> Float[Array, "n n"]:
    """Lower Cholesky factor $L$ with $M = L L^\\top$; NaN (or a zero pivot) if $M$ is not SPD."""
    n = M.shape[0]
    if n > _SMALL:
        return jnp.linalg.cholesky(M)
    M = 0.5 * (M + M.T)  # read both triangles, so derivatives match those of a general solve
    i = jnp.arange(n)
    L = jnp.zeros_like(M)
    for j in range(n):  # column algorithm; L[:, j:] is still zero
        c = M[:, j] - L @ L[j, :]
        d = jnp.sqrt(c[j])
        L = L.at[:, j].set(jnp.where(i > j, c / d, jnp.where(i == j, d, 0.0)))
    return L


def solve_lower(L: Float[Array, "n n"], B: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
    """$L^{-1} B$ for lower-triangular $L$ (forward substitution)."""
    n = L.shape[0]
    if n > _SMALL:
        return jax.scipy.linalg.solve_triangular(L, B, lower=True)
    X = jnp.zeros_like(B)
    for i in range(n):  # X[i:] is still zero
        X = X.at[i].set((B[i] - L[i, :] @ X) / L[i, i])
    return X


def solve_upper_transposed(L: Float[Array, "n n"], B: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
    """$L^{-\\top} B$ for lower-triangular $L$ (back substitution)."""
    n = L.shape[0]
    if n > _SMALL:
        return jax.scipy.linalg.solve_triangular(L, B, lower=True, trans="T")
    X = jnp.zeros_like(B)
    for i in reversed(range(n)):  # X[:i+1] is still zero
        X = X.at[i].set((B[i] - L[:, i] @ X) / L[i, i])
    return X


def qr(
    X: Float[Array, "m n"], complete: bool = False
) -> tuple[Float[Array, "m _"], Float[Array, "_ n"]]:
    """$X = QR$ by Householder reflections, as LAPACK's `geqrf`/`orgqr` (the reflector of a
    column with nothing below its diagonal is the identity, else $\\beta = -\\mathrm{sign}(\\alpha)
    \\|x\\|$ [GolubVanLoan2013, §5.1–5.2]), so the same factors to round-off; `complete`: $Q$ is
    $m \\times m$ and $R$ is $m \\times n$, else $m \\times \\min(m, n)$ and $\\min(m, n) \\times n$."""
    m, n = X.shape
    if max(m, n) > _SMALL:
        return jnp.linalg.qr(X, mode="complete" if complete else "reduced")
    rows, cols = jnp.arange(m), jnp.arange(n)

    def reflect(j, RQ):  # on full-size arrays with zeros above row j: one loop body to compile
        R, Q = RQ
        column = R[:, j]
        alpha, below = column[j], jnp.where(rows > j, column, 0.0)
        s = below @ below
        nonzero = s > 0  # else H = I (LAPACK's tau = 0)
        norm = jnp.sqrt(alpha * alpha + jnp.where(nonzero, s, 1.0))
        beta = -jnp.where(alpha >= 0, norm, -norm)
        # H = I - tau w wᵀ with w = (1, below / (alpha - beta)) from row j, tau = (beta - alpha) / beta
        w = jnp.where(rows == j, 1.0, below / jnp.where(nonzero, alpha - beta, 1.0))
        tau = jnp.where(nonzero, (beta - alpha) / jnp.where(nonzero, beta, 1.0), 0.0)
        R = R - tau * jnp.outer(w, w @ R)
        R = jnp.where((rows[:, None] > j) & (cols[None, :] == j), 0.0, R)  # exactly, below the diagonal
        return R, Q - tau * jnp.outer(Q @ w, w)

    R, Q = jax.lax.fori_loop(0, min(m - 1, n), reflect, (X, jnp.eye(m, dtype=X.dtype)))
    if complete or m <= n:
        return Q, R
    return Q[:, :n], R[:n, :]


def solve_upper(R: Float[Array, "n n"], B: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
    """$R^{-1} B$ for upper-triangular $R$ (back substitution)."""
    return solve_upper_transposed(R.T, B)


def cho_solve(L: Float[Array, "n n"], B: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
    """$M^{-1} B$ from the Cholesky factor $L$ of $M$."""
    return solve_upper_transposed(L, solve_lower(L, B))


@jax.custom_jvp
def spd_solve(M: Float[Array, "n n"], L: Float[Array, "n n"], B: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
    """$M^{-1} B$ for symmetric positive definite $M$ with Cholesky factor $L$ (`cholesky(M)`).

    Differentiated implicitly, $d(M^{-1}B) = M^{-1}(dB - dM\\, M^{-1}B)$ with the same factor,
    instead of through the factorization: its derivatives (forward and reverse) cost two
    triangular solves, and `L`'s own derivative is never formed.
    """
    return cho_solve(L, B)


@spd_solve.defjvp
def _spd_solve_jvp(primals, tangents):
    M, L, B = primals
    dM, _, dB = tangents
    X = cho_solve(L, B)
    dM = 0.5 * (dM + dM.T)  # the factor reads M symmetrized (`cholesky`)
    return X, cho_solve(L, dB - dM @ X)
