"""jit, vmap and grad through `acceleration`, checked against eager calls and central differences."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from manifold_systems import MANIFOLDS, random_states, system_on
from random_systems import random_system

import geomech as gm


@pytest.fixture(scope="module", params=[dict(seed=50), dict(seed=51, time_dependent=True, generalized=False)])
def case(request):
    return random_system(**request.param)


def test_jit_matches_eager(case):
    """The compiled acceleration equals the same computation run op by op (`jax.disable_jit`)."""
    system, s, t = case
    with jax.disable_jit():
        eager = gm.acceleration(system, s, t=t)
    np.testing.assert_allclose(gm.acceleration(system, s, t=t), eager, rtol=1e-12)


def test_vmap_over_states(case):
    system, s, t = case
    ts = jnp.full(3, t)
    batch = jax.tree.map(lambda x: jnp.stack([x, x, x]), s)
    out = jax.vmap(lambda st, tt: gm.acceleration(system, st, t=tt))(batch, ts)
    for i in range(3):
        np.testing.assert_allclose(out[i], gm.acceleration(system, s, t=t), rtol=1e-12)
    # off-C states too (acceleration must keep working slightly off C, as inside an integrator)
    rng = np.random.default_rng(0)
    noisy = gm.State(batch.q + 1e-6 * rng.normal(size=batch.q.shape), batch.v + 1e-6 * rng.normal(size=batch.q.shape))
    out2 = jax.vmap(lambda st: gm.acceleration(system, st, t=t))(noisy)
    for i in range(3):
        st_i = jax.tree.map(lambda x, i=i: x[i], noisy)
        np.testing.assert_allclose(out2[i], gm.acceleration(system, st_i, t=t), rtol=1e-10)


def _central_fd(f, x, h=1e-6):
    x = np.asarray(x, float)
    out = []
    for i in range(x.size):
        e = np.zeros_like(x)
        e.flat[i] = h
        out.append((f(jnp.asarray(x + e)) - f(jnp.asarray(x - e))) / (2 * h))
    out = np.stack(out, axis=-1)
    return out.reshape(out.shape[:-1] + x.shape)


def test_grad_wrt_state_matches_fd(case):
    system, s, t = case
    f = lambda q: gm.acceleration(system, gm.State(q, s.v), t=t)
    J = jax.jacfwd(f)(s.q)
    np.testing.assert_allclose(J, _central_fd(f, s.q), rtol=1e-6, atol=1e-7)
    g = lambda v: gm.acceleration(system, gm.State(s.q, v), t=t)[0]
    np.testing.assert_allclose(jax.grad(g)(s.v), _central_fd(g, s.v), rtol=1e-6, atol=1e-7)


def test_grad_wrt_parameters_matches_fd(case):
    """Reverse mode w.r.t. the fields of an eqx.Module Lagrangian (mass matrix and potential)."""
    system, s, t = case
    w = jnp.asarray(np.random.default_rng(1).normal(size=s.q.shape))

    def loss(sys_):
        return w @ gm.acceleration(sys_, s, t=t) + gm.constraint_force(sys_, s, t=t) @ w

    grads = eqx.filter_grad(loss)(system)
    for leaf in ("B0", "K"):
        get = lambda sy, leaf=leaf: getattr(sy.lagrangian, leaf)
        x0 = get(system)
        fd = _central_fd(lambda x, get=get: loss(eqx.tree_at(get, system, x)), x0)
        np.testing.assert_allclose(get(grads), fd, rtol=1e-6, atol=1e-7)


def test_float32():
    system, s, t = random_system(52, force=False)  # the force closes over float64 arrays
    s32 = gm.State(s.q.astype(jnp.float32), s.v.astype(jnp.float32))
    sys32 = jax.tree.map(lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x, system)
    a32 = gm.acceleration(sys32, s32, t=t)
    assert a32.dtype == jnp.float32
    np.testing.assert_allclose(a32, gm.acceleration(system, s, t=t), rtol=1e-4, atol=1e-4)


def test_reverse_mode_through_a_jitted_batch():
    """`jax.jacrev` and `jax.jacfwd` of a jitted batched `simulate` whose Lagrangian closes over
    the parameter (the members share it; inside `jax.jit` the mode is not known, so the solve
    serves both, `_adjoint.ForwardOrReverse`): the derivative without `jax.jit`, and central
    differences."""

    def f(k):
        system = gm.LagrangianSystem(lambda q, v: 0.5 * v @ v - k * q[0] ** 2)
        y0 = gm.State(jnp.array([[1.0], [0.5]]), jnp.array([[0.0], [0.1]]))
        sol = gm.simulate(system, y0, 0.0, 1.0)
        return jnp.stack([jnp.sum(sol.states.q), jnp.sum(sol.states.v)])

    k, h = 0.3, 1e-6
    eager, jitted = jax.jacrev(f)(k), jax.jacrev(jax.jit(f))(k)
    np.testing.assert_allclose(jitted, eager, rtol=1e-12)
    np.testing.assert_allclose(eager, (f(k + h) - f(k - h)) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(jax.jacfwd(jax.jit(f))(k), eager, rtol=1e-10)


@pytest.mark.parametrize("name", MANIFOLDS)
def test_acceleration_derivatives_on_every_manifold(name):
    """On each manifold (`manifold_systems.py`): `jax.jacfwd` and `jax.grad` of `gm.acceleration`
    by a parameter (a scale of $M$) and by the velocity agree with each other and with central
    differences."""
    state = random_states(system_on(name), seed=9, count=1)[0]

    def a(scale, v):
        return gm.acceleration(system_on(name, mass_scale=scale), gm.State(state.q, v))

    s0, h = 1.3, 1e-6
    J_s, J_v = jax.jit(jax.jacfwd(a, argnums=(0, 1)))(s0, state.v)
    central_s = (a(s0 + h, state.v) - a(s0 - h, state.v)) / (2 * h)
    n = state.v.shape[0]
    central_v = jnp.stack([(a(s0, state.v + h * e) - a(s0, state.v - h * e)) / (2 * h) for e in jnp.eye(n)], 1)
    scale = float(jnp.max(jnp.abs(central_v))) + float(jnp.max(jnp.abs(central_s)))
    assert scale > 1e-2
    np.testing.assert_allclose(J_s, central_s, atol=1e-7 * scale)
    np.testing.assert_allclose(J_v, central_v, atol=1e-7 * scale)
    g = jax.jit(jax.grad(lambda s, v: a(s, v)[-1], argnums=(0, 1)))(s0, state.v)
    np.testing.assert_allclose(g[0], J_s[-1], rtol=1e-12, atol=1e-14 * scale)
    np.testing.assert_allclose(g[1], J_v[-1], rtol=1e-12, atol=1e-14 * scale)
