"""Configuration spaces that are Lie groups (docs/lie_groups.md), on `jaxlie`.

A point is a `jaxlie` group element $q$, a velocity the left-trivialized $v = q^{-1}\\dot q$ (the
body velocity: $\\dot R = R\\hat\\omega$ on SO(3)). The chart centred at $q$ is
$\\psi \\mapsto q \\exp(\\psi)$; along $q \\exp(\\psi(t))$ the velocity is
$v = \\mathrm{dexp}_{-\\psi}\\dot\\psi = J_r(\\psi)\\dot\\psi$ with $J_r$ the right Jacobian of
$\\exp$, so at $\\psi = 0$, $\\dot\\psi = v$ and $\\ddot\\psi = \\dot v$ (`_centred.py`).
"""

import abc
from collections.abc import Callable
from typing import ClassVar

import diffrax
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import jaxlie
import numpy as np
from jaxtyping import Array, Bool, Float

from ._centred import CentredChart
from ._integrator import AbstractStateParts, MuntheKaas, munthe_kaas
from ._manifold import AbstractManifold, Point


def hat(w: Float[Array, "3"]) -> Float[Array, "3 3"]:
    """$\\hat w$ with $\\hat w u = w \\times u$."""
    z = jnp.zeros((), w.dtype)
    return jnp.stack(
        [jnp.stack([z, -w[2], w[1]]), jnp.stack([w[2], z, -w[0]]), jnp.stack([-w[1], w[0], z])]
    )


# The Hamilton product $ab$ of quaternions `wxyz`, written out (jaxlie's original form): jaxlie's
# `SO3.multiply` gathers a table of products with index arrays, whose reverse-mode derivative is
# a scatter-add that XLA's older CPU code generator runs as a loop of kernels inside every
# Runge–Kutta stage (docs/performance.md, "Rigid bodies"); elementwise, the rounding of each
# product does not depend on how a batch is split (a contraction's does: sharded ensembles).
def quaternion_product(
    a: Float[Array, "*batch 4"], b: Float[Array, "*batch 4"]
) -> Float[Array, "*batch 4"]:
    """The Hamilton product of the quaternions `a`, `b` (`wxyz`)."""
    w0, x0, y0, z0 = (a[..., i] for i in range(4))
    w1, x1, y1, z1 = (b[..., i] for i in range(4))
    return jnp.stack(
        [
            -x0 * x1 - y0 * y1 - z0 * z1 + w0 * w1,
            x0 * w1 + y0 * z1 - z0 * y1 + w0 * x1,
            -x0 * z1 + y0 * w1 + z0 * x1 + w0 * y1,
            x0 * y1 - y0 * x1 + z0 * w1 + w0 * z1,
        ],
        axis=-1,
    )


def _rotation_rows(R: jaxlie.SO3) -> tuple[tuple[Float[Array, "*batch"], ...], ...]:
    """The entries of the rotation matrix of the unit quaternion $(w, u)$ of `R`,
    $(w^2 - |u|^2)\\,1 + 2uu^\\top + 2w\\hat u$ [Sola2017], row by row."""
    w, a, b, c = (R.wxyz[..., i] for i in range(4))
    return (
        (1 - 2 * (b * b + c * c), 2 * (a * b - w * c), 2 * (a * c + w * b)),
        (2 * (a * b + w * c), 1 - 2 * (a * a + c * c), 2 * (b * c - w * a)),
        (2 * (a * c - w * b), 2 * (b * c + w * a), 1 - 2 * (a * a + b * b)),
    )


def rotation_matrix(R: jaxlie.SO3) -> Float[Array, "*batch 3 3"]:
    """`R.as_matrix()` written out entry by entry (`_rotation_rows`): jaxlie forms it from 4 × 4
    outer products, three times the arithmetic, and as much again in each derivative."""
    return jnp.stack([jnp.stack(row, axis=-1) for row in _rotation_rows(R)], axis=-2)


def rotate(R: jaxlie.SO3, x: Float[Array, "*batch 3"]) -> Float[Array, "*batch 3"]:
    """$Rx$ (`R.apply(x)`) from the entries of the rotation matrix (`_rotation_rows`), summed
    entry by entry: they are shared by every vector rotated with it, under `jax.jvp` and
    `jax.vmap` as well (a Jacobian's lanes), where the quaternion sandwich $q\\,(0, x)\\,q^{-1}$
    costs two Hamilton products per vector; elementwise, its rounding does not depend on how a
    batch is split."""
    x0, x1, x2 = x[..., 0], x[..., 1], x[..., 2]
    return jnp.stack([r0 * x0 + r1 * x1 + r2 * x2 for r0, r1, r2 in _rotation_rows(R)], axis=-1)


def _series(
    t2: Float[Array, ""], small: Bool[Array, ""], exact: Callable, coefficients: tuple[float, ...]
) -> Float[Array, ""]:
    """`exact(t2)` where $\\theta^2$ = `t2` is not `small`, else the even power series with
    `coefficients` in $\\theta^2$ (exact to round-off there, with correct derivatives at 0)."""
    safe = jnp.where(small, 1.0, t2)
    series = sum(c * t2**i for i, c in enumerate(coefficients))
    return jnp.where(small, series, exact(safe))


def _so3_coefficients(theta: Float[Array, "3"]) -> tuple[Float[Array, ""], ...]:
    """$B = (1 - \\cos\\theta)/\\theta^2$, $C = (\\theta - \\sin\\theta)/\\theta^3$ and
    $D = 1/\\theta^2 - (1 + \\cos\\theta)/(2\\theta\\sin\\theta)$ of $\\theta = |\\theta|$
    ([Sola2018] (143), (144)), by their series for $\\theta^2 < 10^{-2}$."""
    t2 = theta @ theta
    small = t2 < 1e-2
    B = _series(t2, small, lambda s: (1 - jnp.cos(jnp.sqrt(s))) / s, (1 / 2, -1 / 24, 1 / 720, -1 / 40320))
    C = _series(
        t2, small, lambda s: (jnp.sqrt(s) - jnp.sin(jnp.sqrt(s))) / (s * jnp.sqrt(s)),
        (1 / 6, -1 / 120, 1 / 5040, -1 / 362880),
    )
    D = _series(
        t2, small,
        lambda s: 1 / s - (1 + jnp.cos(jnp.sqrt(s))) / (2 * jnp.sqrt(s) * jnp.sin(jnp.sqrt(s))),
        (1 / 12, 1 / 720, 1 / 30240, 1 / 1209600),
    )
    return B, C, D


# Gauss–Legendre nodes and weights on [0, 1]: exact for the polynomials (the nilpotent part of
# SE(n)) and to round-off for the trigonometric part of Ad(exp(-sψ)) at rotation angles |θ| ≤ 3
_NODES, _WEIGHTS = (x / 2 for x in np.polynomial.legendre.leggauss(8))
_NODES = _NODES + 0.5


def _quadrature_right_jacobian(group: "AbstractLieGroup", psi: Float[Array, " n"]) -> Float[Array, "n n"]:
    """$J_r(\\psi) = \\int_0^1 \\mathrm{Ad}_{\\exp(-s\\psi)}\\,ds$ by Gauss–Legendre quadrature."""
    Ad = jax.vmap(lambda s: group.exp(-s * psi).adjoint())(jnp.asarray(_NODES, psi.dtype))
    return jnp.tensordot(jnp.asarray(_WEIGHTS, psi.dtype), Ad, axes=1)


def _unit_quaternion_to_second_order(theta: Float[Array, "3"]) -> Float[Array, "4"]:
    """$\\exp(\\theta) = (\\cos\\frac{|\\theta|}2, \\sin\\frac{|\\theta|}2\\,\\hat\\theta)$
    [Sola2017] to second order: $(1 - |\\theta|^2/8,\\ \\theta/2)$, a unit quaternion to
    fourth order. Elementwise (no contraction), so its rounding does not depend on how a batch
    is split."""
    t2 = theta[0] * theta[0] + theta[1] * theta[1] + theta[2] * theta[2]
    return jnp.concatenate([(1 - t2 / 8)[None], theta / 2])


def _unit_defect(x: Float[Array, "... k"]) -> Float[Array, "..."]:
    """$\\big||x| - 1\\big|$: how far a unit quaternion or unit complex number is off the unit
    sphere (dimensionless)."""
    return jnp.abs(jnp.linalg.norm(x, axis=-1) - 1)


def _unit(x: Float[Array, "... k"]) -> Float[Array, "... k"]:
    return x / jnp.linalg.norm(x, axis=-1, keepdims=True)


class AbstractLieGroup(AbstractManifold):
    """A matrix Lie group of `jaxlie` (`group`) with its chart $\\psi \\mapsto q\\exp(\\psi)$
    centred at $q$; the concrete groups give the exponential, its right Jacobian and the
    bracket."""

    group: ClassVar[type[jaxlie.MatrixLieGroup]]

    @abc.abstractmethod
    def exp(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        """$\\exp(\\psi)$."""

    @abc.abstractmethod
    def exp_to_second_order(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        """$\\exp(\\psi)$ to second order in $\\psi$: its Taylor polynomial of degree two in
        the group's parameters (`retract`)."""

    @abc.abstractmethod
    def log(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        """$\\log(q)$, accurate to round-off near the identity."""

    @property
    def dim(self) -> int:
        return self.group.tangent_dim

    def check(self, q: Point) -> None:
        name = self.group.__name__
        if not isinstance(q, self.group):
            raise ValueError(f"a point of {name} must be a jaxlie.{name}, got {type(q).__name__}.")
        if q.parameters().shape != (self.group.parameters_dim,):
            raise ValueError(
                f"the jaxlie.{name} has parameters of shape {q.parameters().shape}: give one "
                f"element (parameters ({self.group.parameters_dim},)), batch with jax.vmap."
            )

    def batch_shape(self, q: jaxlie.MatrixLieGroup) -> tuple[int, ...]:
        return q.get_batch_axes()

    @abc.abstractmethod
    def compose(self, a: jaxlie.MatrixLieGroup, b: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        """The group product $ab$ (`a @ b`)."""

    def oplus(self, q: jaxlie.MatrixLieGroup, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        return self.compose(q, self.exp(psi))

    def retract(self, q: jaxlie.MatrixLieGroup, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        return self.compose(q, self.exp_to_second_order(psi))

    def ominus(self, p: jaxlie.MatrixLieGroup, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        return self.log(self.compose(q.inverse(), p))  # jaxlie.manifold.rminus(q, p), to round-off

    def velocity_of_point(self, q: jaxlie.MatrixLieGroup, v: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        zero = jnp.zeros_like(v)
        return jax.jvp(lambda psi: self.oplus(q, psi), (zero,), (v,))[1]

    def point_error(
        self, q: jaxlie.MatrixLieGroup, psi: Float[Array, " n"], psi_error: Float[Array, " n"]
    ) -> jaxlie.MatrixLieGroup:
        high, low = self.oplus(q, psi), self.oplus(q, psi - psi_error)
        return jtu.tree_map(jnp.subtract, high, low)

    def parameters(self, q: jaxlie.MatrixLieGroup) -> Float[Array, "*batch p"]:
        return q.parameters()

    def chart(self, q: jaxlie.MatrixLieGroup) -> CentredChart:
        return CentredChart(self, q)

    def integrator(
        self,
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: AbstractStateParts,
        name: str,
    ) -> MuntheKaas:
        return munthe_kaas(solver, self, adjoint=adjoint, parts=parts, name=name)


LieGroup = AbstractLieGroup  # its public name before the geometry wing (`gm.LieGroup`)


class SO3(AbstractLieGroup):
    """The rotation group SO(3): points `jaxlie.SO3` (unit quaternions `wxyz`), velocity the body
    angular velocity ω ($\\dot R = R\\hat\\omega$)."""

    group: ClassVar[type[jaxlie.MatrixLieGroup]] = jaxlie.SO3

    def compose(self, a: jaxlie.MatrixLieGroup, b: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        return jaxlie.SO3(quaternion_product(a.wxyz, b.wxyz))

    def exp(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        return jaxlie.SO3.exp(psi)

    def exp_to_second_order(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        return jaxlie.SO3(_unit_quaternion_to_second_order(psi))

    def log(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        return q.log()

    def dexp(self, psi: Float[Array, " n"], psi_dot: Float[Array, " n"]) -> Float[Array, " n"]:
        # J_r(ψ) ψ̇ = ψ̇ - B ψ×ψ̇ + C ψ×(ψ×ψ̇)  ([Sola2018] (143))
        B, C, _ = _so3_coefficients(psi)
        u = jnp.cross(psi, psi_dot)
        return psi_dot - B * u + C * jnp.cross(psi, u)

    def dexp_inverse(self, psi: Float[Array, " n"], v: Float[Array, " n"]) -> Float[Array, " n"]:
        # J_r(ψ)⁻¹ v = v + ½ ψ×v + D ψ×(ψ×v)  ([Sola2018] (144))
        _, _, D = _so3_coefficients(psi)
        u = jnp.cross(psi, v)
        return v + 0.5 * u + D * jnp.cross(psi, u)

    def bracket(self, v: Float[Array, " n"], w: Float[Array, " n"]) -> Float[Array, " n"]:
        return jnp.cross(v, w)  # [v̂, ŵ] = (v × w)^

    def point_defect(self, q: jaxlie.MatrixLieGroup) -> Float[Array, "*batch"]:
        return _unit_defect(q.wxyz)

    def normalize(self, q: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        return jaxlie.SO3(_unit(q.wxyz))

    def point_scale(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        return jnp.ones(3, q.wxyz.dtype)  # a radian for each rotation direction


class SE3(AbstractLieGroup):
    """SE(3): points `jaxlie.SE3`, velocity the body twist in jaxlie's order (linear ρ, angular
    θ)."""

    group: ClassVar[type[jaxlie.MatrixLieGroup]] = jaxlie.SE3

    def compose(self, a: jaxlie.MatrixLieGroup, b: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        # (R_a, t_a)(R_b, t_b) = (R_a R_b, R_a t_b + t_a), as jaxlie.SE3.multiply
        Ra = a.rotation()
        return jaxlie.SE3.from_rotation_and_translation(
            jaxlie.SO3(quaternion_product(Ra.wxyz, b.rotation().wxyz)),
            rotate(Ra, b.translation()) + a.translation(),
        )

    def exp(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        # V = I + B θ̂ + C θ̂² in closed form to second order near θ = 0, where jaxlie takes V ≈ R
        rho, theta = psi[:3], psi[3:]
        B, C, _ = _so3_coefficients(theta)
        K = hat(theta)
        V = jnp.eye(3, dtype=psi.dtype) + B * K + C * K @ K
        return jaxlie.SE3.from_rotation_and_translation(jaxlie.SO3.exp(theta), V @ rho)

    def exp_to_second_order(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        # V ρ = ρ + ½ θ×ρ + O(|ψ|³) (B = ½ + O(θ²) above)
        rho, theta = psi[:3], psi[3:]
        return jaxlie.SE3.from_rotation_and_translation(
            jaxlie.SO3(_unit_quaternion_to_second_order(theta)), rho + 0.5 * jnp.cross(theta, rho)
        )

    def log(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        # ρ = V⁻¹ t with V⁻¹ = J_l(θ)⁻¹ = I − ½θ̂ + D θ̂² ([Sola2018] (146), (173)); jaxlie's
        # form loses digits to cancellation for small θ
        theta = q.rotation().log()
        _, _, D = _so3_coefficients(theta)
        t = q.translation()
        u = jnp.cross(theta, t)
        return jnp.concatenate([t - 0.5 * u + D * jnp.cross(theta, u), theta])

    def dexp(self, psi: Float[Array, " n"], psi_dot: Float[Array, " n"]) -> Float[Array, " n"]:
        return _quadrature_right_jacobian(self, psi) @ psi_dot

    def dexp_inverse(self, psi: Float[Array, " n"], v: Float[Array, " n"]) -> Float[Array, " n"]:
        return jnp.linalg.solve(_quadrature_right_jacobian(self, psi), v)

    def bracket(self, v: Float[Array, " n"], w: Float[Array, " n"]) -> Float[Array, " n"]:
        # [(ρ₁, θ₁), (ρ₂, θ₂)] = (θ₁×ρ₂ − θ₂×ρ₁, θ₁×θ₂) of se(3) [Sola2018]
        rho1, theta1, rho2, theta2 = v[:3], v[3:], w[:3], w[3:]
        linear = jnp.cross(theta1, rho2) - jnp.cross(theta2, rho1)
        return jnp.concatenate([linear, jnp.cross(theta1, theta2)])

    def point_defect(self, q: jaxlie.MatrixLieGroup) -> Float[Array, "*batch"]:
        return _unit_defect(q.rotation().wxyz)

    def normalize(self, q: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        return jaxlie.SE3.from_rotation_and_translation(
            jaxlie.SO3(_unit(q.rotation().wxyz)), q.translation()
        )

    def point_scale(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        # the distance from the origin for each translation direction, a radian for each rotation
        t = q.translation()
        return jnp.concatenate([jnp.full(3, jnp.linalg.norm(t)), jnp.ones(3, t.dtype)])


class SE2(AbstractLieGroup):
    """SE(2): points `jaxlie.SE2`, velocity $(v_x, v_y, \\omega)$ in the body frame."""

    group: ClassVar[type[jaxlie.MatrixLieGroup]] = jaxlie.SE2

    def compose(self, a: jaxlie.MatrixLieGroup, b: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        return a @ b  # jaxlie.SE2's product has no gather

    def exp(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        # t = V ρ with V = [[sin θ/θ, −(1 − cos θ)/θ], [(1 − cos θ)/θ, sin θ/θ]] ([Sola2018]
        # (156)), by series for small θ, where jaxlie's form cancels
        theta = psi[2]
        t2 = theta**2
        small = t2 < 1e-2
        a = _series(t2, small, lambda x: jnp.sin(jnp.sqrt(x)) / jnp.sqrt(x), (1.0, -1 / 6, 1 / 120, -1 / 5040))
        b = theta * _series(t2, small, lambda x: (1 - jnp.cos(jnp.sqrt(x))) / x, (1 / 2, -1 / 24, 1 / 720, -1 / 40320))
        rho = psi[:2]
        t = jnp.stack([a * rho[0] - b * rho[1], b * rho[0] + a * rho[1]])
        return jaxlie.SE2.from_rotation_and_translation(jaxlie.SO2.from_radians(theta), t)

    def exp_to_second_order(self, psi: Float[Array, " n"]) -> jaxlie.MatrixLieGroup:
        # (cos θ, sin θ) = (1 − θ²/2, θ) and V ρ = ρ + (θ/2) Jρ to second order (V above)
        rho, theta = psi[:2], psi[2]
        t = rho + 0.5 * theta * jnp.stack([-rho[1], rho[0]])
        return jaxlie.SE2(jnp.concatenate([jnp.stack([1 - theta**2 / 2, theta]), t]))

    def log(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        # ρ = [[A, θ/2], [−θ/2, A]] t with A = (θ/2) cot(θ/2) ([Sola2018] (158)), without
        # jaxlie's cancellation in 1 − cos θ for small θ
        c, s, t = q.unit_complex_xy[0], q.unit_complex_xy[1], q.unit_complex_xy[2:]
        theta = jnp.arctan2(s, c)
        t2 = theta**2
        A = _series(
            t2, t2 < 1e-2, lambda x: 0.5 * jnp.sqrt(x) / jnp.tan(0.5 * jnp.sqrt(x)),
            (1.0, -1 / 12, -1 / 720, -1 / 30240),
        )
        h = 0.5 * theta
        rho = jnp.stack([A * t[0] + h * t[1], -h * t[0] + A * t[1]])
        return jnp.concatenate([rho, theta[None]])

    def dexp(self, psi: Float[Array, " n"], psi_dot: Float[Array, " n"]) -> Float[Array, " n"]:
        return _quadrature_right_jacobian(self, psi) @ psi_dot

    def dexp_inverse(self, psi: Float[Array, " n"], v: Float[Array, " n"]) -> Float[Array, " n"]:
        return jnp.linalg.solve(_quadrature_right_jacobian(self, psi), v)

    def bracket(self, v: Float[Array, " n"], w: Float[Array, " n"]) -> Float[Array, " n"]:
        # [(u₁, ω₁), (u₂, ω₂)] = (ω₁ J u₂ − ω₂ J u₁, 0), J = rotation by π/2, of se(2)
        perp = lambda u: jnp.stack([-u[1], u[0]])
        linear = v[2] * perp(w[:2]) - w[2] * perp(v[:2])
        return jnp.concatenate([linear, jnp.zeros(1, w.dtype)])

    def point_defect(self, q: jaxlie.MatrixLieGroup) -> Float[Array, "*batch"]:
        return _unit_defect(q.unit_complex_xy[..., :2])

    def normalize(self, q: jaxlie.MatrixLieGroup) -> jaxlie.MatrixLieGroup:
        p = q.unit_complex_xy
        return jaxlie.SE2(jnp.concatenate([_unit(p[..., :2]), p[..., 2:]], axis=-1))

    def point_scale(self, q: jaxlie.MatrixLieGroup) -> Float[Array, " n"]:
        t = q.translation()
        return jnp.concatenate([jnp.full(2, jnp.linalg.norm(t)), jnp.ones(1, t.dtype)])
