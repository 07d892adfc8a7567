"""The conditions of [Talamucci] comparing vakonomic and Četaev dynamics: condition (57),
the maps between the multipliers $\\lambda$ and $\\mu$, and the transpositional relation (54)."""

from collections.abc import Callable

import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from .._bundle import State
from .._custom_types import RealScalarLike
from .._dynamics import acceleration as cetaev_acceleration
from .._dynamics import multipliers as cetaev_multipliers
from .._operators import weighted_solve
from .._stages import assemble
from .._system import LagrangianSystem
from ._dynamics import check_vakonomic_system, constraint_function, omega_matrix


def _lagrangian_derivative_g(system, t, q, v, a) -> Float[Array, "k n"]:
    """The Lagrangian derivative (53) of the constraints,
    $\\mathcal{D}^{(q_j)} g_\\nu =
    \\tfrac{d}{dt}\\partial g_\\nu/\\partial v_j - \\partial g_\\nu/\\partial q_j$,
    along the motion through $(t, q, v)$ with acceleration $a$; shape `(k, n)`."""
    g = constraint_function(system)
    G = jax.jacfwd(g, argnums=2)
    t = jnp.asarray(t, q.dtype)
    G_dot = jax.jvp(G, (t, q, v), (jnp.ones_like(t), v, a))[1]
    return G_dot - jax.jacfwd(g, argnums=1)(t, q, v)


def _rho(system, state, t, a, omega):
    """$\\mathcal{D}g$ (or $\\mathcal{D}_1 g$ (62) with `omega`), its $M^{-1}$-least-squares
    coefficients $\\varrho$ on $\\mathrm{span}\\{G_\\sigma\\}$ (57), and the remainder."""
    stages = assemble(system, state, t)
    q, v = state.q, state.v
    if a is None:
        a = cetaev_acceleration(system, state, t=t)
    Dg = _lagrangian_derivative_g(system, stages.t, q, v, a)
    G = stages.A
    if omega is not None:
        Dg = Dg - G @ omega_matrix(
            system, omega, stages
        )  # (62): 𝒟_1 g_ν = 𝒟 g_ν − Σ_h ∂g_ν/∂v_h ω_{h,j}
    # ϱ minimizing |𝒟g_ν − Σ_σ ϱ_νσ G_σ| in the kinetic metric M⁻¹ on covectors (invariant)
    lam, _ = weighted_solve(stages.mass, stages.A_rows, stages.A_rows, G @ stages.solve_M(Dg.T))
    rho = lam.T
    R = Dg - rho @ G
    return stages, rho, R


def condition_57(
    system: LagrangianSystem,
    state: State,
    t: RealScalarLike = 0.0,
    *,
    acceleration: Float[Array, " n"] | None = None,
    omega: Callable | None = None,
) -> tuple[Float[Array, " k"], Float[Array, "k k"]]:
    """Residual of condition (57) (Prop. 4), $\\mathcal{D}^{(q_j)} g_\\nu =
    \\sum_\\sigma \\varrho_{\\nu\\sigma}\\, \\partial g_\\sigma/\\partial v_j$: does
    $\\mathcal{D}g_\\nu$ lie in the span of the Četaev covectors?

    (57) is an acceleration-level condition: it is evaluated along a motion, at the acceleration
    `acceleration` (Četaev's $X_R$ by default). Where it holds along the Četaev motion, model B1
    reproduces that motion for every $\\mu_0$ ([Talamucci] Prop. 4 along one motion). Batch along a trajectory with
    `jax.vmap`.

    **Arguments:**

    - `system`, `state`, `t`: as for `vakonomic_acceleration`.
    - `acceleration`: the acceleration of the motion through `state`; Četaev's by default.
    - `omega`: test (57) for $\\mathcal{D}_1 g = \\mathcal{D}g - G\\Omega$ (62) instead (model B2).

    **Returns:** `(residual, rho)`: `residual[ν]` is the distance of $\\mathcal{D}g_\\nu$ from
    $\\mathrm{span}\\{\\partial g_\\sigma/\\partial v\\}$ in the kinetic metric $M^{-1}$ (invariant
    under changes of coordinates), `rho` the `(k, k)` coefficients $\\varrho_{\\nu\\sigma}$ of the
    best fit.
    """
    check_vakonomic_system(system, state, None, t)
    stages, rho, R = _rho(system, state, t, acceleration, omega)
    residual = jnp.sqrt(jnp.sum(R * stages.solve_M(R.T).T, axis=1))
    return residual, rho


def lambda_from_mu(
    system: LagrangianSystem,
    state: State,
    mu: Float[Array, " k"],
    mu_dot: Float[Array, " k"],
    t: RealScalarLike = 0.0,
    *,
    acceleration: Float[Array, " n"] | None = None,
) -> Float[Array, " k"]:
    """Četaev multipliers from vakonomic ones where (57) holds:
    $\\lambda_\\sigma = -\\dot\\mu_\\sigma - \\sum_\\nu \\mu_\\nu \\varrho_{\\nu\\sigma}$
    ([Talamucci] Prop. 4 along one motion; Prop. 1 with $\\rho = -\\varrho$). For exact constraints $g = \\dot f$,
    $\\varrho = 0$ and $\\lambda = -\\dot\\mu$.

    `acceleration` as in `condition_57`. **Returns:** $\\lambda$, shape `(k,)`, with the Četaev
    constraint force $G^\\top\\lambda$.
    """
    check_vakonomic_system(system, state, mu, t)
    _, rho, _ = _rho(system, state, t, acceleration, None)
    return -mu_dot - rho.T @ mu


def mu_dot_from_lambda(
    system: LagrangianSystem,
    state: State,
    mu: Float[Array, " k"],
    t: RealScalarLike = 0.0,
    *,
    lam: Float[Array, " k"] | None = None,
    acceleration: Float[Array, " n"] | None = None,
) -> Float[Array, " k"]:
    """The multiplier rate $\\dot\\mu = -\\lambda - \\varrho^\\top\\mu$ with which the vakonomic
    solution follows the Četaev motion where (57) holds ([Talamucci] Prop. 4); `lam` defaults to Četaev's
    multipliers at `state`. **Returns:** $\\dot\\mu$, shape `(k,)`."""
    check_vakonomic_system(system, state, mu, t)
    _, rho, _ = _rho(system, state, t, acceleration, None)
    if lam is None:
        lam = cetaev_multipliers(system, state, t=t)
    return -lam - rho.T @ mu


def transpositional_relation(
    system: LagrangianSystem,
    state: State,
    acceleration: Float[Array, " n"],
    dq: Float[Array, " n"],
    dq_rate: Float[Array, " n"],
    dv: Float[Array, " n"],
    t: RealScalarLike = 0.0,
) -> tuple[Float[Array, " k"], Float[Array, " k"]]:
    """Both sides of the transpositional relation (54), an identity for every curve and variation:

    $$\\delta^{(v)} g_\\nu - \\tfrac{d}{dt}\\big(\\delta^{(c)} g_\\nu\\big) =
    \\sum_j \\frac{\\partial g_\\nu}{\\partial v_j}
    \\Big(\\delta\\dot q_j - \\tfrac{d}{dt}\\delta q_j\\Big)
    - \\sum_j \\mathcal{D}^{(q_j)} g_\\nu\\, \\delta q_j.$$

    The left side is computed from the definitions:
    $\\delta^{(v)} g = dg(\\delta q, \\delta\\dot q)$ ((49), right) and the time derivative of
    $\\delta^{(c)} g = G\\,\\delta q$ ((49), left) along the curve through $(t, q, v)$ with
    acceleration `acceleration` and a variation $\\delta q(t)$ with rate `dq_rate`; the right side
    uses the Lagrangian derivative (53).

    **Arguments:** `dq` $= \\delta q$, `dq_rate` $= \\tfrac{d}{dt}\\delta q$,
    `dv` $= \\delta\\dot q$ (independent of `dq_rate` unless the commutation rule (28) holds).

    **Returns:** `(lhs, rhs)`, each of shape `(k,)`.
    """
    check_vakonomic_system(system, state, None, t)
    g = constraint_function(system)
    q, v = state.q, state.v
    t = jnp.asarray(t, q.dtype)
    delta_v = jax.jvp(lambda q_, v_: g(t, q_, v_), (q, v), (dq, dv))[1]  # δ^(v) g (49)
    delta_c = lambda s: (
        jax.jacfwd(g, argnums=2)(t + s, q + s * v, v + s * acceleration) @ (dq + s * dq_rate)
    )
    zero = jnp.zeros_like(t)
    lhs = delta_v - jax.jvp(delta_c, (zero,), (jnp.ones_like(t),))[1]
    G = jax.jacfwd(g, argnums=2)(t, q, v)
    rhs = G @ (dv - dq_rate) - _lagrangian_derivative_g(system, t, q, v, acceleration) @ dq  # (54)
    return lhs, rhs
