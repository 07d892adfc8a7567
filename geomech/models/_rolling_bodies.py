"""Balls rolling without slipping on a plane, on $SO(3)\\times\\mathbb{R}^2$ (docs/lie_groups.md),
built from `gm.RigidBody` and `gm.RollingBody`: $q = (R, x)$ with $x$ the horizontal position of
the ball's geometric centre, $v = (\\omega, \\dot x)$ with $\\omega$ the body angular velocity.

On a group `coordinates` and `units` name the tangent directions of the velocity $v$."""

import abc
from collections.abc import Sequence
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
from jaxtyping import Array, ArrayLike, Float

from .._bundle import State
from .._geometry import rotate
from .._scene import Scene
from .._system import LagrangianSystem
from ..bodies import Ellipsoid, RigidBody, RollingBody, Sphere, ThinDisk
from ._base import AbstractRollingModel, AbstractSceneModel
from ._rolling import RollingDisk

Vector = ArrayLike | Sequence[float]


def _param(x):
    x = jnp.asarray(x)
    return x.astype(jnp.result_type(float, x))


class _AbstractRollingBody(AbstractRollingModel, AbstractSceneModel):
    """A body rolling on $SO(3)\\times\\mathbb{R}^2$ with the velocity's tangent directions as its
    coordinates."""

    coordinates: ClassVar[tuple[str, ...]] = ("omega1", "omega2", "omega3", "vx", "vy")
    units: ClassVar[tuple[str, ...]] = ("rad/s", "rad/s", "rad/s", "m/s", "m/s")
    point_parameters: ClassVar[tuple[str, ...] | None] = ("q_w", "q_x", "q_y", "q_z", "x", "y")
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    # a state is its attitude, position and angular velocity; the contact velocity follows
    independent_coordinates: ClassVar[tuple[int, ...] | None] = (0, 1, 2, 3, 4)
    independent_speeds: ClassVar[tuple[int, ...] | None] = (0, 1, 2)

    @abc.abstractmethod
    def rolling_body(self) -> RollingBody:
        """The `gm.RollingBody` with this model's parameters."""

    def system(self) -> LagrangianSystem:
        return self.rolling_body().system()

    def scene(self) -> Scene:
        """The body's surface rolling on the plane, its contact point and its point along the
        body's $e_1$ axis traced (`Scene.rolling`)."""
        return Scene.rolling(self.rolling_body())

    def contact_point(self, q) -> Float[Array, "2"]:
        """$(x, y)$ of the point where the surface touches the plane (`gm.RollingBody.contact`)."""
        return self.rolling_body().contact(q)[:2]


class _AbstractRollingBall(_AbstractRollingBody):
    """A rolling body started from a given attitude, position and body angular velocity (the
    class's `start_omega`, `start_attitude`, `start_position` by default)."""

    start_omega: eqx.AbstractClassVar[tuple[float, float, float]]
    start_attitude: eqx.AbstractClassVar[tuple[float, float, float]]
    start_position: eqx.AbstractClassVar[tuple[float, float]]

    def initial_state(
        self,
        omega: Vector | None = None,
        attitude: Vector | None = None,
        position: Vector | None = None,
    ) -> State:
        """At `position` with attitude $R = \\exp$(`attitude`) and body angular velocity `omega`
        (the model's `start_...` where not given); $\\dot x$ from the rolling constraint (on
        $\\mathcal{C}$)."""
        body = self.rolling_body()
        dtype = body.g.dtype
        given = lambda x, default: jnp.asarray(default if x is None else x, dtype)
        q = (
            jaxlie.SO3.exp(given(attitude, self.start_attitude)),
            given(position, self.start_position),
        )
        return State(q, body.rolling_velocity(q, given(omega, self.start_omega)))


class ChaplyginSphere(_AbstractRollingBall):
    """Chaplygin's ball [Chaplygin1903]: a ball of radius `a` and mass `m` whose centre of mass is
    its geometric centre, with unequal principal moments `inertia` $(I_1, I_2, I_3)$ about it,
    rolling on a horizontal plane. Conserved: the energy, and with the angular momentum about the
    contact point $M = I\\omega + m a^2\\,\\gamma\\times(\\omega\\times\\gamma)$ (body frame,
    $\\gamma = R^\\top e_3$): $(M, \\gamma)$ and $(M, M)$ [BorisovMamaev2002]."""

    a: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    m: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    inertia: Float[Array, "3"] = eqx.field(default=(0.3, 0.4, 0.5), converter=_param)
    g: Float[Array, ""] = eqx.field(default=9.81, converter=_param)

    start_omega: ClassVar[tuple[float, float, float]] = (1.0, -0.5, 2.0)
    start_attitude: ClassVar[tuple[float, float, float]] = (0.3, -0.2, 0.1)
    start_position: ClassVar[tuple[float, float]] = (0.0, 0.0)
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    description: ClassVar[str] = (
        "Chaplygin's ball (centre of mass at the centre, unequal moments) rolling on a plane, "
        "on SO(3) x R^2"
    )

    def rolling_body(self) -> RollingBody:
        return RollingBody(RigidBody(self.m, self.inertia), Sphere(self.a), self.g)


class RouthSphere(_AbstractRollingBall):
    """Routh's sphere [Routh1905]: a ball of radius `a` and mass `m` whose centre of
    mass sits at `offset` $\\varepsilon$ along its axis of dynamical symmetry $e_3$ (the body
    frame's origin is the geometric centre), with moments $I_1 = I_2$ = `I1` and $I_3$ = `I3`
    about the centre of mass, rolling on a horizontal plane under gravity. With $r = -a\\gamma -
    \\varepsilon e_3$ the contact point seen from the centre of mass: the energy, Jellett's
    integral $J = I\\omega\\cdot r$ and Routh's integral
    $\\omega_3\\sqrt{I_1 I_3 + m I_1\\,r\\cdot r + m(I_3 - I_1)\\,r_3^2}$ are conserved
    [Routh1905; BorisovMamaev2002]."""

    a: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    m: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    offset: Float[Array, ""] = eqx.field(default=-0.3, converter=_param)
    I1: Float[Array, ""] = eqx.field(default=0.35, converter=_param)
    I3: Float[Array, ""] = eqx.field(default=0.5, converter=_param)
    g: Float[Array, ""] = eqx.field(default=9.81, converter=_param)

    start_omega: ClassVar[tuple[float, float, float]] = (1.0, -0.5, 2.0)
    start_attitude: ClassVar[tuple[float, float, float]] = (0.3, -0.2, 0.1)
    start_position: ClassVar[tuple[float, float]] = (0.0, 0.0)
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    description: ClassVar[str] = (
        "Routh's sphere (centre of mass off the centre on the symmetry axis) rolling on a plane, "
        "on SO(3) x R^2"
    )

    def rolling_body(self) -> RollingBody:
        c = jnp.stack([0.0 * self.offset, 0.0 * self.offset, self.offset])
        body = RigidBody(self.m, jnp.stack([self.I1, self.I1, self.I3]), c)
        return RollingBody(body, Sphere(self.a), self.g)


class TurntableBall(_AbstractRollingBall):
    """A homogeneous ball (radius `a`, mass `m`, $I = \\tfrac25 m a^2$) rolling on a turntable that
    turns at `Omega` about the vertical through the origin: the contact point moves with the
    table (an affine constraint). The centre's velocity obeys $\\dot u = \\tfrac27\\Omega\\,
    e_3\\times u$, so the centre runs round a circle at the angular rate $2\\Omega/7$
    [Routh1905; BorisovMamaev2002]."""

    a: Float[Array, ""] = eqx.field(default=0.1, converter=_param)
    m: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    Omega: Float[Array, ""] = eqx.field(default=2.0, converter=_param)
    g: Float[Array, ""] = eqx.field(default=9.81, converter=_param)

    start_omega: ClassVar[tuple[float, float, float]] = (3.0, -1.0, 5.0)
    start_attitude: ClassVar[tuple[float, float, float]] = (0.3, -0.2, 0.1)
    start_position: ClassVar[tuple[float, float]] = (0.5, 0.0)
    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    description: ClassVar[str] = (
        "homogeneous ball on a turntable (affine rolling constraint), on SO(3) x R^2"
    )

    def rolling_body(self) -> RollingBody:
        inertia = 0.4 * self.m * self.a**2 * jnp.ones(3, self.a.dtype)
        return RollingBody(RigidBody(self.m, inertia), Sphere(self.a), self.g, self.Omega)

class Rattleback(_AbstractRollingBall):
    """The rattleback of [KaneLevinson1982]: an ellipsoid with semi-axes `semi_axes` $(a, b, c)$
    along the body axes $e_1, e_2, e_3$, its centre of mass at `h` from the ellipsoid's centre
    towards the bottom point, mass `m`, central moments `A`, `B`, `C` and product of inertia `D`
    in the $e_1 e_2$ plane, rolling without slipping on a horizontal plane; $x$ is the horizontal
    position of the ellipsoid's centre. The defaults are Kane & Levinson's ($a, b, c$ = 20, 3,
    2 cm, $h$ = 1 cm, $m$ = 1 kg, $A, B, C, D$ = 2, 16, 17, −0.2 kg cm²).

    Kane & Levinson's $e_3$ points down, into the plane; here $e_3$ points up (their frame turned
    by π about $e_1$), so their inertia matrix $\\begin{pmatrix} A & D & 0\\\\ D & B & 0\\\\ 0 & 0 &
    C\\end{pmatrix}$ reads with $-D$ here, and their spin $\\omega_3 = -5$ rad/s is
    $\\omega_3 = +5$ rad/s about the upward $e_3$ (the default start, tilted by 0.5° about $e_1$
    and $e_2$). The energy is conserved; that spin reverses within the first seconds, the opposite
    one far later."""

    semi_axes: Float[Array, "3"] = eqx.field(default=(0.2, 0.03, 0.02), converter=_param)
    h: Float[Array, ""] = eqx.field(default=0.01, converter=_param)
    m: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    A: Float[Array, ""] = eqx.field(default=2e-4, converter=_param)
    B: Float[Array, ""] = eqx.field(default=16e-4, converter=_param)
    C: Float[Array, ""] = eqx.field(default=17e-4, converter=_param)
    D: Float[Array, ""] = eqx.field(default=-2e-5, converter=_param)
    g: Float[Array, ""] = eqx.field(default=9.81, converter=_param)

    # tilted 0.5° about e₁ and e₂, spinning at Kane & Levinson's −5 rad/s about their downward
    # axis: +5 rad/s about e₃ here
    start_omega: ClassVar[tuple[float, float, float]] = (0.0, 0.0, 5.0)
    start_attitude: ClassVar[tuple[float, float, float]] = (0.0087, 0.0087, 0.0)
    start_position: ClassVar[tuple[float, float]] = (0.0, 0.0)

    description: ClassVar[str] = (
        "rattleback (Kane & Levinson 1982): an ellipsoid with skewed inertia rolling on a plane, "
        "on SO(3) x R^2"
    )
    time_span: ClassVar[tuple[float, float]] = (0.0, 5.0)

    def rolling_body(self) -> RollingBody:
        z = 0.0 * self.D
        inertia = jnp.stack(
            [
                jnp.stack([self.A, -self.D, z]),
                jnp.stack([-self.D, self.B, z]),
                jnp.stack([z, z, self.C]),
            ]
        )
        body = RigidBody(self.m, inertia, jnp.stack([z, z, -self.h]))
        return RollingBody(body, Ellipsoid(self.semi_axes), self.g)

class RollingDiskSO3(_AbstractRollingBody):
    """The thin disk of `gm.models.RollingDisk` (radius `R`, mass `m`, moments `A` about a
    diameter and `B` about the axis; uniform by default, $A = mR^2/4$, $B = mR^2/2$) on
    $SO(3)\\times\\mathbb{R}^2$, without the Euler angles' singularity: the disk's axis is the
    body's $e_2$, $x$ the horizontal position of its centre, the rim rolls on the plane
    (`gm.ThinDisk`). With $R = R_z(\\varphi) R_x(\\theta) R_y(\\psi)$ and the centre at the
    contact point plus $R(\\sin\\theta\\sin\\varphi, -\\sin\\theta\\cos\\varphi, \\cos\\theta)$ it is
    `RollingDisk`'s motion (`from_euler`)."""

    m: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    R: Float[Array, ""] = eqx.field(default=1.0, converter=_param)
    g: Float[Array, ""] = eqx.field(default=9.81, converter=_param)
    A: Float[Array, ""] | None = eqx.field(default=None)
    B: Float[Array, ""] | None = eqx.field(default=None)

    time_span: ClassVar[tuple[float, float]] = (0.0, 10.0)

    description: ClassVar[str] = "thin disk rolling on a plane, on SO(3) x R^2"

    def euler_model(self) -> RollingDisk:
        """The same disk in Euler angles."""
        return RollingDisk(m=self.m, R=self.R, g=self.g, A=self.A, B=self.B)

    def rolling_body(self) -> RollingBody:
        A, B = self.euler_model().inertia()
        body = RigidBody(self.m, jnp.stack([A, B, A]))
        return RollingBody(body, ThinDisk(self.R, axis=1), self.g)

    def from_euler(self, state: State) -> State:
        """`RollingDisk`'s state $(x, y, \\varphi, \\theta, \\psi)$ and its velocity as the state
        $(R, x_{centre})$, $(\\omega, \\dot x_{centre})$ here (valid for one state)."""
        disk = self.euler_model()

        def point(q):
            R, centre = disk.pose(q)
            return R, centre[:2]

        (R, x), (_, xdot) = jax.jvp(point, (state.q,), (state.v,))
        omega, _ = disk.angular_velocity(state.q, state.v)
        return State((R, x), jnp.concatenate([rotate(R.inverse(), omega), xdot]))

    def initial_state(self, **kwargs) -> State:
        """`RollingDisk`'s initial state (its keyword arguments) mapped by `from_euler`."""
        return self.from_euler(self.euler_model().initial_state(**kwargs))
