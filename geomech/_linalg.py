"""Small dense linear-algebra stages shared by the constraint machinery and the solvers."""

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float


def null_space(A: Float[Array, "k n"]) -> Float[Array, "n n-k"]:
    """An orthonormal basis of $\\ker A$ for a full-row-rank $A$, differentiable in $A$.

    The last $n - k$ columns of the complete QR factor of $A^\\top$ (Householder, smooth in $A$).
    """
    k, n = A.shape
    Qf, _ = jnp.linalg.qr(A.T, mode="complete")
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
