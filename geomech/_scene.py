"""What `geomech.plot.animate` draws (docs/seeing_it.md): a body's mesh, where the body is for a
configuration $q$, and the points whose paths are traced.

A `Scene` knows nothing of the models: a model gives its own (`model.scene()`), built by the
constructors below from the objects that carry the geometry (`gm.RollingBody`: the surface, the
position of the reference point, the contact point; `gm.RigidBody`: the mass and inertia), or a
user writes one with a `pose(q)` function.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np

from ._mesh import Mesh, Vector


def _attitude(R: jaxlie.SO3) -> jax.Array:
    """The unit quaternion $(w, x, y, z)$ of a rotation (jaxlie's parameters)."""
    return R.wxyz


def _optional_point(owner: str, name: str, x) -> np.ndarray | None:
    if x is None:
        return None
    x = np.asarray(x, dtype=float)
    if x.shape != (3,) or not np.all(np.isfinite(x)):
        raise ValueError(f"{owner}: `{name}` must be 3 finite numbers or None, got {x!r}.")
    return x


def _extreme_point(mesh: Mesh) -> np.ndarray:
    """The vertex of `mesh` farthest along the body's $e_1$ axis (the default traced point)."""
    return mesh.vertices[int(np.argmax(mesh.vertices[:, 0]))]


class Scene(eqx.Module):
    """What `geomech.plot.animate` draws for each saved configuration $q$.

    **Fields:**

    - `mesh`: the body's `Mesh` in its body frame.
    - `pose`: `q -> (R, X)`, the body's attitude (a `jaxlie.SO3`) and the position $X$ `(3,)`
        of its body frame's origin in space ($z$ up), for one configuration `q` (a JAX function).
    - `contact`: `q -> (3,)`, a point in space whose path is traced (the contact point of a
        rolling body, the knife edge of a sleigh), or `None`.
    - `point`: a point `(3,)` of the body (body frame) whose path $X + R\\,p$ is traced, or `None`.
    - `plane`: the height of the horizontal plane drawn as the floor, or `None` for none.
    - `pivot`: a fixed point `(3,)` in space drawn as a dot (a top's pivot), or `None`.
    - `contact_label`, `point_label`: what the legend calls the two traced paths.

    Constructors for the library's bodies: `Scene.rolling` (a `gm.RollingBody`),
    `Scene.pivoted` (a `gm.RigidBody` on SO(3), turning about its frame's origin) and
    `Scene.free` (a `gm.RigidBody` on SO(3) × ℝ³).
    """

    mesh: Mesh
    pose: Callable
    contact: Callable | None = None
    point: Vector | None = eqx.field(
        default=None, converter=lambda x: _optional_point("Scene", "point", x)
    )
    plane: float | None = eqx.field(
        default=0.0, converter=lambda x: None if x is None else float(x)
    )
    pivot: Vector | None = eqx.field(
        default=None, converter=lambda x: _optional_point("Scene", "pivot", x)
    )
    contact_label: str = "path of the contact point"
    point_label: str = "path of a body point"

    def __check_init__(self):
        if not isinstance(self.mesh, Mesh):
            raise TypeError(
                f"Scene: `mesh` must be a gm.plot.Mesh, got {type(self.mesh).__name__}."
            )
        if not callable(self.pose):
            raise TypeError("Scene: `pose` must be a function q -> (jaxlie.SO3, position (3,)).")
        if self.contact is not None and not callable(self.contact):
            raise TypeError("Scene: `contact` must be a function q -> (3,) or None.")
        if self.plane is not None and not np.isfinite(self.plane):
            raise ValueError(f"Scene: `plane` must be a finite height or None, got {self.plane}.")

    @classmethod
    def rolling(cls, body, *, mesh: Mesh | None = None, point: Vector | None = None) -> "Scene":
        """A `gm.RollingBody` on the plane $z = 0$, $q = (R, x)$: the mesh of its surface
        (`body.surface.mesh()`, or `mesh`), its frame's origin at `body.position(q)`, the
        contact point `body.contact(q)` traced, and `point` (by default the surface's point
        along the body's $e_1$ axis)."""
        mesh = body.surface.mesh() if mesh is None else mesh
        point = _extreme_point(mesh) if point is None else point
        return cls(
            mesh,
            lambda q: (q[0], body.position(q)),
            contact=body.contact,
            point=_optional_point("Scene.rolling", "point", point),
            plane=0.0,
        )

    @classmethod
    def pivoted(
        cls,
        body,
        *,
        mesh: Mesh | None = None,
        point: Vector | None = None,
        plane: float | None = None,
    ) -> "Scene":
        """A `gm.RigidBody` on SO(3) turning about its frame's origin, fixed at the spatial
        origin ($q = R$): by default drawn as its equimomental ellipsoid (`Mesh.equimomental`),
        with the path of `point` (by default the mesh's point farthest along $e_1$), no floor."""
        mesh = Mesh.equimomental(body) if mesh is None else mesh
        point = _extreme_point(mesh) if point is None else point
        return cls(
            mesh,
            lambda R: (R, jnp.zeros(3, R.wxyz.dtype)),
            point=_optional_point("Scene.pivoted", "point", point),
            plane=plane,
            pivot=np.zeros(3),
        )

    @classmethod
    def free(
        cls,
        body,
        *,
        mesh: Mesh | None = None,
        point: Vector | None = None,
        plane: float | None = None,
        pivot: Vector | None = None,
    ) -> "Scene":
        """A `gm.RigidBody` on SO(3) × ℝ³, $q = (R, x)$ with $x$ its frame's origin in space;
        defaults as for `pivoted`."""
        mesh = Mesh.equimomental(body) if mesh is None else mesh
        point = _extreme_point(mesh) if point is None else point
        return cls(
            mesh,
            lambda q: (q[0], q[1]),
            point=_optional_point("Scene.free", "point", point),
            plane=plane,
            pivot=_optional_point("Scene.free", "pivot", pivot),
        )

    def frames(self, q, batch_shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """The drawn quantities for saved configurations `q` with leading axes `batch_shape`:
        `wxyz` (..., 4), `position` (..., 3) and, where the scene traces them, `contact` and
        `point` (..., 3) in space, as float64 NumPy arrays (non-finite where `q` is)."""
        n = int(np.prod(batch_shape))
        flat = jax.tree.map(lambda x: jnp.reshape(x, (n, *jnp.shape(x)[len(batch_shape) :])), q)
        point = None if self.point is None else jnp.asarray(self.point)

        def one(q):
            R, X = self.pose(q)
            X = jnp.asarray(X)
            out = {"wxyz": _attitude(R), "position": X}
            if self.contact is not None:
                out["contact"] = jnp.asarray(self.contact(q))
            if point is not None:
                out["point"] = X + R.apply(point.astype(X.dtype))
            return out

        out = eqx.filter_jit(jax.vmap(one))(flat)
        return {k: np.asarray(v, dtype=float).reshape(*batch_shape, -1) for k, v in out.items()}
