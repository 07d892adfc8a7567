"""Non-ideal constraints with known work (thesis §5.2): F^c(u) = F^0(u) on W, (5.41)–(5.44)."""

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from random_systems import random_case

import geomech as gm


@pytest.mark.parametrize("generalized", [True, False])
@pytest.mark.parametrize("seed", [40, 41])
def test_known_work_on_W(seed, generalized):
    """$F^c(u) = F^0(u)$ on $\\mathcal{W}$, $A a = b$ and Cor. 1' (5.43) $\\tau^{-1}(X_R - X_{\\bar U}) \\in
    \\mathcal{W}^\\perp$, with $M$, $a_{\\bar U} = M^{-1}(Q + F^0)$, $A$, $b$ and a basis $E$ of $\\mathcal{W}$ from
    the independent reference (`reference.py`); and $a_R$ equal to the reference's."""
    base, s, t, problem, _ = random_case(seed, generalized=generalized)
    F0 = lambda q, v: jnp.sin(q) * (1.0 + v @ v)
    system = eqx.tree_at(lambda sy: sy.known_work, base, F0, is_leaf=lambda x: x is None)
    problem = eqx.tree_at(
        lambda p: p.known_work, problem, lambda t, q, v: F0(q, v), is_leaf=lambda x: x is None
    )
    R = ref.solve(problem, np.array([t]), s.q[None], s.v[None])[0]
    Fc = gm.constraint_force(system, s, t=t)
    a = gm.acceleration(system, s, t=t)
    np.testing.assert_allclose(a, R.a, rtol=ref.TOL)
    scale = np.linalg.norm(R.Fc)
    np.testing.assert_allclose(Fc @ R.E, R.F0 @ R.E, atol=ref.TOL * scale)
    np.testing.assert_allclose(R.A @ a, R.b, atol=ref.TOL * np.linalg.norm(R.b))  # the constraints hold
    a_Ubar = R.a_U + np.linalg.solve(R.M, R.F0)
    np.testing.assert_allclose(R.E.T @ R.M @ (a - a_Ubar), 0.0, atol=ref.TOL * scale)  # (5.43)
    # and the motion differs from the ideal one
    assert jnp.linalg.norm(a - gm.acceleration(base, s, t=t)) > 1e-6


def test_known_work_friction_on_incline_line():
    """A bead on the line y = x tan α with a Coulomb-like tangential force of known work −μ N sign(v)
    along W = D: the tangential acceleration is g(−sin α) − F0·û/m (closed form)."""
    m, g, alpha, mu = 2.0, 9.81, 0.4, 0.3
    u = jnp.array([jnp.cos(alpha), jnp.sin(alpha)])
    friction = lambda q, v: -mu * m * g * jnp.cos(alpha) * jnp.tanh(50 * (v @ u)) * u
    system = gm.LagrangianSystem(
        lambda q, v: 0.5 * m * v @ v - m * g * q[1],
        constraint=gm.HolonomicConstraint(lambda q: jnp.sin(alpha) * q[0] - jnp.cos(alpha) * q[1]),
        known_work=friction,
    )
    s = gm.State(jnp.array([1.0, jnp.tan(alpha)]), 2.0 * u)
    a = gm.acceleration(system, s)
    expected = -g * jnp.sin(alpha) + friction(s.q, s.v) @ u / m
    np.testing.assert_allclose(a, expected * u, rtol=1e-12, atol=1e-12)
