"""Configuration manifolds, in the local coordinates of one chart.

geomech works in a chart $(q^i)$ of $Q$ and the induced chart $(q^i, v^i)$ of $TQ$ (thesis §2.1).
A manifold only says how many coordinates a point has and how to bring coordinates back into the
chart's fundamental domain (angles wrap).
"""

import abc

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float


class AbstractManifold(eqx.Module):
    """A configuration manifold $Q$ described by one chart."""

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """The dimension $n$ of $Q$."""

    @abc.abstractmethod
    def wrap(self, q: Float[Array, " n"]) -> Float[Array, " n"]:
        """Map coordinates into the chart's fundamental domain (identity for $\\mathbb{R}^n$)."""

    def check(self, q) -> None:
        """Raise `ValueError` unless `q` has this manifold's shape `(dim,)`."""
        if jnp.shape(q) != (self.dim,):
            raise ValueError(
                f"configuration has shape {jnp.shape(q)} but the manifold {self} has dimension "
                f"{self.dim}: pass q of shape ({self.dim},) (batch with jax.vmap)."
            )


class Euclidean(AbstractManifold):
    """$Q = \\mathbb{R}^n$ with its identity chart."""

    n: int = eqx.field(static=True)

    def __check_init__(self):
        if not (isinstance(self.n, int) and self.n >= 1):
            raise ValueError(f"Euclidean(n) needs a positive integer n, got {self.n!r}.")

    @property
    def dim(self) -> int:
        return self.n

    def wrap(self, q):
        return q


class Circle(AbstractManifold):
    """$Q = S^1$ with an angle coordinate $\\theta$, wrapped to $[-\\pi, \\pi)$."""

    @property
    def dim(self) -> int:
        return 1

    def wrap(self, q):
        return jnp.mod(q + jnp.pi, 2 * jnp.pi) - jnp.pi


class Product(AbstractManifold):
    """The product $Q_1 \\times \\dots \\times Q_m$; coordinates are concatenated in order."""

    factors: tuple[AbstractManifold, ...]

    def __init__(self, *factors: AbstractManifold):
        if not factors or not all(isinstance(f, AbstractManifold) for f in factors):
            raise TypeError("Product(...) takes one or more manifolds, e.g. Product(Euclidean(2), Circle()).")
        self.factors = tuple(factors)

    @property
    def dim(self) -> int:
        return sum(f.dim for f in self.factors)

    def wrap(self, q):
        parts, start = [], 0
        for f in self.factors:
            parts.append(f.wrap(q[start : start + f.dim]))
            start += f.dim
        return jnp.concatenate(parts)
