"""Time-dependent (rheonomic) models of [Zanella]: the bead on a rotating wire and the pursuit problem."""

from typing import ClassVar

import jax.numpy as jnp

from .._bundle import State
from .._constraint import HolonomicConstraint, LinearConstraint
from .._custom_types import RealScalarLike
from .._system import LagrangianSystem
from ._base import AbstractModel


class BeadOnRotatingWire(AbstractModel):
    """[Zanella] §5.4: a bead of mass $m$ sliding on a straight wire through the fixed point $A$ (the
    origin), at angle $\\theta_0$ from the vertical, turning about the vertical at constant $\\omega$.

    Cartesian $q = (x, y, z)$ with $z$ pointing **down** and gravity $+g\\hat z$:
    $L = \\tfrac12 m|v|^2 + m g z$. The wire direction is
    $\\hat e(t) = (\\sin\\theta_0\\cos\\omega t, \\sin\\theta_0\\sin\\omega t, \\cos\\theta_0)$ and the two
    rheonomic holonomic constraints are $h = (q\\cdot\\hat\\theta(t), q\\cdot\\hat\\varphi(t)) = 0$
    ($\\theta = \\theta_0$ and $\\varphi = \\omega t$ of (137)). The system is `time_dependent`.

    With $r = q\\cdot\\hat e$ and $\\Omega = \\omega\\sin\\theta_0$: $\\ddot r = \\Omega^2 r + g\\cos\\theta_0$ (139);
    the Jacobi integral of (138), $J = \\tfrac12 m\\dot r^2 - \\tfrac12 m\\Omega^2 r^2 - m g r\\cos\\theta_0$, is
    conserved, while $E_L = \\tfrac12 m|v|^2 - m g z$ changes at the rate of the power of the wire's
    force, $F_\\varphi\\,r\\Omega$ with $F_\\varphi = 2m\\dot r\\omega\\sin\\theta_0$ (158).
    """

    m: RealScalarLike = 1.0
    omega: RealScalarLike = 2.0
    theta0: RealScalarLike = 1.0
    g: RealScalarLike = 9.81

    description: ClassVar[str] = (
        "bead on a wire rotating about the vertical, rheonomic ([Zanella] §5.4)"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y", "z")
    units: ClassVar[tuple[str, ...]] = ("m", "m", "m")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = (0, 1)
    time_span: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def frame(self, t):
        """$(\\hat e, \\hat\\theta, \\hat\\varphi)$ of the wire at time $t$ (spherical unit vectors)."""
        c, s = jnp.cos(self.omega * t), jnp.sin(self.omega * t)
        ct, st = jnp.cos(self.theta0), jnp.sin(self.theta0)
        e = jnp.stack([st * c, st * s, ct + 0 * c])
        th = jnp.stack([ct * c, ct * s, -st + 0 * c])
        ph = jnp.stack([-s, c, 0 * c])
        return e, th, ph

    def lagrangian(self, t, q, v):
        return 0.5 * self.m * (v @ v) + self.m * self.g * q[2]  # z down

    def h(self, t, q):
        _, th, ph = self.frame(t)
        return jnp.stack([q @ th, q @ ph])  # θ = θ0, φ = ωt (137)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(
            self.lagrangian, constraint=HolonomicConstraint(self.h), time_dependent=True
        )

    def initial_state(self, r0=1.0, rdot0=0.0) -> State:
        e, _, ph = self.frame(jnp.asarray(0.0))
        return State(r0 * e, rdot0 * e + r0 * self.omega * jnp.sin(self.theta0) * ph)

    def radius(self, t, state: State):
        """$(r, \\dot r)$ along the wire."""
        e, _, _ = self.frame(t)
        return state.q @ e, state.v @ e

    def closed_form(self, t, r0, rdot0):
        """$(r(t), \\dot r(t))$ solving (139)."""
        W = self.omega * jnp.sin(self.theta0)
        c = self.g * jnp.cos(self.theta0) / W**2
        r = -c + (r0 + c) * jnp.cosh(W * t) + rdot0 / W * jnp.sinh(W * t)
        rdot = (r0 + c) * W * jnp.sinh(W * t) + rdot0 * jnp.cosh(W * t)
        return r, rdot

    def jacobi_integral(self, t, state: State):
        """$J = \\tfrac12 m\\dot r^2 - \\tfrac12 m\\Omega^2 r^2 - m g r\\cos\\theta_0$, from (138)."""
        r, rdot = self.radius(t, state)
        W = self.omega * jnp.sin(self.theta0)
        return 0.5 * self.m * (rdot**2 - W**2 * r**2) - self.m * self.g * r * jnp.cos(self.theta0)

    def wire_force(self, t, state: State):
        """The wire's force on the bead, $F_\\theta\\hat\\theta + F_\\varphi\\hat\\varphi$ (157)–(158)."""
        r, rdot = self.radius(t, state)
        _, th, ph = self.frame(t)
        st, ct = jnp.sin(self.theta0), jnp.cos(self.theta0)
        F_theta = self.m * (-r * self.omega**2 * ct + self.g) * st  # (157)
        F_phi = 2 * self.m * rdot * self.omega * st  # (158)
        return F_theta * th + F_phi * ph


class Pursuit(AbstractModel):
    """[Zanella] §6.1: a particle whose velocity always points at $Q = (0, ut)$ (the pursuit problem).

    $q = (x, y)$, $L = \\tfrac12 m|v|^2$ (168); the time-dependent nonholonomic constraint is
    $(ut - y)\\dot x + x\\dot y = 0$ (167), the row $(ut - y, x)$, so (169) reads
    $m\\ddot x = \\lambda(ut - y)$, $m\\ddot y = \\lambda x$. The speed is constant (177), and from
    $x(0) = a$, $y(0) = 0$, $\\dot x(0) = -v$, $\\dot y(0) = 0$ the path is (190) ((191) when $u = v$).
    Valid before capture ($x > 0$), at $t = a v/(v^2 - u^2)$ when $v > u$.
    """

    m: RealScalarLike = 1.0
    u: RealScalarLike = 0.5
    a: RealScalarLike = 1.0
    speed: RealScalarLike = 1.0

    description: ClassVar[str] = (
        "pursuit problem: velocity aimed at Q = (0, u t), time-dependent nonholonomic ([Zanella] §6.1)"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y")
    units: ClassVar[tuple[str, ...]] = ("m", "m")  # with u, speed in m/s, a in m
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = (0, 1)
    time_span: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def lagrangian(self, t, q, v):
        return 0.5 * self.m * (v @ v)  # (168)

    def row(self, t, q):
        return jnp.stack([self.u * t - q[1], q[0]])[None, :]  # (167)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(
            self.lagrangian, constraint=LinearConstraint(self.row), time_dependent=True
        )

    def initial_state(self) -> State:
        z = 0.0 * jnp.asarray(self.a, float)
        return State(jnp.stack([self.a + z, z]), jnp.stack([-self.speed + z, z]))

    def path(self, x):
        """$y(x)$ of (190), or (191) when $u = v$."""
        r, X = self.u / self.speed, x / self.a
        one = jnp.isclose(r, 1.0)
        rs = jnp.where(one, 0.5, r)  # keeps the unused branch finite
        y190 = 0.5 * (X ** (1 + rs) / (1 + rs) - X ** (1 - rs) / (1 - rs)) + rs / (1 - rs**2)
        y191 = 0.25 * X**2 - 0.5 * jnp.log(X) - 0.25
        return self.a * jnp.where(one, y191, y190)
