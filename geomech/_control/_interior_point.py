"""A primal-dual interior-point method for the DMOC transcription, in JAX.

The algorithm is IPOPT's ([WaechterBiegler2006]) without its restoration phase and filter: a
logarithmic barrier for the bounds with the monotone (Fiacco–McCormick) update of the barrier
parameter $\\mu$, primal-dual Newton steps on the barrier problem's KKT conditions
$$\\begin{pmatrix} W + \\Sigma + \\delta_w I & J^\\top \\\\ J & -\\delta_c I\\end{pmatrix}
\\begin{pmatrix} dx \\\\ dy\\end{pmatrix} = -\\begin{pmatrix}\\nabla f + J^\\top y - \\mu/s_L +
\\mu/s_U \\\\ c\\end{pmatrix},$$
the inertia correction $\\delta_w$ that makes $W + \\Sigma$ positive definite on the null space of
$J$ (read from the block factorization, `_blocktri.py`), the fraction-to-the-boundary rule, a
backtracking line search on the $\\ell_1$ merit function $\\varphi = f - \\mu\\sum\\log s +
\\nu|c|_1$ ([NocedalWright2006] §19.3, §15.4) and IPOPT's gradient-based scaling of the cost and of
each equation. The KKT matrix is solved by the block-tridiagonal $LDL^\\top$ factorization of
`_blocktri.py` in $O(N)$. Everything runs inside one `jax.lax.while_loop`: jit-compiled,
vmappable over problems (a batch iterates until its last problem stops; the others keep their
values).
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._blocktri import BlockFactorization, BlockTridiagonal, factor
from ._transcription import Transcription

_S_MAX = 100.0  # IPOPT's s_max (scaling of the error measures)
_KAPPA_EPS, _KAPPA_MU, _THETA_MU = 10.0, 0.2, 1.5  # barrier update ([WaechterBiegler2006] (7))
_KAPPA_SIGMA = 1e10  # safeguard on the bound multipliers ((16))
_ETA = 1e-4  # Armijo constant
_MAX_BACKTRACKS = 40
_MAX_CORRECTIONS = 40
_KAPPA_CURV = 1e-10  # curvature and descent margin of the inertia-free test


class ControlResult(eqx.Enumeration):
    """How `gm.solve_optimal_control` ended (`solution.result`)."""

    successful = ""
    max_steps_reached = (
        "The interior-point method reached max_steps before the KKT conditions held to tol: "
        "raise max_steps, give a better guess, or check that the problem is well posed."
    )
    infeasible = (
        "The iterates converged to a point that does not satisfy the equations (the dynamics, "
        "the discrete constraints or the boundary conditions): the problem is (locally) "
        "infeasible, e.g. the target cannot be reached within the bounds and the horizon."
    )
    search_failed = (
        "The line search found no acceptable step (the Newton direction is not a descent "
        "direction): give a better guess or rescale the problem."
    )


class InteriorPoint(eqx.Module):
    """The NLP solver of `gm.solve_optimal_control`: a primal-dual interior-point method
    (IPOPT's algorithm, [WaechterBiegler2006]) on the block-tridiagonal KKT systems of the DMOC
    transcription.

    **Arguments:**

    - `tol`: the tolerance on the scaled KKT error (stationarity, complementarity), as IPOPT's
        `tol`; default $10^{-8}$ (IPOPT's) in float64, $10^{-4}$ in float32.
    - `constraint_tol`: the tolerance on every scaled equation (the dynamics, the discrete
        constraints, the boundary conditions); default $\\varepsilon^{2/3}$ of the dtype
        ($3.7 \\times 10^{-11}$ in float64).
    - `max_steps`: the cap on iterations (default 500).
    - `mu_init`: the initial barrier parameter (default 0.1, IPOPT's).
    """

    tol: float | None = None
    constraint_tol: float | None = None
    max_steps: int = eqx.field(default=500, static=True)
    mu_init: float = 0.1

    def __check_init__(self):
        if not (isinstance(self.max_steps, int) and self.max_steps >= 1):
            raise ValueError(f"max_steps must be a positive int, got {self.max_steps!r}.")
        for name in ("tol", "constraint_tol", "mu_init"):
            value = getattr(self, name)
            if value is not None and not float(value) > 0:
                raise ValueError(f"{name} must be positive, got {value!r}.")

    def tolerances(self, dtype) -> tuple[float, float]:
        eps = float(jnp.finfo(dtype).eps)
        tol = self.tol if self.tol is not None else (1e-8 if eps < 1e-10 else 1e-4)
        ctol = self.constraint_tol if self.constraint_tol is not None else eps ** (2 / 3)
        return tol, ctol


class IPState(eqx.Module):
    """The iterate of the interior-point method."""

    q: object
    w: Array
    y: Array
    zl: Array
    zu: Array
    mu: Array
    nu: Array
    delta_last: Array
    steps: Array
    done: Array
    result: ControlResult
    stationarity: Array
    feasibility: Array
    complementarity: Array
    cost_scale: Array
    rows_scale: Array


class Scaling(eqx.Module):
    """IPOPT's gradient-based scaling: the cost by `cost`, equation rows by `rows` `(N, r)`."""

    cost: Array
    rows: Array


def kkt_matrix(T: Transcription, ev, d, sigma, delta_w, delta_c) -> BlockTridiagonal:
    """The barrier KKT matrix in node order $(x_k, y_k)$ (scaled equations, masks: identity on
    fixed unknowns, $-1$ on empty rows)."""
    s, r = T.layout.s, T.layout.r
    fixed = jnp.asarray(T.fixed(), sigma.dtype)
    live = jnp.asarray(T.rows(), sigma.dtype)
    Jd = d[:, :, None] * ev.J_diag
    Jl = d[1:, :, None] * ev.J_lower
    eye_s = jnp.eye(s, dtype=sigma.dtype)
    eye_r = jnp.eye(r, dtype=sigma.dtype)
    W = ev.W_diag + (sigma + delta_w * (1 - fixed) + fixed)[:, :, None] * eye_s[None]
    C = -(delta_c * live + (1 - live))[:, :, None] * eye_r[None]
    diag = jnp.concatenate(
        [jnp.concatenate([W, jnp.swapaxes(Jd, 1, 2)], 2), jnp.concatenate([Jd, C], 2)], 1
    )
    # the equations of stage k do not depend on the unknowns of stage k + 1 (no upper J block),
    # and those of stage k + 1 read only the state columns of stage k
    lower = jnp.concatenate([ev.W_lower, Jl], 1)
    return BlockTridiagonal(diag, lower, T.coupling())


def kkt_hessian_times(T: Transcription, ev, sigma, delta_w, dx):
    """$(W + \\Sigma + \\delta_w I)\\,dx$ on the free unknowns."""
    free = jnp.asarray(~T.fixed(), sigma.dtype)
    E = jnp.eye(T.layout.s, dtype=dx.dtype)[:, np.asarray(T.coupling())]
    out = jnp.einsum("kij,kj->ki", ev.W_diag, dx)
    below = jnp.einsum("kij,kj->ki", ev.W_lower, dx[:-1] @ E)
    above = jnp.einsum("kji,kj->ki", ev.W_lower, dx[1:]) @ E.T
    zero = jnp.zeros_like(dx[:1])
    out = out + jnp.concatenate([zero, below]) + jnp.concatenate([above, zero])
    return (out + (sigma + delta_w) * dx) * free


def refined_solve(K: BlockTridiagonal, F: BlockFactorization, rhs):
    """$K^{-1}$ `rhs` by the factorization, and one step of iterative refinement where the
    residual exceeds $10^{-10}$ of $|Kx|_\\infty + |\\mathrm{rhs}|_\\infty$ (IPOPT's default
    `residual_ratio_max`, [WaechterBiegler2006]; $100\\varepsilon$ in float32)."""
    x = F.solve(rhs)
    Kx = K.matvec(x)
    r = rhs - Kx
    ratio = max(1e-10, 100 * float(jnp.finfo(rhs.dtype).eps))
    scale = jnp.max(jnp.abs(Kx)) + jnp.max(jnp.abs(rhs))
    small = jnp.max(jnp.abs(r)) <= ratio * scale
    return jax.lax.cond(small, lambda: x, lambda: x + F.solve(r))


def scaling_of(T: Transcription, ev) -> Scaling:
    """$\\sigma_f = \\min(1, 100/|\\nabla f|_\\infty)$ and $d_i = \\min(1, 100/|\\nabla c_i|_\\infty)$
    from the derivatives at the starting point ([WaechterBiegler2006] §3.8)."""
    gmax = jnp.max(jnp.abs(ev.grad_f))
    row = jnp.max(jnp.abs(ev.J_diag), axis=2)
    row = row.at[1:].max(jnp.max(jnp.abs(ev.J_lower), axis=2))
    cost = jnp.minimum(1.0, _S_MAX / jnp.maximum(gmax, 1e-300))
    rows = jnp.where(row > 0, jnp.minimum(1.0, _S_MAX / jnp.maximum(row, 1e-300)), 1.0)
    return Scaling(cost, rows)


def push_inside(x, lower, upper):
    """IPOPT's bound push: at least $\\kappa\\max(1, |b|)$ (and at most a fraction of the
    width) inside each bound, $\\kappa = 10^{-2}$."""
    width = upper - lower
    pl = jnp.minimum(1e-2 * jnp.maximum(1.0, jnp.abs(lower)), 1e-2 * width)
    pu = jnp.minimum(1e-2 * jnp.maximum(1.0, jnp.abs(upper)), 1e-2 * width)
    x = jnp.where(jnp.isfinite(lower), jnp.maximum(x, lower + pl), x)
    return jnp.where(jnp.isfinite(upper), jnp.minimum(x, upper - pu), x)


def _slacks(T, q, w, lower, upper, has_l, has_u):
    v = T.bound_values(q, w)
    sl = jnp.where(has_l, v - lower, 1.0)
    su = jnp.where(has_u, upper - v, 1.0)
    return sl, su


def _errors(T, gLs, cs, zl, zu, y, sl, su, has_l, has_u, mu):
    """The scaled KKT errors of the barrier problem at `mu` ([WaechterBiegler2006] (5))."""
    free = jnp.asarray(~T.fixed(), cs.dtype)
    live = jnp.asarray(T.rows(), cs.dtype)
    n_b = jnp.maximum(jnp.sum(has_l) + jnp.sum(has_u), 1)
    n_y = jnp.maximum(jnp.sum(live), 1)
    z_sum = jnp.sum(jnp.abs(zl)) + jnp.sum(jnp.abs(zu))
    s_d = jnp.maximum(_S_MAX, (jnp.sum(jnp.abs(y * live)) + z_sum) / (n_y + n_b)) / _S_MAX
    s_c = jnp.maximum(_S_MAX, z_sum / n_b) / _S_MAX
    stat = jnp.max(jnp.abs((gLs - zl + zu) * free)) / s_d
    feas = jnp.max(jnp.abs(cs))
    comp_l = jnp.where(has_l, zl * sl - mu, 0.0)
    comp_u = jnp.where(has_u, zu * su - mu, 0.0)
    comp = jnp.maximum(jnp.max(jnp.abs(comp_l)), jnp.max(jnp.abs(comp_u))) / s_c
    return stat, feas, comp


def solve_nlp(T: Transcription, solver: InteriorPoint, q_init, w_init) -> tuple[IPState, Scaling]:
    """Run the interior-point method from `(q_init, w_init)`."""
    lay = T.layout
    dtype = w_init.dtype
    tol, ctol = solver.tolerances(dtype)
    lower, upper = T.bounds(dtype)
    has_l, has_u = jnp.isfinite(lower), jnp.isfinite(upper)
    free = jnp.asarray(~T.fixed(), dtype)
    q_init = T.points(q_init)
    # the starting point strictly inside the bounds (coordinates of q and w)
    v0 = push_inside(T.bound_values(q_init, w_init), lower, upper)
    w_init = v0[:, lay.n :]
    if T.problem.has_coordinates:
        q_init = q_init.at[1:].set(jnp.where(free[:, : lay.n] > 0, v0[:, : lay.n], q_init[1:]))

    def merit_parts(q, w, sigma_f, d):
        f, c = T.residuals(q, w)
        return sigma_f * f, d * c

    def barrier(sl, su, mu):
        return -mu * (
            jnp.sum(jnp.where(has_l, jnp.log(sl), 0.0))
            + jnp.sum(jnp.where(has_u, jnp.log(su), 0.0))
        )

    def body(st: IPState) -> IPState:
        ev = T.derivatives(st.q, st.w, st.y * st.rows_scale, st.cost_scale)
        # IPOPT's gradient-based scaling, from the first point (where y = 0, so that the Hessian
        # is the cost's and scales with it)
        at_start = st.steps == 0
        scale = jax.lax.cond(
            at_start, lambda: scaling_of(T, ev), lambda: Scaling(st.cost_scale, st.rows_scale)
        )
        sigma_f, d = scale.cost, scale.rows
        ratio = jnp.where(at_start, sigma_f, 1.0)
        ev = eqx.tree_at(
            lambda e: (e.W_diag, e.W_lower, e.grad_L),
            ev,
            (ev.W_diag * ratio, ev.W_lower * ratio, ev.grad_L * ratio),
        )
        cs = d * ev.c
        sl, su = _slacks(T, st.q, st.w, lower, upper, has_l, has_u)
        stat, feas, comp = _errors(T, ev.grad_L, cs, st.zl, st.zu, st.y, sl, su, has_l, has_u, 0.0)
        converged = (jnp.maximum(stat, comp) <= tol) & (feas <= ctol)
        # the barrier parameter: decrease once the barrier problem is solved to κ_ε μ
        e_mu = jnp.maximum(
            jnp.maximum(
                *_errors(T, ev.grad_L, cs, st.zl, st.zu, st.y, sl, su, has_l, has_u, st.mu)[::2]
            ),
            feas,
        )
        mu = jnp.where(
            e_mu <= _KAPPA_EPS * st.mu,
            jnp.maximum(tol / 10, jnp.minimum(_KAPPA_MU * st.mu, st.mu**_THETA_MU)),
            st.mu,
        )
        Sigma = jnp.where(has_l, st.zl / sl, 0.0) + jnp.where(has_u, st.zu / su, 0.0)
        bar_grad = jnp.where(has_l, -mu / sl, 0.0) + jnp.where(has_u, mu / su, 0.0)
        grad_phi = (sigma_f * ev.grad_f + bar_grad) * free
        rhs = jnp.concatenate([-(ev.grad_L + bar_grad) * free, -cs], axis=1)

        # regularization δ_w until the step is a direction of sufficient descent of the merit
        # function with positive curvature: the inertia-free test of [ChiangZavala2016] in place
        # of IPOPT's inertia count ([WaechterBiegler2006] §3.1)
        nu_floor = st.nu

        def step_with(delta_w):
            K = kkt_matrix(T, ev, d, Sigma, delta_w, jnp.zeros((), dtype))
            step = refined_solve(K, factor(K), rhs)
            dx, dy = step[:, : lay.s] * free, step[:, lay.s :]
            curvature = jnp.sum(dx * (kkt_hessian_times(T, ev, Sigma, delta_w, dx)))
            nu = jnp.maximum(nu_floor, 1.1 * jnp.max(jnp.abs(st.y + dy)) + 1e-8)
            slope = jnp.sum(grad_phi * dx) - nu * jnp.sum(jnp.abs(cs))
            size = jnp.sum(dx * dx)
            good = (curvature >= _KAPPA_CURV * size) & (slope <= -_KAPPA_CURV * size)
            good = (good | (size <= (tol * 1e-3) ** 2)) & jnp.all(jnp.isfinite(step))
            return dx, dy, nu, slope, good

        # one trace of the step: a do-while loop, δ_w = 0 on its first pass
        def correct_cond(c):
            _, tries, (_, _, _, _, good) = c
            return (tries == 0) | ((~good) & (tries < _MAX_CORRECTIONS))

        def correct_body(c):
            delta_w, tries, _ = c
            delta_w = jnp.where(
                tries == 0,
                0.0,
                jnp.where(
                    delta_w == 0,
                    jnp.where(st.delta_last == 0, 1e-4, jnp.maximum(1e-20, st.delta_last / 3)),
                    jnp.where(st.delta_last == 0, 100.0, 8.0) * delta_w,
                ),
            ).astype(dtype)
            return delta_w, tries + 1, step_with(delta_w)

        zero = jnp.zeros((), dtype)
        blank = (
            jnp.zeros((lay.stages, lay.s), dtype),
            jnp.zeros((lay.stages, lay.r), dtype),
            zero,
            zero,
            jnp.asarray(False),
        )
        delta_w, _, (dx, dy, nu, slope, _) = jax.lax.while_loop(
            correct_cond, correct_body, (zero, 0, blank)
        )
        dv = dx  # the bounded values move with z (ξ on coordinates, w)
        dzl = jnp.where(has_l, mu / sl - st.zl - st.zl / sl * dv, 0.0)
        dzu = jnp.where(has_u, mu / su - st.zu + st.zu / su * dv, 0.0)
        # fraction to the boundary
        tau = jnp.maximum(0.99, 1 - mu)
        ratio = lambda s_, ds_: jnp.where(
            ds_ < 0, -tau * s_ / jnp.where(ds_ < 0, ds_, -1.0), jnp.inf
        )
        alpha_max = jnp.minimum(
            1.0,
            jnp.minimum(
                jnp.min(jnp.where(has_l, ratio(sl, dv), jnp.inf)),
                jnp.min(jnp.where(has_u, ratio(su, -dv), jnp.inf)),
            ),
        )
        alpha_z = jnp.minimum(
            1.0,
            jnp.minimum(
                jnp.min(jnp.where(has_l, ratio(st.zl, dzl), jnp.inf)),
                jnp.min(jnp.where(has_u, ratio(st.zu, dzu), jnp.inf)),
            ),
        )
        # ℓ1 merit with ν > |y + dy|_∞
        f0 = sigma_f * ev.cost
        phi0 = f0 + barrier(sl, su, mu) + nu * jnp.sum(jnp.abs(cs))

        def trial(alpha):
            q1, w1 = T.advance(st.q, st.w, dx, alpha)
            f1, c1 = merit_parts(q1, w1, sigma_f, d)
            sl1, su1 = _slacks(T, q1, w1, lower, upper, has_l, has_u)
            phi = f1 + barrier(sl1, su1, mu) + nu * jnp.sum(jnp.abs(c1))
            return jnp.where(jnp.isfinite(phi), phi, jnp.inf)

        # Armijo's condition, with the round-off of φ itself forgiven (near the optimum the
        # predicted decrease falls below it)
        noise = 100 * jnp.finfo(dtype).eps * (jnp.abs(phi0) + jnp.abs(f0))

        # near the solution (the KKT errors within 100 tolerances) take full Newton steps: the
        # merit function cannot resolve the decrease there (round-off, the Maratos effect)
        near = (feas <= 100 * ctol) & (jnp.maximum(stat, comp) <= 100 * tol)

        def acceptable(alpha, phi):
            return (phi <= phi0 + _ETA * alpha * slope + noise) | (near & jnp.isfinite(phi))

        # backtracking, one trace of the trial point: a do-while loop from α_max
        def ls_cond(c):
            alpha, phi, tries = c
            return (tries == 0) | (~acceptable(alpha, phi) & (tries < _MAX_BACKTRACKS))

        def ls_body(c):
            alpha, _, tries = c
            alpha = jnp.where(tries == 0, alpha_max, alpha / 2)
            return alpha, trial(alpha), tries + 1

        alpha, phi, tries = jax.lax.while_loop(ls_cond, ls_body, (alpha_max, zero, 0))
        accepted = acceptable(alpha, phi)
        q1, w1 = T.advance(st.q, st.w, dx, alpha)
        y1 = st.y + alpha * dy
        zl1 = st.zl + alpha_z * dzl
        zu1 = st.zu + alpha_z * dzu
        # keep the bound multipliers near μ/s ((16))
        sl1, su1 = _slacks(T, q1, w1, lower, upper, has_l, has_u)
        zl1 = jnp.where(
            has_l, jnp.clip(zl1, mu / (_KAPPA_SIGMA * sl1), _KAPPA_SIGMA * mu / sl1), 0.0
        )
        zu1 = jnp.where(
            has_u, jnp.clip(zu1, mu / (_KAPPA_SIGMA * su1), _KAPPA_SIGMA * mu / su1), 0.0
        )

        stop = converged | ~accepted
        R = ControlResult
        result = R.where(
            converged,
            R.successful,
            R.where(feas > ctol, R.infeasible, R.search_failed),
        )
        keep = lambda old, new: jax.tree_util.tree_map(lambda a, b: jnp.where(stop, a, b), old, new)
        q_new, w_new, y_new, zl_new, zu_new = keep(
            (st.q, st.w, st.y, st.zl, st.zu), (q1, w1, y1, zl1, zu1)
        )
        return IPState(
            q=q_new,
            w=w_new,
            y=y_new,
            zl=zl_new,
            zu=zu_new,
            mu=mu,
            nu=nu,
            delta_last=jnp.where(delta_w > 0, delta_w, st.delta_last),
            steps=st.steps + jnp.where(stop, 0, 1),
            done=stop,
            result=R.where(stop, result, st.result),
            stationarity=stat,
            feasibility=feas,
            complementarity=comp,
            cost_scale=sigma_f,
            rows_scale=d,
        )

    zl0 = jnp.where(has_l, 1.0, 0.0).astype(dtype)
    zu0 = jnp.where(has_u, 1.0, 0.0).astype(dtype)
    inf = jnp.asarray(jnp.inf, dtype)
    st0 = IPState(
        q=q_init,
        w=w_init,
        y=jnp.zeros((lay.stages, lay.r), dtype),
        zl=zl0,
        zu=zu0,
        mu=jnp.asarray(solver.mu_init, dtype),
        nu=jnp.asarray(1.0, dtype),
        delta_last=jnp.zeros((), dtype),
        steps=jnp.asarray(0),
        done=jnp.asarray(False),
        result=ControlResult.max_steps_reached,
        stationarity=inf,
        feasibility=inf,
        complementarity=inf,
        cost_scale=jnp.ones((), dtype),
        rows_scale=jnp.ones((lay.stages, lay.r), dtype),
    )
    final = jax.lax.while_loop(lambda st: (~st.done) & (st.steps < solver.max_steps), body, st0)
    return final, Scaling(final.cost_scale, final.rows_scale)
