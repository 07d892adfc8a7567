"""Configuration manifolds, each with the chart centred at a point (docs/lie_groups.md).

geomech works in a chart $(q^i)$ of $Q$ and the induced chart $(q^i, v^i)$ of $TQ$ (thesis §2.1).
Every manifold gives the chart centred at $q$, $\\psi \\mapsto q \\oplus \\psi$, and the velocity
$v$ of $q \\oplus \\psi(t)$ in the manifold's convention, $v = \\mathrm{dexp}(\\psi, \\dot\\psi)$. On
a *coordinate* manifold (ℝⁿ, S¹ and their products) $q$ is an array, $q \\oplus \\psi = q + \\psi$
(angles wrapped) and $v = \\dot\\psi$: the stages run on $q$ directly, at no cost. Lie groups
(`_lie.py`) keep the group element and the left-trivialized velocity.
"""

import abc

import equinox as eqx
import jax.numpy as jnp
import numpy as np
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

    # -- the chart centred at q (overridden by Lie groups, `_lie.py`) ---------------------------

    @property
    def coordinates(self) -> bool:
        """Whether a point is an array of `dim` coordinates with $v = \\dot q$ (ℝⁿ, S¹)."""
        return True

    def batch_shape(self, q) -> tuple[int, ...]:
        """The leading (batch) axes of a point `q` (or of a batch of points)."""
        return jnp.shape(q)[:-1]

    def oplus(self, q, psi: Float[Array, " n"]):
        """$q \\oplus \\psi$, the chart centred at `q` ($q + \\psi$, wrapped)."""
        return self.wrap(q + psi)

    def dexp(self, psi: Float[Array, " n"], psi_dot: Float[Array, " n"]) -> Float[Array, " n"]:
        """The velocity $v$ of $q \\oplus \\psi(t)$ for $\\dot\\psi$ = `psi_dot` ($= \\dot\\psi$ here)."""
        return psi_dot

    def dexp_inverse(self, psi: Float[Array, " n"], v: Float[Array, " n"]) -> Float[Array, " n"]:
        """The inverse of `dexp` in its second argument: $\\dot\\psi$ from $v$."""
        return v

    def velocity_of_point(self, q, v: Float[Array, " n"]):
        """$\\dot q$ of the stored point (its parameters) for the velocity `v`."""
        return v

    def point_scale(self, q) -> Float[Array, " n"]:
        """The size of each coordinate of the chart centred at `q`, `(dim,)`: what the holonomic
        residual is measured against (`_checks.position_residual`); the coordinates themselves
        on ℝⁿ and S¹."""
        return q

    def point_error(self, q, psi: Float[Array, " n"], psi_error: Float[Array, " n"]):
        """The difference of the stored points $q \\oplus \\psi$ and $q \\oplus (\\psi - e)$ for an
        error estimate $e$ = `psi_error` in the chart (the step-size controller's measure)."""
        return psi_error


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
        return jnp.concatenate([f.wrap(x) for f, x in zip(self.factors, self._split(q), strict=True)])

    def _split(self, psi):
        """The factors' parts of a flat vector."""
        ends = np.cumsum([f.dim for f in self.factors])
        return [psi[..., end - f.dim : end] for f, end in zip(self.factors, ends, strict=True)]

    # with a Lie-group factor a point is the tuple of the factors' points, a velocity is flat
    # (the factors' velocities concatenated in order)

    @property
    def coordinates(self) -> bool:
        return all(f.coordinates for f in self.factors)

    def _each(self, method, q, *flat):
        parts = zip(self.factors, q, *(self._split(x) for x in flat), strict=True)
        return tuple(getattr(f, method)(*args) for f, *args in parts)

    def check(self, q) -> None:
        if self.coordinates:
            return super().check(q)
        if not isinstance(q, tuple) or len(q) != len(self.factors):
            raise ValueError(
                f"a point of {self} is a tuple of {len(self.factors)} points, one per factor, got "
                f"{type(q).__name__}."
            )
        for f, x in zip(self.factors, q, strict=True):
            f.check(x)

    def batch_shape(self, q):
        return super().batch_shape(q) if self.coordinates else self.factors[0].batch_shape(q[0])

    def oplus(self, q, psi):
        return super().oplus(q, psi) if self.coordinates else self._each("oplus", q, psi)

    def dexp(self, psi, psi_dot):
        parts = zip(self.factors, self._split(psi), self._split(psi_dot), strict=True)
        return jnp.concatenate([f.dexp(a, b) for f, a, b in parts])

    def dexp_inverse(self, psi, v):
        parts = zip(self.factors, self._split(psi), self._split(v), strict=True)
        return jnp.concatenate([f.dexp_inverse(a, b) for f, a, b in parts])

    def velocity_of_point(self, q, v):
        return v if self.coordinates else self._each("velocity_of_point", q, v)

    def point_scale(self, q):
        return q if self.coordinates else jnp.concatenate(self._each("point_scale", q))

    def point_error(self, q, psi, psi_error):
        if self.coordinates:
            return psi_error
        return self._each("point_error", q, psi, psi_error)
