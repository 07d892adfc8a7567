"""A constraint nonlinear in the velocities: the Appell–Hamel-type particle."""

from typing import ClassVar

import jax.numpy as jnp

from .._bundle import State
from .._constraint import Constraint
from .._custom_types import RealScalarLike
from .._symmetry import LieAlgebraAction
from .._system import LagrangianSystem
from ._base import AbstractSymmetricModel
from ._pendulum import z_rotation_generator


def _horizontal_euclidean_generators(q):
    """$\\xi_Q$ for the $x$, $y$ translations and the rotation about the $z$ axis."""
    return jnp.concatenate([jnp.eye(3, 2, dtype=q.dtype), z_rotation_generator(q)], axis=1)


def _safe_norm(x):
    """$|x|$ with a finite (zero) derivative at $x = 0$ (the double-`where` trick)."""
    s = x @ x
    pos = s > 0
    return jnp.where(pos, jnp.sqrt(jnp.where(pos, s, 1.0)), 0.0)


class AppellHamel(AbstractSymmetricModel):
    """A particle of mass $m$ in gravity with the constraint $\\dot z + a\\sqrt{\\dot x^2 + \\dot y^2} = 0$
    (Appell–Hamel type, nonlinear in the velocities), imposed by Četaev's rule ($\\mathcal W = \\mathcal D$).

    $q = (x, y, z)$, $z$ up, $L = \\tfrac12 m|v|^2 - m g z$. The norm is guarded so that $\\phi$ has a
    finite derivative at zero horizontal speed, where $\\partial\\phi/\\partial v = (0, 0, 1)$ keeps rank 1.
    Since $\\phi$ is homogeneous of degree 1 in $v$,
    $F^c(v) = \\lambda\\,\\partial_v\\phi\\cdot v = \\lambda\\phi = 0$ and
    $E_L$ is conserved. The horizontal direction is constant and the horizontal speed grows
    uniformly: $\\dot s = a g/(1 + a^2)$, $z(t) = z_0 - a(s_0 t + \\tfrac12\\dot s t^2)$.
    """

    m: RealScalarLike = 1.0
    a: RealScalarLike = 0.5
    g: RealScalarLike = 9.81

    description: ClassVar[str] = (
        "particle with the nonlinear constraint zdot + a |(xdot, ydot)| = 0 (Appell–Hamel type)"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y", "z")
    units: ClassVar[tuple[str, ...]] = ("m", "m", "m")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 2.0)

    def lagrangian(self, q, v):
        return 0.5 * self.m * (v @ v) - self.m * self.g * q[2]

    def phi(self, q, v):
        return v[2] + self.a * _safe_norm(v[:2])

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian, constraint=Constraint(self.phi))

    def action(self) -> LieAlgebraAction:
        """$SE(2)$ acting on $(x, y)$ (horizontal translations and rotations about the $z$ axis)."""
        return LieAlgebraAction(_horizontal_euclidean_generators)

    def initial_state(self, speed=1.0, heading=0.3) -> State:
        z = jnp.zeros(())
        vh = speed * jnp.stack([jnp.cos(z + heading), jnp.sin(z + heading)])
        return State(
            jnp.stack([z, z, z]), jnp.concatenate([vh, jnp.atleast_1d(-self.a * speed + z)])
        )

    def closed_form(self, t, s0, z0=0.0):
        """$(s(t), z(t))$: horizontal speed and height."""
        sdot = self.a * self.g / (1 + self.a**2)
        return s0 + sdot * t, z0 - self.a * (s0 * t + 0.5 * sdot * t**2)
