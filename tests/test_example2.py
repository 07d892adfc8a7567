"""Thesis Example 2 (§3.2): two charges and a spring, a generalized nonholonomic system (W ≠ D)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm
from geomech.models import ThesisExample2

rng = np.random.default_rng(2)
STATES = [(rng.uniform(-0.5, 0.5), rng.uniform(1.5, 2.5), rng.normal()) for _ in range(4)]


@pytest.fixture(params=STATES)
def example(request):
    q1, q2, u = request.param
    model = ThesisExample2(m1=1.3, m2=0.7)
    system = model()
    q = jnp.array([q1, q2])
    A = model.A(q)
    s = gm.State(q, jnp.array([u, A * u]))  # C = {(q; u, A(q) u)}
    return model, system, s


def test_projections_3_31(example):
    model, system, s = example
    m1, m2, A = model.m1, model.m2, model.A(s.q)
    st = gm.assemble(system, s)
    den = m2 * A - m1
    u = jnp.asarray(rng.normal(size=2))
    PiD = jnp.array([(m2 * u[1] - m1 * u[0]) / den, A * (m2 * u[1] - m1 * u[0]) / den])
    PiWp = jnp.array([m2 * (A * u[0] - u[1]) / den, m1 * (A * u[0] - u[1]) / den])
    np.testing.assert_allclose(st.project_D(u), PiD, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(st.project_Wperp(u), PiWp, rtol=1e-12, atol=1e-13)
    # W⊥ = {(u, m1/m2 u)} (3.30)
    w = st.Pi_Wperp @ u
    np.testing.assert_allclose(w[1], m1 / m2 * w[0], rtol=1e-12)


def test_Y_R_closed_form(example):
    model, system, s = example
    m1, m2 = model.m1, model.m2
    A = model.A(s.q)
    r = s.q[1] - s.q[0]
    dU = model.kappa * (r - model.a) - model.coulomb / r**2  # ∂U/∂q² = -∂U/∂q¹
    a_U = jnp.array([dU / m1, -dU / m2])  # Y_U = -(∂₁U/m1, ∂₂U/m2)
    np.testing.assert_allclose(gm.unconstrained_acceleration(system, s), a_U, rtol=1e-12)
    dA = jnp.array([0.2 * jnp.cos(s.q[0]), -0.1 * jnp.sin(s.q[1])])  # ∂A/∂q of the default A
    np.testing.assert_allclose(jax.grad(model.A)(s.q), dA, rtol=1e-14)
    b = (dA @ s.v) * s.v[0]  # (3.29): b = ∂A/∂q¹ v¹v¹ + ∂A/∂q² v²v¹
    Y_R = (m1 * a_U[0] + m2 * (b - a_U[1])) / (m1 - m2 * A)
    a_R = gm.acceleration(system, s)
    np.testing.assert_allclose(a_R, [Y_R, A * Y_R + b], rtol=1e-12, atol=1e-12)
    assert abs(dA[0]) + abs(dA[1]) > 1e-3  # A(q) is genuinely non-constant here


@pytest.mark.parametrize(
    "work_space",
    [gm.Subspace(basis=jnp.array([1.0, -1.0])), gm.Subspace(annihilator=jnp.array([1.0, 1.0]))],
    ids=["one_basis_vector", "one_annihilator_row"],
)
def test_W_given_by_one_vector(work_space):
    """$\\mathcal{W} = \\mathrm{span}\\{(1, -1)\\}$ given as a single (1-D) basis vector, or
    $\\mathcal{W}^0$ as a single (1-D) row $(1, 1)$: the same $Y_R$ (3.29) as the model's own
    annihilator, on and off $\\mathcal{C}$."""
    model = ThesisExample2(m1=1.3, m2=0.7)
    system = model()
    other = eqx.tree_at(lambda sy: sy.work_space, system, work_space)
    q1, q2, u = STATES[0]
    q = jnp.array([q1, q2])
    for v in (jnp.array([u, model.A(q) * u]), jnp.array([u, 0.3])):  # on and off C
        s = gm.State(q, v)
        # the model's annihilator gives the closed form (`test_Y_R_closed_form`)
        a = gm.acceleration(system, s)
        np.testing.assert_allclose(gm.acceleration(other, s), a, rtol=1e-12)


def test_constraint_force_is_eE_dq1_plus_dq2(example):
    _, system, s = example
    Fc = gm.constraint_force(system, s)
    np.testing.assert_allclose(Fc @ jnp.array([1.0, -1.0]), 0.0, atol=1e-12)  # annihilates W
    np.testing.assert_allclose(Fc[0], Fc[1], rtol=1e-12)  # F^c = eE (dq¹ + dq²)
    assert abs(Fc[0]) > 1e-6


def test_condition_3_19_fails_when_A_equals_m1_over_m2():
    model = eqx.tree_at(lambda m: m.A, ThesisExample2(m1=1.0, m2=2.0), lambda q: 0.5 + 0.0 * q[0])
    s = gm.State(jnp.array([0.0, 2.0]), jnp.array([1.0, 0.5]))
    with pytest.raises(Exception, match=r"\(3.19\)"):
        gm.acceleration(model(), s)
