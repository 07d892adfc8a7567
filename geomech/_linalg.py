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


def relative_min_singular_value(S: Float[Array, "k m"]) -> Float[Array, ""]:
    """$\\sigma_{\\min}(S) / \\sigma_{\\max}(S)$, without gradient (used only by checks)."""
    s = jnp.linalg.svd(jax.lax.stop_gradient(S), compute_uv=False)
    return jnp.where(s[0] > 0, s[-1] / jnp.where(s[0] > 0, s[0], 1.0), 0.0)
