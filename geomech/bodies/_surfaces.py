"""Convex surfaces of rolling bodies, in the body frame about its origin: the support function
$h(u) = \\max_{p \\in K} p\\cdot u$ and the point $s(\\gamma) = \\nabla h(-\\gamma)$ where the body
touches a plane below it, $\\gamma$ the upward vertical in the body frame [BorisovMamaev2002]; the
origin is at height $z = h(-\\gamma) = -s\\cdot\\gamma$ above the plane (Euler's relation for the
1-homogeneous $h$)."""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from .._checks import as_real_array, concrete
from .._mesh import Mesh


def _positive(owner: str, name: str, x: ArrayLike, shape: tuple[int, ...]) -> Array:
    """`x` as a float array of `shape` whose entries are finite and positive: a `ValueError`
    naming the argument before tracing where `x` is concrete, the same check inside the program
    (`eqx.error_if`) where it is traced (a body swept under `jit`/`vmap`)."""
    x = as_real_array(x)
    if x.shape != shape:
        raise ValueError(f"{owner}: `{name}` must have shape {shape}, got {x.shape}.")
    message = f"{owner}: `{name}` must be finite and positive"
    c = concrete(x)
    if c is None:
        return eqx.error_if(x, ~jnp.all(x > 0) | ~jnp.all(jnp.isfinite(x)), message + ".")
    if not (np.all(np.isfinite(c)) and np.all(c > 0)):
        raise ValueError(f"{message}, got {c}.")
    return x


class AbstractSurface(eqx.Module):
    """The convex surface of a body, in the body frame about its origin: its support function
    $h(u) = \\max_{p\\in K} p\\cdot u$ and the point $s(\\gamma) = \\nabla h(-\\gamma)$ where it
    touches a plane below it ($\\gamma$ the upward vertical in the body frame)
    [BorisovMamaev2002]."""

    @abc.abstractmethod
    def support(self, u: Float[Array, "3"]) -> Float[Array, ""]:
        """$h(u)$, 1-homogeneous in $u$."""

    @abc.abstractmethod
    def contact_point(self, gamma: Float[Array, "3"]) -> Float[Array, "3"]:
        """$s(\\gamma) = \\nabla h(-\\gamma)$, the body-frame point of contact with the plane."""

    def height(self, gamma: Float[Array, "3"]) -> Float[Array, ""]:
        """$z = -s(\\gamma)\\cdot\\gamma$, the height of the body frame's origin above the plane."""
        return -self.contact_point(gamma) @ gamma

    @abc.abstractmethod
    def contact_margin(self, gamma: Float[Array, "3"]) -> Float[Array, ""]:
        """How well the contact point is defined, at most 1 (`gm.AbstractContact.margin`)."""

    @abc.abstractmethod
    def same_contact(self, gamma0: Float[Array, "3"], gamma1: Float[Array, "3"]) -> Bool[Array, ""]:
        """Whether the contact point moves continuously from vertical `gamma0` to `gamma1`
        (`gm.AbstractContact.same_contact`)."""

    @abc.abstractmethod
    def mesh(self) -> Mesh:
        """A triangle mesh of the surface in the body frame (what `geomech.plot.animate` draws)."""


class AbstractSmoothSurface(AbstractSurface):
    """A smooth, strictly convex surface: it touches a plane at one point in any attitude, moving
    continuously with it (a margin of 1, never an undefined contact)."""

    def contact_margin(self, gamma: Float[Array, "3"]) -> Float[Array, ""]:
        return jnp.ones((), gamma.dtype)

    def same_contact(self, gamma0: Float[Array, "3"], gamma1: Float[Array, "3"]) -> Bool[Array, ""]:
        return jnp.array(True)


class Sphere(AbstractSmoothSurface):
    """A sphere of `radius` $a$ centred at the body frame's origin: $h(u) = a|u|$,
    $s = -a\\gamma$, $z = a$."""

    radius: Float[Array, ""]

    def __init__(self, radius: ArrayLike):
        self.radius = _positive("Sphere", "radius", radius, ())

    def support(self, u: Float[Array, "3"]) -> Float[Array, ""]:
        return self.radius * jnp.linalg.norm(u)

    def contact_point(self, gamma: Float[Array, "3"]) -> Float[Array, "3"]:
        return -self.radius * gamma / jnp.linalg.norm(gamma)

    def mesh(self) -> Mesh:
        return Mesh.sphere(np.asarray(self.radius))


class Ellipsoid(AbstractSmoothSurface):
    """An ellipsoid $\\sum_i p_i^2/a_i^2 = 1$ with `semi_axes` $a$ along the body axes, centred at
    the origin: $h(u) = |D u|$, $D = \\mathrm{diag}(a)$, so $s = -D^2\\gamma/|D\\gamma|$ and
    $z = |D\\gamma|$ [BorisovMamaev2002]."""

    semi_axes: Float[Array, "3"]

    def __init__(self, semi_axes: ArrayLike):
        self.semi_axes = _positive("Ellipsoid", "semi_axes", semi_axes, (3,))

    def support(self, u: Float[Array, "3"]) -> Float[Array, ""]:
        return jnp.linalg.norm(self.semi_axes * u)

    def contact_point(self, gamma: Float[Array, "3"]) -> Float[Array, "3"]:
        d2 = self.semi_axes**2
        return -d2 * gamma / jnp.sqrt(gamma @ (d2 * gamma))

    def mesh(self) -> Mesh:
        return Mesh.ellipsoid(np.asarray(self.semi_axes))


class ThinDisk(AbstractSurface):
    """The rim of a thin disk of `radius` $r$ centred at the origin, in the plane normal to the
    body axis `axis` $n$ (0, 1, 2 or a 3-vector): $h(u) = r|u - (u\\cdot n)n|$, so
    $s = -r\\,\\gamma_\\perp/|\\gamma_\\perp|$ with $\\gamma_\\perp = \\gamma - (\\gamma\\cdot n)n$
    (singular when the disk lies flat, $\\gamma \\parallel n$)."""

    radius: Float[Array, ""]
    axis: Float[Array, "3"]

    def __init__(self, radius: ArrayLike, axis: int | ArrayLike = 2):
        self.radius = _positive("ThinDisk", "radius", radius, ())
        if isinstance(axis, bool | np.bool_):
            raise ValueError(f"ThinDisk: `axis` must be 0, 1, 2 or a 3-vector, got {axis}.")
        if isinstance(axis, int | np.integer):
            if axis not in (0, 1, 2):
                raise ValueError(f"ThinDisk: `axis` must be 0, 1, 2 or a 3-vector, got {axis}.")
            axis = np.eye(3)[int(axis)]
        n = jnp.asarray(axis, self.radius.dtype)
        if n.shape != (3,):
            raise ValueError(
                f"ThinDisk: `axis` must be 0, 1, 2 or a 3-vector, got shape {n.shape}."
            )
        c = concrete(n)
        if c is not None and not (np.all(np.isfinite(c)) and np.linalg.norm(c) > 0):
            raise ValueError(f"ThinDisk: `axis` must be a finite non-zero vector, got {c}.")
        self.axis = n / jnp.linalg.norm(n)

    def _in_plane(self, u: Float[Array, "3"]) -> Float[Array, "3"]:
        return u - (u @ self.axis) * self.axis

    def support(self, u: Float[Array, "3"]) -> Float[Array, ""]:
        return self.radius * jnp.linalg.norm(self._in_plane(u))

    def contact_point(self, gamma: Float[Array, "3"]) -> Float[Array, "3"]:
        g = self._in_plane(gamma)
        return -self.radius * g / jnp.linalg.norm(g)

    def contact_margin(self, gamma: Float[Array, "3"]) -> Float[Array, ""]:
        """$|\\gamma_\\perp|$, the sine of the disk's tilt to the plane (0: lying flat)."""
        return jnp.linalg.norm(self._in_plane(gamma))

    def same_contact(self, gamma0: Float[Array, "3"], gamma1: Float[Array, "3"]) -> Bool[Array, ""]:
        """The contact point stays on the same half of the rim: $\\gamma_{0\\perp}\\cdot
        \\gamma_{1\\perp} > 0$ (through flat it jumps to the opposite point)."""
        return self._in_plane(gamma0) @ self._in_plane(gamma1) > 0

    def mesh(self) -> Mesh:
        return Mesh.disk(np.asarray(self.radius), np.asarray(self.axis))


class SupportFunction(AbstractSmoothSurface):
    """A convex body given by its support function `h(u) -> scalar` (body frame, about the
    origin; 1-homogeneous and differentiable where the body touches the plane): the contact point
    is $\\nabla h(-\\gamma)$ by automatic differentiation."""

    h: Callable

    def __check_init__(self) -> None:
        if not callable(self.h):
            raise TypeError(
                f"SupportFunction: `h` must be a function h(u) -> scalar, got {type(self.h).__name__}."
            )

    def support(self, u: Float[Array, "3"]) -> Float[Array, ""]:
        return jnp.asarray(self.h(u))

    def contact_point(self, gamma: Float[Array, "3"]) -> Float[Array, "3"]:
        return jax.grad(self.support)(-gamma)

    def mesh(self) -> Mesh:
        """The boundary points $\\nabla h(u)$ over the directions $u$ of a sphere mesh."""
        return Mesh.convex(jax.vmap(jax.grad(self.support)))
