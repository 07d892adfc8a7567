"""Triangle meshes of bodies, in the body frame, for `geomech.plot.animate` (docs/seeing_it.md).

A `Mesh` is vertices, triangles (counter-clockwise seen from outside, so the volume of a closed
mesh is positive) and a two-tone `pattern` per triangle (octants of an ellipsoid, sectors of a
disk) that makes a turning body of revolution visibly turn. Plain NumPy: the meshes are drawn,
not differentiated.
"""

from collections.abc import Sequence

import equinox as eqx
import numpy as np
from jaxtyping import ArrayLike

Vector = ArrayLike | Sequence[float]  # a point or direction: an array, or a tuple of floats


def _vector(owner: str, name: str, x, size: int = 3) -> np.ndarray:
    x = np.asarray(x, dtype=float)
    if x.shape != (size,) or not np.all(np.isfinite(x)):
        raise ValueError(f"{owner}: `{name}` must be {size} finite numbers, got {x!r}.")
    return x


def _positive(owner: str, name: str, x) -> float:
    x = np.asarray(x, dtype=float)
    if x.shape != () or not (np.isfinite(x) and x > 0):
        raise ValueError(f"{owner}: `{name}` must be a finite positive number, got {x!r}.")
    return float(x)


def _frame(axis) -> np.ndarray:
    """An orthonormal basis `(3, 3)` whose third column is the unit vector `axis` (0, 1, 2 or a
    3-vector): the frame in which meshes of revolution are built about $e_3$."""
    n = np.eye(3)[axis] if isinstance(axis, int) else np.asarray(axis, float)
    n = n / np.linalg.norm(n)
    helper = np.eye(3)[int(np.argmin(np.abs(n)))]
    u = np.cross(helper, n)
    u /= np.linalg.norm(u)
    return np.stack([u, np.cross(n, u), n], axis=1)


def _check_axis(owner: str, axis):
    if isinstance(axis, int | np.integer):
        if axis not in (0, 1, 2):
            raise ValueError(f"{owner}: `axis` must be 0, 1, 2 or a 3-vector, got {axis}.")
        return int(axis)
    n = _vector(owner, "axis", axis)
    if not np.linalg.norm(n) > 0:
        raise ValueError(f"{owner}: `axis` must be a non-zero vector, got {n}.")
    return n


def _unit_sphere(rings: int, segments: int):
    """Vertices on the unit sphere (poles and `rings - 1` circles of latitude, `segments`
    longitudes), outward triangles, and the octant pattern of each triangle (`segments` a
    multiple of 4 and `rings` even, so no triangle straddles a coordinate plane)."""
    theta = np.linspace(0.0, np.pi, rings + 1)[1:-1]
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    st, ct = np.sin(theta)[:, None], np.cos(theta)[:, None]
    ring = np.stack(
        [st * np.cos(phi), st * np.sin(phi), np.broadcast_to(ct, (rings - 1, segments))], -1
    ).reshape(-1, 3)
    vertices = np.concatenate([[[0.0, 0.0, 1.0]], ring, [[0.0, 0.0, -1.0]]])
    top, bottom = 0, len(vertices) - 1
    idx = lambda i, j: 1 + i * segments + j % segments  # ring i, longitude j
    faces = [(top, idx(0, j), idx(0, j + 1)) for j in range(segments)]
    for i in range(rings - 2):
        for j in range(segments):
            a, b, c, d = idx(i, j), idx(i, j + 1), idx(i + 1, j), idx(i + 1, j + 1)
            faces += [(a, c, d), (a, d, b)]
    faces += [(bottom, idx(rings - 2, j + 1), idx(rings - 2, j)) for j in range(segments)]
    faces = np.asarray(faces)
    centre = vertices[faces].mean(axis=1)
    pattern = (np.prod(np.sign(centre), axis=1) > 0).astype(np.int8)
    return vertices, faces, pattern


def _revolution(profile: np.ndarray, segments: int, frame: np.ndarray, creases=()):
    """The surface swept by the polyline `profile` `(P, 2)` of `(r, z)` points turned about $e_3$
    of `frame`, from bottom to top (the first and last points on the axis close it). A vertex
    index in `creases` is doubled so that the normals break there (an edge of a cylinder). The
    pattern alternates over 8 sectors."""
    phi = np.linspace(0.0, 2 * np.pi, segments, endpoint=False)
    rows, keep = [], []
    for k, (r, z) in enumerate(profile):
        copies = 2 if k in creases else 1
        for _ in range(copies):
            rows.append(np.stack([r * np.cos(phi), r * np.sin(phi), np.full(segments, z)], -1))
            keep.append(k)
    vertices = np.concatenate(rows)
    faces, pattern = [], []
    sector = (np.arange(segments) * 8 // segments) % 2
    for i in range(len(rows) - 1):
        if keep[i] == keep[i + 1]:
            continue  # the two copies of a crease
        for j in range(segments):
            a, b = i * segments + j, i * segments + (j + 1) % segments
            c, d = a + segments, b + segments
            faces += [(a, b, d), (a, d, c)]
            pattern += [sector[j], sector[j]]
    faces, pattern = np.asarray(faces), np.asarray(pattern, np.int8)
    p = vertices[faces]
    area = np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)
    keep = area > 1e-12 * np.max(area)  # the triangles with two corners on the axis
    return vertices @ frame.T, faces[keep], pattern[keep]


class Mesh(eqx.Module):
    """A triangle mesh in the body frame: `vertices` `(V, 3)`, `faces` `(F, 3)` vertex indices
    counter-clockwise seen from outside, and `pattern` `(F,)` of 0 and 1, the two tones the faces
    are drawn in (all 0: one colour). Build one from your own data, e.g. read from an OBJ or STL
    file, or with the constructors `ellipsoid`, `sphere`, `disk`, `box`, `cone`, `equimomental`,
    and combine them with `merge`."""

    vertices: np.ndarray
    faces: np.ndarray
    pattern: np.ndarray

    def __init__(
        self,
        vertices: ArrayLike | Sequence,
        faces: ArrayLike | Sequence,
        pattern: Vector | None = None,
    ):
        vertices = np.asarray(vertices, dtype=float)
        faces = np.asarray(faces)
        if vertices.ndim != 2 or vertices.shape[1] != 3 or len(vertices) < 3:
            raise ValueError(f"Mesh: `vertices` must have shape (V, 3), got {vertices.shape}.")
        if not np.all(np.isfinite(vertices)):
            raise ValueError("Mesh: `vertices` must be finite.")
        if faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
            raise ValueError(f"Mesh: `faces` must have shape (F, 3), got {faces.shape}.")
        if not np.issubdtype(faces.dtype, np.integer):
            raise ValueError(f"Mesh: `faces` must be integer vertex indices, got {faces.dtype}.")
        if faces.min() < 0 or faces.max() >= len(vertices):
            raise ValueError(
                f"Mesh: `faces` index vertices 0 ... {len(vertices) - 1}, got indices "
                f"{faces.min()} ... {faces.max()}."
            )
        if pattern is None:
            pattern = np.zeros(len(faces), np.int8)
        pattern = np.asarray(pattern)
        if pattern.shape != (len(faces),) or not np.all((pattern == 0) | (pattern == 1)):
            raise ValueError(f"Mesh: `pattern` must be {len(faces)} values 0 or 1 (one per face).")
        self.vertices, self.faces = vertices, faces.astype(np.int64)
        self.pattern = pattern.astype(np.int8)

    @classmethod
    def ellipsoid(
        cls,
        semi_axes: Vector,
        centre: Vector = (0.0, 0.0, 0.0),
        axes: ArrayLike | Sequence | None = None,
        *,
        rings: int = 24,
        segments: int = 48,
    ) -> "Mesh":
        """The ellipsoid $\\sum_i (p_i/a_i)^2 = 1$ with `semi_axes` $a$ along the columns of the
        rotation `axes` (the body axes by default), around `centre`; octants in two tones."""
        a = _vector("Mesh.ellipsoid", "semi_axes", semi_axes)
        if not np.all(a >= 0) or not np.max(a) > 0:
            raise ValueError(f"Mesh.ellipsoid: `semi_axes` must be >= 0, not all 0, got {a}.")
        c = _vector("Mesh.ellipsoid", "centre", centre)
        Q = np.eye(3) if axes is None else np.asarray(axes, float)
        if Q.shape != (3, 3) or not np.allclose(Q.T @ Q, np.eye(3), atol=1e-9):
            raise ValueError("Mesh.ellipsoid: `axes` must be a rotation matrix (3, 3).")
        if rings % 2 or segments % 4 or rings < 4:
            raise ValueError(
                "Mesh.ellipsoid: `rings` must be even (>= 4), `segments` a multiple of 4."
            )
        u, faces, pattern = _unit_sphere(rings, segments)
        return cls(c + (u * a) @ Q.T, faces, pattern)

    @classmethod
    def sphere(cls, radius: ArrayLike, centre: Vector = (0.0, 0.0, 0.0), **kwargs) -> "Mesh":
        """A sphere of `radius` around `centre`, its octants in two tones (so its spin shows)."""
        r = _positive("Mesh.sphere", "radius", radius)
        return cls.ellipsoid((r, r, r), centre, **kwargs)

    @classmethod
    def disk(
        cls,
        radius: ArrayLike,
        axis: int | Vector = 2,
        thickness: ArrayLike | None = None,
        *,
        segments: int = 64,
    ) -> "Mesh":
        """A thin disk (a flat cylinder, `thickness` $0.04 r$ by default) of `radius` centred at
        the origin, normal to the body axis `axis` (0, 1, 2 or a 3-vector), in 8 sectors."""
        r = _positive("Mesh.disk", "radius", radius)
        h = 0.5 * (
            0.04 * r if thickness is None else _positive("Mesh.disk", "thickness", thickness)
        )
        axis = _check_axis("Mesh.disk", axis)
        profile = np.array([[0.0, -h], [r, -h], [r, h], [0.0, h]])
        return cls(*_revolution(profile, segments, _frame(axis), creases=(1, 2)))

    @classmethod
    def cone(
        cls,
        radius: ArrayLike,
        height: ArrayLike,
        axis: int | Vector = 2,
        *,
        segments: int = 64,
    ) -> "Mesh":
        """A solid cone with its apex at the origin and its base, of `radius`, at `height` along
        the body axis `axis` (a spinning top on its tip), in 8 sectors. Its centroid is at
        $\\tfrac34$ `height` on the axis."""
        r = _positive("Mesh.cone", "radius", radius)
        h = _positive("Mesh.cone", "height", height)
        axis = _check_axis("Mesh.cone", axis)
        profile = np.array([[0.0, 0.0], [r, h], [0.0, h]])
        return cls(*_revolution(profile, segments, _frame(axis), creases=(1,)))

    @classmethod
    def convex(cls, boundary_points, *, rings: int = 24, segments: int = 48) -> "Mesh":
        """A strictly convex body from `boundary_points(u)`: for unit vectors `u` `(N, 3)` its
        boundary points `(N, 3)` with outward normals `u` (the gradient $\\nabla h(u)$ of its
        support function [BorisovMamaev2002]; e.g. `jax.vmap(jax.grad(h))`), evaluated on the
        directions of a sphere mesh."""
        u, faces, pattern = _unit_sphere(rings, segments)
        points = np.asarray(boundary_points(u), dtype=float)
        if points.shape != u.shape:
            raise ValueError(
                f"Mesh.convex: `boundary_points` must map (N, 3) to (N, 3), got {points.shape}."
            )
        return cls(points, faces, pattern)

    @classmethod
    def box(cls, half_extents: Vector, centre: Vector = (0.0, 0.0, 0.0)) -> "Mesh":
        """A box $|p_i - c_i| \\le e_i$ with `half_extents` $e$ around `centre` $c$, the faces
        normal to each axis in alternating tones."""
        e = _vector("Mesh.box", "half_extents", half_extents)
        if not np.all(e > 0):
            raise ValueError(f"Mesh.box: `half_extents` must be positive, got {e}.")
        c = _vector("Mesh.box", "centre", centre)
        vertices, faces, pattern = [], [], []
        for axis in range(3):
            for sign in (-1.0, 1.0):
                n = sign * np.eye(3)[axis]
                u = np.eye(3)[(axis + 1) % 3]
                w = np.cross(n, u)  # (u, w, n) right-handed: counter-clockwise seen from outside
                corners = [n + s * u + t * w for s, t in ((-1, -1), (1, -1), (1, 1), (-1, 1))]
                k = len(vertices)
                vertices += [c + e * p for p in corners]
                faces += [(k, k + 1, k + 2), (k, k + 2, k + 3)]
                pattern += [axis % 2] * 2
        return cls(np.asarray(vertices), np.asarray(faces), np.asarray(pattern))

    @classmethod
    def equimomental(cls, body, **kwargs) -> "Mesh":
        """The uniform solid ellipsoid with the mass, centre of mass and inertia of `body` (a
        `gm.RigidBody`): semi-axes $a_i = \\sqrt{5(J_j + J_k - J_i)/(2m)}$ along the principal
        axes, $J$ the principal moments about the centre of mass (from
        $J_i = \\tfrac{m}{5}(a_j^2 + a_k^2)$ [LandauLifshitz1976, §32]). A body whose moments obey
        $J_1 + J_2 = J_3$ is a lamina: its ellipsoid is flat (drawn $10^{-2}$ of its size thick)."""
        m = float(np.asarray(body.mass))
        J, Q = np.linalg.eigh(np.asarray(body.inertia, float))
        a2 = 2.5 / m * (J.sum() - 2 * J)
        a = np.sqrt(np.maximum(a2, 0.0))
        a = np.maximum(a, 1e-2 * a.max())
        if np.linalg.det(Q) < 0:
            Q = Q * np.array([1.0, 1.0, -1.0])
        return cls.ellipsoid(a, np.asarray(body.centre_of_mass, float), Q, **kwargs)

    @staticmethod
    def merge(*meshes: "Mesh") -> "Mesh":
        """One mesh of several (e.g. a rod and two balls)."""
        if not meshes:
            raise ValueError("Mesh.merge: give at least one mesh.")
        offsets = np.cumsum([0] + [len(m.vertices) for m in meshes[:-1]])
        return Mesh(
            np.concatenate([m.vertices for m in meshes]),
            np.concatenate([m.faces + k for m, k in zip(meshes, offsets, strict=True)]),
            np.concatenate([m.pattern for m in meshes]),
        )

    def translated(self, offset: Vector) -> "Mesh":
        """The same mesh moved by `offset` in the body frame."""
        return Mesh(
            self.vertices + _vector("Mesh.translated", "offset", offset), self.faces, self.pattern
        )

    def volume(self) -> float:
        """The enclosed volume, $\\tfrac16\\sum_f p_0\\cdot(p_1\\times p_2)$ (divergence theorem):
        positive for a closed mesh whose faces are counter-clockwise seen from outside."""
        p = self.vertices[self.faces]
        return float(np.einsum("fi,fi->f", p[:, 0], np.cross(p[:, 1], p[:, 2])).sum() / 6.0)

    def radius(self) -> float:
        """The largest distance of a vertex from the body frame's origin."""
        return float(np.max(np.linalg.norm(self.vertices, axis=1)))
