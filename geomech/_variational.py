"""Variational integrators of discrete mechanics: RATTLE-type for holonomic constraints and the
discrete Lagrange–d'Alembert (DLA) integrator for constraints linear in the velocities.

References, cited by their tags in the comments:

- [MW] J. E. Marsden, M. West, *Discrete mechanics and variational integrators*, Acta Numerica 10
    (2001) 357–514: discrete Lagrangian, discrete Euler–Lagrange (DEL) equations and Legendre
    transforms (Part 1), quadrature discrete Lagrangians (Part 2), discrete forces (§3.2) and
    holonomic constraints (§3.5).
- [CM] J. Cortés, S. Martínez, *Non-holonomic integrators*, Nonlinearity 14 (2001) 1365–1392: the
    discrete Lagrange–d'Alembert (DLA) equations.
- [MP] R. I. McLachlan, M. Perlmutter, *Integrators for nonholonomic mechanical systems*,
    J. Nonlinear Sci. 16 (2006) 283–328: DLA with a discrete constraint $\\omega_d = 0$.
- [HLW] E. Hairer, C. Lubich, G. Wanner, *Geometric Numerical Integration*, 2nd ed. (2006),
    §VII.1 (RATTLE) and §VI.6 (variational integrators).
- [LR] B. Leimkuhler, S. Reich, *Simulating Hamiltonian Dynamics* (2004), ch. 7 (RATTLE).
- On Lie groups (docs/variational.md, "On Lie groups"): [LeeLeokMcClamroch2007] (the Lie-group
    variational integrator), [BouRabeeMarsden2009] (exponential coordinates), [FedorovZenkov2005]
    and [KobilarovMarsdenSukhatme2010] (discrete Lagrange–d'Alembert on groups).

One step $(t_k, q_k, v_k) \\mapsto (t_{k+1}, q_{k+1}, v_{k+1})$ on $\\mathcal{C}$,
$h = t_{k+1} - t_k$:

1. $p_k = \\partial L/\\partial v(t_k, q_k, v_k)$ (Legendre map, thesis (2.3));
2. solve for $(q_{k+1}, \\lambda)$:
   $p_k + D_1L_d(q_k, q_{k+1}) + f_d^-(q_k, q_{k+1}) = A(t_k, q_k)^\\top\\lambda$ and
   $\\phi_d(q_k, q_{k+1}) = 0$;
3. $p_{k+1}^+ = D_2L_d(q_k, q_{k+1}) + f_d^+(q_k, q_{k+1})$ (discrete Legendre transform);
4. solve for $(v_{k+1}, \\mu)$: $\\partial L/\\partial v(t_{k+1}, q_{k+1}, v_{k+1}) = p_{k+1}^+ +
   A(t_{k+1}, q_{k+1})^\\top\\mu$ and $\\phi(t_{k+1}, q_{k+1}, v_{k+1}) = 0$.

$A = \\partial\\phi/\\partial v$ holds the constraint covectors ($Dh$ for holonomic rows). The
multiplier $\\lambda$ of step 2 absorbs the $A^\\top\\mu$ of step 4, so the positions are exactly
those of the two-step equations $D_2L_d(q_{k-1}, q_k) + f_d^+ + D_1L_d(q_k, q_{k+1}) + f_d^-
\\in \\operatorname{span} A(q_k)^\\top$, $\\phi_d(q_k, q_{k+1}) = 0$: the constrained DEL equations
([MW] §3.5; SHAKE/RATTLE, [HLW] VII.1, [LR] ch. 7) and the DLA equations ([CM], [MP]); step 4 only
chooses the velocity on $\\mathcal{C}$ among those with the same discrete momentum modulo the
constraint covectors (RATTLE's projection of the momentum).

On a Lie group $q_{k+1} = q_k\\exp(\\Delta q)$, $v$ and $p$ are the body velocity and momentum, and
$D_1L_d$, $D_2L_d$ are the derivatives along $q_i \\mapsto q_i\\exp(\\eta_i)$ (left-trivialized):
the same four steps are the Lie-group variational integrator and the discrete Lagrange–d'Alembert
scheme on groups (`DiscreteMechanicsSolver.discrete_momenta`).
"""

import functools
from typing import ClassVar

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import optimistix as optx
from jaxtyping import Array, Float

from ._bundle import State
from ._constraint import NO_DISCRETE_FORM
from ._system import LagrangianSystem
from ._system_integrator import AbstractSystemIntegrator

_QUADRATURES = ("midpoint", "trapezoid")


class VariationalIntegrator(AbstractSystemIntegrator):
    """A variational integrator of discrete mechanics, for `gm.simulate(..., integrator=...)` with a
    fixed step `dt0`.

    The discrete Lagrangian $L_d(q_k, q_{k+1}) \\approx \\int_{t_k}^{t_{k+1}} L\\,dt$ comes from the
    user's $L$ by a quadrature ([MW] Part 2), with $h = t_{k+1} - t_k$ and
    $\\bar v = (q_{k+1} - q_k)/h$:

    - `"midpoint"`: $L_d = h\\,L(t_{k+1/2}, \\tfrac12(q_k + q_{k+1}), \\bar v)$;
    - `"trapezoid"`: $L_d = \\tfrac h2[L(t_k, q_k, \\bar v) + L(t_{k+1}, q_{k+1}, \\bar v)]$
        (Störmer–Verlet / RATTLE for $L = \\tfrac12 v^\\top M v - V(q)$).

    External forces $F^e$ enter by the discrete Lagrange–d'Alembert principle ([MW] §3.2) with
    the same quadrature: $f_d^\\pm = \\tfrac h2 F^e(t_{k+1/2}, \\tfrac12(q_k + q_{k+1}), \\bar v)$
    (midpoint), $f_d^- = \\tfrac h2 F^e(t_k, q_k, \\bar v)$,
    $f_d^+ = \\tfrac h2 F^e(t_{k+1}, q_{k+1}, \\bar v)$ (trapezoid).

    Constraints:

    - holonomic $h(q) = 0$ (`gm.HolonomicConstraint`): the constrained discrete Euler–Lagrange
        equations with discrete multipliers and $h(q_{k+1}) = 0$ ([MW] §3.5), velocities on the
        hidden constraint $Dh\\,v = 0$ (RATTLE, [HLW] VII.1, [LR] ch. 7);
    - linear in $v$, $A(q)v + c(q) = 0$ (`gm.LinearConstraint`): the discrete Lagrange–d'Alembert
        equations of [CM] (constraint covectors at $q_k$) with the midpoint discrete constraint
        $\\omega_d = A(q_{k+1/2})\\,\\bar v + c(q_{k+1/2}) = 0$ ([MP]);
    - stacks of both (rows keep their kind).

    On a Lie group (`gm.SO3()`, `gm.SE2()`, `gm.SE3()`, products) the step is
    $q_{k+1} = q_k\\exp(\\psi_k)$ with the quadrature velocity $\\psi_k/h$ the body velocity, and
    the discrete Legendre transforms are left-trivialized: the Lie-group variational integrator
    ([LeeLeokMcClamroch2007], [BouRabeeMarsden2009]) and, for `gm.LinearConstraint`, the discrete
    Lagrange–d'Alembert scheme on groups ([FedorovZenkov2005], [KobilarovMarsdenSukhatme2010]);
    the stored group element stays on the group to round-off and the momentum of a left symmetry
    (the spatial angular momentum of a free body) is conserved to the solver's tolerance.

    Constraints nonlinear in $v$ (`gm.Constraint`), $\\mathcal{W} \\ne \\mathcal{D}$ (`work_space`)
    and known work (`known_work`) have no variational discretization here: `simulate` raises.

    Every saved state lies on $\\mathcal{C}$: positions on $h = 0$ and velocities on $\\phi = 0$ to
    the root finder's tolerance, at every step. `SaveAt(ts=...)` between two steps takes a
    partial variational step from the last step (so those states lie on $\\mathcal{C}$ too, with
    the integrator's accuracy; each such saved time costs one more step).

    Each step solves two small nonlinear systems (positions and multipliers, then velocities
    and multipliers) with an optimistix Newton-type method; gradients through a simulation use
    implicit differentiation of these solves (`optimistix.ImplicitAdjoint`). A step whose
    solve does not converge ends that trajectory with `Solution.result ==
    diffrax.RESULTS.nonlinear_max_steps_reached` (iteration cap) or `nonlinear_divergence`
    (iterates diverged), keeping its last state; the other trajectories of an ensemble are
    unaffected.

    **Arguments:**

    - `quadrature`: `"midpoint"` (default) or `"trapezoid"`.
    - `root_finder`: an `optimistix` root finder for the two solves of a step. The default,
        `optimistix.Chord(rtol=tol, atol=tol)` with $\\mathrm{tol} = \\varepsilon^{2/3}$ of the
        state's dtype (3.7e-11 in float64, 2.4e-5 in float32), is Newton's method with the
        Jacobian (and its LU factorization) of the first iterate: the velocity solve is linear
        for $L$ quadratic in $v$, and the position solve starts $O(h^2)$ from its root, so the
        frozen Jacobian converges in 4 to 6 cheap iterations (2 for the velocities). Pass
        `optimistix.Newton(rtol=..., atol=...)` to refactorize at every iteration. Iterations
        stop when two iterates differ by less than `atol + rtol * |y|` (max norm) and the
        residual is below `atol`, momentum rows relative to $1 + |p|_\\infty$ and constraint
        rows relative to $1 + |v|_\\infty$.
    - `max_steps`: the cap on iterations per solve (default 16).
    """

    quadrature: str = eqx.field(default="midpoint", static=True)
    root_finder: optx.AbstractRootFinder | None = None
    max_steps: int = eqx.field(default=16, static=True)

    def __check_init__(self):
        if self.quadrature not in _QUADRATURES:
            raise ValueError(
                f"quadrature must be 'midpoint' or 'trapezoid', got {self.quadrature!r}."
            )
        if not (isinstance(self.max_steps, int) and self.max_steps >= 1):
            raise ValueError(f"max_steps must be a positive int, got {self.max_steps!r}.")
        if self.root_finder is not None and not isinstance(
            self.root_finder, optx.AbstractRootFinder
        ):
            raise TypeError(
                "root_finder must be an optimistix root finder such as "
                f"optimistix.Newton(rtol=1e-12, atol=1e-12), got {self.root_finder!r}."
            )

    def bind(self, system, *, dt0, stepsize_controller, stabilization) -> "DiscreteMechanicsSolver":
        if not isinstance(system, LagrangianSystem):
            raise TypeError(f"expected a gm.LagrangianSystem, got {type(system).__name__}.")
        if stabilization is not None:
            raise ValueError(
                "stabilization is not used by gm.VariationalIntegrator: its discrete equations "
                "keep positions on h = 0 and velocities on phi = 0 at every step. Leave "
                "stabilization=None."
            )
        if isinstance(stepsize_controller, diffrax.AbstractAdaptiveStepSizeController):
            raise ValueError(
                "gm.VariationalIntegrator takes fixed steps (it has no error estimate, and its "
                "long-time properties need a fixed step): pass dt0 and no adaptive "
                "stepsize_controller (diffrax.ConstantStepSize() or diffrax.StepTo(ts) are fine)."
            )
        if dt0 is None and not isinstance(stepsize_controller, diffrax.StepTo):
            raise ValueError(
                "gm.VariationalIntegrator needs a fixed step: pass dt0 (e.g. dt0=1e-2) to simulate."
            )
        if system.work_space is not None:
            raise ValueError(
                "gm.VariationalIntegrator implements ideal constraints (W = D, the "
                "Lagrange-d'Alembert principle); this system has a work_space W != D, which has no "
                "variational discretization here: use a diffrax integrator."
            )
        if system.constraint is not None and not system.constraint.affine_in_v():
            raise TypeError(NO_DISCRETE_FORM)
        if system.known_work is not None:
            raise ValueError(
                "gm.VariationalIntegrator implements ideal constraints; this system has known_work "
                "(non-ideal constraints, thesis §5.2), which has no variational discretization "
                "here: use a diffrax integrator."
            )
        return DiscreteMechanicsSolver(system, self.quadrature, self.root_finder, self.max_steps)


class DiscreteMechanicsSolver(diffrax.AbstractSolver):
    """The diffrax solver of `VariationalIntegrator.bind(system)`: fixed steps of the discrete
    flow on $\\mathcal{C}$ (see the module docstring), state `gm.State(q, v)`, no error estimate.

    It evaluates the system's Lagrangian, not the diffrax term (whose `contr` only gives the
    signed step, so backward integration works).
    """

    system: LagrangianSystem
    quadrature: str = eqx.field(static=True)
    root_finder: optx.AbstractRootFinder | None
    max_steps: int = eqx.field(static=True)

    term_structure: ClassVar = diffrax.AbstractTerm

    @property
    def interpolation_cls(self):  # pyright: ignore
        return functools.partial(_PartialStepInterpolation, solver=self)

    def order(self, terms):
        return 2

    def init(self, terms, t0, t1, y0, args):
        if not isinstance(y0, State):  # e.g. the augmented state of BacksolveAdjoint
            raise TypeError(
                "gm.VariationalIntegrator steps a gm.State(q, v) with its discrete equations "
                f"and cannot integrate a {type(y0).__name__}: diffrax.BacksolveAdjoint (which "
                "solves an adjoint ODE with the same solver) is not supported; use the default "
                "diffrax.RecursiveCheckpointAdjoint, which differentiates each step implicitly."
            )
        return None

    def step(self, terms, t0, t1, y0, args, solver_state, made_jump):
        del args, solver_state, made_jump  # a one-step map of (q, v): nothing carried
        # diffrax runs time forwards: for t1 < t0 it negates t and wraps the term, whose control
        # is then the physical signed step
        dt = terms.contr(t0, t1)
        direction = jnp.where(dt < 0, -1, 1).astype(jnp.result_type(dt))
        y1, result = self.discrete_flow(direction * t0, y0, dt)
        dense_info = dict(y0=y0, y1=y1, direction=direction, ok=diffrax.is_successful(result))
        return y1, None, dense_info, None, result

    def func(self, terms, t0, y0, args):
        return terms.vf(t0, y0, args)

    # -- the discrete mechanics ------------------------------------------------------------------

    def advance(self, q0, dq):
        """$q_0 \\oplus \\Delta q$: $q_0 + \\Delta q$ in coordinates, $q_0\\exp(\\Delta q)$ on a group."""
        return self.system.manifold.oplus(q0, dq)

    def discrete_lagrangian(self, t0, q0, dt, dq) -> Float[Array, ""]:
        """$L_d(q_0, q_0 \\oplus \\Delta q)$ over $[t_0, t_0 + \\Delta t]$ ([MW] Part 2), written in
        the increment $\\Delta q$ so that $\\bar v = \\Delta q/\\Delta t$ has no cancellation. On a
        group $\\bar v$ is the body velocity of $q_0\\exp(s\\,\\Delta q)$, $s \\in [0, 1]$
        ([LeeLeokMcClamroch2007], [BouRabeeMarsden2009])."""
        L, v = self.system.L, dq / dt
        if self.quadrature == "midpoint":
            return dt * L(t0 + dt / 2, self.advance(q0, dq / 2), v)  # midpoint rule
        return dt / 2 * (L(t0, q0, v) + L(t0 + dt, self.advance(q0, dq), v))  # trapezoidal rule

    def virtual_work(self, t0, q0, dt, dq, eta0, eta1) -> Float[Array, ""]:
        """$f_d^-\\cdot\\eta_0 + f_d^+\\cdot\\eta_1$: the same quadrature of
        $\\int F^e\\cdot\\delta q\\,dt$ ([MW] §3.2) for the variations $\\eta_0, \\eta_1$ of the
        end points ($\\delta q$ linear on the step in coordinates; left-trivialized on a group,
        $q(s)^{-1}\\delta q(s) = \\mathrm{Ad}_{\\exp(-s\\Delta q)}\\eta_0 + s\\,\\mathrm{dexp}_{-s\\Delta q}
        \\delta(\\Delta q)$, see `discrete_momenta`)."""
        F, v = self.system.external_force, dq / dt
        if self.quadrature == "trapezoid":
            f0, f1 = F(t0, q0, v), F(t0 + dt, self.advance(q0, dq), v)
            return dt / 2 * (f0 @ eta0 + f1 @ eta1)
        f = F(t0 + dt / 2, self.advance(q0, dq / 2), v)
        m = self.system.manifold
        # at s = 1/2 with Ad_{exp(-x)} = J_r(x) J_r(-x)⁻¹ (J_r(x) = ∫₀¹ Ad_{exp(-sx)} ds); the
        # mean (η₀ + η₁)/2 in coordinates, where dexp is the identity
        w = m.dexp(dq / 2, m.dexp_inverse(-dq / 2, eta0) + self.increment_variation(dq, eta0, eta1) / 2)
        return dt * f @ w

    def increment_variation(self, dq, eta0, eta1):
        """$\\delta(\\Delta q)$ for the variations $\\eta_0, \\eta_1$ of $q_0$, $q_1 = q_0 \\oplus
        \\Delta q$: $\\eta_1 - \\eta_0$ in coordinates; on a group, with $\\delta q_i = q_i\\eta_i$,
        $\\mathrm{dexp}_{-\\Delta q}\\delta(\\Delta q) = \\eta_1 - \\mathrm{Ad}_{\\exp(-\\Delta q)}\\eta_0$, so
        $\\delta(\\Delta q) = J_r(\\Delta q)^{-1}\\eta_1 - J_r(-\\Delta q)^{-1}\\eta_0$ ([BouRabeeMarsden2009])."""
        m = self.system.manifold  # η₁ - η₀ in coordinates, where dexp is the identity
        return m.dexp_inverse(dq, eta1) - m.dexp_inverse(-dq, eta0)

    def discrete_momenta(self, t0, q0, dt, dq) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
        """$(D_1L_d + f_d^-, D_2L_d + f_d^+)$ at $(q_0, q_0 \\oplus \\Delta q)$: minus the discrete
        momentum at $q_0$ and the discrete momentum at $q_1$ (discrete Legendre transforms, forced,
        [MW] Part 1, §3.2). On a group both are left-trivialized (body momenta), the derivatives of
        the discrete action along $q_i \\mapsto q_i\\exp(\\eta_i)$ ([LeeLeokMcClamroch2007]);
        with `increment_variation` this is
        $D_1L_d = \\partial_{q}L_d - J_r(-\\Delta q)^{-\\top}\\partial_{\\Delta q}L_d$,
        $D_2L_d = J_r(\\Delta q)^{-\\top}\\partial_{\\Delta q}L_d$ ([BouRabeeMarsden2009]), and in
        coordinates $\\partial_{q_0} - \\partial_{\\Delta q}$, $\\partial_{\\Delta q}$."""

        def action(eta0, eta1):  # the step's discrete action and virtual work, varied
            varied = dq + self.increment_variation(dq, eta0, eta1)
            Ld = self.discrete_lagrangian(t0, self.advance(q0, eta0), dt, varied)
            return Ld + self.virtual_work(t0, q0, dt, dq, eta0, eta1)

        zero = jnp.zeros_like(dq)
        return jax.grad(action, argnums=(0, 1))(zero, zero)

    def discrete_constraint(self, t0, q0, dt, dq) -> Float[Array, " k"]:
        """$\\phi_d(q_0, q_0 \\oplus \\Delta q)$; on a group the constraint's discrete form in the
        chart centred at $q_0$: $h(q_0\\exp\\Delta q)$ on holonomic rows,
        $A(q_0\\exp\\tfrac{\\Delta q}{2})\\,\\Delta q/h + c$ on linear ones (the body velocity of
        the step is $\\Delta q/h$ all along it)."""
        chart = self.system.manifold.chart(q0)  # the identity chart on coordinates
        local = chart.system(self.system).constraint
        return local.discrete_residual(t0, chart.origin, dt, dq)

    def constraint_covectors(self, t, q, v) -> Float[Array, "k n"]:
        """$A = \\partial\\phi/\\partial v$ (rows $Dh$ for holonomic constraints; independent of $v$
        for the constraints accepted here; acting on the body velocity on a group)."""
        system = self.system
        return jax.jacfwd(lambda v_: system.constraint_residual(State(q, v_), t))(v)

    def discrete_flow(self, t0, y0: State, dt) -> tuple[State, diffrax.RESULTS]:
        """One step from `y0` at time `t0` by the signed step `dt`: the new `State` (`y0` itself if
        a solve failed) and the result code."""
        system, root_finder = self.system, self.root_finder
        q0, v0 = y0.q, y0.v
        if root_finder is None:  # simplified Newton at a tolerance near round-off
            tol = float(jnp.finfo(v0.dtype).eps) ** (2 / 3)
            root_finder = optx.Chord(rtol=tol, atol=tol)
        solve = functools.partial(
            optx.root_find, solver=root_finder, max_steps=self.max_steps, throw=False
        )
        t1 = t0 + dt
        p0 = system.momentum(y0, t0)  # Legendre map (2.3); the body momentum on a group
        A0 = self.constraint_covectors(t0, q0, v0)
        scale_p = jax.lax.stop_gradient(1 + jnp.max(jnp.abs(p0)))
        scale_c = jax.lax.stop_gradient(1 + jnp.max(jnp.abs(v0)))
        constraint = system.constraint

        def position_equations(y, args):
            dq, lam = y
            t0_, q0_, p0_, dt_, A0_ = args
            minus, _ = self.discrete_momenta(t0_, q0_, dt_, dq)
            # p_k + D1 L_d + f_d^- = A(q_k)^T λ: forced, constrained DEL / DLA in
            # position-momentum form ([MW] §3.2, §3.5; [CM]; [MP]); left-trivialized on a group
            # ([LeeLeokMcClamroch2007]; [FedorovZenkov2005], [KobilarovMarsdenSukhatme2010])
            r_p = (p0_ + minus - A0_.T @ lam) / scale_p
            if constraint is None:
                return r_p, lam
            # φ_d(q_k, q_{k+1}) = 0: h(q_{k+1}) on holonomic rows, the midpoint ω_d on linear ones
            r_c = self.discrete_constraint(t0_, q0_, dt_, dq) / scale_c
            return r_p, r_c

        k, dtype = A0.shape[0], v0.dtype
        guess = (dt * v0, jnp.zeros((k,), dtype))
        positions = solve(position_equations, y0=guess, args=(t0, q0, p0, dt, A0))
        dq = positions.value[0]
        q1 = self.advance(q0, dq)
        # F^+L_d, forced ([MW] §3.2): the body momentum at q_{k+1} on a group
        _, p1 = self.discrete_momenta(t0, q0, dt, dq)
        A1 = self.constraint_covectors(t1, q1, dq / dt)

        def velocity_equations(y, args):
            v, mu = y
            t1_, q1_, p1_, A1_ = args
            state = State(q1_, v)
            # ∂L/∂v(q_{k+1}, v_{k+1}) = p^+_{k+1} + A(q_{k+1})^T μ, φ(q_{k+1}, v_{k+1}) = 0:
            # the projection of RATTLE ([HLW] VII.1, [LR] ch. 7), inverse Legendre map (2.3)
            r_p = (system.momentum(state, t1_) - p1_ - A1_.T @ mu) / scale_p
            return r_p, system.constraint_residual(state, t1_) / scale_c

        guess = (2 * dq / dt - v0, jnp.zeros((k,), dtype))  # (v_k + v_{k+1})/2 ≈ Δq/h
        velocities = solve(velocity_equations, y0=guess, args=(t1, q1, p1, A1))
        result = _step_result(positions.result, velocities.result)
        y1 = State(q1, velocities.value[0])
        ok = diffrax.is_successful(result)
        return jtu.tree_map(lambda a, b: jnp.where(ok, a, b), y1, y0), result


def _step_result(*solves: optx.RESULTS) -> diffrax.RESULTS:
    """`successful` if every solve converged, else `nonlinear_max_steps_reached` (iteration cap)
    or `nonlinear_divergence` (any other failure, e.g. iterates running to inf/NaN)."""
    R = diffrax.RESULTS
    ok = functools.reduce(jnp.logical_and, [r == optx.RESULTS.successful for r in solves])
    capped = functools.reduce(
        jnp.logical_or, [r == optx.RESULTS.nonlinear_max_steps_reached for r in solves]
    )
    failed = R.where(capped, R.nonlinear_max_steps_reached, R.nonlinear_divergence)
    return R.where(ok, R.successful, failed)


class _PartialStepInterpolation(diffrax.AbstractLocalInterpolation):
    """Dense output of `DiscreteMechanicsSolver`: $y(t)$ inside a step is a variational step of
    length $t - t_k$ from $y_k$, so it lies on $\\mathcal{C}$. `inf` after the start of a failed
    step (not reached); linear interpolation (on a group: the nearer end) if that partial step
    itself failed to converge."""

    t0: Array
    t1: Array
    y0: State
    y1: State
    direction: Array
    ok: Array
    solver: DiscreteMechanicsSolver

    def evaluate(self, t0, t1=None, left=True):
        del left
        if t1 is not None:
            return jtu.tree_map(lambda a, b: a - b, self.evaluate(t1), self.evaluate(t0))
        s, full = t0 - self.t0, self.t1 - self.t0  # normalized (increasing) time
        inside = (s > 0) & (s < full)
        s_safe = jnp.where(inside, s, full)  # no zero-length step, even in unused branches
        y, result = self.solver.discrete_flow(
            self.direction * self.t0, self.y0, self.direction * s_safe
        )
        c = s_safe / full
        # along the chart centred at y0's point (a straight line in coordinates, the geodesic
        # q0 exp(c (q1 ⊖ q0)) on a group)
        chart = self.solver.system.manifold.chart(self.y0.q)
        x0, x1 = chart.origin, chart.coordinates(self.y1.q)
        linear = State(chart.point(x0 + c * (x1 - x0)), self.y0.v + c * (self.y1.v - self.y0.v))
        converged = diffrax.is_successful(result)
        y = jtu.tree_map(lambda a, b: jnp.where(converged, a, b), y, linear)
        y = jtu.tree_map(lambda a, b: jnp.where(s >= full, b, a), y, self.y1)
        y = jtu.tree_map(lambda a: jnp.where(self.ok, a, jnp.inf), y)
        return jtu.tree_map(lambda a, b: jnp.where(s <= 0, b, a), y, self.y0)
