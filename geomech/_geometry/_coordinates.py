"""Coordinate manifolds (ℝⁿ, S¹) and the identity chart (docs/lie_groups.md): a point is an
array of `dim` coordinates, $v = \\dot q$, and the stages run on $q$ itself at no cost."""

import abc

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from ._manifold import AbstractChart, AbstractManifold, Point


class AbstractCoordinateManifold(AbstractManifold):
    """A manifold described by one global chart (ℝⁿ, S¹ and their products): a point is an array
    of `dim` coordinates, $v = \\dot q$, $q \\oplus \\psi = q + \\psi$ (wrapped into the chart's
    domain), and the chart at every point is the identity."""

    @abc.abstractmethod
    def wrap(self, q: Float[Array, "... n"]) -> Float[Array, "... n"]:
        """Map coordinates into the chart's fundamental domain (identity for $\\mathbb{R}^n$)."""

    def check(self, q: Point) -> None:
        shape = jnp.shape(q)
        if len(shape) != 1:
            raise ValueError(
                f"the configuration has shape {shape}; the manifold {self} takes one point, "
                "q of shape (n,): batch with jax.vmap (simulate accepts a leading batch axis)."
            )
        if self.dim is not None and shape != (self.dim,):
            raise ValueError(
                f"the configuration has shape {shape} but the manifold {self} has dimension "
                f"{self.dim}: q must have shape ({self.dim},)."
            )

    def point_defect(self, q: Float[ArrayLike, "*batch n"]) -> Float[Array, ""]:
        return jnp.zeros((), jnp.result_type(q))

    def normalize(self, q: Float[ArrayLike, "*batch n"]) -> Float[ArrayLike, "*batch n"]:
        return self.wrap(q)

    def batch_shape(self, q: Float[ArrayLike, "*batch n"]) -> tuple[int, ...]:
        return jnp.shape(q)[:-1]

    def oplus(self, q: Float[ArrayLike, " n"], psi: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return self.wrap(q + psi)

    def retract(self, q: Float[ArrayLike, " n"], psi: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return self.oplus(q, psi)

    def ominus(self, p: Float[ArrayLike, " n"], q: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return self.wrap(p - q)

    def dexp(self, psi: Float[ArrayLike, " n"], psi_dot: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return psi_dot

    def dexp_inverse(self, psi: Float[ArrayLike, " n"], v: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return v

    def velocity_of_point(self, q: Float[ArrayLike, " n"], v: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return v

    def point_scale(self, q: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return q

    def point_error(
        self, q: Float[ArrayLike, " n"], psi: Float[ArrayLike, " n"], psi_error: Float[ArrayLike, " n"]
    ) -> Float[ArrayLike, " n"]:
        return psi_error

    def parameters(self, q: Float[ArrayLike, "*batch n"]) -> Float[ArrayLike, "*batch n"]:
        return q

    def chart(self, q: Float[ArrayLike, " n"]) -> "IdentityChart":
        return IdentityChart(self, q)

    def integrator(
        self,
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: object,  # unused: the solver steps on the coordinates themselves
        name: str,
    ) -> diffrax.AbstractSolver:
        return solver


class Euclidean(AbstractCoordinateManifold):
    """$Q = \\mathbb{R}^n$ with its identity chart; `Euclidean()` takes $n$ from the points (the
    default manifold of a `LagrangianSystem`)."""

    n: int | None = eqx.field(default=None, static=True)

    def __check_init__(self):
        if self.n is not None and not (
            isinstance(self.n, int | np.integer) and not isinstance(self.n, bool) and self.n >= 1
        ):
            raise ValueError(f"Euclidean(n) needs a positive integer n, got {self.n!r}.")

    @property
    def dim(self) -> int | None:
        return None if self.n is None else int(self.n)

    def wrap(self, q: Float[ArrayLike, "*batch n"]) -> Float[ArrayLike, "*batch n"]:
        return q

    def bracket(self, v: Float[ArrayLike, " n"], w: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return jnp.zeros_like(w)


class Circle(AbstractCoordinateManifold):
    """$Q = S^1$ with an angle coordinate $\\theta$, wrapped to $[-\\pi, \\pi)$."""

    @property
    def dim(self) -> int:
        return 1

    def wrap(self, q: Float[ArrayLike, "*batch n"]) -> Float[ArrayLike, "*batch n"]:
        return jnp.mod(q + jnp.pi, 2 * jnp.pi) - jnp.pi

    def bracket(self, v: Float[ArrayLike, " n"], w: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return jnp.zeros_like(w)


class BodyFrame(AbstractCoordinateManifold):
    """The coordinates $\\psi$ of the chart centred at a point of `manifold`, with that manifold's
    velocities: the configuration space of a system localized there
    (`CentredChart.system`). Its velocity frame is `manifold`'s, so a Lie group's bracket enters
    the equations of motion (the Hamel / Euler–Poincaré term, `_system.coordinate_force`)."""

    manifold: AbstractManifold

    @property
    def dim(self) -> int | None:
        return self.manifold.dim

    def wrap(self, q: Float[ArrayLike, "*batch n"]) -> Float[ArrayLike, "*batch n"]:
        return q

    def bracket(self, v: Float[ArrayLike, " n"], w: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return self.manifold.bracket(v, w)


class IdentityChart(AbstractChart):
    """The global chart of a coordinate manifold, at the point `q`: the chart coordinates are
    the coordinates themselves, and a system is its own localization (no cost): of ℝⁿ, S¹ or
    a product of them."""

    manifold: AbstractManifold
    q: Float[ArrayLike, " n"]

    @property
    def origin(self) -> Float[ArrayLike, " n"]:
        return self.q

    @property
    def frame(self) -> AbstractManifold:
        return self.manifold

    def point(self, x: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return x

    def point_to_second_order(self, x: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return x

    def coordinates(self, p: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return p

    def moved(self, x: Float[ArrayLike, " n"], v: Float[ArrayLike, " n"]) -> Float[ArrayLike, " n"]:
        return self.manifold.oplus(x, v)

    def centre_defect(self) -> Float[Array, ""]:
        return jnp.zeros((), jnp.result_type(self.q))

    def system(self, system: eqx.Module) -> eqx.Module:
        return system
