"""Rigid bodies on SO(3) and SO(3) × ℝ³ (docs/lie_groups.md), built from `gm.RigidBody`: the free
rigid body, the heavy top (on SO(3), and on SO(3) × ℝ³ held at its pivot), the Suslov problem and
the Veselova system.

On a group the configuration is the `jaxlie` element itself, so `coordinates` and `units` name the
components of the velocity $v$ (the body angular velocity $\\omega_1, \\omega_2, \\omega_3$ in
rad/s, then $\\dot x$ in m/s on SO(3) × ℝ³), and `point_parameters` the stored parameters of the
point (the unit quaternion $q_w, q_x, q_y, q_z$ of `jaxlie.SO3.wxyz`, then $x$).
"""

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
import jaxlie
from jaxtyping import Array, ArrayLike, Float

from .._bundle import State
from .._constraint import HolonomicConstraint, LinearConstraint
from .._geometry import SO3, Euclidean, Product, rotate
from .._mesh import Mesh
from .._scene import Scene
from .._system import AbstractBodiesLagrangian, LagrangianSystem
from ..bodies import RigidBody
from ._base import AbstractSceneModel

E3 = (0.0, 0.0, 1.0)
_OMEGA = ("omega1", "omega2", "omega3")
_QUATERNION = ("q_w", "q_x", "q_y", "q_z")


def _inertia(I1, I2, I3, I12=0.0, I13=0.0, I23=0.0) -> Float[Array, "3 3"]:
    """The symmetric inertia matrix from its moments and products (entries, not $-\\int xy$)."""
    return jnp.array([[I1, I12, I13], [I12, I2, I23], [I13, I23, I3]], dtype=float)


def _rotation(R0) -> jaxlie.SO3:
    return jaxlie.SO3(jnp.asarray([1.0, 0.0, 0.0, 0.0])) if R0 is None else R0


class _AbstractRigidModel(AbstractSceneModel):
    """A body on SO(3) with a fixed point (the body frame's origin): $L = T - U$ of
    `gm.RigidBody.lagrangian(gm.SO3())`, $q = R$, $v = \\omega$."""

    body: RigidBody

    units: ClassVar[tuple[str, ...]] = ("rad/s",) * 3
    coordinates: ClassVar[tuple[str, ...]] = _OMEGA
    point_parameters: ClassVar[tuple[str, ...] | None] = _QUATERNION
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None

    @abc.abstractmethod
    def lagrangian(self) -> AbstractBodiesLagrangian:
        """$L = T - U$ of the body (`gm.RigidBody.lagrangian`): a bodies Lagrangian, so the
        equations are Kane's (docs/performance.md)."""


def _weightless(body: RigidBody) -> AbstractBodiesLagrangian:
    """$L = T$ on SO(3), the body's frame origin a fixed point."""
    return body.lagrangian(SO3(), jnp.zeros(3, body.mass.dtype))


class FreeRigidBody(_AbstractRigidModel):
    """The free rigid body (Euler's equations): $L = \\tfrac12\\omega^\\top I\\omega$ on SO(3),
    so $I\\dot\\omega = I\\omega \\times \\omega$ and $\\dot R = R\\hat\\omega$
    [LandauLifshitz1976, §36–§37]. The energy and the spatial angular momentum $R I\\omega$ are
    conserved; for principal moments $I_1 < I_2 < I_3$, $\\omega$ is given by Jacobi's elliptic
    functions (§37).

    Parameters: the principal moments `I1`, `I2`, `I3` [kg m²] (body axes principal).
    """

    description: ClassVar[str] = (
        "free rigid body on SO(3), Euler's equations ([LandauLifshitz1976] §37)"
    )
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def __init__(self, I1: ArrayLike = 1.0, I2: ArrayLike = 2.0, I3: ArrayLike = 3.0):
        self.body = RigidBody(1.0, _inertia(I1, I2, I3))

    def lagrangian(self) -> AbstractBodiesLagrangian:
        return _weightless(self.body)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian(), manifold=SO3())

    def scene(self) -> Scene:
        """The equimomental ellipsoid turning about its centre (`Scene.pivoted`)."""
        return Scene.pivoted(self.body)

    def initial_state(self, omega0=(1.0, 0.3, 0.5), R0=None) -> State:
        """At the rotation `R0` (the identity by default) with body angular velocity `omega0`."""
        return State(_rotation(R0), jnp.asarray(omega0, float))


class _AbstractTop(_AbstractRigidModel):
    """A heavy top: mass `m`, principal moments `I1`, `I2`, `I3` about the centre of mass, which
    sits at $\\ell e_3$ on the body's symmetry axis, in the field $g$ along $-e_3$."""

    g: Float[Array, ""]
    ell: Float[Array, ""]

    time_span: ClassVar[tuple[float, float]] = (0.0, 5.0)

    def __init__(
        self,
        m: ArrayLike = 1.0,
        I1: ArrayLike = 0.5,
        I2: ArrayLike = 0.5,
        I3: ArrayLike = 0.4,
        ell: ArrayLike = 0.5,
        g: ArrayLike = 9.81,
    ):
        self.ell = jnp.asarray(ell, float)
        self.g = jnp.asarray(g, float)
        self.body = RigidBody(m, _inertia(I1, I2, I3), self.ell * jnp.asarray(E3))

    def gravity(self):
        return self.g * jnp.asarray((0.0, 0.0, -1.0))

    def top(self) -> Mesh:
        """A solid cone on its apex at the pivot whose centroid ($\\tfrac34$ of its height
        $\\tfrac43\\ell$) is the centre of mass (the shape only: the inertia is the model's)."""
        ell = float(self.ell)
        return Mesh.cone(0.5 * ell, 4.0 * ell / 3.0)

    def _floor(self) -> float:
        return -1.5 * float(self.ell)  # below every point of the cone: a floor to see by


class HeavyTop(_AbstractTop):
    """The heavy top on SO(3), its pivot at the body frame's origin:
    $L = \\tfrac12\\omega^\\top I_O\\omega - m g \\ell\\,(R e_3)\\cdot e_3$ with $I_O$ the inertia
    about the pivot (parallel axes, [Goldstein2002, §5.3]), so the Euler–Poisson equations
    $I_O\\dot\\omega = I_O\\omega\\times\\omega + m g\\ell\\,\\gamma\\times e_3$,
    $\\dot\\gamma = \\gamma\\times\\omega$ with $\\gamma = R^\\top e_3$ [Goldstein2002, §5.7].

    The default state starts **upright** ($R = 1$, the symmetry axis vertical), where the ZXZ
    Euler angles are singular ($\\theta = 0$); see docs/rotating_bodies.md.
    """

    description: ClassVar[str] = (
        "heavy top on SO(3) through the upright position (Euler–Poisson, [Goldstein2002] §5.7)"
    )

    def lagrangian(self) -> AbstractBodiesLagrangian:
        return self.body.lagrangian(SO3(), self.gravity())

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(self.lagrangian(), manifold=SO3())

    def scene(self) -> Scene:
        """The cone `top()` on its pivot, the centre of its base traced, a floor below."""
        ell = float(self.ell)
        return Scene.pivoted(
            self.body, mesh=self.top(), point=(0.0, 0.0, 4.0 * ell / 3.0), plane=self._floor()
        )

    def initial_state(self, omega0=(0.3, 0.0, 6.0), R0=None) -> State:
        """At `R0` (upright by default) with body angular velocity `omega0` (spin about the axis)."""
        return State(_rotation(R0), jnp.asarray(omega0, float))


class PivotedTop(_AbstractTop):
    """The heavy top of `HeavyTop` as a free body on SO(3) × ℝ³, held at its pivot by a
    holonomic constraint: $q = (R, x)$ with $x$ the centre of mass (the body frame's origin here),
    $v = (\\omega, \\dot x)$, $L = \\tfrac12 m|\\dot x|^2 + \\tfrac12\\omega^\\top I_c\\omega - m g x_3$
    and $h(R, x) = x - \\ell R e_3 = 0$ (the pivot at the spatial origin). Its rotation is that of
    `HeavyTop` with the same parameters; the multiplier is the pivot's reaction.
    """

    description: ClassVar[str] = (
        "heavy top as a body on SO(3) × R^3 held at its pivot (3 holonomic constraints)"
    )
    coordinates: ClassVar[tuple[str, ...]] = (*_OMEGA, "vx", "vy", "vz")  # ẋ, spatial
    units: ClassVar[tuple[str, ...]] = ("rad/s",) * 3 + ("m/s",) * 3
    point_parameters: ClassVar[tuple[str, ...] | None] = (*_QUATERNION, "x", "y", "z")

    def lagrangian(self) -> AbstractBodiesLagrangian:
        # the same body with its frame's origin at the centre of mass
        free = eqx.tree_at(lambda b: b.centre_of_mass, self.body, jnp.zeros(3, self.ell.dtype))
        return free.lagrangian(self.manifold(), self.gravity())

    def manifold(self) -> Product:
        return Product(SO3(), Euclidean(3))

    def pivot(self, q):
        """$h(R, x) = x - \\ell R e_3$: the pivot's position, held at the origin."""
        R, x = q
        return x - self.ell * rotate(R, jnp.asarray(E3, x.dtype))

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(
            self.lagrangian(), constraint=HolonomicConstraint(self.pivot), manifold=self.manifold()
        )

    def scene(self) -> Scene:
        """`HeavyTop`'s scene with the body frame at the centre of mass $x$."""
        ell = float(self.ell)
        return Scene.free(
            self.body,
            mesh=self.top().translated((0.0, 0.0, -ell)),
            point=(0.0, 0.0, ell / 3.0),
            plane=self._floor(),
            pivot=(0.0, 0.0, 0.0),
        )

    def initial_state(self, omega0=(0.3, 0.0, 6.0), R0=None) -> State:
        """`HeavyTop`'s state: $x = \\ell R e_3$, $\\dot x = \\ell R(\\omega \\times e_3)$."""
        R, w = _rotation(R0), jnp.asarray(omega0, float)
        e3 = jnp.asarray(E3)
        x, xdot = self.ell * rotate(R, e3), self.ell * rotate(R, jnp.cross(w, e3))
        return State((R, x), jnp.concatenate([w, xdot]))


class Suslov(_AbstractRigidModel):
    """Suslov's problem: a free rigid body with the nonholonomic constraint
    $\\langle\\omega, e\\rangle = 0$ for the body-fixed axis $e = e_3$ [BorisovKilinMamaev2011]:
    $I\\dot\\omega = I\\omega\\times\\omega + \\lambda e_3$, $\\omega_3 = 0$. The closed form
    below is derived here from these equations (and checked numerically in the tests).

    With $I_{12} = 0$ the first two rows give $I_1\\dot\\omega_1 = -u\\,\\omega_2$,
    $I_2\\dot\\omega_2 = u\\,\\omega_1$, $u = I_{13}\\omega_1 + I_{23}\\omega_2$. The energy
    $E = \\tfrac12(I_1\\omega_1^2 + I_2\\omega_2^2)$ is conserved: $\\omega_1 = a\\cos\\varphi$,
    $\\omega_2 = b\\sin\\varphi$ with $a = \\sqrt{2E/I_1}$, $b = \\sqrt{2E/I_2}$ and
    $\\dot\\varphi = u/\\sqrt{I_1 I_2} = K\\cos(\\varphi - \\varphi_*)$,
    $K = \\sqrt{I_{13}^2a^2 + I_{23}^2b^2}/\\sqrt{I_1I_2}$, $\\tan\\varphi_* = I_{23}b/(I_{13}a)$.
    So $\\chi = \\varphi - \\varphi_*$ is the Gudermannian of $s = Kt + s_0$: $\\cos\\chi =
    \\operatorname{sech}s$, $\\sin\\chi = \\tanh s$, and
    $\\omega_1 = a(\\operatorname{sech}s\\cos\\varphi_* - \\tanh s\\sin\\varphi_*)$,
    $\\omega_2 = b(\\operatorname{sech}s\\sin\\varphi_* + \\tanh s\\cos\\varphi_*)$ (`closed_form`):
    the body tends to a steady rotation for $t \\to \\pm\\infty$ (for $I_{13} = I_{23} = 0$,
    $K = 0$ and $\\omega$ is constant).

    Parameters: `I1`, `I2`, `I3`, `I13`, `I23` [kg m²] ($I_{12} = 0$: the body axes 1, 2 principal
    in the plane $e^\\perp$).
    """

    description: ClassVar[str] = (
        "Suslov's problem: rigid body with <omega, e3> = 0 in the body ([BorisovKilinMamaev2011])"
    )
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def __init__(
        self,
        I1: ArrayLike = 1.0,
        I2: ArrayLike = 2.0,
        I3: ArrayLike = 2.5,
        I13: ArrayLike = 0.3,
        I23: ArrayLike = 0.2,
    ):
        self.body = RigidBody(1.0, _inertia(I1, I2, I3, 0.0, I13, I23))

    def axis(self, R) -> Float[Array, "1 3"]:
        """$A(R) = e^\\top$: the constraint $\\langle\\omega, e_3\\rangle = 0$."""
        return jnp.asarray([E3], self.body.mass.dtype)

    def lagrangian(self) -> AbstractBodiesLagrangian:
        return _weightless(self.body)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(
            self.lagrangian(), constraint=LinearConstraint(self.axis), manifold=SO3()
        )

    def scene(self) -> Scene:
        """The equimomental ellipsoid turning about its centre (`Scene.pivoted`); $e_3$ is the
        body axis about which it may not turn."""
        return Scene.pivoted(self.body)

    def initial_state(self, omega0=(1.0, -0.5), R0=None) -> State:
        """At `R0` (the identity by default) with $\\omega = (\\omega_1, \\omega_2, 0)$."""
        w = jnp.asarray(omega0, float)
        return State(_rotation(R0), jnp.concatenate([w, jnp.zeros(1, w.dtype)]))

    def closed_form(self, t, omega0):
        """$(\\omega_1(t), \\omega_2(t))$ from $\\omega(0) = $ `omega0` (class docstring)."""
        I = self.body.inertia
        I1, I2, I13, I23 = I[0, 0], I[1, 1], I[0, 2], I[1, 2]
        w1, w2 = omega0[0], omega0[1]
        E2 = I1 * w1**2 + I2 * w2**2
        a, b = jnp.sqrt(E2 / I1), jnp.sqrt(E2 / I2)
        K = jnp.sqrt((I13 * a) ** 2 + (I23 * b) ** 2) / jnp.sqrt(I1 * I2)
        phi_star = jnp.arctan2(I23 * b, I13 * a)
        chi0 = jnp.arctan2(w2 / b, w1 / a) - phi_star
        # χ̇ = K cos χ: χ = gd(s) where cos χ > 0; where cos χ0 < 0, χ - π = gd(-K t + s0)
        sigma = jnp.where(jnp.cos(chi0) >= 0, 1.0, -1.0)
        s = sigma * K * t + jnp.arctanh(sigma * jnp.sin(chi0))
        cos_chi, sin_chi = sigma / jnp.cosh(s), sigma * jnp.tanh(s)
        cp, sp = jnp.cos(phi_star), jnp.sin(phi_star)
        return a * (cos_chi * cp - sin_chi * sp), b * (cos_chi * sp + sin_chi * cp)


class Veselova(_AbstractRigidModel):
    """The Veselova system: a rigid body with a fixed point (its centre of mass) and the
    nonholonomic constraint $\\langle\\omega, \\gamma\\rangle = 0$, $\\gamma = R^\\top e_3$ the
    spatial vertical in body axes (no spin about the vertical) [VeselovVeselova1988]:
    $I\\dot\\omega = I\\omega\\times\\omega + \\lambda\\gamma$, $\\dot\\gamma = \\gamma\\times\\omega$.
    The energy $\\tfrac12\\omega^\\top I\\omega$ and $|I\\omega|^2 - (I\\omega\\cdot\\gamma)^2$ are
    conserved (the latter since $\\tfrac{d}{dt}(I\\omega) = I\\omega\\times\\omega + \\lambda\\gamma$
    and $\\tfrac{d}{dt}(I\\omega\\cdot\\gamma) = \\lambda$).

    Parameters: the principal moments `I1`, `I2`, `I3` [kg m²].
    """

    description: ClassVar[str] = (
        "Veselova system: rigid body with <omega, R^T e3> = 0 ([VeselovVeselova1988])"
    )
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    def __init__(self, I1: ArrayLike = 1.0, I2: ArrayLike = 2.0, I3: ArrayLike = 3.0):
        self.body = RigidBody(1.0, _inertia(I1, I2, I3))

    def vertical(self, R) -> Float[Array, "1 3"]:
        """$A(R) = \\gamma^\\top$, $\\gamma = R^\\top e_3$."""
        return rotate(R.inverse(), jnp.asarray(E3, self.body.mass.dtype))[None, :]

    def lagrangian(self) -> AbstractBodiesLagrangian:
        return _weightless(self.body)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(
            self.lagrangian(), constraint=LinearConstraint(self.vertical), manifold=SO3()
        )

    def scene(self) -> Scene:
        """The equimomental ellipsoid turning about its centre (`Scene.pivoted`) above a floor,
        so that the spatial vertical (about which it may not turn) is seen."""
        return Scene.pivoted(self.body, plane=-float(Mesh.equimomental(self.body).radius()))

    def initial_state(self, omega0=(1.0, -0.4, 0.6), R0=None) -> State:
        """At `R0` (a tilt by default) with `omega0` projected onto $\\gamma^\\perp$."""
        R = jaxlie.SO3.exp(jnp.array([0.4, -0.3, 0.2])) if R0 is None else R0
        w = jnp.asarray(omega0, float)
        gamma = rotate(R.inverse(), jnp.asarray(E3))
        return State(R, w - (w @ gamma) * gamma)
