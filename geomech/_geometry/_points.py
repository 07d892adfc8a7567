"""Points by their structure, for the objects that hold a point without a manifold (`gm.State`, a
user function's arguments, a group action's generators): an array of coordinates, a `jaxlie`
element, or a tuple of points (a product with a group factor)."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
import jaxlie
from jaxtyping import Array, Float, PyTree


def _structured(q: PyTree) -> bool:
    return isinstance(q, jaxlie.MatrixLieGroup | tuple)


def as_point(q: PyTree, convert: Callable) -> PyTree:
    """`q` with `convert` applied to its arrays: to the array itself, or leaf by leaf to a group
    element or a tuple of points."""
    return jax.tree_util.tree_map(convert, q) if _structured(q) else convert(q)


def point_shape(q: PyTree) -> tuple[tuple[int, ...], int]:
    """The batch axes and the tangent dimension of a point."""
    if isinstance(q, jaxlie.MatrixLieGroup):
        return q.get_batch_axes(), q.tangent_dim
    if isinstance(q, tuple) and q:
        shapes = [point_shape(x) for x in q]
        return shapes[0][0], sum(n for _, n in shapes)
    if isinstance(q, tuple):
        raise ValueError("a point of a product is a non-empty tuple of the factors' points.")
    shape = jnp.shape(q)
    return shape[:-1], (shape[-1] if shape else 0)


def point_difference(q: PyTree, p: PyTree) -> Float[Array, " n"]:
    """$p \\ominus q$ by the structure of the points: $\\log(q^{-1}p)$ on a group, $p - q$ on
    coordinates, concatenated for a tuple (`AbstractManifold.ominus` without the manifold)."""
    if isinstance(q, tuple):
        return jnp.concatenate([point_difference(a, b) for a, b in zip(q, p, strict=True)])
    if isinstance(q, jaxlie.MatrixLieGroup):
        return (q.inverse() @ p).log()
    return jnp.asarray(p) - jnp.asarray(q)  # jaxlie.manifold.rminus gives q - p on arrays


def point_parameters(q: PyTree) -> Float[Array, "... p"]:
    """The stored parameters of a point as one array, the parameters last: coordinates as they
    are, a group element's parameters (`wxyz` of an SO(3), `wxyz_xyz` of an SE(3)), a tuple's
    factors concatenated in order (`AbstractManifold.parameters` without the manifold)."""
    if isinstance(q, tuple):
        return jnp.concatenate([point_parameters(p) for p in q], axis=-1)
    return q.parameters() if isinstance(q, jaxlie.MatrixLieGroup) else jnp.asarray(q)


def attitude(q: PyTree) -> Float[Array, "... 3 3"]:
    """The rotation matrices of the body frames of points on SO(3), SE(3), or a product whose
    first factor is one of them (a rigid body's attitude); `ValueError` for other points."""
    first = q[0] if isinstance(q, tuple) else q
    rotation = first.rotation() if isinstance(first, jaxlie.SE3) else first
    if not isinstance(rotation, jaxlie.SO3):
        raise ValueError(
            "this needs configurations on gm.SO3(), gm.SE3() or a gm.Product whose first factor "
            f"is one of them; got {type(first).__name__}."
        )
    return rotation.as_matrix()


def angular_velocity_indices(q: PyTree) -> tuple[int, int, int]:
    """Where the body angular velocity sits in the flat velocity of a point of `attitude`'s
    spaces: after the linear part on SE(3) (jaxlie's order), first otherwise."""
    first = q[0] if isinstance(q, tuple) else q
    return (3, 4, 5) if isinstance(first, jaxlie.SE3) else (0, 1, 2)
