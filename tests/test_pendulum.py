"""[Zanella]'s Cartesian pendulum (x down, gravity +g x̂) and a rheonomic pendulum of varying length."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm
from geomech.models import CartesianPendulum

M_, L_, G_ = 1.7, 1.3, 9.81


def _state(theta, omega, l=L_):
    q = l * jnp.array([jnp.cos(theta), jnp.sin(theta)])
    v = l * omega * jnp.array([-jnp.sin(theta), jnp.cos(theta)])
    return gm.State(q, v)


@pytest.mark.parametrize("form", ["holonomic", "linear"])
@pytest.mark.parametrize("theta,omega", [(0.3, 1.1), (2.5, -0.4), (-1.2, 2.0)])
def test_tension_closed_form(form, theta, omega):
    """F^c = -T r̂ with T = m(|v|²/l + g x/l) ([Zanella] §4.1, x down)."""
    system = CartesianPendulum(m=M_, l=L_, g=G_, form=form)()
    s = _state(theta, omega)
    T = M_ * ((s.v @ s.v) / L_ + G_ * s.q[0] / L_)
    Fc = gm.constraint_force(system, s)
    np.testing.assert_allclose(Fc, -T * s.q / L_, rtol=1e-12, atol=1e-12)
    # the multiplier depends on the row's scaling: ∇h = 2q, [Zanella]'s row is q
    lam = gm.multipliers(system, s)
    np.testing.assert_allclose(lam, [-T / L_ / (2.0 if form == "holonomic" else 1.0)], rtol=1e-12)
    # angular equation θ̈ = -(g/l) sin θ
    a = gm.acceleration(system, s)
    theta_dd = (s.q[0] * a[1] - s.q[1] * a[0]) / L_**2
    np.testing.assert_allclose(theta_dd, -G_ / L_ * jnp.sin(theta), rtol=1e-12)


def _varying_length(t):
    return L_ + 0.2 * jnp.sin(1.7 * t)


def test_rheonomic_pendulum():
    """h(t, q) = |q|² − l(t)²: radial force F_r = m(l̈ − l θ̇²) − m g x/l, and A a_R = b includes ∂_t h."""
    system = gm.LagrangianSystem(
        lambda t, q, v: 0.5 * M_ * v @ v + M_ * G_ * q[0],
        constraint=gm.HolonomicConstraint(lambda t, q: q @ q - _varying_length(t) ** 2),
        time_dependent=True,
    )
    t, theta, omega = 0.7, 0.4, 0.9
    l = _varying_length(t)
    ldot = jax.grad(_varying_length)(t)
    lddot = jax.grad(jax.grad(_varying_length))(t)
    rhat = jnp.array([jnp.cos(theta), jnp.sin(theta)])
    that = jnp.array([-jnp.sin(theta), jnp.cos(theta)])
    s = gm.State(l * rhat, ldot * rhat + l * omega * that)
    np.testing.assert_allclose(system.constraint_residual(s, t), 0.0, atol=1e-13)
    Fc = gm.constraint_force(system, s, t=t)
    F_r = M_ * (lddot - l * omega**2) - M_ * G_ * jnp.cos(theta)
    np.testing.assert_allclose(Fc, F_r * rhat, rtol=1e-11, atol=1e-12)
    a = gm.acceleration(system, s, t=t)
    np.testing.assert_allclose(a @ rhat + l * omega**2, lddot, rtol=1e-11)  # a·r̂ = r̈ − r θ̇²
