"""Rolling without slipping of a convex rigid body on a horizontal plane (docs/lie_groups.md), as
ready building blocks: the body's surface, the contact point found from it, the rolling constraint
(on a fixed plane or a turntable) and the Lagrangian of the rolling body.

The configuration is $q = (R, x) \\in SO(3) \\times \\mathbb{R}^2$: the attitude $R$ and the
horizontal position $x = (x, y)$ of the body frame's origin (the reference point); the velocity
is $v = (\\omega, \\dot x)$ with $\\omega$ the body angular velocity. The plane is $z = 0$, $e_3$
points up, and $\\gamma = R^\\top e_3$ is the vertical in the body frame.

**Contact point** [BorisovMamaev2002]: a convex body with support function
$h(u) = \\max_{p \\in K} p\\cdot u$ (in the body frame, about the origin) touches the plane below
it at the point whose outward normal is $-\\gamma$, $s(\\gamma) = \\nabla h(-\\gamma)$, and its
origin is at height $z(R) = h(-\\gamma) = -s\\cdot\\gamma$ (Euler's relation for the 1-homogeneous
$h$): a holonomic relation, not a coordinate. Along the motion $\\dot\\gamma = \\gamma\\times\\omega$
and $\\dot z = s\\cdot(\\omega\\times\\gamma)$ (the envelope theorem: $s$ moving along the surface
does not contribute).

**Rolling**: the material point at the contact has the velocity of the plane there,
$\\dot X + R(\\omega\\times s) = \\Omega\\, e_3\\times x_c$ with $X = (x, y, z)$ and
$x_c = X + R s$ the contact point ($\\Omega = 0$ on a fixed plane; $\\Omega$ the angular velocity
of a turntable about the vertical through the spatial origin, [BorisovMamaev2002]); the
vertical row holds identically by $\\dot z$ above, the horizontal rows are the constraint
$\\dot x - [R\\,\\hat s\\,\\omega]_{xy} - \\Omega\\,[e_3 \\times x_c]_{xy} = 0$ (a `LinearConstraint`
$A(q)\\,v + c(q) = 0$, affine when $\\Omega \\ne 0$).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float

from .._bundle import State
from .._checks import as_real_array, concrete
from .._constraint import AbstractRatedField, LinearConstraint
from .._contact import AbstractContact
from .._geometry import SO3, Euclidean, Product, hat, rotate, rotation_matrix
from .._system import AbstractExplicitBodiesLagrangian, LagrangianSystem
from ._rigid_body import RigidBody
from ._surfaces import AbstractSurface

# -- the rolling constraint --------------------------------------------------------------------


def _vertical(R: jaxlie.SO3) -> Float[Array, "3"]:
    """$\\gamma = R^\\top e_3$."""
    return rotate(R.inverse(), jnp.array([0.0, 0.0, 1.0], R.wxyz.dtype))


def _contact_rate(surface: AbstractSurface, R: Float[Array, "3 3"], w: Float[Array, "3"]):
    """$s(\\gamma)$ and its rate $\\dot s = Ds(\\gamma)\\,\\dot\\gamma$ along $\\dot R = R\\hat\\omega$
    ($\\gamma = R^\\top e_3$, $\\dot\\gamma = \\gamma\\times\\omega$), from the rotation matrix `R`."""
    gamma = R[2]
    return jax.jvp(surface.contact_point, (gamma,), (jnp.cross(gamma, w),))


class _RollingRows(AbstractRatedField):
    """$A(q) = [-(R\\hat s)_{xy},\\ I_2]$: $A v = \\dot x + [R(\\omega\\times s)]_{xy}$; its rate
    $\\dot A = [-(R(\\hat\\omega\\hat s + \\hat{\\dot s}))_{xy},\\ 0]$."""

    surface: AbstractSurface

    def __call__(self, q: tuple[jaxlie.SO3, Float[Array, "2"]]) -> Float[Array, "2 5"]:
        R, _ = q
        s = self.surface.contact_point(_vertical(R))
        rows = -(rotation_matrix(R) @ hat(s))[:2]
        return jnp.concatenate([rows, jnp.eye(2, dtype=rows.dtype)], axis=1)

    def rate(self, q: tuple[jaxlie.SO3, Float[Array, "2"]], v: Float[Array, "5"]) -> Float[Array, "2 5"]:
        R, w = rotation_matrix(q[0]), v[:3]
        s, s_dot = _contact_rate(self.surface, R, w)
        rows = -(R @ (hat(w) @ hat(s) + hat(s_dot)))[:2]
        return jnp.concatenate([rows, jnp.zeros((2, 2), rows.dtype)], axis=1)


class _TableTerm(AbstractRatedField):
    """$c(q) = -\\Omega\\,[e_3\\times x_c]_{xy}$, $x_c = x + [R s]_{xy}$: the turntable's velocity
    at the contact point; its rate with $\\dot x_c = \\dot x + [R(\\omega\\times s + \\dot s)]_{xy}$."""

    surface: AbstractSurface
    table_rate: Float[Array, ""]

    def __call__(self, q: tuple[jaxlie.SO3, Float[Array, "2"]]) -> Float[Array, "2"]:
        R, x = q
        xc = x + rotate(R, self.surface.contact_point(_vertical(R)))[:2]
        return -self.table_rate * jnp.stack([-xc[1], xc[0]])

    def rate(self, q: tuple[jaxlie.SO3, Float[Array, "2"]], v: Float[Array, "5"]) -> Float[Array, "2"]:
        R, w = rotation_matrix(q[0]), v[:3]
        s, s_dot = _contact_rate(self.surface, R, w)
        xc_dot = v[3:] + (R @ (jnp.cross(w, s) + s_dot))[:2]
        return -self.table_rate * jnp.stack([-xc_dot[1], xc_dot[0]])


def _check_surface(owner: str, surface: object) -> None:
    if not isinstance(surface, AbstractSurface):
        raise TypeError(
            f"{owner}: `surface` must be a gm.Sphere, gm.Ellipsoid, gm.ThinDisk or "
            f"gm.SupportFunction, got {type(surface).__name__}."
        )


def _table_rate(owner: str, table_rate: ArrayLike | None) -> Array | None:
    if table_rate is None:
        return None
    rate = as_real_array(table_rate)
    if rate.shape != ():
        raise ValueError(f"{owner}: `table_rate` must be a scalar, got shape {rate.shape}.")
    c = concrete(rate)
    if c is not None and not np.isfinite(c):
        raise ValueError(f"{owner}: `table_rate` must be finite, got {c}.")
    return rate


def rolling_constraint(
    surface: AbstractSurface, table_rate: ArrayLike | None = None
) -> LinearConstraint:
    """Rolling without slipping of a body with `surface` on the plane $z = 0$, on
    $q = (R, x) \\in SO(3)\\times\\mathbb{R}^2$ with $v = (\\omega, \\dot x)$: the material contact
    point has the plane's velocity [BorisovMamaev2002],

    $$\\dot x + [R(\\omega\\times s(\\gamma))]_{xy} - \\Omega\\,[e_3\\times x_c]_{xy} = 0,$$

    $s(\\gamma)$ the body-frame contact point, $x_c = x + (R s)_{xy}$ the contact point on the
    plane, $\\Omega$ = `table_rate` the angular velocity of a turntable about the vertical through
    the origin (`None`: a fixed plane; then the constraint is linear, else affine, with its free
    term). Two rows; the vertical one, $\\dot z = s\\cdot(\\omega\\times\\gamma)$, is the holonomic
    relation $z = -s\\cdot\\gamma$ (`RollingBody`)."""
    _check_surface("rolling_constraint", surface)
    rate = _table_rate("rolling_constraint", table_rate)
    free = None if rate is None else _TableTerm(surface, rate)
    return LinearConstraint(_RollingRows(surface), free)


# -- the rolling body --------------------------------------------------------------------------


class RollingBody(eqx.Module):
    """A `RigidBody` whose `surface` rolls without slipping on the horizontal plane $z = 0$ (a
    turntable turning at `table_rate` $\\Omega$ about the vertical through the origin, when given)
    in the field of gravity $-g e_3$, on $SO(3)\\times\\mathbb{R}^2$ (`manifold`):
    $q = (R, x)$, $v = (\\omega, \\dot x)$, $x$ the horizontal position of the body frame's origin,
    whose height is $z(R) = -s\\cdot\\gamma$.

    `lagrangian(q, v)` is the body's $T - U$ with its origin at $X = (x, y, z(R))$ moving with
    $\\dot X = (\\dot x, \\dot y, s\\cdot(\\omega\\times\\gamma))$ [BorisovMamaev2002];
    `constraint()` is `rolling_constraint(surface, table_rate)`; `system()` both, as a
    `LagrangianSystem`. Fields are parameters (one compilation for every radius or inertia)."""

    body: RigidBody
    surface: AbstractSurface
    g: Float[Array, ""]
    table_rate: Float[Array, ""] | None

    def __init__(
        self,
        body: RigidBody,
        surface: AbstractSurface,
        g: ArrayLike = 9.81,
        table_rate: ArrayLike | None = None,
    ):
        if not isinstance(body, RigidBody):
            raise TypeError(
                f"RollingBody: `body` must be a gm.RigidBody, got {type(body).__name__}."
            )
        _check_surface("RollingBody", surface)
        g = as_real_array(g)
        if g.shape != ():
            raise ValueError(f"RollingBody: `g` must be a scalar, got shape {g.shape}.")
        c = concrete(g)
        if c is not None and not (np.isfinite(c) and c >= 0):
            raise ValueError(f"RollingBody: `g` must be finite and non-negative, got {c}.")
        self.body, self.surface, self.g = body, surface, g
        self.table_rate = _table_rate("RollingBody", table_rate)

    @property
    def manifold(self) -> Product:
        return Product(SO3(), Euclidean(2))

    def position(self, q) -> Float[Array, "3"]:
        """$X = (x, y, z(R))$, the body frame's origin in space."""
        R, x = q
        return jnp.concatenate([x, self.surface.height(_vertical(R))[None]])

    def contact(self, q) -> Float[Array, "3"]:
        """$x_c = X + R s$, the contact point in space (its height is zero)."""
        R, _ = q
        return self.position(q) + rotate(R, self.surface.contact_point(_vertical(R)))

    def velocity(self, q, v) -> Float[Array, "3"]:
        """$\\dot X$: $(\\dot x, \\dot y)$ from `v` and $\\dot z = s\\cdot(\\omega\\times\\gamma)$."""
        R, _ = q
        gamma = _vertical(R)
        zdot = self.surface.contact_point(gamma) @ jnp.cross(v[:3], gamma)
        return jnp.concatenate([v[3:], zdot[None]])

    def rolling_velocity(self, q, omega: Float[Array, "3"]) -> Float[Array, "5"]:
        """The velocity $v = (\\omega, \\dot x)$ with $\\dot x$ from the rolling constraint, for a
        state on $\\mathcal{C}$."""
        rows = _RollingRows(self.surface)(q)
        xdot = -rows[:, :3] @ omega
        if self.table_rate is not None:
            xdot = xdot - _TableTerm(self.surface, self.table_rate)(q)
        return jnp.concatenate([omega, xdot])

    def lagrangian(self, q, v) -> Float[Array, ""]:
        """$L = T - U$ at $(q, v)$ (`RollingLagrangian`)."""
        return RollingLagrangian(self)(q, v)

    def constraint(self) -> LinearConstraint:
        return rolling_constraint(self.surface, self.table_rate)

    def system(self, **kwargs) -> LagrangianSystem:
        """The `LagrangianSystem` (keyword arguments, e.g. `force`, passed on), with the plane as
        its `contact` (`PlaneContact`: `simulate` stops a trajectory that lifts off or whose
        contact point becomes undefined; `contact=None` holds the body on the plane regardless,
        one right-hand side fewer per step)."""
        kwargs.setdefault("contact", PlaneContact(self))
        return LagrangianSystem(
            RollingLagrangian(self), constraint=self.constraint(), manifold=self.manifold, **kwargs
        )


class PlaneContact(AbstractContact):
    """The plane under a `RollingBody`, a unilateral contact: it pushes with the normal force
    $N = m(g + \\ddot z_G)$ ($z_G$ the height of the centre of mass, Newton's law along the
    vertical), which must stay positive, at a point that the surface must define
    (`AbstractSurface.contact_margin`: a thin disk lying flat does not)."""

    rolling: RollingBody

    def _height_rate(
        self, q: tuple[jaxlie.SO3, Float[Array, "2"]], v: Float[Array, "5"]
    ) -> Float[Array, ""]:
        """$\\dot z_G$, the vertical velocity of the centre of mass."""
        R, c = q[0], self.rolling.body.centre_of_mass
        return (self.rolling.velocity(q, v) + rotate(R, jnp.cross(v[:3], c)))[2]

    def normal_force(
        self, t: Float[ArrayLike, ""], state: State, acceleration: Float[Array, "5"]
    ) -> tuple[Float[Array, ""], Float[Array, ""]]:
        (R, x), v = state.q, state.v

        # along the motion: R exp(ε ω), x + ε ẋ, v + ε a
        def height_rate(eps: Float[Array, ""]) -> Float[Array, ""]:
            q = (R @ jaxlie.SO3.exp(eps * v[:3]), x + eps * v[3:])
            return self._height_rate(q, v + eps * acceleration)

        zero, one = jnp.zeros((), v.dtype), jnp.ones((), v.dtype)
        _, z_ddot = jax.jvp(height_rate, (zero,), (one,))
        body = self.rolling.body
        size = jnp.linalg.norm(self.rolling.surface.contact_point(_vertical(R))) + jnp.linalg.norm(
            body.centre_of_mass
        )
        scale = body.mass * (self.rolling.g + jnp.abs(z_ddot) + (v[:3] @ v[:3]) * size)
        return body.mass * (self.rolling.g + z_ddot), scale

    def margin(self, t: Float[ArrayLike, ""], state: State) -> Float[Array, ""]:
        return self.rolling.surface.contact_margin(_vertical(state.q[0]))

    def same_contact(self, y0: State, y1: State) -> Bool[Array, ""]:
        return self.rolling.surface.same_contact(_vertical(y0.q[0]), _vertical(y1.q[0]))


class RollingLagrangian(AbstractExplicitBodiesLagrangian):
    """The Lagrangian of a `RollingBody`: its body's $T - U$ with the origin at
    $X = (x, y, z(R))$ moving with $\\dot X = (\\dot x, \\dot y, s\\cdot(\\omega\\times\\gamma))$
    [BorisovMamaev2002], so the centre of mass moves with $u = \\dot X + R(\\omega\\times c)$ and
    $U = m g\\,(X + Rc)_3$ (Kane's form, `gm.AbstractBodiesLagrangian`), its partial
    velocities and their rates in closed form (`partial_velocities`, `velocity_rates`)."""

    rolling: RollingBody

    def masses(self) -> Float[Array, " 1"]:
        return self.rolling.body.mass[None]

    def inertias(self) -> Float[Array, "1 3 3"]:
        return self.rolling.body.inertia[None]

    def velocities(
        self, q: tuple[jaxlie.SO3, Float[Array, "2"]], v: Float[Array, "5"]
    ) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        R, c = q[0], self.rolling.body.centre_of_mass
        return (self.rolling.velocity(q, v) + rotate(R, jnp.cross(v[:3], c)))[None], v[:3][None]

    def potential(self, q: tuple[jaxlie.SO3, Float[Array, "2"]]) -> Float[Array, ""]:
        R, c = q[0], self.rolling.body.centre_of_mass
        height = (self.rolling.position(q) + rotate(R, c))[2]
        return self.rolling.body.mass * self.rolling.g * height

    def partial_velocities(
        self, q: tuple[jaxlie.SO3, Float[Array, "2"]]
    ) -> tuple[Float[Array, "1 3 5"], Float[Array, "1 3 5"]]:
        # u = e3 (γ × s)·ω - R ĉ ω + (ẋ, ẏ, 0): ż = s·(ω × γ), ω × c = -ĉ ω
        R, c = rotation_matrix(q[0]), self.rolling.body.centre_of_mass
        gamma = R[2]  # Rᵀ e3
        s = self.rolling.surface.contact_point(gamma)
        e3 = jnp.array([0.0, 0.0, 1.0], R.dtype)
        B_omega = jnp.outer(e3, jnp.cross(gamma, s)) - R @ hat(c)
        B = jnp.concatenate([B_omega, jnp.eye(3, 2, dtype=R.dtype)], axis=1)
        W = jnp.eye(3, 5, dtype=R.dtype)
        return B[None], W[None]

    def velocity_rates(
        self, q: tuple[jaxlie.SO3, Float[Array, "2"]], v: Float[Array, "5"]
    ) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        # along Ṙ = R ω̂: γ̇ = γ × ω, ṡ = Ds(γ) γ̇, d/dt R(ω × c) = R(ω × (ω × c)); ω̇ = 0
        R, c, w = rotation_matrix(q[0]), self.rolling.body.centre_of_mass, v[:3]
        gamma = R[2]
        s, s_dot = _contact_rate(self.rolling.surface, R, w)
        z_rate = (jnp.cross(jnp.cross(gamma, w), s) + jnp.cross(gamma, s_dot)) @ w
        e3 = jnp.array([0.0, 0.0, 1.0], R.dtype)
        u_dot = z_rate * e3 + R @ jnp.cross(w, jnp.cross(w, c))
        return u_dot[None], jnp.zeros_like(w)[None]

    def gravity(self) -> Float[Array, "3"]:
        g = self.rolling.g
        return jnp.stack([jnp.zeros_like(g), jnp.zeros_like(g), -g])
