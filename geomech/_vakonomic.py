"""Vakonomic dynamics beside Četaev's, for constraints $g(t, q, v) = 0$ nonlinear in $v$.

Seed 002 (Talamucci) and `notes/seed-002-methods.md`. Četaev's dynamics is the constrained
field $X_R$ of the core with $\\mathcal{W} = \\mathcal{D} = \\ker \\partial g/\\partial v$ (paper
(52), first group). Vakonomic dynamics (model B1, paper (58)) is a *different* dynamics: the
Euler–Lagrange equations of $L + \\mu \\cdot g$ with the multipliers $\\mu$ as state variables,
whose initial value $\\mu_0$ is free. At each state it is the linear (KKT) system

$$\\begin{pmatrix} M_\\mu & G^\\top \\\\ G & 0 \\end{pmatrix}
\\begin{pmatrix} a \\\\ \\dot\\mu \\end{pmatrix} =
\\begin{pmatrix} f_\\mu \\\\ b \\end{pmatrix},\\qquad
M_\\mu = M + \\textstyle\\sum_\\nu \\mu_\\nu\\, \\partial^2 g_\\nu / \\partial v^2,$$

with $G = \\partial g/\\partial v$, $G a = b$ the differentiated constraint and $f_\\mu$ the
generalized force of $L + \\mu \\cdot g$ (note, Algorithm B). Model B2,
$\\delta\\dot q - \\tfrac{d}{dt}\\delta q = \\Omega\\,\\delta q$, adds
$\\Omega^\\top G^\\top \\mu$ to $f_\\mu$ (paper (52)B); the modified variant of
Llibre–Ramírez–Sadovskaia and Pastore–Giammarini–Grillo adds $\\Omega^\\top \\partial L/\\partial v$
as well (paper (60)).

Where $M_\\mu$ is degenerate on $\\ker G$ the KKT matrix is singular (an impasse point); this is
reported, never integrated through.
"""

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float

from ._bundle import State
from ._constraint import call
from ._dynamics import (
    acceleration as cetaev_acceleration,
)
from ._dynamics import (
    check_on_constraint,
)
from ._dynamics import (
    multipliers as cetaev_multipliers,
)
from ._integrate import (
    AbstractStabilization,
    Baumgarte,
    ManifoldProjection,
    Solution,
    _as_stabilization,
    _check_state,
    _Diagnostics,
    _integrate_ode,
    _project_state,
    _solve_options,
    baumgarte_stages,
    simulate,
)
from ._linalg import null_space
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._stages import Stages, assemble
from ._system import LagrangianSystem


def _check_vakonomic_system(system: LagrangianSystem, state: State, mu, t) -> int:
    """Shape/configuration checks before tracing; returns $k$."""
    if not isinstance(system, LagrangianSystem):
        raise TypeError(f"expected a gm.LagrangianSystem, got {type(system).__name__}.")
    if system.constraint is None:
        raise ValueError("vakonomic dynamics needs constraints g(q, v) = 0: the system has none.")
    if system.work_space is not None or system.known_work is not None:
        raise ValueError(
            "vakonomic dynamics is the Euler–Lagrange equations of L + mu @ g; it has no work "
            "space W and no known work F^0. Build the system without work_space/known_work."
        )
    k = system.check_shapes(state, t)
    if mu is not None and jnp.shape(mu) != (k,):
        raise ValueError(
            f"mu must have shape ({k},) (one multiplier per constraint), got {jnp.shape(mu)}."
        )
    return k


def _g(system: LagrangianSystem):
    td = system.time_dependent
    return lambda t, q, v: system.constraint.residual(t, q, v, time_dependent=td)


def _omega_matrix(system: LagrangianSystem, omega: Callable, stages: Stages) -> Float[Array, "n n"]:
    q = stages.state.q
    Om = jnp.asarray(call(omega, stages.t, q, stages.state.v, time_dependent=system.time_dependent))
    if Om.shape != (q.shape[0], q.shape[0]):
        raise ValueError(
            f"omega must return the ({q.shape[0]}, {q.shape[0]}) matrix Ω of δq̇ − d/dt δq = Ω δq "
            f"(30), got shape {Om.shape}."
        )
    return Om


def _mu_g(stages: Stages, mu) -> LagrangianSystem:
    """$\\mu\\cdot g$ with $\\mu$ frozen (58), as a Lagrangian for the core's own routines."""
    g = _g(stages.system)
    mu = jnp.asarray(mu, stages.M.dtype)
    return LagrangianSystem(lambda t_, q_, v_: mu @ g(t_, q_, v_), time_dependent=True)


def _M_mu(stages: Stages, mu_g: LagrangianSystem) -> Float[Array, "n n"]:
    return stages.M + mu_g.mass_matrix(stages.state, stages.t)  # M + Σ μ_ν ∂²g_ν/∂v² (§5.5)


def _signed_margin(stages: Stages, M_mu) -> Float[Array, ""]:
    """$\\pm\\sigma_{\\min}/\\sigma_{\\max}$ of $Z^\\top M_\\mu Z$ ($Z$ a basis of $\\ker G$),
    with the sign of its determinant: zero at an impasse point (the KKT matrix is singular iff
    $M_\\mu$ is degenerate on $\\ker G$) and changing sign where a motion crosses one. The sign
    does not depend on the basis $Z$. A check, not differentiated."""
    Z = null_space(stages.A)
    lam = jnp.linalg.eigvalsh(jax.lax.stop_gradient(Z.T @ M_mu @ Z))  # symmetric: σ = |λ|
    return jnp.prod(jnp.sign(lam)) * jnp.min(jnp.abs(lam)) / jnp.max(jnp.abs(lam))


def _vakonomic_kkt(stages: Stages, mu, omega, modified):
    """Solve the vakonomic KKT system from the shared stages; returns `(a, mu_dot, M_mu)`."""
    system, state, t = stages.system, stages.state, stages.t
    mu = jnp.asarray(mu, stages.M.dtype)
    mu_g = _mu_g(stages, mu)  # L + μ·g: its v-Hessian and generalized force (58)
    M_mu = _M_mu(stages, mu_g)
    f_mu = stages.Q + mu_g.generalized_force(state, t)
    G, b = stages.A, stages.b
    if omega is not None:
        Om = _omega_matrix(system, omega, stages)
        p = G.T @ mu  # (52)B: + Σ_ν μ_ν Σ_h ∂g_ν/∂v_h ω_{h,j}
        if modified:
            p = p + system.momentum(state, t)  # (60): + Σ_h ∂L/∂v_h ω_{h,j}
        f_mu = f_mu + Om.T @ p
    n, k = stages.n, stages.k
    K = jnp.block([[M_mu, G.T], [G, jnp.zeros((k, k), M_mu.dtype)]])
    x = jnp.linalg.solve(K, jnp.concatenate([f_mu, b]))
    return x[:n], x[n:], M_mu


def default_impasse_tol(dtype) -> float:
    """The default relative tolerance below which $M_\\mu$ counts as degenerate on $\\ker G$."""
    return float(np.sqrt(np.finfo(dtype).eps))


_IMPASSE_MESSAGE = (
    "vakonomic impasse point: M_mu = M + sum_nu mu_nu d2g_nu/dv2 is degenerate on ker(dg/dv), "
    "so the KKT system for (a, mu_dot) is singular and the vakonomic equations do not determine "
    "the motion here. Choose another mu0 (the multipliers of L + mu @ g), or pass throw=False: "
    "vakonomic_acceleration then returns NaN, simulate_vakonomic stops the trajectory there and "
    "flags it in sol.impasse."
)


def vakonomic_acceleration(
    system: LagrangianSystem,
    state: State,
    mu: Float[Array, " k"],
    t=0.0,
    *,
    omega: Callable | None = None,
    modified: bool = False,
    throw: bool = True,
    impasse_tol: float | None = None,
) -> tuple[Float[Array, " n"], Float[Array, " k"]]:
    """The vakonomic acceleration and multiplier rate at one state (seed 002, (58)).

    Solves $\\begin{pmatrix} M_\\mu & G^\\top \\\\ G & 0\\end{pmatrix}\\binom{a}{\\dot\\mu} =
    \\binom{f_\\mu}{b}$, the Euler–Lagrange equations $\\mathcal{D}(L + \\mu\\cdot g) = F^e$
    together with $\\dot g = 0$.

    **Arguments:**

    - `system`: a `LagrangianSystem` with constraints $g$ (no `work_space`, no `known_work`); its
        `force` plays the paper's non-potential force $F_{NP}$.
    - `state`: one point `State(q, v)` on $g = 0$.
    - `mu`: the multipliers, shape `(k,)`, entering as $L + \\mu\\cdot g$.
    - `t`: the time.
    - `omega`: `None` for model B1 (variation and time derivative commute); otherwise model B2
        with $\\delta\\dot q - \\tfrac{d}{dt}\\delta q = \\Omega\\,\\delta q$ (30): a callable
        `(q, v) -> (n, n)` (`(t, q, v)` for time-dependent systems) giving
        $\\Omega_{jh} = \\omega_{j,h}$; adds $\\Omega^\\top G^\\top\\mu$ to $f_\\mu$
        ((52), second group).
    - `modified`: with `omega`, the modified vakonomic equations (60) of [16]/[19], which also add
        $\\Omega^\\top \\partial L/\\partial v$.
    - `throw`: at an impasse point ($M_\\mu$ degenerate on $\\ker G$, relative smallest singular
        value below `impasse_tol`) raise an error if `True`, else return NaNs.
    - `impasse_tol`: default $\\sqrt{\\varepsilon}$ of the dtype.

    **Returns:** `(a, mu_dot)` of shapes `(n,)` and `(k,)`.
    """
    _check_vakonomic_system(system, state, mu, t)
    if modified and omega is None:
        raise ValueError("modified=True is the variant (60) of model B2: it needs omega.")
    stages = assemble(system, state, t, checks=throw)
    a, mu_dot, M_mu = _vakonomic_kkt(stages, mu, omega, modified)
    tol = default_impasse_tol(a.dtype) if impasse_tol is None else impasse_tol
    bad = jnp.abs(_signed_margin(stages, M_mu)) <= tol
    if throw:
        a = eqx.error_if(a, bad, _IMPASSE_MESSAGE)
    else:
        a = jnp.where(bad, jnp.nan, a)
        mu_dot = jnp.where(bad, jnp.nan, mu_dot)
    return a, mu_dot


def impasse_margin(
    system: LagrangianSystem, state: State, mu: Float[Array, " k"], t=0.0
) -> Float[Array, ""]:
    """How far the vakonomic KKT system is from singular: $\\sigma_{\\min}/\\sigma_{\\max}$ of
    $M_\\mu$ restricted to $\\ker G$ (zero at an impasse point). Not differentiated."""
    _check_vakonomic_system(system, state, mu, t)
    stages = assemble(system, state, t, checks=False)
    return jnp.abs(_signed_margin(stages, _M_mu(stages, _mu_g(stages, mu))))


# -- diagnostics: the paper's conditions ------------------------------------------------------


def _lagrangian_derivative_g(system, t, q, v, a) -> Float[Array, "k n"]:
    """The Lagrangian derivative (53) of the constraints,
    $\\mathcal{D}^{(q_j)} g_\\nu =
    \\tfrac{d}{dt}\\partial g_\\nu/\\partial v_j - \\partial g_\\nu/\\partial q_j$,
    along the motion through $(t, q, v)$ with acceleration $a$; shape `(k, n)`."""
    g = _g(system)
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
        Dg = Dg - G @ _omega_matrix(
            system, omega, stages
        )  # (62): 𝒟_1 g_ν = 𝒟 g_ν − Σ_h ∂g_ν/∂v_h ω_{h,j}
    # ϱ minimizing |𝒟g_ν − Σ_σ ϱ_νσ G_σ| in the kinetic metric M⁻¹ on covectors (invariant)
    MinvGT = stages.solve_M(G.T)
    rho = jnp.linalg.solve(G @ MinvGT, (Dg @ MinvGT).T).T
    R = Dg - rho @ G
    return stages, rho, R


def condition_57(
    system: LagrangianSystem,
    state: State,
    t=0.0,
    *,
    acceleration: Float[Array, " n"] | None = None,
    omega: Callable | None = None,
) -> tuple[Float[Array, " k"], Float[Array, "k k"]]:
    """Residual of condition (57) (Prop. 4), $\\mathcal{D}^{(q_j)} g_\\nu =
    \\sum_\\sigma \\varrho_{\\nu\\sigma}\\, \\partial g_\\sigma/\\partial v_j$: does
    $\\mathcal{D}g_\\nu$ lie in the span of the Četaev covectors?

    (57) is an acceleration-level condition: it is evaluated along a motion, at the acceleration
    `acceleration` (Četaev's $X_R$ by default). Where it holds along the Četaev motion, model B1
    reproduces that motion for every $\\mu_0$ (note §7.4). Batch along a trajectory with
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
    _check_vakonomic_system(system, state, None, t)
    stages, rho, R = _rho(system, state, t, acceleration, omega)
    residual = jnp.sqrt(jnp.sum(R * stages.solve_M(R.T).T, axis=1))
    return residual, rho


def lambda_from_mu(
    system: LagrangianSystem,
    state: State,
    mu: Float[Array, " k"],
    mu_dot: Float[Array, " k"],
    t=0.0,
    *,
    acceleration: Float[Array, " n"] | None = None,
) -> Float[Array, " k"]:
    """Četaev multipliers from vakonomic ones where (57) holds:
    $\\lambda_\\sigma = -\\dot\\mu_\\sigma - \\sum_\\nu \\mu_\\nu \\varrho_{\\nu\\sigma}$
    (note §7.4; Prop. 1 with $\\rho = -\\varrho$). For exact constraints $g = \\dot f$,
    $\\varrho = 0$ and $\\lambda = -\\dot\\mu$.

    `acceleration` as in `condition_57`. **Returns:** $\\lambda$, shape `(k,)`, with the Četaev
    constraint force $G^\\top\\lambda$.
    """
    _check_vakonomic_system(system, state, mu, t)
    _, rho, _ = _rho(system, state, t, acceleration, None)
    return -mu_dot - rho.T @ mu


def mu_dot_from_lambda(
    system: LagrangianSystem,
    state: State,
    mu: Float[Array, " k"],
    t=0.0,
    *,
    lam: Float[Array, " k"] | None = None,
    acceleration: Float[Array, " n"] | None = None,
) -> Float[Array, " k"]:
    """The multiplier rate $\\dot\\mu = -\\lambda - \\varrho^\\top\\mu$ with which the vakonomic
    solution follows the Četaev motion where (57) holds (note §7.4); `lam` defaults to Četaev's
    multipliers at `state`. **Returns:** $\\dot\\mu$, shape `(k,)`."""
    _check_vakonomic_system(system, state, mu, t)
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
    t=0.0,
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
    _check_vakonomic_system(system, state, None, t)
    g = _g(system)
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


def vakonomic_energy(
    system: LagrangianSystem, state: State, mu: Float[Array, " k"], t=0.0
) -> Float[Array, ""]:
    """The energy of $L_\\mu = L + \\mu\\cdot g$: $E_{vak} = v\\cdot\\partial_v L_\\mu - L_\\mu$
    (note §9.5).

    Conserved along vakonomic motions of autonomous systems without external force (on $g = 0$,
    $\\tfrac{d}{dt}E_{vak} = -\\dot\\mu\\cdot g = 0$). Equal to $E_L$ when $g$ is homogeneous in
    $v$.
    """
    _check_vakonomic_system(system, state, mu, t)
    g = _g(system)
    L_mu = LagrangianSystem(
        lambda t_, q_, v_: system.L(t_, q_, v_) + mu @ g(t_, q_, v_), time_dependent=True
    )
    return L_mu.energy(state, t)


# -- integration ---------------------------------------------------------------------------------


class VakonomicSolution(eqx.Module):
    """The result of `simulate_vakonomic`: the fields of `gm.Solution` plus the multipliers.

    With a batch (leading axis `B`) every field has the leading axis `B`.

    **Fields:**

    - `ts`: the saved times, `(T,)`.
    - `states`: a `State` with a time axis, `states.q`, `states.v` of shape `(T, n)`.
    - `mu`: the multipliers $\\mu(t)$, `(T, k)`.
    - `result`: one result code per trajectory (`diffrax.RESULTS`): `successful`,
        `event_occurred` for a trajectory stopped at an impasse point (the only event of
        `simulate_vakonomic`; see `impasse`), or a failure code as for `gm.Solution`.
    - `impasse`: `True` for a trajectory stopped at an impasse point ($M_\\mu$ degenerate on
        $\\ker G$), `()` (or `(B,)`); its saved states after the stop are `inf`.
    - `t_final`: the time each trajectory reached, `()` (or `(B,)`): `t1`, or where it stopped
        (the accepted step on which the impasse margin fell below `impasse_tol` or changed sign).
    - `energy`: $E_L$ at the saved states, `(T,)`.
    - `vakonomic_energy`: $E_{vak}$ of $L + \\mu\\cdot g$ (`vakonomic_energy`), `(T,)`.
    - `constraint_residual`: $|g(t, q, v)|$, `(T,)`.
    - `position_residual`: $|h(t, q)|$ of the holonomic parts, `(T,)`.
    - `stats`: diffrax's step counts.
    """

    ts: Float[Array, "*B T"]
    states: State
    mu: Float[Array, "*B T k"]
    result: diffrax.RESULTS
    impasse: Bool[Array, "*B"]
    t_final: Float[Array, "*B"]
    energy: Float[Array, "*B T"]
    vakonomic_energy: Float[Array, "*B T"]
    constraint_residual: Float[Array, "*B T"]
    position_residual: Float[Array, "*B T"]
    stats: dict


class _VakonomicField(eqx.Module):
    """The right-hand side $(\\dot q, \\dot v, \\dot\\mu) = (v, a, \\dot\\mu)$ on `(State, mu)`.

    No impasse check here (it would poison trial stages): the `_Impasse` event checks the
    accepted states and stops the trajectory on the first step that reaches or crosses one."""

    system: LagrangianSystem
    omega: Callable | None
    modified: bool = eqx.field(static=True)
    baumgarte: Baumgarte | None

    def __call__(self, t, y, args):
        state, mu = y
        stages = assemble(self.system, state, t, checks=False)
        if self.baumgarte is not None:
            stages = baumgarte_stages(stages, self.baumgarte)
        a, mu_dot, _ = _vakonomic_kkt(stages, mu, self.omega, self.modified)
        return State(state.v, a), mu_dot


class _Impasse(eqx.Module):
    """A `diffrax.Event` condition on the accepted states `(State, mu)`: `crossing=False` is
    `True` where the impasse margin is at most `tol` (also at `t0`); `crossing=True` is the
    signed margin, whose sign change marks a step across an impasse point."""

    system: LagrangianSystem
    tol: float = eqx.field(static=True)
    crossing: bool = eqx.field(static=True)

    def __call__(self, t, y, args, **kwargs):
        state, mu = y
        stages = assemble(self.system, state, t, checks=False)
        margin = _signed_margin(stages, _M_mu(stages, _mu_g(stages, mu)))
        return margin if self.crossing else jnp.abs(margin) <= self.tol


class _VakonomicProjection(eqx.Module):
    """Returns `(State, mu)` to $g = 0$ (and $h = 0$); the multipliers are not projected."""

    system: LagrangianSystem
    iterations: int = eqx.field(static=True)

    def __call__(self, t, y, args):
        return _project_state(self.system, y[0], t, self.iterations), y[1]


class _VakonomicDiagnostics(eqx.Module):
    system: LagrangianSystem

    def __call__(self, t, state, mu):
        E, phi, h = _Diagnostics(self.system)(t, state)
        return E, vakonomic_energy(self.system, state, mu, t), phi, h


def simulate_vakonomic(
    system: LagrangianSystem,
    y0: State,
    mu0: Float[Array, "*B k"] | None,
    t0,
    t1,
    *,
    omega: Callable | None = None,
    modified: bool = False,
    integrator: diffrax.AbstractSolver = diffrax.Tsit5(),  # noqa: B008 (immutable modules)
    saveat: diffrax.SaveAt = diffrax.SaveAt(t1=True),  # noqa: B008
    rtol: float = 1e-8,
    atol: float = 1e-8,
    dt0=None,
    max_steps: int = 4096,
    stepsize_controller: diffrax.AbstractStepSizeController | None = None,
    stabilization: None | str | AbstractStabilization = None,
    adjoint: diffrax.AbstractAdjoint = diffrax.RecursiveCheckpointAdjoint(),  # noqa: B008
    throw: bool = True,
    impasse_tol: float | None = None,
    progress: bool = False,
    sharding=None,
) -> VakonomicSolution:
    """Integrate the vakonomic dynamics (seed 002, (58)) on the extended state $(q, v, \\mu)$.

    Shares `gm.simulate`'s machinery: stabilization acts on $(q, v)$ only (Baumgarte on $G a = b$,
    or projection onto $g = 0$; $\\mu$ is never projected), ensembles are one vmapped call with a
    result code per trajectory, and gradients flow through the solve.

    **Arguments:**

    - `system`: a `LagrangianSystem` with constraints and no `work_space`/`known_work`.
    - `y0`: a `State` on $g = 0$, `(n,)` or a batch `(B, n)`.
    - `mu0`: the free initial multipliers: `None` (zeros), `(k,)`, or a batch `(B, k)` (with an
        unbatched `y0` this runs a grid of $\\mu_0$ from one mechanical state).
    - `t0`, `t1`: the interval.
    - `omega`, `modified`: model B2 and the variant (60), as in `vakonomic_acceleration`.
    - `integrator`, `saveat`, `rtol`, `atol`, `dt0`, `max_steps`, `stepsize_controller`,
        `stabilization`, `adjoint`, `progress`, `sharding`: as in `gm.simulate`.
    - `throw`: if `True`, reaching an impasse point raises an error saying so, and so does any
        other integration failure. If `False` a trajectory reaching an impasse point stops there
        with `sol.impasse` `True`, `sol.result == diffrax.RESULTS.event_occurred` and
        `sol.t_final` the time reached; the other trajectories are returned unharmed.
    - `impasse_tol`: an accepted state whose impasse margin ($\\sigma_{\\min}/\\sigma_{\\max}$ of
        $M_\\mu$ on $\\ker G$, `impasse_margin`) is at most this is an impasse point, and so is a
        step across which the margin's sign (that of $\\det Z^\\top M_\\mu Z$) changes (a
        `diffrax.Event`, checked after every accepted step and at `t0`). Default
        $\\sqrt{\\varepsilon}$ of the dtype.

    **Returns:** a `VakonomicSolution`.
    """
    batched_y = _check_state(system, y0, t0)
    one = jax.tree_util.tree_map(lambda x: x[0], y0) if batched_y else y0
    k = _check_vakonomic_system(system, one, None, t0)
    if modified and omega is None:
        raise ValueError("modified=True is the variant (60) of model B2: it needs omega.")
    dtype = y0.q.dtype
    mu0 = jnp.zeros((k,), dtype) if mu0 is None else jnp.asarray(mu0, dtype)
    if mu0.ndim not in (1, 2) or mu0.shape[-1] != k:
        raise ValueError(f"mu0 must have shape ({k},) or (B, {k}), got {mu0.shape}.")
    batched = batched_y or mu0.ndim == 2
    if batched:
        B = y0.q.shape[0] if batched_y else mu0.shape[0]
        if mu0.ndim == 2 and mu0.shape[0] != B:
            raise ValueError(f"y0 has a batch of {B} states but mu0 a batch of {mu0.shape[0]}.")
        y0 = (
            y0
            if batched_y
            else jax.tree_util.tree_map(lambda x: jnp.broadcast_to(x, (B, *x.shape)), y0)
        )
        mu0 = mu0 if mu0.ndim == 2 else jnp.broadcast_to(mu0, (B, k))
    stabilization = _as_stabilization(stabilization)
    options = _solve_options(
        integrator=integrator,
        saveat=saveat,
        rtol=rtol,
        atol=atol,
        dt0=dt0,
        max_steps=max_steps,
        stepsize_controller=stepsize_controller,
        adjoint=adjoint,
        throw=throw,
        progress=progress,
        sharding=sharding,
        batched=batched,
        projecting=isinstance(stabilization, ManifoldProjection),
        dtype=dtype,
    )
    tol = default_impasse_tol(dtype) if impasse_tol is None else float(impasse_tol)
    t0, t1 = jnp.asarray(t0, dtype), jnp.asarray(t1, dtype)
    return _simulate_vakonomic(
        system, y0, mu0, t0, t1, omega, modified, stabilization, tol, batched=batched, **options
    )


@eqx.filter_jit
def _simulate_vakonomic(
    system, y0, mu0, t0, t1, omega, modified, stabilization, impasse_tol, *, batched, **options
) -> VakonomicSolution:
    check = lambda s: check_on_constraint(system, s, t0)
    y0 = jax.vmap(check)(y0) if batched else check(y0)
    baumgarte = stabilization if isinstance(stabilization, Baumgarte) else None
    project = None
    if isinstance(stabilization, ManifoldProjection):
        project = _VakonomicProjection(system, stabilization.iterations)
    rhs = _VakonomicField(system, omega, modified, baumgarte)
    event = diffrax.Event(tuple(_Impasse(system, impasse_tol, c) for c in (False, True)))
    raw = _integrate_ode(
        rhs, (y0, mu0), t0, t1, batched=batched, project=project, event=event, **options
    )
    impasse = raw.result == diffrax.RESULTS.event_occurred
    result = raw.result
    if options["throw"]:
        result = eqx.error_if(result, impasse, _IMPASSE_MESSAGE)
    states, mu = raw.ys
    diagnostics = jax.vmap(_VakonomicDiagnostics(system))
    if batched:
        diagnostics = jax.vmap(diagnostics)
    E, E_vak, phi, h = diagnostics(raw.ts, states, mu)
    return VakonomicSolution(
        raw.ts, states, mu, result, impasse, raw.t_final, E, E_vak, phi, h, raw.stats
    )


# -- Četaev vs vakonomic ------------------------------------------------------------------------


class DynamicsComparison(eqx.Module):
    """The result of `compare_cetaev_vakonomic`.

    **Fields:**

    - `cetaev`: the `gm.Solution` of Četaev's dynamics ($X_R$ with $\\mathcal{W} = \\mathcal{D}$).
    - `vakonomic`: the `VakonomicSolution`, batched over the `B` values of $\\mu_0$.
    - `mu0`: the initial multipliers, `(B, k)`.
    - `max_deviation`: $\\max_t \\max_i |q^{vak}_i(t) - q^{cet}_i(t)|$ per $\\mu_0$, `(B,)`
        (`inf`/`nan` for a vakonomic run that did not finish: stopped at an impasse point,
        `vakonomic.impasse`, or failed, `vakonomic.result`).
    - `max_velocity_deviation`: the same for $v$, `(B,)`.
    """

    cetaev: Solution
    vakonomic: VakonomicSolution
    mu0: Float[Array, "B k"]
    max_deviation: Float[Array, " B"]
    max_velocity_deviation: Float[Array, " B"]


def compare_cetaev_vakonomic(
    system: LagrangianSystem,
    y0: State,
    mu0: Float[Array, "*B k"] | None,
    t0,
    t1,
    *,
    saveat: diffrax.SaveAt | None = None,
    solver: AbstractSolver = Projection(),  # noqa: B008
    omega: Callable | None = None,
    modified: bool = False,
    throw: bool = False,
    **kwargs,
) -> DynamicsComparison:
    """Run Četaev's and the vakonomic dynamics from the same mechanical state and compare them.

    **Arguments:**

    - `system`: a `LagrangianSystem` with constraints (ideal: $\\mathcal{W} = \\mathcal{D}$).
    - `y0`: one `State` on $g = 0$, shape `(n,)`.
    - `mu0`: `None` (zeros), one `(k,)` or a grid `(B, k)` of initial multipliers.
    - `t0`, `t1`: the interval.
    - `saveat`: where to compare; 101 equally spaced times by default.
    - `solver`: the principle for Četaev's dynamics (all give the same $X_R$).
    - `omega`, `modified`: the vakonomic model (B1 by default), as in `vakonomic_acceleration`.
    - `throw`: passed to both integrations; by default failing vakonomic runs (impasse points)
        are flagged per $\\mu_0$ instead of raising.
    - `**kwargs`: `rtol`, `atol`, `integrator`, `max_steps`, `stabilization`, ... for both.

    **Returns:** a `DynamicsComparison`.
    """
    if y0.q.ndim != 1:
        raise ValueError(
            "compare_cetaev_vakonomic takes one mechanical state y0 (q of shape (n,)); "
            "give several initial multipliers as a grid mu0 of shape (B, k)."
        )
    k = _check_vakonomic_system(system, y0, None, t0)
    mu0 = (
        jnp.zeros((1, k), y0.q.dtype)
        if mu0 is None
        else jnp.atleast_2d(jnp.asarray(mu0, y0.q.dtype))
    )
    if saveat is None:
        saveat = diffrax.SaveAt(ts=jnp.linspace(t0, t1, 101))
    cet = simulate(system, y0, t0, t1, solver=solver, saveat=saveat, throw=throw, **kwargs)
    vak = simulate_vakonomic(
        system,
        y0,
        mu0,
        t0,
        t1,
        omega=omega,
        modified=modified,
        saveat=saveat,
        throw=throw,
        **kwargs,
    )
    dev = lambda x_vak, x_cet: jnp.max(jnp.abs(x_vak - x_cet[None]), axis=(1, 2))
    return DynamicsComparison(
        cet, vak, mu0, dev(vak.states.q, cet.states.q), dev(vak.states.v, cet.states.v)
    )
