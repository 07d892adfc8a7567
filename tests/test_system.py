"""ω_L, E_L, the Legendre map and X_U (thesis §2.1, §3.1) on random and simple systems."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from random_systems import random_system

import geomech as gm

SEEDS = [0, 1, 2]


def _omega_matrix(system, x, t):
    n = x.shape[0] // 2
    return system.lagrangian_two_form(gm.State(x[:n], x[n:]), t).matrix


@pytest.mark.parametrize("seed", SEEDS)
def test_omega_L_closed_and_nondegenerate(seed):
    system, s, t = random_system(seed, force=False)
    x = jnp.concatenate([s.q, s.v])
    W = _omega_matrix(system, x, t)
    np.testing.assert_allclose(W, -W.T, atol=1e-12)
    assert abs(jnp.linalg.det(W)) > 1e-6  # regular L: symplectic (2.6)
    # dω = 0: ∂_a Ω_bc + ∂_b Ω_ca + ∂_c Ω_ab = 0
    dW = jax.jacfwd(lambda y: _omega_matrix(system, y, t))(x)  # [b, c, a]
    cyc = jnp.einsum("bca->abc", dW) + jnp.einsum("cab->abc", dW) + jnp.einsum("abc->abc", dW)
    np.testing.assert_allclose(cyc, 0.0, atol=1e-10)
    # the gyroscopic term makes B - Bᵀ nonzero, so the test exercises the dq∧dq part of (2.5)
    assert jnp.max(jnp.abs(W[: x.shape[0] // 2, : x.shape[0] // 2])) > 1e-3


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("time_dependent", [False, True])
def test_X_U_invariant_equals_fast(seed, time_dependent):
    system, s, t = random_system(seed, time_dependent=time_dependent)
    fast = system.unconstrained_field(s, t)
    inv = system.unconstrained_field(s, t, invariant=True)
    np.testing.assert_allclose(inv.flat(), fast.flat(), rtol=1e-12, atol=1e-12)
    assert inv.is_special_at(s)  # X_U is special (3.4)
    np.testing.assert_allclose(gm.unconstrained_acceleration(system, s, t), fast.dv, rtol=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_X_L_special_and_energy_conserved(seed):
    system, s, t = random_system(seed, force=False)
    X = system.unconstrained_field(s, t, invariant=True)
    assert X.is_special_at(s)
    # dE_L(X_L) = 0 for an autonomous L without forces
    np.testing.assert_allclose(system.energy_differential(s, t) @ X.flat(), 0.0, atol=1e-11)


def test_energy_power_with_force():
    system, s, t = random_system(3)
    X = system.unconstrained_field(s, t)
    power = system.external_force(t, s.q, s.v) @ s.v
    np.testing.assert_allclose(system.energy_differential(s, t) @ X.flat(), power, rtol=1e-10)


def test_lemma_3_2_and_3_3():
    """(3.2): ω_L(τY, w) = ⟨Y, π_* w⟩_M; (3.3): F horizontal ⇔ X_F vertical."""
    system, s, t = random_system(4)
    rng = np.random.default_rng(4)
    n = s.q.shape[0]
    omega = system.lagrangian_two_form(s, t)
    M = system.mass_matrix(s, t)
    Y = jnp.asarray(rng.normal(size=n))
    w = gm.TangentVector(jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=n)))
    np.testing.assert_allclose(omega(gm.vertical_lift(Y), w), Y @ M @ w.dq, rtol=1e-12)
    F = gm.HorizontalForm(lambda q, v: jnp.sin(q) + v)
    XF = omega.sharp(F.on_tq(s))
    np.testing.assert_allclose(XF.dq, 0.0, atol=1e-12)  # vertical
    np.testing.assert_allclose(M @ gm.vertical_lift_inverse(XF), F.covector(s.q, s.v), rtol=1e-10)
    # a non-horizontal form has a non-vertical X
    alpha = jnp.concatenate([jnp.zeros(n), jnp.ones(n)])
    assert jnp.linalg.norm(omega.sharp(alpha).dq) > 1e-3
    np.testing.assert_allclose(omega.flat(gm.vertical_lift(Y))[n:], 0.0, atol=1e-12)  # flat(vertical) horizontal


@pytest.mark.parametrize("time_dependent", [False, True])
def test_legendre_energy_mass(time_dependent):
    """Closed forms of the random Lagrangian $L = \\tfrac12 v^\\top M(q) v + \\gamma(t)\\tanh(G q)\\cdot v - V(q)$,
    $\\gamma(t) = 1 + 0.3\\sin t$: $p = M v + \\gamma\\tanh(G q)$ and $E_L = \\tfrac12 v^\\top M v + V$ (the
    gyroscopic term, linear in $v$, does no work)."""
    system, s, t = random_system(5, time_dependent=time_dependent)
    lag, q_, v = system.lagrangian, s.q, s.v
    gamma = 1.0 + 0.3 * jnp.sin(t if time_dependent else 0.0)
    M = lag.mass(q_)
    V = 0.5 * q_ @ lag.K @ q_ + jnp.sum(jnp.cos(q_))
    q, p = system.legendre(s, t)
    np.testing.assert_array_equal(q, s.q)
    np.testing.assert_allclose(p, M @ v + gamma * jnp.tanh(lag.g @ q_), rtol=1e-12)
    np.testing.assert_allclose(system.energy(s, t), 0.5 * v @ M @ v + V, rtol=1e-12)
    np.testing.assert_allclose(system.mass_matrix(s, t), M, rtol=1e-12)


def test_harmonic_oscillator_closed_form():
    k, m = 3.0, 2.0
    system = gm.LagrangianSystem(lambda q, v: 0.5 * m * v @ v - 0.5 * k * q @ q)
    s = gm.State(jnp.array([0.7, -0.2]), jnp.array([1.0, 0.0]))
    np.testing.assert_allclose(gm.acceleration(system, s), -k / m * s.q, rtol=1e-14)
    np.testing.assert_allclose(system.energy(s), 0.5 * m + 0.5 * k * (0.49 + 0.04), rtol=1e-14)
    assert system.dim(s) == 2  # dim Q: the coordinates of a Euclidean space
    # no constraint: no rows (k = 0) in the residuals and the stages, and no constraint force
    assert system.constraint_residual(s).shape == (0,) and system.position_residual(s).shape == (0,)
    stages = gm.assemble(system, s)
    assert stages.A.shape == (0, 2) and stages.b.shape == (0,) and stages.C.shape == (0, 2)
    np.testing.assert_allclose(stages.a_U, -k / m * s.q, rtol=1e-14)


def test_time_dependent_lagrangian_matches_euler_lagrange():
    """L = ½ m(t) v² with m(t) = 1 + t²: d/dt(m v) = 0 ⇒ a = -ṁ v / m."""
    system = gm.LagrangianSystem(lambda t, q, v: 0.5 * (1 + t**2) * v @ v, time_dependent=True)
    s = gm.State(jnp.array([0.0]), jnp.array([2.0]))
    t = 0.5
    np.testing.assert_allclose(gm.unconstrained_acceleration(system, s, t), [-2 * t * 2.0 / (1 + t**2)], rtol=1e-14)
    inv = system.unconstrained_field(s, t, invariant=True)
    np.testing.assert_allclose(inv.dv, [-2 * t * 2.0 / (1 + t**2)], rtol=1e-12)


def test_manifold_product_system():
    """A cart (x ∈ R) with a pendulum angle θ ∈ S¹: X_U is independent of the wrap of θ."""
    system = gm.LagrangianSystem(
        lambda q, v: 0.5 * 2 * v[0] ** 2 + v[0] * v[1] * jnp.cos(q[1]) + 0.5 * v[1] ** 2 + 9.81 * jnp.cos(q[1]),
        manifold=gm.Product(gm.Euclidean(1), gm.Circle()),
    )
    s1 = gm.State(jnp.array([0.1, 0.4]), jnp.array([0.3, -1.0]))
    s2 = gm.State(jnp.array([0.1, 0.4 + 2 * jnp.pi]), jnp.array([0.3, -1.0]))
    np.testing.assert_allclose(gm.acceleration(system, s1), gm.acceleration(system, s2), rtol=1e-12)
    with pytest.raises(ValueError, match="dimension 2"):
        gm.acceleration(system, gm.State(jnp.ones(3), jnp.ones(3)))


def test_a_system_called_again_is_not_traced_again_before_its_run(monkeypatch):
    """`check_shapes` traces the user's functions once per system structure and state shapes (its
    result is kept as `eqx.filter_jit` keeps a program): a second `simulate` of the same system
    traces nothing before its run; a new function, new shapes or a failing check are checked
    anew."""
    traced = []
    trace = gm.LagrangianSystem._function_shapes
    monkeypatch.setattr(
        gm.LagrangianSystem, "_function_shapes", lambda s, *a: traced.append(1) or trace(s, *a)
    )
    L = lambda q, v: 0.5 * v @ v - q @ jnp.array([0.0, 0.0, 1.0])
    phi = lambda q, v: jnp.atleast_1d(v[1] - q[0] * v[2])
    system = gm.LagrangianSystem(L, constraint=gm.Constraint(phi))
    y0 = gm.State(jnp.array([0.1, 0.2, 0.3]), jnp.array([1.0, 0.05, 0.5]))
    run = lambda s, y: gm.simulate(s, y, 0.0, 0.1, saveat=diffrax.SaveAt(t1=True))
    first = run(system, y0)
    assert len(traced) == 1
    again = run(system, y0)
    np.testing.assert_array_equal(again.states.v, first.states.v)
    assert system.check_shapes(y0) == 1 and len(traced) == 1
    # a batch is checked on its member (the same shapes); another dtype is checked once
    batch = jax.tree_util.tree_map(lambda x: jnp.stack([x, x]), y0)
    np.testing.assert_array_equal(run(system, batch).states.v[0], first.states.v)
    assert len(traced) == 1
    y0_32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), y0)
    assert system.check_shapes(y0_32) == 1 and len(traced) == 2
    assert system.check_shapes(y0_32) == 1 and len(traced) == 2
    # the same functions in a new system are the same key; another function is checked, and a
    # failing check raises every time
    assert gm.LagrangianSystem(L, constraint=gm.Constraint(phi)).check_shapes(y0) == 1
    assert len(traced) == 2
    wrong = gm.LagrangianSystem(lambda q, v: v, constraint=gm.Constraint(phi))
    for _ in range(2):
        with pytest.raises(ValueError, match="the Lagrangian"):
            wrong.check_shapes(y0)
    bad_state = gm.State(jnp.zeros(2), jnp.zeros(2))
    for _ in range(2):
        with pytest.raises(ValueError, match="failed on a state with n = 2"):
            system.check_shapes(bad_state)
    assert len(traced) == 6
