"""Products of manifolds, $Q_1 \\times \\dots \\times Q_m$ (docs/lie_groups.md): every question is
answered factor by factor. A tangent vector is flat, the factors' tangents concatenated in order;
a point is the factors' coordinates concatenated when every factor is a coordinate manifold
(the product is then one itself, with the identity chart), else the tuple of the factors' points
(with the chart centred at the point and the Lie-group integrator)."""

import abc

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._centred import CentredChart
from ._coordinates import AbstractCoordinateManifold, IdentityChart
from ._integrator import AbstractStateParts, munthe_kaas
from ._manifold import AbstractChart, AbstractManifold, Point


class _AbstractLayout(eqx.Module):
    """How a product stores its points, and the chart and integrator that go with it."""

    @abc.abstractmethod
    def split(self, product: "Product", q: Point) -> list[Point]:
        """The factors' points of `q`."""

    @abc.abstractmethod
    def join(self, points: list[Point]) -> Point:
        """The product's point made of the factors' `points`."""

    @abc.abstractmethod
    def check(self, product: "Product", q: Point) -> None:
        """Raise `ValueError` unless `q` has this layout's structure."""

    @abc.abstractmethod
    def chart(self, product: "Product", q: Point) -> AbstractChart:
        """The chart centred at `q`."""

    @abc.abstractmethod
    def integrator(
        self,
        product: "Product",
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: AbstractStateParts,
        name: str,
    ) -> diffrax.AbstractSolver:
        """The diffrax solver stepping on the product."""


class _Concatenated(_AbstractLayout):
    """Coordinate factors only: a point is one array, the factors' coordinates in order."""

    def split(self, product: "Product", q: Point) -> list[Point]:
        return product.split(q)

    def join(self, points: list[Float[Array, "... _m"]]) -> Float[Array, "... n"]:
        return jnp.concatenate(points, axis=-1)

    def check(self, product: "Product", q: Point) -> None:
        shape = jnp.shape(q)
        if len(shape) != 1:
            raise ValueError(
                f"the configuration has shape {shape}; the manifold {product} takes one point, "
                f"q of shape ({product.dim},): batch with jax.vmap (simulate accepts a leading "
                "batch axis)."
            )
        if shape != (product.dim,):
            raise ValueError(
                f"the configuration has shape {shape} but the manifold {product} has dimension "
                f"{product.dim}: q must have shape ({product.dim},)."
            )

    def chart(self, product: "Product", q: Point) -> AbstractChart:
        return IdentityChart(product, q)

    def integrator(
        self,
        product: "Product",
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: AbstractStateParts,
        name: str,
    ) -> diffrax.AbstractSolver:
        return solver


class _Tupled(_AbstractLayout):
    """With a Lie-group factor: a point is the tuple of the factors' points."""

    def split(self, product: "Product", q: Point) -> list[Point]:
        return list(q)

    def join(self, points: list[Point]) -> tuple:
        return tuple(points)

    def check(self, product: "Product", q: Point) -> None:
        if not isinstance(q, tuple) or len(q) != len(product.factors):
            raise ValueError(
                f"a point of {product} is a tuple of {len(product.factors)} points, one per "
                f"factor, got {type(q).__name__}."
            )

    def chart(self, product: "Product", q: Point) -> AbstractChart:
        return CentredChart(product, q)

    def integrator(
        self,
        product: "Product",
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: AbstractStateParts,
        name: str,
    ) -> diffrax.AbstractSolver:
        return munthe_kaas(solver, product, adjoint=adjoint, parts=parts, name=name)


class Product(AbstractManifold):
    """The product $Q_1 \\times \\dots \\times Q_m$ of `factors`; tangent vectors concatenated in
    order, points concatenated (coordinate factors only) or a tuple of the factors' points."""

    factors: tuple[AbstractManifold, ...]
    layout: _AbstractLayout

    def __init__(self, *factors: AbstractManifold):
        if not factors or not all(isinstance(f, AbstractManifold) for f in factors):
            raise TypeError(
                "Product(...) takes one or more manifolds, e.g. Product(Euclidean(2), Circle())."
            )
        if any(f.dim is None for f in factors):
            raise ValueError("Product(...) needs factors of known dimension, e.g. Euclidean(2).")
        self.factors = tuple(factors)
        coordinates = all(isinstance(f, AbstractCoordinateManifold) for f in factors)
        self.layout = _Concatenated() if coordinates else _Tupled()

    @property
    def dim(self) -> int:
        return sum(f.dim for f in self.factors)

    def split(self, x: Float[Array, "... n"]) -> list[Float[Array, "... m"]]:
        """The factors' parts of a flat vector (a tangent vector, or concatenated coordinates)."""
        ends = np.cumsum([f.dim for f in self.factors])
        return [x[..., end - f.dim : end] for f, end in zip(self.factors, ends, strict=True)]

    def _points(self, q: Point) -> list[Point]:
        return self.layout.split(self, q)

    def _each(self, method: str, *args: Point) -> Point:
        """`method` of every factor on the factors' parts of `args`: points split by the layout
        (the first argument), tangent vectors by `split`."""
        q, *flat = args
        parts = zip(self.factors, self._points(q), *(self.split(x) for x in flat), strict=True)
        return [getattr(f, method)(*a) for f, *a in parts]

    def _tangent(self, method: str, *vectors: Float[Array, "... n"]) -> Float[Array, "... n"]:
        parts = zip(self.factors, *(self.split(x) for x in vectors), strict=True)
        return jnp.concatenate([getattr(f, method)(*a) for f, *a in parts], axis=-1)

    def check(self, q: Point) -> None:
        self.layout.check(self, q)
        for f, x in zip(self.factors, self._points(q), strict=True):
            f.check(x)

    def point_defect(self, q: Point) -> Float[Array, "*batch"]:
        return jnp.max(jnp.stack(self._each("point_defect", q)), axis=0)

    def normalize(self, q: Point) -> Point:
        return self.layout.join(self._each("normalize", q))

    def wrap(self, q: Point) -> Point:
        """The point with its coordinates in their charts' domains (`normalize`)."""
        return self.normalize(q)

    def batch_shape(self, q: Point) -> tuple[int, ...]:
        return self.factors[0].batch_shape(self._points(q)[0])

    def oplus(self, q: Point, psi: Float[Array, " n"]) -> Point:
        return self.layout.join(self._each("oplus", q, psi))

    def retract(self, q: Point, psi: Float[Array, " n"]) -> Point:
        return self.layout.join(self._each("retract", q, psi))

    def ominus(self, p: Point, q: Point) -> Float[Array, " n"]:
        parts = zip(self.factors, self._points(p), self._points(q), strict=True)
        return jnp.concatenate([f.ominus(a, b) for f, a, b in parts], axis=-1)

    def dexp(self, psi: Float[Array, " n"], psi_dot: Float[Array, " n"]) -> Float[Array, " n"]:
        return self._tangent("dexp", psi, psi_dot)

    def dexp_inverse(self, psi: Float[Array, " n"], v: Float[Array, " n"]) -> Float[Array, " n"]:
        return self._tangent("dexp_inverse", psi, v)

    def bracket(self, v: Float[Array, " n"], w: Float[Array, " n"]) -> Float[Array, " n"]:
        return self._tangent("bracket", v, w)

    def velocity_of_point(self, q: Point, v: Float[Array, " n"]) -> Point:
        return self.layout.join(self._each("velocity_of_point", q, v))

    def point_scale(self, q: Point) -> Float[Array, " n"]:
        return jnp.concatenate(self._each("point_scale", q), axis=-1)

    def point_error(self, q: Point, psi: Float[Array, " n"], psi_error: Float[Array, " n"]) -> Point:
        return self.layout.join(self._each("point_error", q, psi, psi_error))

    def parameters(self, q: Point) -> Float[Array, "*batch p"]:
        return jnp.concatenate(self._each("parameters", q), axis=-1)

    def chart(self, q: Point) -> AbstractChart:
        return self.layout.chart(self, q)

    def integrator(
        self,
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: AbstractStateParts,
        name: str,
    ) -> diffrax.AbstractSolver:
        return self.layout.integrator(self, solver, adjoint=adjoint, parts=parts, name=name)

