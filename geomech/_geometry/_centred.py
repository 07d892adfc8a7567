r"""The chart centred at a point of a Lie group (or of a product with one), and a system written in
it (docs/lie_groups.md).

At the centre, $\psi = 0$, the chart's velocity is the manifold's own (left-trivialized, body)
velocity, $\dot\psi = v$ and $\ddot\psi = \dot v$. A system is written in the chart by reading
every user function at $q \oplus \psi$ with the body velocity $v$ as it is: $\ell(\psi, v) =
L(q \oplus \psi, v)$, $\phi(q \oplus \psi, v)$, $A(q \oplus \psi)$, forces and work spaces alike.
That is the Lagrangian in the body frame, whose equations of motion at $\psi = 0$ are Hamel's
(Euler–Poincaré's for a left-invariant $L$) [Bloch2003, §5.2; MarsdenRatiu1999, §13.5]:

$$\frac{d}{dt}\frac{\partial \ell}{\partial v} = \mathrm{ad}_v^{*}\frac{\partial \ell}{\partial v}
+ \frac{\partial \ell}{\partial \psi} + F,$$

with $\mathrm{ad}_v^* p = \mathrm{ad}_v^\top p$ the transpose of the bracket of the frame
(`BodyFrame`, `_system.coordinate_force`); for SO(3), $\mathrm{ad}^*_\omega p = p \times \omega$
and $L = \frac12\omega^\top I\omega$ gives Euler's $I\dot\omega = I\omega\times\omega$. Only first
derivatives in $\psi$ are taken, so the exponential map is never differentiated twice; the
constraints' $b = -\partial_\psi\phi\, v - \partial_t\phi$ needs no correction, since
$\mathrm{ad}_v v = 0$.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._coordinates import BodyFrame
from ._manifold import AbstractChart, AbstractManifold, Point


class CentredChart(AbstractChart):
    r"""The chart $\psi \mapsto q \oplus \psi$ of `manifold` centred at the point `q`."""

    manifold: AbstractManifold
    q: Point

    @property
    def origin(self) -> Float[Array, " n"]:
        dtype = jnp.result_type(*jax.tree_util.tree_leaves(self.q))
        return jnp.zeros(self.manifold.dim, dtype)

    @property
    def frame(self) -> BodyFrame:
        return BodyFrame(self.manifold)

    def point(self, x: Float[Array, " n"]) -> Point:
        return self.manifold.oplus(self.q, x)

    def point_to_second_order(self, x: Float[Array, " n"]) -> Point:
        return self.manifold.retract(self.q, x)

    def coordinates(self, p: Point) -> Float[Array, " n"]:
        return self.manifold.ominus(p, self.q)

    def moved(self, x: Float[Array, " n"], v: Float[Array, " n"]) -> Point:
        return self.manifold.oplus(self.point(x), v)

    def centre_defect(self) -> Float[Array, ""]:
        return self.manifold.point_defect(self.q)

    def system(self, system: eqx.Module) -> eqx.Module:
        return system.in_chart(self)
