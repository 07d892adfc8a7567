"""Rigid bodies as building blocks (docs/lie_groups.md): the kinetic and potential energy of a body
on SO(3) (a fixed point), SO(3) × ℝ³ and SE(3), so a user writes bodies, not Lagrangians.

The body frame has its origin at a reference point of the body (a pivot, the centre of a ball, the
geometric centre of a disk); the centre of mass sits at `centre_of_mass` $c$ in that frame. With
the body angular velocity $\\omega$ and the body-frame velocity $V$ of the origin, the centre of
mass moves with $V + \\omega \\times c$, so [Goldstein2002, §5.3]

$$T = \\tfrac12 m\\,|V + \\omega\\times c|^2 + \\tfrac12\\,\\omega^\\top I_c\\,\\omega ,$$

and in a uniform field $g$ (spatial) $U = -m\\,g\\cdot(x + R c)$.
"""

import equinox as eqx
import jax.numpy as jnp
import jaxlie
import numpy as np
from jaxtyping import Array, ArrayLike, Float

from .._checks import as_real_array, concrete
from .._geometry import SE3, SO3, AbstractManifold, Euclidean, Product, rotate
from .._system import AbstractBodiesLagrangian, AbstractBodyFrameLagrangian

GRAVITY = (0.0, 0.0, -9.81)


class RigidBody(eqx.Module):
    """A rigid body: `mass` $m$, `inertia` $I_c$ (3 × 3, or its 3 principal moments) about the
    centre of mass in body axes, and `centre_of_mass` $c$ in the body frame (from the frame's
    origin, the reference point the configuration tracks). Fields are parameters: a `jax.vmap`
    over bodies or a `jax.grad` by the inertia compiles once."""

    mass: Float[Array, ""]
    inertia: Float[Array, "3 3"]
    centre_of_mass: Float[Array, "3"]

    def __init__(
        self, mass: ArrayLike, inertia: ArrayLike, centre_of_mass: ArrayLike = (0.0, 0.0, 0.0)
    ):
        mass, inertia, c = (as_real_array(x) for x in (mass, inertia, centre_of_mass))
        dtype = jnp.result_type(mass, inertia, c)
        mass, inertia, c = (x.astype(dtype) for x in (mass, inertia, c))
        if mass.shape != ():
            raise ValueError(f"RigidBody: `mass` must be a scalar, got shape {mass.shape}.")
        if inertia.shape == (3,):
            inertia = jnp.diag(inertia)
        if inertia.shape != (3, 3):
            raise ValueError(
                f"RigidBody: `inertia` must have shape (3, 3) or (3,), got {inertia.shape}."
            )
        if c.shape != (3,):
            raise ValueError(f"RigidBody: `centre_of_mass` must have shape (3,), got {c.shape}.")
        values = (concrete(mass), concrete(inertia), concrete(c))
        if any(x is None for x in values):  # traced (a body swept under jit/vmap): in-program
            mass, inertia, c = _checked_in_program(mass, inertia, c)
        else:
            _check_values(*values)
        self.mass, self.inertia, self.centre_of_mass = mass, inertia, c

    def inertia_about_origin(self) -> Float[Array, "3 3"]:
        """$I_O = I_c + m(|c|^2 1 - c c^\\top)$, the inertia about the body frame's origin (the
        parallel-axis theorem [Goldstein2002, §5.3])."""
        c = self.centre_of_mass
        return self.inertia + self.mass * (c @ c * jnp.eye(3, dtype=c.dtype) - jnp.outer(c, c))

    def kinetic_energy(
        self, omega: Float[Array, "3"], V: Float[Array, "3"] | None = None
    ) -> Float[Array, ""]:
        """$T$ for the body angular velocity `omega` and the body-frame velocity `V` of the
        origin (`None`: the origin is fixed, a pivot)."""
        if V is None:
            return 0.5 * omega @ self.inertia_about_origin() @ omega
        u = V + jnp.cross(omega, self.centre_of_mass)  # the centre of mass's velocity, body frame
        return 0.5 * self.mass * u @ u + 0.5 * omega @ self.inertia @ omega

    def potential_energy(
        self, R: jaxlie.SO3, x: Float[Array, "3"] | None = None, gravity: ArrayLike = GRAVITY
    ) -> Float[Array, ""]:
        """$U = -m\\,g\\cdot(x + R c)$ for the orientation `R`, the origin's position `x`
        (`None`: at the spatial origin) and the spatial field `gravity`."""
        r = rotate(R, self.centre_of_mass)
        if x is not None:
            r = r + x
        return -self.mass * jnp.asarray(gravity, r.dtype) @ r

    def lagrangian(
        self, manifold: AbstractManifold, gravity: ArrayLike = GRAVITY
    ) -> "AbstractBodyLagrangian":
        """$L = T - U$ on `manifold`, with the velocities of geomech's conventions:

        - `gm.SO3()`: $q = R$, $v = \\omega$; the origin of the body frame is a fixed pivot;
        - `gm.Product(gm.SO3(), gm.Euclidean(3))`: $q = (R, x)$, $v = (\\omega, \\dot x)$ with
          $\\dot x$ spatial ($V = R^\\top\\dot x$);
        - `gm.SE3()`: $q = (R, x)$ as a `jaxlie.SE3`, $v = (V, \\omega)$, the body twist in
          jaxlie's order (linear, angular).
        """
        try:
            form = _LAGRANGIANS[manifold]
        except (KeyError, TypeError):
            raise ValueError(
                f"RigidBody.lagrangian: `manifold` must be gm.SO3(), gm.SE3() or "
                f"gm.Product(gm.SO3(), gm.Euclidean(3)), got {manifold}."
            ) from None
        return form(self, jnp.asarray(gravity, self.mass.dtype))


_INERTIA_MESSAGE = (
    "a rigid body's are positive and each is at most the sum of the other two (I₁ + I₂ ≥ I₃)"
)


def _inertia_tolerance(inertia: Float[ArrayLike, "3 3"]) -> Float[Array, ""]:
    return 64 * jnp.finfo(inertia.dtype).eps * jnp.max(jnp.abs(inertia))


def _checked_in_program(
    mass: Float[Array, ""], inertia: Float[Array, "3 3"], c: Float[Array, "3"]
) -> tuple[Float[Array, ""], Float[Array, "3 3"], Float[Array, "3"]]:
    """`_check_values` on traced parameters, inside the program (`eqx.error_if`)."""
    mass = eqx.error_if(
        mass, ~(jnp.isfinite(mass) & (mass > 0)), "RigidBody: `mass` must be finite and positive."
    )
    c = eqx.error_if(c, ~jnp.all(jnp.isfinite(c)), "RigidBody: `centre_of_mass` must be finite.")
    tol = _inertia_tolerance(inertia)
    asymmetric = ~jnp.isfinite(tol) | (jnp.max(jnp.abs(inertia - inertia.T)) > tol)
    message = "RigidBody: `inertia` must be finite and symmetric."
    inertia = eqx.error_if(inertia, asymmetric, message)
    moments = jnp.linalg.eigvalsh(jnp.where(asymmetric, jnp.eye(3, dtype=inertia.dtype), inertia))
    bad = (moments[0] <= tol) | (moments[0] + moments[1] < moments[2] - tol)
    message = f"RigidBody: `inertia` has principal moments no body has; {_INERTIA_MESSAGE}."
    return mass, eqx.error_if(inertia, bad, message), c


def _check_values(
    mass: np.ndarray | None, inertia: np.ndarray | None, c: np.ndarray | None
) -> None:
    """Physical parameters, when concrete: a positive mass and an inertia that a body can have
    (symmetric, positive definite, principal moments obeying the triangle inequality)."""
    if mass is not None and not (np.isfinite(mass) and mass > 0):
        raise ValueError(f"RigidBody: `mass` must be finite and positive, got {mass}.")
    if c is not None and not np.all(np.isfinite(c)):
        raise ValueError(f"RigidBody: `centre_of_mass` must be finite, got {c}.")
    if inertia is None:
        return
    tol = float(_inertia_tolerance(inertia)) if np.all(np.isfinite(inertia)) else np.nan
    if not np.isfinite(tol) or np.max(np.abs(inertia - inertia.T)) > tol:
        raise ValueError(f"RigidBody: `inertia` must be finite and symmetric, got\n{inertia}.")
    moments = np.linalg.eigvalsh(inertia)
    if moments[0] <= tol or moments[0] + moments[1] < moments[2] - tol:
        message = f"RigidBody: `inertia` has principal moments {moments}; {_INERTIA_MESSAGE}."
        raise ValueError(message)


class AbstractBodyLagrangian(AbstractBodiesLagrangian):
    """$L(q, v) = T - U$ of one `RigidBody` in the spatial field `gravity`, on one configuration
    space (`RigidBody.lagrangian`): the body's centre of mass moves with $u$ (spatial) and turns
    with the body angular velocity $\\omega$ (`velocities`); the body and the field stay
    parameters (fields)."""

    body: eqx.AbstractVar[RigidBody]
    gravity: eqx.AbstractVar[Float[Array, "3"]]

    def masses(self) -> Float[Array, " 1"]:
        return self.body.mass[None]

    def inertias(self) -> Float[Array, "1 3 3"]:
        return self.body.inertia[None]


class PivotedBodyLagrangian(AbstractBodyLagrangian, AbstractBodyFrameLagrangian):
    """On SO(3): $q = R$, $v = \\omega$, the body frame's origin a fixed pivot:
    $u = R(\\omega \\times c)$, $U = -m\\,g\\cdot Rc$."""

    body: RigidBody
    gravity: Float[Array, "3"]

    def body_velocities(self, v: Float[Array, "3"]) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        return jnp.cross(v, self.body.centre_of_mass)[None], v[None]

    def velocities(
        self, q: jaxlie.SO3, v: Float[Array, "3"]
    ) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        u, w = self.body_velocities(v)
        return rotate(q, u[0])[None], w

    def body_gravity(self, q: jaxlie.SO3) -> Float[Array, "1 3"]:
        return rotate(q.inverse(), self.gravity)[None]

    def potential(self, q: jaxlie.SO3) -> Float[Array, ""]:
        return self.body.potential_energy(q, None, self.gravity)


class FreeBodyLagrangian(AbstractBodyLagrangian):
    """On SO(3) × ℝ³: $q = (R, x)$, $v = (\\omega, \\dot x)$ with $\\dot x$ spatial:
    $u = \\dot x + R(\\omega \\times c)$, $U = -m\\,g\\cdot(x + Rc)$."""

    body: RigidBody
    gravity: Float[Array, "3"]

    def velocities(
        self, q: tuple[jaxlie.SO3, Float[Array, "3"]], v: Float[Array, "6"]
    ) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        R, omega = q[0], v[:3]
        return (v[3:] + rotate(R, jnp.cross(omega, self.body.centre_of_mass)))[None], omega[None]

    def potential(self, q: tuple[jaxlie.SO3, Float[Array, "3"]]) -> Float[Array, ""]:
        return self.body.potential_energy(q[0], q[1], self.gravity)


class SE3BodyLagrangian(AbstractBodyLagrangian, AbstractBodyFrameLagrangian):
    """On SE(3): $q$ a `jaxlie.SE3`, $v = (V, \\omega)$ the body twist (linear, angular):
    $u = R(V + \\omega \\times c)$, $U = -m\\,g\\cdot(x + Rc)$."""

    body: RigidBody
    gravity: Float[Array, "3"]

    def body_velocities(self, v: Float[Array, "6"]) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        V, omega = v[:3], v[3:]
        return (V + jnp.cross(omega, self.body.centre_of_mass))[None], omega[None]

    def velocities(
        self, q: jaxlie.SE3, v: Float[Array, "6"]
    ) -> tuple[Float[Array, "1 3"], Float[Array, "1 3"]]:
        u, w = self.body_velocities(v)
        return rotate(q.rotation(), u[0])[None], w

    def body_gravity(self, q: jaxlie.SE3) -> Float[Array, "1 3"]:
        return rotate(q.rotation().inverse(), self.gravity)[None]

    def potential(self, q: jaxlie.SE3) -> Float[Array, ""]:
        return self.body.potential_energy(q.rotation(), q.translation(), self.gravity)


# the form of L on each configuration space of a body, by the manifold itself (equal manifolds
# are equal modules)
_LAGRANGIANS = {
    SO3(): PivotedBodyLagrangian,
    Product(SO3(), Euclidean(3)): FreeBodyLagrangian,
    SE3(): SE3BodyLagrangian,
}
