"""Lemma 1, Lemma 2, Corollaries 1–3, projections (3.20) and D (3.10) as properties on random systems."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from random_systems import random_system

import geomech as gm

CASES = [
    dict(seed=10, generalized=True),
    dict(seed=11, generalized=True, time_dependent=True),
    dict(seed=12, generalized=False),
    dict(seed=13, generalized=True, n=5, k=1),
    dict(seed=14, generalized=True, n=5, k=3, time_dependent=True),
]


def _setup(case):
    case = dict(case)
    system, s, t = random_system(case.pop("seed"), **case)
    st = gm.assemble(system, s, t)
    a_R = gm.acceleration(system, s, t=t)
    return system, s, t, st, a_R


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def setup(request):
    return _setup(request.param)


def test_lemma1_X_R_tangent_to_C(setup):
    """dφ(X_R) = 0, checked by differentiating φ along X_R independently of A and b."""
    system, s, t, st, a_R = setup
    phi = lambda e: system.constraint_residual(gm.State(s.q + e * s.v, s.v + e * a_R), t + e)
    np.testing.assert_allclose(jax.jacfwd(phi)(0.0), 0.0, atol=1e-11)
    np.testing.assert_allclose(st.A @ st.a_0, st.b, atol=1e-12)  # X_0 ∈ S(C)


def test_virtual_displacements(setup):
    _, s, _, st, _ = setup
    N = st.D_basis
    assert N.shape == (st.n, st.n - st.k)
    np.testing.assert_allclose(st.A @ N, 0.0, atol=1e-12)
    np.testing.assert_allclose(N.T @ N, np.eye(st.n - st.k), atol=1e-12)


def test_projections_3_20(setup):
    _, _, _, st, _ = setup
    P, R, I = st.Pi_D, st.Pi_Wperp, np.eye(st.n)
    np.testing.assert_allclose(P @ P, P, atol=1e-11)
    np.testing.assert_allclose(P + R, I, atol=1e-12)
    np.testing.assert_allclose(st.A @ P, 0.0, atol=1e-11)  # range Π_D = D
    np.testing.assert_allclose(st.W_basis.T @ st.M @ R, 0.0, atol=1e-11)  # range Π_W⊥ = W⊥
    np.testing.assert_allclose(st.C @ st.W_basis, 0.0, atol=1e-12)


def test_corollary1_and_2(setup):
    _, _, _, st, a_R = setup
    # Corollary 1 (3.24): τ⁻¹(X_R − X_U) ∈ W⊥
    np.testing.assert_allclose(st.W_basis.T @ st.M @ (a_R - st.a_U), 0.0, atol=1e-11)
    # Corollary 2: X_R − X_0 = Π_D(X_U − X_0)
    np.testing.assert_allclose(a_R - st.a_0, st.Pi_D @ (st.a_U - st.a_0), atol=1e-11)


def test_corollary3_characterizes_X_R(setup):
    """(3.25): X ∈ S(C) equals X_R iff X = X_U + Π_W⊥(X − X_U)."""
    _, _, _, st, a_R = setup
    np.testing.assert_allclose(a_R, st.a_U + st.Pi_Wperp @ (a_R - st.a_U), atol=1e-11)
    other = a_R + st.D_basis @ jnp.ones(st.n - st.k)  # another element of S(C) (Lemma 1)
    np.testing.assert_allclose(st.A @ other, st.b, atol=1e-11)
    assert jnp.linalg.norm(other - (st.a_U + st.Pi_Wperp @ (other - st.a_U))) > 1e-3


def test_constraint_force_in_W0(setup):
    system, s, t, st, a_R = setup
    Fc = gm.constraint_force(system, s, t=t)
    np.testing.assert_allclose(Fc @ st.W_basis, 0.0, atol=1e-11)
    np.testing.assert_allclose(st.M @ a_R, st.Q + Fc, rtol=1e-12, atol=1e-12)  # M a = Q + F^c
    np.testing.assert_allclose(st.C.T @ gm.multipliers(system, s, t=t), Fc, atol=1e-11)


@pytest.mark.parametrize("seed", [20, 21])
def test_lemma2(seed):
    """F ∈ S⁰ ⇔ τ⁻¹ X_F ∈ S⊥ (3.18), for a random subspace S and X_F from ω_L."""
    system, s, t = random_system(seed)
    rng = np.random.default_rng(seed)
    n = s.q.shape[0]
    omega = system.lagrangian_two_form(s, t)
    M = system.mass_matrix(s, t)
    S = jnp.asarray(rng.normal(size=(n, 2)))
    annihilator = gm._linalg.null_space(S.T)  # columns: covectors vanishing on S
    F = annihilator @ jnp.asarray(rng.normal(size=n - 2))
    XF = omega.sharp(jnp.concatenate([F, jnp.zeros(n)]))
    np.testing.assert_allclose(S.T @ M @ gm.vertical_lift_inverse(XF), 0.0, atol=1e-11)
    G = F + S[:, 0]  # not in S⁰
    XG = omega.sharp(jnp.concatenate([G, jnp.zeros(n)]))
    assert jnp.linalg.norm(S.T @ M @ gm.vertical_lift_inverse(XG)) > 1e-3


def test_subspace_basis_or_annihilator_same_dynamics():
    system, s, t = random_system(30)
    C = system.work_space.annihilator(s.q, s.v)
    E = gm._linalg.null_space(C)
    by_basis = eqx.tree_at(lambda sy: sy.work_space, system, gm.Subspace(basis=lambda q, v: E))
    const = eqx.tree_at(lambda sy: sy.work_space, system, gm.Subspace(annihilator=C))
    a = gm.acceleration(system, s, t=t)
    np.testing.assert_allclose(gm.acceleration(by_basis, s, t=t), a, rtol=1e-11)
    np.testing.assert_allclose(gm.acceleration(const, s, t=t), a, rtol=1e-11)


def test_stacked_constraints():
    """A holonomic and a linear constraint stacked = one Constraint with both rows."""
    L = lambda q, v: 0.5 * v @ v - q[2]
    h = gm.HolonomicConstraint(lambda q: q @ q - 1.0)
    lin = gm.LinearConstraint(lambda q: jnp.array([[0.0, 1.0, -q[0]]]))
    stacked = gm.LagrangianSystem(L, constraint=gm.Constraint.stack([h, lin]))
    joint = gm.LagrangianSystem(
        L, constraint=gm.Constraint(lambda q, v: jnp.array([2 * q @ v, v[1] - q[0] * v[2]]))
    )
    also = gm.LagrangianSystem(L, constraint=h & lin)
    q = jnp.array([0.6, 0.0, 0.8])
    v = jnp.array([-0.8, 0.3, 0.6])
    v = v - (v @ q) * q  # q·v = 0 (|q| = 1)
    v = v.at[1].set(q[0] * v[2])  # v1 = q0 v2; keeps q·v = 0 since q1 = 0
    s = gm.State(q, v)
    np.testing.assert_allclose(stacked.constraint_residual(s), 0.0, atol=1e-15)
    np.testing.assert_allclose(gm.acceleration(stacked, s), gm.acceleration(joint, s), rtol=1e-12)
    np.testing.assert_allclose(gm.acceleration(also, s), gm.acceleration(joint, s), rtol=1e-12)
    np.testing.assert_allclose(stacked.position_residual(s), [q @ q - 1.0], atol=1e-15)
    assert joint.position_residual(s).shape == (0,)
