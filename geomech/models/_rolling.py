"""Knife edges and rolling bodies: the sleigh of [Goicolea], the rolling disk, the hoop on an incline."""

from typing import ClassVar

import jax
import jax.numpy as jnp
import jaxlie

from .._bundle import State
from .._constraint import LinearConstraint
from .._contact import AbstractContact
from .._custom_types import RealScalarLike
from .._mesh import Mesh
from .._scene import Scene
from .._symmetry import LieAlgebraAction
from .._system import LagrangianSystem
from ._base import AbstractModel, AbstractSceneModel, AbstractSymmetricModel


def _planar_euclidean_generators(q):
    """$\\xi_Q$ of $SE(2)$ on $(x, y, \\theta, \\dots)$: the translations and the rotation about 0."""
    x, y = q[0], q[1]
    e = jnp.eye(q.shape[0], 3, dtype=q.dtype)
    return e.at[0, 2].set(-y).at[1, 2].set(x)


def _disk_generators(q):
    """$SE(2)$ on $(x, y, \\varphi)$ and the spin shift $\\psi \\mapsto \\psi + s$."""
    return jnp.concatenate(
        [_planar_euclidean_generators(q), jnp.eye(5, dtype=q.dtype)[:, 4:]], axis=1
    )


class ChaplyginSleigh(AbstractSymmetricModel, AbstractSceneModel):
    """[Goicolea] Ex. 7.1/7.7: two particles of mass $m$ joined by a massless rod of length $l$, with a
    knife edge at $A$ (the Chaplygin sleigh), on a smooth horizontal plane.

    $q = (x, y, \\theta)$: centre of mass $G$ and the rod's angle to the $x$ axis; $A = G - \\tfrac l2\\hat e_1$
    with $\\hat e_1 = (\\cos\\theta, \\sin\\theta)$, $\\hat e_2 = (-\\sin\\theta, \\cos\\theta)$.
    $L = m(\\dot x^2 + \\dot y^2) + \\tfrac14 m l^2\\dot\\theta^2$; the constraint is (7.65),
    $-\\dot x\\sin\\theta + \\dot y\\cos\\theta - \\tfrac l2\\dot\\theta = 0$, whose multiplier is the knife's
    normal reaction $R$ (7.66)–(7.72).

    With $u = \\dot x\\cos\\theta + \\dot y\\sin\\theta$ and $\\omega = \\dot\\theta$: $\\dot u = \\tfrac l2\\omega^2$,
    $\\dot\\omega = -u\\omega/l$, so with $c = \\sqrt{u_0^2 + \\tfrac12 l^2\\omega_0^2}$
    (from $E = m(u^2 + \\tfrac12 l^2\\omega^2)$) and $s = ct/l + \\operatorname{artanh}(u_0/c)$:
    $u = c\\tanh s$, $\\omega = \\pm\\sqrt2\\,(c/l)\\operatorname{sech} s$,
    $\\theta = \\theta_0 \\pm \\sqrt2\\,(\\operatorname{gd} s - \\operatorname{gd} s_0)$ and
    $\\lambda = R = m u\\omega$.
    """

    m: RealScalarLike = 1.0
    l: RealScalarLike = 1.0

    description: ClassVar[str] = (
        "knife-edge (Chaplygin) sleigh, two masses on a rod ([Goicolea] Ex. 7.1/7.7)"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y", "theta")
    units: ClassVar[tuple[str, ...]] = ("m", "m", "rad")  # with m in kg, l in m
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = (0, 1)
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def lagrangian(self, q, v):
        return self.m * (v[0] ** 2 + v[1] ** 2) + 0.25 * self.m * self.l**2 * v[2] ** 2

    def row(self, q):
        th = q[2]
        return jnp.stack([-jnp.sin(th), jnp.cos(th), -0.5 * self.l + 0 * th])[None, :]  # (7.65)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian, constraint=LinearConstraint(self.row))

    def action(self) -> LieAlgebraAction:
        """$SE(2)$ (translations of the plane, rotations about the origin), leaving $L$ invariant."""
        return LieAlgebraAction(_planar_euclidean_generators)

    def knife_edge(self, q):
        """$A = G - \\tfrac l2\\hat e_1$ on the plane, in space (z = 0)."""
        th = q[2]
        return jnp.stack(
            [q[0] - 0.5 * self.l * jnp.cos(th), q[1] - 0.5 * self.l * jnp.sin(th), 0.0 * th]
        )

    def scene(self) -> Scene:
        """The two particles (balls of radius $0.06\\,l$ resting on the plane) on their rod, the
        blade under $A$; the knife edge's path and that of the other particle traced."""
        l = float(self.l)
        rho = 0.06 * l
        mesh = Mesh.merge(
            Mesh.box((0.5 * l, 0.012 * l, 0.012 * l)),
            Mesh.sphere(rho, (-0.5 * l, 0.0, 0.0), rings=12, segments=24),
            Mesh.sphere(rho, (0.5 * l, 0.0, 0.0), rings=12, segments=24),
            Mesh.box((0.1 * l, 0.004 * l, 0.5 * rho), (-0.5 * l, 0.0, -0.5 * rho)),
        )

        def pose(q):
            return jaxlie.SO3.from_z_radians(q[2]), jnp.stack([q[0], q[1], rho + 0.0 * q[2]])

        return Scene(
            mesh,
            pose,
            contact=self.knife_edge,
            point=(0.5 * l, 0.0, -rho),
            contact_label="path of the knife edge A",
            point_label="path of the other particle",
        )

    def initial_state(self, u0=0.5, omega0=1.0, theta0=0.3) -> State:
        """$G$ at the origin, rod at angle `theta0`, longitudinal speed `u0`, turning rate `omega0`."""
        th = jnp.asarray(theta0, float)
        e1, e2 = jnp.stack([jnp.cos(th), jnp.sin(th)]), jnp.stack([-jnp.sin(th), jnp.cos(th)])
        vxy = u0 * e1 + 0.5 * self.l * omega0 * e2  # lateral speed of G is (l/2) ω on C
        return State(
            jnp.stack([0.0 * th, 0.0 * th, th]),
            jnp.concatenate([vxy, jnp.atleast_1d(omega0 + 0.0 * th)]),
        )

    def body_velocities(self, state: State):
        """$(u, \\omega)$: longitudinal speed of $G$ and turning rate."""
        th = state.q[2]
        return state.v[0] * jnp.cos(th) + state.v[1] * jnp.sin(th), state.v[2]

    def closed_form(self, t, u0, omega0, theta0=0.0):
        """$(u(t), \\omega(t), \\theta(t), R(t))$ of the class docstring."""
        c = jnp.sqrt(u0**2 + 0.5 * self.l**2 * omega0**2)
        s0 = jnp.arctanh(u0 / c)
        s = c * t / self.l + s0
        gd = lambda x: 2 * jnp.arctan(jnp.tanh(0.5 * x))  # Gudermannian, ∫ sech
        u = c * jnp.tanh(s)
        omega = jnp.sign(omega0) * jnp.sqrt(2.0) * c / self.l / jnp.cosh(s)
        theta = theta0 + jnp.sign(omega0) * jnp.sqrt(2.0) * (gd(s) - gd(s0))
        return u, omega, theta, self.m * u * omega


class RollingDisk(AbstractSymmetricModel, AbstractSceneModel):
    """A disk (radius $R$, mass $m$) rolling without slipping on the horizontal plane $z = 0$.

    $q = (x, y, \\varphi, \\theta, \\psi)$: contact point $(x, y)$, yaw $\\varphi$ (the rolling direction is
    $\\hat t = (\\cos\\varphi, \\sin\\varphi, 0)$), lean $\\theta$ (rotation about $\\hat t$; $\\theta = 0$ upright)
    and spin $\\psi$ about the disk's axis $\\hat a = \\cos\\theta\\,\\hat n + \\sin\\theta\\,\\hat z$,
    $\\hat n = (-\\sin\\varphi, \\cos\\varphi, 0)$. $z$ points up. The centre is at $(x, y, 0) + c$ with
    $c = R(\\sin\\theta\\sin\\varphi, -\\sin\\theta\\cos\\varphi, \\cos\\theta)$, the angular velocity is
    $\\omega = \\dot\\varphi\\hat z + \\dot\\theta\\hat t + \\dot\\psi\\hat a$, and
    $L = \\tfrac12 m|\\dot c_G|^2 + \\tfrac12[A(|\\omega|^2 - (\\omega\\cdot\\hat a)^2)
    + B(\\omega\\cdot\\hat a)^2] - m g R\\cos\\theta$
    with $A$, $B$ the moments of inertia about a diameter and the axis (uniform disk by default:
    $A = mR^2/4$, $B = mR^2/2$). Rolling (zero velocity of the material contact point) gives the two
    nonholonomic constraints $\\dot x - R\\dot\\psi\\cos\\varphi = 0$, $\\dot y - R\\dot\\psi\\sin\\varphi = 0$.
    Valid for $|\\theta| < \\pi/2$; $E_L$ is conserved.
    """

    m: RealScalarLike = 1.0
    R: RealScalarLike = 1.0
    g: RealScalarLike = 9.81
    A: RealScalarLike | None = None
    B: RealScalarLike | None = None

    description: ClassVar[str] = (
        "disk rolling without slipping on a plane: (x, y, yaw, lean, spin), 2 nonholonomic constraints"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "y", "phi", "theta", "psi")
    units: ClassVar[tuple[str, ...]] = ("m", "m", "rad", "rad", "rad")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = (0, 1)
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def inertia(self):
        A = 0.25 * self.m * self.R**2 if self.A is None else self.A
        B = 0.5 * self.m * self.R**2 if self.B is None else self.B
        return A, B

    def center_offset(self, angles):
        """$c(\\varphi, \\theta)$, the vector from the contact point to the centre."""
        phi, th = angles
        return self.R * jnp.stack(
            [jnp.sin(th) * jnp.sin(phi), -jnp.sin(th) * jnp.cos(phi), jnp.cos(th)]
        )

    def angular_velocity(self, q, v):
        """$\\omega$ and the axis $\\hat a$ in the fixed frame."""
        phi, th = q[2], q[3]
        t_hat = jnp.stack([jnp.cos(phi), jnp.sin(phi), 0 * phi])
        n_hat = jnp.stack([-jnp.sin(phi), jnp.cos(phi), 0 * phi])
        z_hat = jnp.stack([0 * phi, 0 * phi, 1 + 0 * phi])
        a_hat = jnp.cos(th) * n_hat + jnp.sin(th) * z_hat
        return v[2] * z_hat + v[3] * t_hat + v[4] * a_hat, a_hat

    def pose(self, q):
        """The disk's attitude $R = R_z(\\varphi) R_x(\\theta) R_y(\\psi)$ (its axis the body
        $e_2$, `RollingDiskSO3`'s frame) and its centre $(x, y, 0) + c(\\varphi, \\theta)$."""
        R = (
            jaxlie.SO3.from_z_radians(q[2])
            @ jaxlie.SO3.from_x_radians(q[3])
            @ jaxlie.SO3.from_y_radians(q[4])
        )
        return R, jnp.concatenate([q[:2], jnp.zeros(1, q.dtype)]) + self.center_offset(q[2:4])

    def scene(self) -> Scene:
        """The disk (axis $e_2$) on the plane, its contact point $(x, y)$ and a point of its rim
        traced."""
        R = float(self.R)

        def contact(q):
            return jnp.concatenate([q[:2], jnp.zeros(1, q.dtype)])

        return Scene(Mesh.disk(R, axis=1), self.pose, contact=contact, point=(0.0, 0.0, R))

    def lagrangian(self, q, v):
        A, B = self.inertia()
        _, c_dot = jax.jvp(self.center_offset, (q[2:4],), (v[2:4],))
        vG = jnp.concatenate([v[:2], jnp.zeros((1,), v.dtype)]) + c_dot
        w, a_hat = self.angular_velocity(q, v)
        wa = w @ a_hat
        T = 0.5 * self.m * (vG @ vG) + 0.5 * (A * (w @ w - wa**2) + B * wa**2)
        return T - self.m * self.g * self.R * jnp.cos(q[3])

    def rows(self, q):
        phi, z, o = q[2], 0 * q[2], 1 + 0 * q[2]
        return jnp.stack(
            [
                jnp.stack([o, z, z, z, -self.R * jnp.cos(phi)]),
                jnp.stack([z, o, z, z, -self.R * jnp.sin(phi)]),
            ]
        )

    def system(self) -> LagrangianSystem:
        """With the plane as its `contact` (`_LeanContact`: a run stops where the disk lies flat or
        would lift off)."""
        return LagrangianSystem(
            self.lagrangian, constraint=LinearConstraint(self.rows), contact=_LeanContact(self)
        )

    def action(self) -> LieAlgebraAction:
        """$SE(2) \\times S^1$: planar motions of $(x, y, \\varphi)$ and spin shifts; $L$ is invariant."""
        return LieAlgebraAction(_disk_generators)

    def initial_state(self, lean=0.1, yaw_rate=0.5, lean_rate=0.0, spin_rate=5.0) -> State:
        """At the origin with yaw 0 and lean `lean`; $(\\dot x, \\dot y)$ from the rolling constraints.
        The defaults roll fast enough for the disk to stay up (|lean| stays small)."""
        z = jnp.zeros(())
        q = jnp.stack([z, z, z, z + lean, z])
        v = jnp.stack([z + self.R * spin_rate, z, z + yaw_rate, z + lean_rate, z + spin_rate])
        return State(q, v)


class _LeanContact(AbstractContact):
    """`RollingDisk`'s plane: the normal force $N = m(g + \\ddot z_G)$ with the centre's height
    $z_G = R\\cos\\theta$, so $\\ddot z_G = -R(\\cos\\theta\\,\\dot\\theta^2 + \\sin\\theta\\,
    \\ddot\\theta)$, and the margin $\\cos\\theta$, which changes sign where the disk passes flat
    ($\\theta = \\pm\\pi/2$, where the model ends)."""

    disk: RollingDisk

    def normal_force(self, t, state, acceleration):
        th, th_dot, th_ddot = state.q[3], state.v[3], acceleration[3]
        m, g, R = self.disk.m, self.disk.g, self.disk.R
        z_ddot = -R * (jnp.cos(th) * th_dot**2 + jnp.sin(th) * th_ddot)
        return m * (g + z_ddot), m * (g + R * (th_dot**2 + jnp.abs(th_ddot)))

    def margin(self, t, state):
        return jnp.cos(state.q[3])

    def same_contact(self, y0, y1):  # continuous in θ: the margin's sign change finds flat
        return jnp.array(True)


class RollingHoop(AbstractModel):
    """[Goicolea] Ex. 7.6: a hoop (radius $r$, mass $m$) rolling without slipping down a line inclined at $\\alpha$.

    $q = (x, \\theta)$, $x$ measured **down** the incline. $L = \\tfrac12 m\\dot x^2 + \\tfrac12 m r^2\\dot\\theta^2
    + m g x\\sin\\alpha$ (the printed $\\sec\\alpha$ is an OCR error for $\\sin\\alpha$). The rolling condition is
    kept as the velocity constraint $A_x\\dot x + A_\\theta\\dot\\theta = 0$ with $(A_x, A_\\theta) = (-1, r)$,
    so $\\lambda = \\tfrac12 m g\\sin\\alpha$, $\\ddot x = \\tfrac12 g\\sin\\alpha$ and the friction is
    $R_x = \\lambda A_x = -\\tfrac12 m g\\sin\\alpha$ (pointing up the incline).
    """

    m: RealScalarLike = 1.0
    r: RealScalarLike = 0.5
    alpha: RealScalarLike = 0.3
    g: RealScalarLike = 9.81

    description: ClassVar[str] = (
        "hoop rolling down an incline, rolling kept as a constraint ([Goicolea] Ex. 7.6)"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("x", "theta")
    units: ClassVar[tuple[str, ...]] = ("m", "rad")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 2.0)

    def lagrangian(self, q, v):
        return 0.5 * self.m * (v[0] ** 2 + self.r**2 * v[1] ** 2) + self.m * self.g * q[
            0
        ] * jnp.sin(self.alpha)

    def row(self, q):
        return jnp.stack([-1.0 + 0 * q[0], self.r + 0 * q[0]])[None, :]

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian, constraint=LinearConstraint(self.row))

    def initial_state(self, speed=0.5) -> State:
        z = jnp.zeros(())
        return State(jnp.stack([z, z]), jnp.stack([z + speed, z + speed / self.r]))
