"""The independent reference of `reference.py` is itself right: its finite differences against
autodiff of the same functions (the accuracy that sets `reference.TOL`), and its accelerations
against closed forms of the seeds, on and off the constraint manifold. Nothing of `geomech` is
called here (the random systems are only used for their user functions)."""

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from random_systems import perturbed_states, random_case


def autodiff_stages(problem, t, q, v):
    """$M$, $Q$, $A$, $b$ of `problem` at one state by JAX autodiff (the formulas of the
    `reference.py` docstring)."""
    L = problem.lagrangian
    M = jax.hessian(L, argnums=2)(t, q, v)
    dLdv = jax.grad(L, argnums=2)
    mixed = jax.jvp(lambda t_, q_: dLdv(t_, q_, v), (t, q), (jnp.ones_like(t), v))[1]
    Q = jax.grad(L, argnums=1)(t, q, v) - mixed
    if problem.force is not None:
        Q = Q + problem.force(t, q, v)
    As, bs = [], []
    for c in problem.constraints:
        if isinstance(c, ref.Velocity):
            As.append(jnp.atleast_2d(jax.jacfwd(c.phi, argnums=2)(t, q, v)))
            phi_t = functools.partial(lambda phi, t_, q_: phi(t_, q_, v), c.phi)
            bs.append(-jnp.atleast_1d(jax.jvp(phi_t, (t, q), (1.0 + 0 * t, v))[1]))
        else:
            As.append(jnp.atleast_2d(jax.jacfwd(c.h, argnums=1)(t, q)))
            h_s = functools.partial(lambda h, s: h(t + s, q + s * v), c.h)
            bs.append(-jnp.atleast_1d(jax.jacfwd(jax.jacfwd(h_s))(0.0 * t)))
    return M, Q, jnp.concatenate(As), jnp.concatenate(bs)


RANDOM = {
    "generalized_time_dependent": dict(time_dependent=True),
    "ideal_symmetric": dict(generalized=False, symmetric=True),
    "mixed": dict(
        n=5,
        k=3,
        holonomic=True,
        affine=True,
        work_space="basis",
        time_dependent=True,
        known_work=True,
    ),
}


@pytest.mark.parametrize("name", list(RANDOM))
def test_finite_differences_accuracy(name):
    """$M$, $Q$, $A$, $b$ and $a_R$ of the reference agree with autodiff to about $10^{-10}$
    (relative), two orders below `reference.TOL`; the three textbook formulas agree to round-off."""
    c = random_case(7, **RANDOM[name])
    states, ts = perturbed_states(c.state, c.t, 4, seed=1)
    R = ref.solve(c.problem, ts, states.q, states.v)
    M, Q, A, b = jax.jit(jax.vmap(lambda t, q, v: autodiff_stages(c.problem, t, q, v)))(
        ts, states.q, states.v
    )
    for x, y in ((R.M, M), (R.Q, Q), (R.A, A), (R.b, b)):
        S = len(ts)
        assert np.all(ref.rel_err(x.reshape(S, -1), np.asarray(y).reshape(S, -1)) <= 1e-9)
    # a_R from the autodiff stages by the KKT system
    K = np.block(
        [
            [np.asarray(M), -np.swapaxes(R.C, 1, 2)],
            [np.asarray(A), np.zeros(R.lam.shape + R.lam.shape[-1:])],
        ]
    )
    x = np.linalg.solve(K, np.concatenate([np.asarray(Q) + R.F0, np.asarray(b)], 1)[..., None])[
        ..., 0
    ]
    assert np.all(ref.rel_err(R.a, x[:, : M.shape[1]]) <= 1e-9)
    assert np.all(ref.rel_err(R.a_uk, R.a_kkt) <= 1e-12)
    assert np.all(ref.rel_err(R.a_dalembert, R.a_kkt) <= 1e-12)
    assert np.all(
        np.max(np.abs(R.C @ R.E), axis=(1, 2)) <= 1e-12 * np.max(np.abs(R.C))
    )  # E spans W = ker C


def _tq(f):
    return lambda t, q, v: f(q, v)


def test_pendulum_closed_form_on_and_off_C():
    """[Zanella] §1.1 ($x$ down): $A a = b$ with $A \\propto q$, $b \\propto -|v|^2$ and the force
    along $q$ give $a = g\\hat x - (|v|^2 + g x)\\,q/|q|^2$, on $\\mathcal{C}$ (the tension law) and
    off it; the
    multiplier of the holonomic row $h = |q|^2 - l^2$ is $-(|v|^2 + g x)/(2|q|^2)$ times $m$."""
    m, g, l = 1.3, 9.81, 1.7
    L = lambda q, v: 0.5 * m * v @ v + m * g * q[0]
    holonomic = ref.Problem(_tq(L), (ref.Position(lambda t, q: q @ q - l**2),))
    linear = ref.Problem(_tq(L), (ref.Velocity(lambda t, q, v: jnp.atleast_1d(q @ v)),))
    rng = np.random.default_rng(0)
    th = rng.uniform(-3, 3, 5)
    q = (
        l * np.stack([np.cos(th), np.sin(th)], 1) * np.array([[1.0]] * 3 + [[1.1], [0.8]])
    )  # 2 off C
    v = rng.normal(size=(5, 2))
    lam = (np.sum(v**2, 1) + g * q[:, 0]) / np.sum(q**2, 1)
    a = np.array([g, 0.0]) - lam[:, None] * q
    for problem, scale in ((holonomic, 0.5), (linear, 1.0)):
        R = ref.solve(problem, np.zeros(5), q, v)
        assert np.all(ref.rel_err(R.a, a) <= 1e-10)
        np.testing.assert_allclose(R.lam[:, 0], -m * scale * lam, rtol=1e-9)


def _example2(m1=2.0, m2=1.0, kappa=3.0, a0=1.0, coulomb=0.5, F0=None):
    """Thesis Example 2 (§3.2) with the errata of `geomech.models.ThesisExample2`, written out."""
    A = lambda q: 0.3 + 0.2 * jnp.sin(q[0]) + 0.1 * jnp.cos(q[1])

    def L(t, q, v):
        r = q[1] - q[0]
        return 0.5 * (m1 * v[0] ** 2 + m2 * v[1] ** 2) - 0.5 * kappa * (r - a0) ** 2 - coulomb / r

    def closed_form(q, v, F):
        """(3.29) and $Y_R$ by hand: $m_1(a^1 - Y^1) - F^1 = m_2(a^2 - Y^2) - F^2$
        ($F^c - F^0 \\propto (1, 1)$) with $a^2 = A a^1 + (\\partial A \\cdot v) v^1$."""
        r = q[1] - q[0]
        dU = kappa * (r - a0) - coulomb / r**2  # ∂U/∂q², = -∂U/∂q¹
        Y = np.array([dU / m1, -dU / m2])
        Aq = 0.3 + 0.2 * np.sin(q[0]) + 0.1 * np.cos(q[1])
        b = (0.2 * np.cos(q[0]) * v[0] - 0.1 * np.sin(q[1]) * v[1]) * v[0]
        a1 = (m1 * Y[0] + F[0] + m2 * (b - Y[1]) - F[1]) / (m1 - m2 * Aq)
        return np.array([a1, Aq * a1 + b])

    problem = ref.Problem(
        L,
        (ref.Velocity(lambda t, q, v: jnp.atleast_1d(A(q) * v[0] - v[1])),),
        annihilator=lambda t, q, v: jnp.ones((1, 2)),
        known_work=F0,
    )
    return problem, closed_form


@pytest.mark.parametrize("known_work", [False, True])
def test_thesis_example2_closed_form(known_work):
    """$\\mathcal{W} \\ne \\mathcal{D}$: thesis Example 2's $Y_R$ (3.29), with known work too, on
    and off $\\mathcal{C}$."""
    F0 = (
        (lambda t, q, v: jnp.array([0.3 * jnp.sin(q[0]), -0.2 * v[1] ** 2])) if known_work else None
    )
    problem, closed_form = _example2(F0=F0)
    rng = np.random.default_rng(1)
    q = np.stack([rng.uniform(-0.5, 0.5, 4), rng.uniform(1.5, 2.5, 4)], 1)
    v = rng.normal(size=(4, 2))
    R = ref.solve(problem, np.zeros(4), q, v)
    F = R.F0 if known_work else np.zeros((4, 2))
    a = np.stack([closed_form(q[i], v[i], F[i]) for i in range(4)])
    assert np.all(ref.rel_err(R.a, a) <= 1e-9)
    assert np.abs(F).max() > 0.1 or not known_work


def test_known_work_incline_closed_form():
    """A bead on the line $y = x\\tan\\alpha$ with a tangential friction force of known work
    (W = D, the Udwadia–Kalaba formula with $F^0$):
    $a = (-g\\sin\\alpha + F^0\\cdot\\hat u/m)\\,\\hat u$."""
    m, g, alpha, mu = 2.0, 9.81, 0.4, 0.3
    u = np.array([np.cos(alpha), np.sin(alpha)])
    friction = lambda t, q, v: -mu * m * g * np.cos(alpha) * jnp.tanh(5 * (v @ u)) * u
    problem = ref.Problem(
        lambda t, q, v: 0.5 * m * v @ v - m * g * q[1],
        (ref.Position(lambda t, q: jnp.atleast_1d(np.sin(alpha) * q[0] - np.cos(alpha) * q[1])),),
        known_work=friction,
    )
    s = np.array([0.3, -1.0, 2.0])
    q, v = np.stack([1.0 * u] * 3), s[:, None] * u
    R = ref.solve(problem, np.zeros(3), q, v)
    a = (-g * np.sin(alpha) + np.sum(R.F0 * u, 1) / m)[:, None] * u
    assert np.all(ref.rel_err(R.a, a) <= 1e-10)


def test_rheonomic_pendulum_closed_form():
    """Time dependence: $h(t, q) = |q|^2 - l(t)^2$, $l(t) = 1.3 + 0.2\\sin 1.7t$; the radial force
    is
    $F_r = m(\\ddot l - l\\dot\\theta^2) - m g\\cos\\theta$ ($x$ down)."""
    m, g = 1.7, 9.81
    ell = lambda t: 1.3 + 0.2 * jnp.sin(1.7 * t)
    problem = ref.Problem(
        lambda t, q, v: 0.5 * m * v @ v + m * g * q[0],
        (ref.Position(lambda t, q: jnp.atleast_1d(q @ q - ell(t) ** 2)),),
    )
    t, th, w = np.array([0.7, 2.1]), np.array([0.4, -1.0]), np.array([0.9, -0.3])
    l, ldot, lddot = 1.3 + 0.2 * np.sin(1.7 * t), 0.34 * np.cos(1.7 * t), -0.578 * np.sin(1.7 * t)
    rhat, that = np.stack([np.cos(th), np.sin(th)], 1), np.stack([-np.sin(th), np.cos(th)], 1)
    R = ref.solve(problem, t, l[:, None] * rhat, ldot[:, None] * rhat + (l * w)[:, None] * that)
    F_r = m * (lddot - l * w**2) - m * g * np.cos(th)
    assert np.all(ref.rel_err(R.Fc, F_r[:, None] * rhat) <= 1e-9)
