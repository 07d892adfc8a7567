"""Vakonomic dynamics beside Četaev's, for constraints $g(t, q, v) = 0$ nonlinear in $v$.

[Talamucci]. Četaev's dynamics is the constrained
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

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .. import _linalg as la
from .._bundle import State
from .._custom_types import RealScalarLike
from .._geometry import AbstractCoordinateManifold
from .._linalg import null_space
from .._stages import Stages, assemble
from .._system import LagrangianSystem


def check_vakonomic_system(system: LagrangianSystem, state: State, mu, t) -> int:
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


def check_omega(system: LagrangianSystem, omega, modified: bool) -> None:
    """Model B2's options before tracing: `modified` needs `omega`, a matrix in coordinates."""
    if modified and omega is None:
        raise ValueError("modified=True is the variant (60) of model B2: it needs omega.")
    if omega is not None and not isinstance(system.manifold, AbstractCoordinateManifold):
        raise ValueError(
            "omega (model B2, δq̇ − d/dt δq = Ω δq) is a matrix in coordinates q: it is not "
            "available on Lie groups; use model B1 (omega=None)."
        )


def constraint_function(system: LagrangianSystem) -> Callable:
    """$g(t, q, v)$, the constraints of the vakonomic Lagrangian $L + \\mu\\cdot g$."""
    return system.constraint.residual


def omega_matrix(system: LagrangianSystem, omega: Callable, stages: Stages) -> Float[Array, "n n"]:
    q = stages.state.q
    Om = jnp.asarray(system.in_tqv_form(omega)(stages.t, q, stages.state.v))
    if Om.shape != (q.shape[0], q.shape[0]):
        raise ValueError(
            f"omega must return the ({q.shape[0]}, {q.shape[0]}) matrix Ω of δq̇ − d/dt δq = Ω δq "
            f"(30), got shape {Om.shape}."
        )
    return Om


def multiplier_lagrangian(stages: Stages, mu) -> LagrangianSystem:
    """$\\mu\\cdot g$ with $\\mu$ frozen (58), as a Lagrangian for the core's own routines."""
    g = constraint_function(stages.system)
    mu = jnp.asarray(mu, stages.M.dtype)
    # in the frame of the stages' system: on a group its generalized force has Hamel's term
    return LagrangianSystem(
        lambda t_, q_, v_: mu @ g(t_, q_, v_), manifold=stages.system.manifold, time_dependent=True
    )


def vakonomic_mass_matrix(stages: Stages, mu_g: LagrangianSystem) -> Float[Array, "n n"]:
    return stages.M + mu_g.mass_matrix(stages.state, stages.t)  # M + Σ μ_ν ∂²g_ν/∂v² (§5.5)


def signed_margin(stages: Stages, M_mu) -> Float[Array, ""]:
    """The eigenvalue of $M_\\mu$ on $\\ker G$ relative to the kinetic metric $M$ there that is
    smallest in modulus, with the sign of $\\det Z^\\top M_\\mu Z$ ($Z$ a basis of $\\ker G$):
    the generalized eigenvalues $\\lambda$ of $(Z^\\top M_\\mu Z, Z^\\top M Z)$, all 1 at
    $\\mu = 0$. Zero at an impasse point (the KKT matrix is singular iff $M_\\mu$ is degenerate
    on $\\ker G$), also when $\\dim\\ker G = 1$, and changing sign where a motion crosses one;
    independent of the basis $Z$, of the coordinates and of the units of $L$. A check, not
    differentiated."""
    Z = jax.lax.stop_gradient(null_space(stages.A))
    W = la.cholesky(Z.T @ jax.lax.stop_gradient(stages.M) @ Z)  # Z^T M Z = W W^T
    Y = la.solve_lower(W, Z.T)  # W^{-1} Z^T: the M-orthonormal basis Z W^{-T} of ker G, transposed
    lam = jnp.linalg.eigvalsh(Y @ jax.lax.stop_gradient(M_mu) @ Y.T)
    return jnp.prod(jnp.sign(lam)) * jnp.min(jnp.abs(lam))


def vakonomic_kkt(stages: Stages, mu, omega, modified):
    """Solve the vakonomic KKT system from the shared stages; returns `(a, mu_dot, M_mu)`."""
    system, state, t = stages.system, stages.state, stages.t
    mu = jnp.asarray(mu, stages.M.dtype)
    mu_g = multiplier_lagrangian(stages, mu)  # L + μ·g: its v-Hessian and generalized force (58)
    M_mu = vakonomic_mass_matrix(stages, mu_g)
    f_mu = stages.Q + mu_g.generalized_force(state, t)
    G = stages.A
    if omega is not None:
        Om = omega_matrix(system, omega, stages)
        p = G.T @ mu  # (52)B: + Σ_ν μ_ν Σ_h ∂g_ν/∂v_h ω_{h,j}
        if modified:
            p = p + system.momentum(state, t)  # (60): + Σ_h ∂L/∂v_h ω_{h,j}
        f_mu = f_mu + Om.T @ p
    a, mu_dot = stages.solve_saddle(M_mu, -G, f_mu)  # [[M_mu, Gᵀ], [G, 0]] (a, μ̇) = (f_mu, b)
    return a, mu_dot, M_mu


def default_impasse_tol(dtype) -> float:
    """The default relative tolerance below which $M_\\mu$ counts as degenerate on $\\ker G$."""
    return float(np.sqrt(np.finfo(dtype).eps))


IMPASSE_MESSAGE = (
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
    t: RealScalarLike = 0.0,
    *,
    omega: Callable | None = None,
    modified: bool = False,
    throw: bool = True,
    impasse_tol: float | None = None,
) -> tuple[Float[Array, " n"], Float[Array, " k"]]:
    """The vakonomic acceleration and multiplier rate at one state ([Talamucci] (58)).

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
    - `throw`: at an impasse point ($M_\\mu$ degenerate on $\\ker G$, `impasse_margin`
        value below `impasse_tol`) raise an error if `True`, else return NaNs.
    - `impasse_tol`: default $\\sqrt{\\varepsilon}$ of the dtype.

    **Returns:** `(a, mu_dot)` of shapes `(n,)` and `(k,)`.
    """
    check_vakonomic_system(system, state, mu, t)
    check_omega(system, omega, modified)
    stages = assemble(system, state, t, checks=throw)
    a, mu_dot, M_mu = vakonomic_kkt(stages, mu, omega, modified)
    tol = default_impasse_tol(a.dtype) if impasse_tol is None else impasse_tol
    bad = jnp.abs(signed_margin(stages, M_mu)) <= tol
    if throw:
        a = eqx.error_if(a, bad, IMPASSE_MESSAGE)
    else:
        a = jnp.where(bad, jnp.nan, a)
        mu_dot = jnp.where(bad, jnp.nan, mu_dot)
    return a, mu_dot


def impasse_margin(
    system: LagrangianSystem, state: State, mu: Float[Array, " k"], t: RealScalarLike = 0.0
) -> Float[Array, ""]:
    """How far the vakonomic KKT system is from singular: the smallest $|\\lambda|$ of $M_\\mu$
    relative to $M$ on $\\ker G$ (`signed_margin`; 1 at $\\mu = 0$, zero at an impasse point).
    Not differentiated."""
    check_vakonomic_system(system, state, mu, t)
    stages = assemble(system, state, t, checks=False)
    return jnp.abs(signed_margin(stages, vakonomic_mass_matrix(stages, multiplier_lagrangian(stages, mu))))


def vakonomic_energy(
    system: LagrangianSystem, state: State, mu: Float[Array, " k"], t: RealScalarLike = 0.0
) -> Float[Array, ""]:
    """The energy of $L_\\mu = L + \\mu\\cdot g$: $E_{vak} = v\\cdot\\partial_v L_\\mu - L_\\mu$
    (from [Talamucci] (58)).

    Conserved along vakonomic motions of autonomous systems without external force (on $g = 0$,
    $\\tfrac{d}{dt}E_{vak} = -\\dot\\mu\\cdot g = 0$). Equal to $E_L$ when $g$ is homogeneous in
    $v$.
    """
    check_vakonomic_system(system, state, mu, t)
    system, state = system.localized(state)  # on a Lie group: at ψ = 0 of the centred chart
    g = constraint_function(system)
    L_mu = LagrangianSystem(
        lambda t_, q_, v_: system.L(t_, q_, v_) + mu @ g(t_, q_, v_), time_dependent=True
    )
    return L_mu.energy(state, t)


