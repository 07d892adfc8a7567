"""`solve_optimal_control`: the DMOC transcription solved by the interior-point method, with
the solution differentiated implicitly through the optimality conditions."""

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PyTree

from .._bundle import State
from .._geometry import point_shape
from ._blocktri import factor
from ._interior_point import (
    ControlResult,
    InteriorPoint,
    IPState,
    kkt_matrix,
    refined_solve,
    solve_nlp,
)
from ._problem import OptimalControlProblem, problem_dtype
from ._transcription import Layout, Transcription, ominus, oplus, take


class OptimalControlSolution(eqx.Module):
    """The result of `gm.solve_optimal_control` (batched fields under `jax.vmap`).

    **Fields:**

    - `ts`: the node times, `(N,)`.
    - `q`: the node configurations, stacked: `(N, n)` arrays, or group elements with a leading
        axis `N`.
    - `v`: the node velocities `(N, n)`: those of the boundary conditions where given, elsewhere
        the discrete Legendre transform of the plan ($\\partial L/\\partial v(q_k, v_k) =
        D_2L_d + f^+ + A^\\top\\mu$ on $\\mathcal{C}$), the velocities `gm.VariationalIntegrator`
        computes.
    - `u`: the controls `(N - 1, m)`, control `u[k]` acting on $[t_k, t_{k+1})$.
    - `multipliers`: $\\lambda_k$ `(N, k)` of the discrete Lagrange–d'Alembert equations.
    - `cost`: the optimal cost.
    - `horizon`: $T$.
    - `result`: a `gm.ControlResult`: `successful`, `max_steps_reached`, `infeasible` or
        `search_failed` (`solution.result == gm.ControlResult.successful`).
    - `steps`: the number of interior-point iterations.
    - `stationarity`, `complementarity`: the scaled KKT errors at the end (IPOPT's measures).
    - `feasibility`: the largest scaled equation residual at the end.
    - `constraint_residuals`: the discrete constraint $\\phi_d(q_k, q_{k+1})$ on every interval
        `(N - 1, k)`, unscaled.
    - `dynamics_residuals`: the discrete Lagrange–d'Alembert equations of every interval in
        position–momentum form (momentum and Legendre rows) `(N - 1, 2n)`, unscaled.
    """

    ts: Float[Array, " N"]
    q: PyTree
    v: Float[Array, "N n"]
    u: Float[Array, "Nm1 m"]
    multipliers: Float[Array, "N k"]
    cost: Float[Array, ""]
    horizon: Float[Array, ""]
    result: ControlResult
    steps: Int[Array, ""]
    stationarity: Float[Array, ""]
    complementarity: Float[Array, ""]
    feasibility: Float[Array, ""]
    constraint_residuals: Float[Array, "Nm1 k"]
    dynamics_residuals: Float[Array, "Nm1 twon"]


def initial_guess(T: Transcription, guess_q, guess_u):
    """The starting point $(q, w)$: `guess_q` (stacked node points) or the interpolation
    $q_0 \\oplus s\\,(q_f \\ominus q_0)$ (constant $q_0$ without a final configuration);
    `guess_u` `(N-1, m)` or zero; multipliers zero; momenta those of the guessed motion; $h$
    from the horizon's guess."""
    p, lay = T.problem, T.layout
    dtype = problem_dtype(p)
    if guess_q is None:
        s = jnp.linspace(0.0, 1.0, lay.N, dtype=dtype)
        target = p.q0 if p.qf is None else p.qf
        delta = ominus(p, p.q0, target)
        guess_q = jax.vmap(lambda si: oplus(p, p.q0, si * delta))(s)
    guess_q = T.points(guess_q)
    S = lay.stages
    u = jnp.zeros((S, lay.m), dtype) if guess_u is None else jnp.asarray(guess_u, dtype)
    h = (p.horizon.initial() if lay.nt else p.horizon) / S
    dq = jax.vmap(lambda a, b: ominus(p, a, b))(
        take(guess_q, slice(0, -1)), take(guess_q, slice(1, None))
    )
    momenta = jax.vmap(lambda q_, v_: p.system.momentum(State(q_, v_), p.t0))(
        take(guess_q, slice(1, None)), dq / h
    )
    parts = [u, jnp.zeros((S, lay.k), dtype)]
    if lay.nt:
        parts.append(jnp.full((S, 1), h, dtype))
    parts.append(momenta)
    if lay.n0:
        parts.append(jnp.zeros((S, lay.n0), dtype))
    if lay.nf:
        parts.append(jnp.zeros((S, lay.k), dtype))
    return guess_q, jnp.concatenate(parts, axis=1)


def _check_guess(T: Transcription, guess_q, guess_u):
    lay = T.layout
    if guess_u is not None and jnp.shape(guess_u) != (lay.N - 1, lay.m):
        raise ValueError(
            f"guess_u must have shape ({lay.N - 1}, {lay.m}) (one control per interval), "
            f"got {jnp.shape(guess_u)}."
        )
    if guess_q is not None:
        leaves = jax.tree_util.tree_leaves(guess_q)
        if not leaves or any(jnp.ndim(x) == 0 or jnp.shape(x)[0] != lay.N for x in leaves):
            raise ValueError(
                f"guess_q must hold the {lay.N} node configurations stacked on a leading axis."
            )
        first = take(guess_q, 0)
        T.problem.system.manifold.check(first)
        if point_shape(first)[1] != lay.n:
            raise ValueError(f"guess_q's configurations must have dimension {lay.n}.")


@eqx.filter_custom_jvp
def _solve(problem, guess_q, guess_w, *, layout, solver):
    T = Transcription(problem, layout)
    state, scaling = solve_nlp(T, solver, guess_q, guess_w)
    return state, scaling.rows, scaling.cost


@_solve.def_jvp
def _solve_jvp(primals, tangents, *, layout, solver):
    """The implicit function theorem on the barrier KKT conditions at the final iterate
    ([WaechterBiegler2006] (4); as for the sensitivity of an NLP solution, [Fiacco1983]):
    $K\\,(\\dot x, \\dot y) = -(\\partial_p\\nabla_x\\mathcal{L}\\,\\dot p - \\Sigma_L\\dot\\ell -
    \\Sigma_U\\dot u,\\ \\partial_p c\\,\\dot p)$ with the KKT matrix $K$ of the last Newton step
    (no regularization); the bound multipliers follow from the complementarity conditions."""
    problem, guess_q, guess_w = primals
    dproblem, _, _ = tangents
    state, d, sigma_f = _solve(problem, guess_q, guess_w, layout=layout, solver=solver)
    d, sigma_f = jax.lax.stop_gradient((d, sigma_f))
    T = Transcription(problem, layout)
    dtype = state.w.dtype
    if dproblem is None:
        dproblem = jax.tree_util.tree_map(jnp.zeros_like, eqx.filter(problem, eqx.is_inexact_array))
    lower, upper = T.bounds(dtype)
    has_l, has_u = jnp.isfinite(lower), jnp.isfinite(upper)
    v = T.bound_values(state.q, state.w)
    sl = jnp.where(has_l, v - lower, 1.0)
    su = jnp.where(has_u, upper - v, 1.0)
    Sigma_l = jnp.where(has_l, state.zl / sl, 0.0)
    Sigma_u = jnp.where(has_u, state.zu / su, 0.0)

    diff, static = eqx.partition(problem, eqx.is_inexact_array)

    def first_order(diff_):
        T_ = Transcription(eqx.combine(diff_, static), layout)
        grad, c = T_.lagrangian_gradient(state.q, state.w, state.y * d, sigma_f)
        lo, hi = T_.bounds(dtype)
        return grad, d * c, jnp.where(has_l, lo, 0.0), jnp.where(has_u, hi, 0.0)

    dproblem = eqx.filter(dproblem, eqx.is_inexact_array)
    dproblem = jax.tree_util.tree_map(
        lambda x, t: x if x is None else (jnp.zeros_like(x) if t is None else t),
        diff,
        dproblem,
        is_leaf=lambda x: x is None,
    )
    _, (dgrad, dc, dlo, dhi) = jax.jvp(first_order, (diff,), (dproblem,))
    ev = T.derivatives(state.q, state.w, state.y * d, sigma_f)
    free = jnp.asarray(~T.fixed(), dtype)
    K = kkt_matrix(T, ev, d, Sigma_l + Sigma_u, jnp.zeros((), dtype), jnp.zeros((), dtype))
    F = factor(K)
    rhs = jnp.concatenate([-(dgrad - Sigma_l * dlo - Sigma_u * dhi) * free, -dc], axis=1)
    step = jax.lax.custom_linear_solve(
        K.matvec, rhs, lambda _, b: refined_solve(K, F, b), symmetric=True
    )
    dx, dy = step[:, : layout.s] * free, step[:, layout.s :]
    dzl = jnp.where(has_l, -Sigma_l * (dx - dlo), 0.0)
    dzu = jnp.where(has_u, Sigma_u * (dx - dhi), 0.0)
    n = layout.n
    dq_rest = jax.vmap(
        lambda qk, dk: jax.jvp(lambda e: oplus(problem, qk, e), (jnp.zeros_like(dk),), (dk,))[1]
    )(take(state.q, slice(1, None)), dx[:, :n])
    dq = jax.tree_util.tree_map(lambda a: jnp.concatenate([jnp.zeros_like(a[:1]), a]), dq_rest)
    # the given nodes move with the problem's q0 and qf
    _, dq = jax.jvp(
        lambda diff_, q_: Transcription(eqx.combine(diff_, static), layout).points(q_),
        (diff, state.q),
        (dproblem, dq),
    )
    zeros = lambda x: None if not eqx.is_inexact_array(x) else jnp.zeros_like(x)
    dstate = jax.tree_util.tree_map(zeros, state)
    dstate = eqx.tree_at(
        lambda s: (s.q, s.w, s.y, s.zl, s.zu),
        dstate,
        (dq, dx[:, n:], dy, dzl, dzu),
        is_leaf=lambda x: x is None,
    )
    return (state, d, sigma_f), (dstate, jnp.zeros_like(d), jnp.zeros_like(sigma_f))


def solve_optimal_control(
    problem: OptimalControlProblem,
    *,
    solver: InteriorPoint = InteriorPoint(),
    guess_q: PyTree | None = None,
    guess_u: Float[Array, "Nm1 m"] | None = None,
) -> OptimalControlSolution:
    """Solve an optimal control problem by discrete mechanics and optimal control (DMOC): the
    discrete Lagrange–d'Alembert equations of `gm.VariationalIntegrator` on $N$ nodes as the
    constraints of a nonlinear program ([OberBloebaum2011]; on Lie groups
    [KobilarovMarsden2011]), solved by a primal-dual interior-point method
    ([WaechterBiegler2006]) with block-tridiagonal KKT solves.

    The discrete constraint $\\phi_d(q_k, q_{k+1}) = 0$ holds on every interval to the solver's
    `constraint_tol` when `result` is `successful`; otherwise `result` says why not, and the
    residuals are in the solution (the plan is returned, never silently).

    Works under `jax.jit` and `jax.vmap` (a batch of problems in one compiled call), and is
    differentiable: the derivatives of the solution and of its cost with respect to any array
    in `problem` (a model parameter inside the Lagrangian, the boundary conditions, the bounds,
    the horizon) come from the implicit function theorem on the optimality conditions (one
    block-tridiagonal solve), not from unrolling the iterations.

    **Arguments:**

    - `problem`: a `gm.OptimalControlProblem`.
    - `solver`: a `gm.InteriorPoint` (tolerances, `max_steps`).
    - `guess_q`: initial node configurations, stacked on a leading axis of size $N$; default
        the interpolation from `q0` to `qf`.
    - `guess_u`: initial controls `(N - 1, m)`; default zero (pushed inside the bounds).

    **Returns:** a `gm.OptimalControlSolution`.
    """
    if not isinstance(problem, OptimalControlProblem):
        raise TypeError(
            f"problem must be a gm.OptimalControlProblem, got {type(problem).__name__}."
        )
    if not isinstance(solver, InteriorPoint):
        raise TypeError(f"solver must be a gm.InteriorPoint, got {type(solver).__name__}.")
    T = Transcription.of(problem)
    _check_guess(T, guess_q, guess_u)
    q_init, w_init = initial_guess(T, guess_q, guess_u)
    state, d, _ = _solve(problem, q_init, w_init, layout=T.layout, solver=solver)
    return _solution(T, state, d)


def _solution(T: Transcription, state: IPState, d) -> OptimalControlSolution:
    p, lay = T.problem, T.layout
    q, w = T.points(state.q), state.w
    cost, c = T.residuals(q, w)
    hs, dq, dc = T.interval_quantities(q, w)
    h = hs[0]
    ts = p.t0 + jnp.arange(lay.N, dtype=w.dtype) * h
    parts = lay.split(T.stage_z(w).T)  # each (size, N-1)
    lam = parts[2].T
    lam_last = parts[6].T[-1] if lay.nf else jnp.zeros(lay.k, w.dtype)
    lam = jnp.concatenate([lam, lam_last[None]])
    system = p.system
    p_next = parts[4].T
    if p.v0 is not None:
        p_first = system.momentum(State(p.q0, jnp.asarray(p.v0, w.dtype)), p.t0)
    else:
        p_first = parts[5].T[0]
    momenta = jnp.concatenate([p_first[None], p_next])

    def legendre_inverse(qk, pk, guess, t):
        # ∂L/∂v(q, v) = p + A^T μ, φ(q, v) = 0 (the velocity step of gm.VariationalIntegrator)
        def F(z):
            v, mu = z[: lay.n], z[lay.n :]
            state = State(qk, v)
            A = jax.jacfwd(lambda v_: system.constraint_residual(State(qk, v_), t))(v)
            residual = system.momentum(state, t) - pk - A.T @ mu
            return jnp.concatenate([residual, system.constraint_residual(state, t)])

        z = jnp.concatenate([guess, jnp.zeros(lay.k, guess.dtype)])
        # Newton (exact in one step for L quadratic in v and φ affine in v), one trace
        newton = lambda _, z_: z_ - jnp.linalg.solve(jax.jacfwd(F)(z_), F(z_))
        return jax.lax.fori_loop(0, 4, newton, z)[: lay.n]

    guesses = jnp.concatenate([dq[:1] / h, dq / hs[:, None]])
    v = jax.vmap(legendre_inverse)(q, momenta, guesses, ts)
    if p.v0 is not None:
        v = v.at[0].set(jnp.asarray(p.v0, w.dtype))
    if p.vf is not None:
        v = v.at[-1].set(jnp.asarray(p.vf, w.dtype))
    return OptimalControlSolution(
        ts=ts,
        q=q,
        v=v,
        u=w[:, : lay.m],
        multipliers=lam,
        cost=cost,
        horizon=h * (lay.N - 1),
        result=state.result,
        steps=state.steps,
        stationarity=state.stationarity,
        complementarity=state.complementarity,
        feasibility=state.feasibility,
        constraint_residuals=dc,
        dynamics_residuals=c[:, : 2 * lay.n],
    )


__all__ = ["Layout", "OptimalControlSolution", "solve_optimal_control"]
