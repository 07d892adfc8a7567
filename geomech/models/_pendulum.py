"""Pendulums and chains of [Zanella] (§1.1, §3.1–§3.3), in redundant coordinates with multipliers."""

from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp

from .._bundle import State
from .._constraint import HolonomicConstraint, LinearConstraint
from .._custom_types import RealScalarLike
from .._symmetry import LieAlgebraAction
from .._system import LagrangianSystem
from ._base import AbstractModel, AbstractSymmetricModel


def z_rotation_generator(q):
    """$\\xi_Q = (-y, x, 0)$: the rotation of $(x, y, z)$ about the $z$ axis."""
    return jnp.stack([-q[1], q[0], jnp.zeros_like(q[0])])[:, None]


def _planar_positions(lengths, angles):
    """Bob positions of a planar chain hanging from the origin, $x$ down: link $i$ at angle
    $\\varphi_i$ from the downward vertical, $r_i = \\sum_{j \\le i} l_j(\\cos\\varphi_j, \\sin\\varphi_j)$."""
    return jnp.cumsum(lengths[:, None] * jnp.stack([jnp.cos(angles), jnp.sin(angles)], -1), axis=0)


def _planar_velocities(lengths, angles, rates):
    """Time derivative of `_planar_positions` along the angle rates."""
    return jnp.cumsum(
        (lengths * rates)[:, None] * jnp.stack([-jnp.sin(angles), jnp.cos(angles)], -1), axis=0
    )


class CartesianPendulum(AbstractModel):
    """[Zanella] §1.1: a point mass $m$ on a massless rod of length $l$, in Cartesian $(x, y)$.

    Axes as in [Zanella]: $x$ points **down**, gravity is $+g\\hat x$, so $L = \\tfrac12 m|v|^2 + m g x$.
    `form="holonomic"` imposes $h = x^2 + y^2 - l^2 = 0$; `form="linear"` the row $x\\dot x + y\\dot y = 0$
    of [Zanella] (half the gradient of $h$, so its multiplier is twice the holonomic one).
    The tension is $m(|v|^2/l + g x/l)$ along $-\\hat r$; with the row $(x, y)$ the multiplier is
    $\\lambda = -m(|v|^2 + g x)/l^2$ ([Zanella] (72)).
    """

    m: RealScalarLike = 1.0
    l: RealScalarLike = 1.0
    g: RealScalarLike = 9.81
    form: str = eqx.field(default="holonomic", static=True)

    description: ClassVar[str] = "simple pendulum in Cartesian (x, y), x down ([Zanella] §1.1, §3.1)"
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y")
    units: ClassVar[tuple[str, ...]] = ("m", "m")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def lagrangian(self, q, v):
        return 0.5 * self.m * (v @ v) + self.m * self.g * q[0]

    def h(self, q):
        return q @ q - self.l**2

    def row(self, q):
        return q[None, :]

    def tension(self, state: State):
        """The rod's pull on the bob, $T = m(|v|^2 + g x)/l$ (positive when the rod pulls inward)."""
        return self.m * (state.v @ state.v + self.g * state.q[0]) / self.l

    def system(self) -> LagrangianSystem:
        if self.form == "holonomic":
            c = HolonomicConstraint(self.h)
        elif self.form == "linear":
            c = LinearConstraint(self.row)
        else:
            raise ValueError(f"form must be 'holonomic' or 'linear', got {self.form!r}.")
        return LagrangianSystem(self.lagrangian, constraint=c)

    def initial_state(self, angle=0.5, rate=1.0) -> State:
        """The bob at `angle` from the downward vertical, turning at `rate`."""
        l = jnp.atleast_1d(jnp.asarray(self.l, float))
        a, w = jnp.atleast_1d(jnp.asarray(angle, float)), jnp.atleast_1d(jnp.asarray(rate, float))
        return State(_planar_positions(l, a)[0], _planar_velocities(l, a, w)[0])


class PolarPendulum(AbstractModel):
    """[Zanella] §3.2: the simple pendulum in polar $(\\rho, \\varphi)$ with the constraint $\\rho = l$.

    $\\varphi$ is measured from the downward vertical; $L = \\tfrac12 m(\\dot\\rho^2 + \\rho^2\\dot\\varphi^2)
    + m g \\rho\\cos\\varphi$ (78), $h = \\rho - l$ (79), so the multiplier is
    $\\bar\\lambda = -m(l\\dot\\varphi^2 + g\\cos\\varphi)$ (83), minus the rod tension.
    """

    m: RealScalarLike = 1.0
    l: RealScalarLike = 1.0
    g: RealScalarLike = 9.81

    description: ClassVar[str] = "simple pendulum in polar (rho, phi) with rho = l ([Zanella] §3.2)"
    coordinates: ClassVar[tuple[str, ...]] = ("rho", "phi")
    units: ClassVar[tuple[str, ...]] = ("m", "rad")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def lagrangian(self, q, v):
        rho, phi = q
        return 0.5 * self.m * (v[0] ** 2 + rho**2 * v[1] ** 2) + self.m * self.g * rho * jnp.cos(
            phi
        )  # (78)

    def h(self, q):
        return q[0] - self.l  # (79)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian, constraint=HolonomicConstraint(self.h))

    def initial_state(self, angle=0.5, rate=1.0) -> State:
        return State(
            jnp.stack([jnp.asarray(self.l, float), jnp.asarray(angle, float)]),
            jnp.stack([jnp.asarray(0.0), jnp.asarray(rate, float)]),
        )


class PlanarChain(AbstractModel):
    """An $N$-link planar pendulum chain in Cartesian coordinates ([Zanella] §3.3 generalized).

    Coordinates $q = (x_1, y_1, \\dots, x_N, y_N)$ of the $N$ bobs, $x$ pointing **down**, gravity
    $+g\\hat x$: $L = \\sum_i \\tfrac12 m_i|\\dot r_i|^2 + m_i g x_i$ (85). Holonomic constraints
    $h_i = \\tfrac12(|r_i - r_{i-1}|^2 - l_i^2)$ with $r_0 = 0$ (86); the factor $\\tfrac12$ makes the
    rows those of (87), so the multipliers are [Zanella]'s $\\lambda_i$ in (91) and the pull of link $i$
    on bob $i$ is $\\lambda_i (r_i - r_{i-1})$.

    **Arguments:** `N` (number of links, static), `masses` and `lengths` (shape `(N,)`, default ones), `g`.
    """

    masses: jnp.ndarray
    lengths: jnp.ndarray
    g: RealScalarLike = 9.81

    description: ClassVar[str] = (
        "N-link planar pendulum chain in Cartesian coordinates, x down ([Zanella] §3.3)"
    )
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def __init__(self, N: int = 3, masses=None, lengths=None, g=9.81):
        if not (isinstance(N, int) and N >= 1):
            raise ValueError(f"PlanarChain needs an integer number of links N >= 1, got {N!r}.")
        self.masses = jnp.ones(N) if masses is None else jnp.asarray(masses, float)
        self.lengths = jnp.ones(N) if lengths is None else jnp.asarray(lengths, float)
        if self.masses.shape != (N,) or self.lengths.shape != (N,):
            raise ValueError(f"masses and lengths must have shape ({N},) for N = {N} links.")
        self.g = g

    @property
    def N(self) -> int:
        return self.masses.shape[0]

    @property
    def coordinates(self) -> tuple[str, ...]:
        return tuple(f"{c}{i}" for i in range(1, self.N + 1) for c in "xy")

    @property
    def units(self) -> tuple[str, ...]:
        return ("m",) * (2 * self.N)

    def lagrangian(self, q, v):
        x, vv = q.reshape(-1, 2), v.reshape(-1, 2)
        return 0.5 * jnp.sum(self.masses * jnp.sum(vv**2, -1)) + self.g * jnp.sum(
            self.masses * x[:, 0]
        )  # (85)

    def h(self, q):
        r = q.reshape(-1, 2)
        d = jnp.diff(jnp.concatenate([jnp.zeros((1, 2), q.dtype), r]), axis=0)
        return 0.5 * (jnp.sum(d**2, -1) - self.lengths**2)  # (86), halved so that rows are (87)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian, constraint=HolonomicConstraint(self.h))

    def initial_state(self, angles=None, rates=None) -> State:
        """Link $i$ at angle `angles[i]` from the downward vertical turning at `rates[i]`
        (default: a bent chain, each link 0.3 rad further out, with rates alternating ±1)."""
        i = jnp.arange(self.N)
        angles = 0.3 * (i + 1) if angles is None else jnp.asarray(angles, float)
        rates = jnp.where(i % 2 == 0, 1.0, -1.0) if rates is None else jnp.asarray(rates, float)
        return State(
            _planar_positions(self.lengths, angles).reshape(-1),
            _planar_velocities(self.lengths, angles, rates).reshape(-1),
        )


class DoublePendulum(AbstractModel):
    """[Zanella] §3.3: the double pendulum in Cartesian $(x_1, y_1, x_2, y_2)$, $x$ down.

    $L$ (85), constraints (86) halved so that the rows are (87) and the multipliers are those of (91):
    $m_1\\ddot x_1 = m_1 g + \\lambda_1 x_1 + \\lambda_2(x_1 - x_2)$, etc. The `PlanarChain` with $N = 2$.
    """

    m1: RealScalarLike = 1.0
    m2: RealScalarLike = 1.0
    l1: RealScalarLike = 1.0
    l2: RealScalarLike = 1.0
    g: RealScalarLike = 9.81

    description: ClassVar[str] = "double pendulum in Cartesian coordinates, x down ([Zanella] §3.3)"
    coordinates: ClassVar[tuple[str, ...]] = ("x1", "y1", "x2", "y2")
    units: ClassVar[tuple[str, ...]] = ("m", "m", "m", "m")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def chain(self) -> PlanarChain:
        return PlanarChain(
            2,
            jnp.stack([jnp.asarray(self.m1, float), jnp.asarray(self.m2, float)]),
            jnp.stack([jnp.asarray(self.l1, float), jnp.asarray(self.l2, float)]),
            self.g,
        )

    def system(self) -> LagrangianSystem:
        return self.chain().system()

    def initial_state(self, angles=(0.5, 1.0), rates=(0.0, 1.0)) -> State:
        return self.chain().initial_state(angles, rates)


class SphericalPendulum(AbstractSymmetricModel):
    """A particle of mass $m$ on a sphere of radius $R$ (the spherical pendulum), Cartesian $(x, y, z)$.

    $z$ points **up**, gravity $-g\\hat z$: $L = \\tfrac12 m|v|^2 - m g z$, $h = \\tfrac12(|q|^2 - R^2)$,
    so the multiplier $\\lambda$ gives the normal force $\\lambda q$ and
    $\\lambda = -m(|v|^2 - g z)/R^2$. $E$ and $L_z = m(x\\dot y - y\\dot x)$ are conserved.
    """

    m: RealScalarLike = 1.0
    R: RealScalarLike = 1.0
    g: RealScalarLike = 9.81

    description: ClassVar[str] = (
        "particle on a sphere (spherical pendulum), Cartesian (x, y, z), z up"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y", "z")
    units: ClassVar[tuple[str, ...]] = ("m", "m", "m")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = (0, 1)
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def lagrangian(self, q, v):
        return 0.5 * self.m * (v @ v) - self.m * self.g * q[2]

    def h(self, q):
        return 0.5 * (q @ q - self.R**2)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian, constraint=HolonomicConstraint(self.h))

    def action(self) -> LieAlgebraAction:
        """Rotations about the vertical $z$ axis, leaving $L$ and the sphere invariant."""
        return LieAlgebraAction(z_rotation_generator)

    def initial_state(self, polar=2.0, azimuth_rate=2.0, polar_rate=0.3) -> State:
        """Polar angle `polar` from the upward $z$ axis, azimuth 0, with the given angle rates."""
        th, R = jnp.asarray(polar, float), jnp.asarray(self.R, float)
        q = R * jnp.stack([jnp.sin(th), 0.0 * th, jnp.cos(th)])
        v = R * jnp.stack(
            [polar_rate * jnp.cos(th), azimuth_rate * jnp.sin(th), -polar_rate * jnp.sin(th)]
        )
        return State(q, v)
