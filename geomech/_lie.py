"""Configuration spaces that are Lie groups (docs/lie_groups.md), built on `jaxlie`.

A point is a `jaxlie` group element $q$, a velocity the left-trivialized $v = q^{-1}\\dot q$ (the
body velocity: $\\dot R = R\\hat\\omega$ on SO(3)). The chart centred at $q$ is
$\\psi \\mapsto q \\exp(\\psi)$; along $q \\exp(\\psi(t))$ the velocity is
$v = \\mathrm{dexp}_{-\\psi}\\dot\\psi$ (the right Jacobian of $\\exp$), so at $\\psi = 0$,
$\\dot\\psi = v$ and $\\ddot\\psi = \\dot v$. In that chart a system is an ordinary Lagrangian system
in coordinates (`localize`), and every stage applies at $\\psi = 0$.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import jaxlie
import numpy as np
from jaxtyping import Array, Float, PyTree

from ._manifold import AbstractManifold


class LieGroup(AbstractManifold):
    """A matrix Lie group of `jaxlie` with its chart $\\psi \\mapsto q \\exp(\\psi)$ centred at $q$."""

    group: type[jaxlie.MatrixLieGroup] = eqx.field(static=True)

    @property
    def dim(self) -> int:
        return self.group.tangent_dim

    @property
    def coordinates(self) -> bool:
        return False

    def wrap(self, q):
        return q

    def check(self, q) -> None:
        name = self.group.__name__
        if not isinstance(q, self.group):
            raise ValueError(f"a point of {name} must be a jaxlie.{name}, got {type(q).__name__}.")
        if q.parameters().shape != (self.group.parameters_dim,):
            raise ValueError(
                f"the jaxlie.{name} has parameters of shape {q.parameters().shape}: give one "
                f"element (parameters ({self.group.parameters_dim},)), batch with jax.vmap."
            )

    def batch_shape(self, q):
        return q.get_batch_axes()

    def oplus(self, q, psi):
        return q @ _exp(self.group, psi)

    def dexp(self, psi, psi_dot):
        # q⁻¹ d/dt q exp(ψ(t)) = J_r(ψ) ψ̇, J_r(ψ) = ∫₀¹ Ad(exp(-sψ)) ds (the right Jacobian of exp)
        return _right_jacobian(self.group, psi) @ psi_dot

    def dexp_inverse(self, psi, v):
        return jnp.linalg.solve(_right_jacobian(self.group, psi), v)

    def velocity_of_point(self, q, v):
        zero = jnp.zeros_like(v)
        return jax.jvp(lambda psi: self.oplus(q, psi), (zero,), (v,))[1]

    def point_scale(self, q):
        # a radian for each rotation direction, the distance from the origin for each
        # translation direction (jaxlie orders an SE(n) tangent (linear, angular))
        if not hasattr(q, "translation"):
            return jnp.ones(self.dim, q.parameters().dtype)
        t = q.translation()
        n = t.shape[-1]
        return jnp.concatenate([jnp.full(n, jnp.linalg.norm(t)), jnp.ones(self.dim - n, t.dtype)])

    def point_error(self, q, psi, psi_error):
        high, low = self.oplus(q, psi), self.oplus(q, psi - psi_error)
        return jtu.tree_map(jnp.subtract, high, low)


def _hat(w):
    return jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def _so3_coefficients(theta):
    """$B = (1 - \\cos\\theta)/\\theta^2$, $C = (\\theta - \\sin\\theta)/\\theta^3$ of
    $\\theta = |\\theta|$, by their series for $\\theta^2 < 10^{-2}$ (exact to round-off, and
    correct derivatives at $\\theta = 0$)."""
    t2 = theta @ theta
    small = t2 < 1e-2
    safe = jnp.where(small, 1.0, t2)
    th = jnp.sqrt(safe)
    B = jnp.where(small, 1 / 2 - t2 / 24 + t2**2 / 720 - t2**3 / 40320, (1 - jnp.cos(th)) / safe)
    C = jnp.where(
        small, 1 / 6 - t2 / 120 + t2**2 / 5040 - t2**3 / 362880, (th - jnp.sin(th)) / (safe * th)
    )
    return B, C


def _exp(group, psi):
    """$\\exp(\\psi)$; on SE(3) with $V = I + B\\hat\\theta + C\\hat\\theta^2$ accurate to second
    order near $\\theta = 0$, where `jaxlie.SE3.exp` takes $V \\approx R$ (its first derivative
    is right there, its second is not, and the stages of a holonomic constraint need it)."""
    if group is not jaxlie.SE3:
        return group.exp(psi)
    rho, theta = psi[:3], psi[3:]
    B, C = _so3_coefficients(theta)
    K = _hat(theta)
    V = jnp.eye(3, dtype=psi.dtype) + B * K + C * K @ K
    return jaxlie.SE3.from_rotation_and_translation(jaxlie.SO3.exp(theta), V @ rho)


# Gauss–Legendre nodes and weights on [0, 1]: exact for the polynomials (the nilpotent part of
# SE(n)) and to round-off for the trigonometric part of Ad(exp(-sψ)) at rotation angles |θ| ≤ 3
_NODES, _WEIGHTS = (x / 2 for x in np.polynomial.legendre.leggauss(8))
_NODES = _NODES + 0.5


def _right_jacobian(group, psi):
    """$J_r(\\psi) = \\int_0^1 \\mathrm{Ad}_{\\exp(-s\\psi)}\\,ds$; on SO(3) the closed form
    $I - B\\hat\\psi + C\\hat\\psi^2$ ([Sola2018] (143))."""
    if group is jaxlie.SO3:
        B, C = _so3_coefficients(psi)
        K = _hat(psi)
        return jnp.eye(3, dtype=psi.dtype) - B * K + C * K @ K
    Ad = jax.vmap(lambda s: _exp(group, -s * psi).adjoint())(jnp.asarray(_NODES, psi.dtype))
    return jnp.tensordot(jnp.asarray(_WEIGHTS, psi.dtype), Ad, axes=1)


def SO3() -> LieGroup:
    """The rotation group SO(3): points `jaxlie.SO3`, velocity the body angular velocity ω
    ($\\dot R = R\\hat\\omega$)."""
    return LieGroup(jaxlie.SO3)


def SE3() -> LieGroup:
    """SE(3): points `jaxlie.SE3`, velocity the body twist in jaxlie's order (linear, angular)."""
    return LieGroup(jaxlie.SE3)


def SE2() -> LieGroup:
    """SE(2): points `jaxlie.SE2`, velocity $(v_x, v_y, \\omega)$ in the body frame."""
    return LieGroup(jaxlie.SE2)


def is_point(q) -> bool:
    """Whether `q` is a point of a group or a product (not an array of coordinates)."""
    return isinstance(q, jaxlie.MatrixLieGroup | tuple)


def point_shape(q) -> tuple[tuple[int, ...], int]:
    """The batch axes and the tangent dimension of a group element or a tuple of points."""
    if isinstance(q, jaxlie.MatrixLieGroup):
        return q.get_batch_axes(), q.tangent_dim
    if isinstance(q, tuple) and q:
        shapes = [point_shape(x) if is_point(x) else (jnp.shape(x)[:-1], jnp.shape(x)[-1]) for x in q]
        return shapes[0][0], sum(n for _, n in shapes)
    raise ValueError(f"not a point of a manifold: {type(q).__name__}.")


# -- the chart centred at q: a system's functions as functions of ψ ------------------------------


class Centred(eqx.Module):
    """A user function `fn` in the chart centred at `q`; `kind` says how it transforms:

    - `"q"`: $f(q \\oplus \\psi)$ (holonomic $h$, the free term $c$);
    - `"qv"`: $f(q \\oplus \\psi, v)$ with $v = \\mathrm{dexp}(\\psi, \\dot\\psi)$ ($L$, $\\phi$);
    - `"covector"`: $J^\\top f(\\ldots)$ with $J = \\partial v/\\partial\\dot\\psi$ (forces, $F^0$);
    - `"rows"`: $f(q \\oplus \\psi)\\,J$, rows acting on $v$ (`LinearConstraint`'s $A(q)$);
    - `"annihilator"`: $f(\\ldots)\\,J$; `"basis"`: $J^{-1} f(\\ldots)$ (a work space);
    - `"vectors"`: $J^{-1} f(q \\oplus \\psi)$, columns in the velocity convention (the
        generators of a `LieAlgebraAction`).

    Called as `f(t, psi, psi_dot)` (or `f(t, psi)` for `"q"`, `"rows"`), like the user's
    function with `t` first; `t` reaches `fn` only if `time_dependent`."""

    fn: Callable | Array
    manifold: AbstractManifold
    q: PyTree
    kind: str = eqx.field(static=True)
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, t, psi, psi_dot=None):
        m = self.manifold
        point = m.oplus(self.q, psi)
        at = (lambda *a: self.fn(t, *a)) if self.time_dependent else self.fn
        if not callable(self.fn):  # a constant work space
            at = lambda *a: self.fn
        if self.kind in ("q", "rows", "vectors"):
            out = jnp.asarray(at(point))
            if self.kind == "q":
                return out
            if self.kind == "vectors":
                return _inverse_jacobian_times(m, psi, out)
            return _times_jacobian(m, psi, jnp.atleast_2d(out))
        v = m.dexp(psi, psi_dot)
        out = at(point, v)
        if self.kind == "qv":
            return out
        if self.kind == "covector":  # J^T F: the covector acting on ψ̇
            return jax.linear_transpose(lambda u: m.dexp(psi, u), psi_dot)(jnp.asarray(out))[0]
        out = jnp.asarray(out)
        if self.kind == "annihilator":
            return _times_jacobian(m, psi, jnp.atleast_2d(out))
        return _inverse_jacobian_times(m, psi, out)


def _inverse_jacobian_times(manifold, psi, vectors: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
    """$J^{-1}$ times each column of `vectors` (velocities $v$ to $\\dot\\psi$)."""
    columns = vectors[:, None] if vectors.ndim == 1 else vectors
    return jax.vmap(lambda u: manifold.dexp_inverse(psi, u), in_axes=1, out_axes=1)(columns)


def _times_jacobian(manifold, psi, rows: Float[Array, "k n"]) -> Float[Array, "k n"]:
    """`rows` $J$, for $J = \\partial\\,\\mathrm{dexp}(\\psi, \\cdot)$ (a transpose of the linear map)."""
    transpose = jax.linear_transpose(lambda u: manifold.dexp(psi, u), psi)
    return jax.vmap(lambda r: transpose(r)[0])(rows)


class Chart(eqx.Module):
    """The chart centred at `q` of `manifold`: `chart(fn, kind, time_dependent)` is `fn` in it."""

    manifold: AbstractManifold
    q: PyTree

    def __call__(self, fn, kind: str, time_dependent: bool) -> Centred:
        return Centred(fn, self.manifold, self.q, kind, time_dependent)


def user_chart(system) -> tuple[Chart, bool] | None:
    """For a system in the chart centred at a point (`LagrangianSystem.localized`, whose
    Lagrangian is then a `Centred`): that chart and whether the user's functions take `t`, to put
    more of the user's functions in it (a solver's basis or generators); `None` on coordinates."""
    L = system.lagrangian
    if not isinstance(L, Centred):
        return None
    return Chart(L.manifold, L.q), L.time_dependent


def local_coordinates(q, p) -> Float[Array, " n"]:
    """$\\psi$ with $p = q \\oplus \\psi$ for a point $p$ near $q$, by the structure of $q$:
    $\\log(q^{-1}p)$ on a `jaxlie` group, $p - q$ on coordinates, concatenated for a tuple."""
    if isinstance(q, jaxlie.MatrixLieGroup):
        return (q.inverse() @ p).log()
    if isinstance(q, tuple):
        return jnp.concatenate([local_coordinates(a, b) for a, b in zip(q, p, strict=True)])
    return p - q
