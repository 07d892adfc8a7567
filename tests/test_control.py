"""Optimal control by DMOC (`gm.solve_optimal_control`): the discrete constraint at every node,
the optimum against an independent solution, the plan as a trajectory of the variational
integrator, implicit derivatives against finite differences of re-solved problems, batches, and
the statuses of problems that cannot be solved."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest

import geomech as gm

# -- the double integrator: L = m v^2 / 2, u a force; a linear-quadratic problem ----------------

N_DI = 11


class Particle(eqx.Module):
    m: jax.Array

    def __call__(self, q, v):
        return 0.5 * self.m * v @ v


def push_particle(q, v, u):
    return u


# The functions of a problem are defined once, at module level: problems rebuilt from them (the
# finite differences, the solo solves) reuse one compiled program, where a new lambda per
# problem would compile each again (JAX keys its programs on the functions' identity).


def particle_problem(m=1.0, target=1.0, bound=100.0, horizon=1.0):
    system = gm.LagrangianSystem(Particle(jnp.asarray(m)))
    z = jnp.zeros(1)
    return gm.OptimalControlProblem(
        system,
        push_particle,
        num_controls=1,
        q0=z,
        horizon=jnp.asarray(horizon),
        num_nodes=N_DI,
        v0=z,
        qf=jnp.asarray(target) * jnp.ones(1),
        vf=z,
        control_bounds=(-bound * jnp.ones(1), bound * jnp.ones(1)),
    )


solve = eqx.filter_jit(gm.solve_optimal_control)


def particle_qp(m, target, N=N_DI, T=1.0):
    """The same DMOC problem written out by hand and solved as an equality-constrained QP with
    numpy: unknowns q_1..q_{N-2}, u_0..u_{N-2}; the discrete Euler-Lagrange equations of the
    midpoint rule with f^± = h u / 2 ([MW] §3.2), the discrete Legendre transforms at the ends."""
    h = T / (N - 1)
    nq, nu = N - 2, N - 1
    fixed = {0: 0.0, N - 1: target}
    A, b = np.zeros((N, nq + nu)), np.zeros(N)

    def put(row, k, coef):  # coefficient of q_k; returns the right-hand-side contribution
        if k in fixed:
            return -coef * fixed[k]
        A[row, k - 1] += coef
        return 0.0

    for k in range(N):
        if k == 0:  # m v0 - m (q1 - q0)/h + h u0 / 2 = 0
            b[k] += put(k, 1, -m / h) + put(k, 0, m / h)
            A[k, nq] += h / 2
        elif k == N - 1:  # m (q_{N-1} - q_{N-2})/h + h u_{N-2} / 2 - m vf = 0
            b[k] += put(k, N - 1, m / h) + put(k, N - 2, -m / h)
            A[k, nq + N - 2] += h / 2
        else:
            b[k] += put(k, k, 2 * m / h) + put(k, k - 1, -m / h) + put(k, k + 1, -m / h)
            A[k, nq + k - 1] += h / 2
            A[k, nq + k] += h / 2
    H = np.zeros((nq + nu, nq + nu))
    H[nq:, nq:] = 2 * h * np.eye(nu)
    K = np.block([[H, A.T], [A, np.zeros((N, N))]])
    z = np.linalg.solve(K, np.concatenate([np.zeros(nq + nu), b]))
    u = z[nq : nq + nu]
    return u, h * u @ u


@pytest.mark.parametrize("stages", [1, 2, 7])
def test_block_factorization_solves_the_dense_system(stages):
    """The block LDL^T (Riccati) factorization of a symmetric indefinite block-tridiagonal
    matrix whose sub-diagonal blocks read only the coupling columns solves it as a dense solve
    does: random KKT-like blocks (W positive definite, J of full row rank)."""
    from geomech._control._blocktri import BlockTridiagonal, factor

    s, r, cols = 5, 3, (0, 2, 4)
    b = s + r
    rng = np.random.default_rng(stages)
    diag, lower = [], []
    for _ in range(stages):
        X = rng.normal(size=(s, s))
        J = rng.normal(size=(r, s))
        diag.append(np.block([[X @ X.T + np.eye(s), J.T], [J, np.zeros((r, r))]]))
    for _ in range(stages - 1):
        L = np.zeros((b, len(cols)))
        L[s:] = rng.normal(size=(r, len(cols)))  # equations of stage i+1 read stage i's state
        L[:s] = 0.1 * rng.normal(size=(s, len(cols)))
        lower.append(L)
    K = BlockTridiagonal(
        jnp.asarray(np.array(diag)), jnp.asarray(np.array(lower).reshape(-1, b, 3)), cols
    )
    dense = np.zeros((stages * b, stages * b))
    for i in range(stages):
        dense[i * b : (i + 1) * b, i * b : (i + 1) * b] = diag[i]
    for i in range(stages - 1):
        block = np.zeros((b, b))
        block[:, list(cols)] = lower[i]
        dense[(i + 1) * b : (i + 2) * b, i * b : (i + 1) * b] = block
        dense[i * b : (i + 1) * b, (i + 1) * b : (i + 2) * b] = block.T
    rhs = rng.normal(size=(stages, b))
    x = jax.jit(lambda K, r: factor(K).solve(r))(K, jnp.asarray(rhs))
    expected = np.linalg.solve(dense, rhs.ravel()).reshape(stages, b)
    scale = np.max(np.abs(expected))
    cond = np.linalg.cond(dense)
    assert cond < 1e6  # a well-posed check
    assert np.max(np.abs(np.asarray(x) - expected)) <= 1e-14 * cond * scale
    np.testing.assert_allclose(K.matvec(jnp.asarray(expected)), rhs, atol=1e-12 * scale)


def test_linear_quadratic_optimum_equals_an_independent_qp():
    sol = solve(particle_problem(m=2.0, target=1.0))
    u_ref, cost_ref = particle_qp(2.0, 1.0)
    assert sol.result == gm.ControlResult.successful
    np.testing.assert_allclose(sol.u[:, 0], u_ref, rtol=1e-8, atol=1e-8)
    np.testing.assert_allclose(sol.cost, cost_ref, rtol=1e-9)
    # the continuous optimum u = m (6 - 12 t) has cost 12 m^2; DMOC is O(h^2) from it
    assert abs(sol.cost / (12 * 4.0) - 1) < 0.02
    assert sol.stationarity < 1e-8 and sol.complementarity < 1e-8 and sol.feasibility < 1e-10
    assert jnp.max(jnp.abs(sol.dynamics_residuals)) < 1e-10
    np.testing.assert_allclose(sol.q[-1], [1.0])
    np.testing.assert_allclose(sol.v[jnp.array([0, -1])], 0.0, atol=1e-10)


def test_implicit_derivative_of_the_optimal_cost_equals_finite_differences():
    cost = lambda m, target: solve(particle_problem(m, target)).cost
    m, target = jnp.asarray(2.0), jnp.asarray(1.3)
    g_m, g_t = jax.grad(cost, argnums=(0, 1))(m, target)
    eps = 1e-5
    fd_m = (cost(m + eps, target) - cost(m - eps, target)) / (2 * eps)
    fd_t = (cost(m, target + eps) - cost(m, target - eps)) / (2 * eps)
    np.testing.assert_allclose(g_m, fd_m, rtol=1e-6)
    np.testing.assert_allclose(g_t, fd_t, rtol=1e-6)
    # closed form of the discrete problem: cost = c m^2 target^2
    c = particle_qp(1.0, 1.0)[1]
    np.testing.assert_allclose(g_m, 2 * c * m * target**2, rtol=1e-8)


def test_vmap_over_problems_equals_solo_solves():
    targets = jnp.array([0.5, 1.0, 2.0])
    batch = eqx.filter_jit(jax.vmap(lambda t: gm.solve_optimal_control(particle_problem(2.0, t))))(
        targets
    )
    for i, t in enumerate(targets):
        solo = solve(particle_problem(2.0, t))
        np.testing.assert_allclose(batch.u[i], solo.u, rtol=1e-10, atol=1e-10)
        np.testing.assert_allclose(batch.cost[i], solo.cost, rtol=1e-12)
    assert jnp.all(batch.result._value == gm.ControlResult.successful._value)


def test_an_unreachable_target_is_reported_not_solved():
    # |u| <= 1 moves the particle at most 1/4 in one second, rest to rest
    sol = solve(particle_problem(m=1.0, target=1.0, bound=1.0))
    assert sol.result != gm.ControlResult.successful
    assert sol.feasibility > 1e-3  # the plan it returns says how far it is from feasible
    capped = eqx.filter_jit(
        lambda p: gm.solve_optimal_control(p, solver=gm.InteriorPoint(max_steps=2))
    )(particle_problem(m=1.0, target=1.0, bound=100.0))
    assert capped.result == gm.ControlResult.max_steps_reached


def test_bad_configuration_raises_before_tracing():
    p = particle_problem()
    with pytest.raises(ValueError, match="num_nodes"):
        gm.OptimalControlProblem(p.system, p.control, 1, p.q0, 1.0, 2)
    with pytest.raises(ValueError, match="control must return"):
        gm.solve_optimal_control(
            gm.OptimalControlProblem(p.system, lambda q, v, u: u, 2, p.q0, 1.0, 5)
        )
    with pytest.raises(ValueError, match="guess_u"):
        gm.solve_optimal_control(p, guess_u=jnp.zeros((3, 1)))
    with pytest.raises(ValueError, match="vf is given"):
        gm.OptimalControlProblem(p.system, p.control, 1, p.q0, 1.0, 5, vf=jnp.zeros(1))
    with pytest.raises(ValueError, match="horizon"):
        gm.OptimalControlProblem(p.system, p.control, 1, p.q0, -1.0, 5)


# -- a knife edge on ℝ³ and a sleigh on SE(2): nonholonomic, steered to a pose ---------------------

N_KNIFE = 16


class Knife(eqx.Module):
    """A knife edge (a sleigh with its contact at the centre of mass): q = (x, y, θ)."""

    m: jax.Array
    inertia: jax.Array

    def __call__(self, q, v):
        return 0.5 * self.m * (v[0] ** 2 + v[1] ** 2) + 0.5 * self.inertia * v[2] ** 2


def knife_edge(q):
    return jnp.array([[-jnp.sin(q[2]), jnp.cos(q[2]), 0.0]])


def push_knife(q, v, u):
    return jnp.array([u[0] * jnp.cos(q[2]), u[0] * jnp.sin(q[2]), u[1]])


def knife_problem(inertia=0.5):
    system = gm.LagrangianSystem(
        Knife(jnp.asarray(1.0), jnp.asarray(inertia)), constraint=gm.LinearConstraint(knife_edge)
    )
    z = jnp.zeros(3)
    return gm.OptimalControlProblem(
        system,
        push_knife,
        2,
        z,
        jnp.asarray(4.0),
        N_KNIFE,
        v0=z,
        qf=jnp.array([1.0, 1.0, 0.0]),
        vf=z,
        control_bounds=(-5.0 * jnp.ones(2), 5.0 * jnp.ones(2)),
    )


def replay(problem, sol):
    """The plan's controls played, piecewise constant, through `gm.simulate` with the variational
    integrator at the plan's step: the same discrete dynamics, solved forward step by step."""
    ts, u = sol.ts, sol.u
    force = lambda t, q, v: problem.control(
        q, v, u[jnp.clip(jnp.searchsorted(ts, t, side="right") - 1, 0, len(u) - 1)]
    )
    s = problem.system
    rows = s.constraint.A_of_q  # a gm.LinearConstraint's A(q), read as A(t, q) below
    driven = gm.LagrangianSystem(
        lambda t, q, v: s.lagrangian(q, v),
        force=force,
        constraint=gm.LinearConstraint(lambda t, q: rows(q)),
        manifold=s.manifold,
        time_dependent=True,
    )
    return gm.simulate(
        driven,
        gm.State(problem.q0, problem.v0),
        ts[0],
        ts[-1],
        integrator=gm.VariationalIntegrator(),
        dt0=ts[1] - ts[0],
        saveat=diffrax.SaveAt(ts=ts),
    )


def test_nonholonomic_plan_holds_the_discrete_constraint_and_is_an_integrator_trajectory():
    problem = knife_problem()
    sol = solve(problem)
    assert sol.result == gm.ControlResult.successful, sol.result
    assert sol.constraint_residuals.shape == (N_KNIFE - 1, 1)
    assert jnp.max(jnp.abs(sol.constraint_residuals)) <= 1e-10  # at every node
    assert jnp.max(jnp.abs(sol.dynamics_residuals)) <= 1e-9
    np.testing.assert_allclose(sol.q[-1], [1.0, 1.0, 0.0], atol=1e-12)
    # the node velocities lie on C
    phi = jax.vmap(lambda q, v: problem.system.constraint_residual(gm.State(q, v)))(sol.q, sol.v)
    assert jnp.max(jnp.abs(phi)) < 1e-10
    run = replay(problem, sol)
    np.testing.assert_allclose(run.states.q, sol.q, atol=1e-8)
    np.testing.assert_allclose(run.states.v, sol.v, atol=1e-8)


def test_implicit_derivative_with_respect_to_the_inertia_equals_finite_differences():
    cost = lambda inertia: solve(knife_problem(inertia)).cost
    I0, eps = jnp.asarray(0.5), 1e-5
    g = jax.grad(cost)(I0)
    fd = (cost(I0 + eps) - cost(I0 - eps)) / (2 * eps)
    np.testing.assert_allclose(g, fd, rtol=1e-6)


class BodySleigh(eqx.Module):
    """A Chaplygin sleigh on SE(2): body velocity (v_x, v_y, ω) of the knife's contact point, the
    centre of mass a distance `a` ahead of it."""

    a: jax.Array

    def __call__(self, g, v):
        return 0.5 * (v[0] ** 2 + (v[1] + self.a * v[2]) ** 2) + 0.5 * 0.2 * v[2] ** 2


def test_group_problem_on_se2():
    system = gm.LagrangianSystem(
        BodySleigh(jnp.asarray(0.3)),
        constraint=gm.LinearConstraint(lambda g: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SE2(),
    )
    g0 = jaxlie.SE2.identity()
    gf = jaxlie.SE2.from_xy_theta(1.0, 0.5, 0.6)
    problem = gm.OptimalControlProblem(
        system,
        lambda g, v, u: jnp.array([u[0], 0.0, u[1]]),
        2,
        g0,
        jnp.asarray(3.0),
        13,
        v0=jnp.zeros(3),
        qf=gf,
        vf=jnp.zeros(3),
    )
    sol = solve(problem)
    assert sol.result == gm.ControlResult.successful, sol.result
    assert jnp.max(jnp.abs(sol.constraint_residuals)) <= 1e-10
    final = (gf.inverse() @ jax.tree_util.tree_map(lambda a: a[-1], sol.q)).log()
    assert jnp.max(jnp.abs(final)) < 1e-12
    run = replay(problem, sol)
    np.testing.assert_allclose(run.states.q.parameters(), sol.q.parameters(), atol=1e-8)


def test_free_horizon_minimum_time_equals_bang_bang():
    """min T for the double integrator from rest at 0 to rest at 1 with |u| <= 1: T* = 2
    (bang-bang); DMOC is exact for piecewise-constant controls and the switch falls on a node."""
    system = gm.LagrangianSystem(Particle(jnp.asarray(1.0)))
    z = jnp.zeros(1)
    problem = gm.OptimalControlProblem(
        system,
        lambda q, v, u: u,
        1,
        z,
        gm.FreeHorizon(1.0, 4.0, 3.0),
        N_DI,
        v0=z,
        qf=jnp.ones(1),
        vf=z,
        running_cost=lambda t, q, v, u: jnp.ones(()),
        control_bounds=(-jnp.ones(1), jnp.ones(1)),
    )
    sol = solve(problem)
    assert sol.result == gm.ControlResult.successful, sol.result
    np.testing.assert_allclose(sol.horizon, 2.0, rtol=1e-7)
    np.testing.assert_allclose(sol.cost, 2.0, rtol=1e-7)
    np.testing.assert_allclose(sol.u[:, 0], np.r_[np.ones(5), -np.ones(5)], atol=1e-6)
