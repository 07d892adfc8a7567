"""Lemma 1, Lemma 2, Corollaries 1–3, projections (3.20) and D (3.10) as properties on random systems."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from random_systems import random_case, random_system

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
    c = random_case(case.pop("seed"), **case)
    st = gm.assemble(c.system, c.state, c.t)
    a_R = gm.acceleration(c.system, c.state, t=c.t)
    R = ref.solve(c.problem, np.array([c.t]), c.state.q[None], c.state.v[None])[0]
    return c.system, c.state, c.t, st, a_R, R


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def setup(request):
    return _setup(request.param)


def complement_projector(U, V):
    """The projector onto span U along span V (columns; together a basis of R^n), built from the
    two bases: $[U\\, V]\\,\\mathrm{diag}(I, 0)\\,[U\\, V]^{-1}$."""
    B = np.concatenate([U, V], 1)
    return U @ np.linalg.solve(B, np.eye(B.shape[0]))[: U.shape[1]]


def reference_projector(R):
    """$\\Pi_{\\mathcal{D}}$ of (3.20) from the reference: onto $\\mathcal{D} = \\ker A$ along
    $\\mathcal{W}^\\perp = M^{-1}\\mathcal{W}^0$ (Lemma 2), $\\mathcal{W}^0$ spanned by the rows of $C$."""
    return complement_projector(ref.null_space(R.A), np.linalg.solve(R.M, R.C.T))


def test_lemma1_X_R_tangent_to_C(setup):
    """dφ(X_R) = 0, checked by differentiating φ along X_R independently of A and b."""
    system, s, t, st, a_R, _ = setup
    phi = lambda e: system.constraint_residual(gm.State(s.q + e * s.v, s.v + e * a_R), t + e)
    np.testing.assert_allclose(jax.jacfwd(phi)(0.0), 0.0, atol=1e-11)
    np.testing.assert_allclose(st.A @ st.a_0, st.b, atol=1e-12)  # X_0 ∈ S(C)


def test_virtual_displacements(setup):
    """$\\mathcal{D} = \\ker A$ (3.10), with $A$ of the reference (finite differences of φ)."""
    _, s, _, st, _, R = setup
    N = st.D_basis
    assert N.shape == (st.n, st.n - st.k)
    np.testing.assert_allclose(R.A @ N, 0.0, atol=ref.TOL)
    np.testing.assert_allclose(N.T @ N, np.eye(st.n - st.k), atol=1e-12)


def test_projections_3_20(setup):
    """$\\Pi_{\\mathcal{D}}$ and $\\Pi_{\\mathcal{W}^\\perp}$ are the projectors of the splitting
    $T_qQ = \\mathcal{D} \\oplus \\mathcal{W}^\\perp$ (3.19)–(3.20): idempotent, $\\Pi_{\\mathcal{D}}$ is the
    identity on $\\mathcal{D}$ and zero on $\\mathcal{W}^\\perp$, $\\Pi_{\\mathcal{W}^\\perp}$ the reverse, with
    $\\mathcal{D}$, $\\mathcal{W}^\\perp = M^{-1}\\mathcal{W}^0$ from the reference's $A$, $M$, $C$; so both
    equal the projector built from those two subspaces."""
    _, _, _, st, _, R = setup
    P, Rp = np.asarray(st.Pi_D), np.asarray(st.Pi_Wperp)
    D, Wperp = ref.null_space(R.A), np.linalg.solve(R.M, R.C.T)
    for X in (P, Rp):
        np.testing.assert_allclose(X @ X, X, atol=1e-11)
    np.testing.assert_allclose(P @ D, D, atol=ref.TOL)
    np.testing.assert_allclose(P @ Wperp, 0.0, atol=ref.TOL * np.abs(Wperp).max())
    np.testing.assert_allclose(Rp @ Wperp, Wperp, atol=ref.TOL * np.abs(Wperp).max())
    np.testing.assert_allclose(Rp @ D, 0.0, atol=ref.TOL)
    np.testing.assert_allclose(P, reference_projector(R), atol=ref.TOL * np.abs(P).max())
    np.testing.assert_allclose(st.C @ st.W_basis, 0.0, atol=1e-12)


def test_corollary1_and_2(setup):
    """Cor. 1 (3.24): $\\tau^{-1}(X_R - X_U) \\in \\mathcal{W}^\\perp$;
    Cor. 2: $X_R - X_0 = \\Pi_{\\mathcal{D}}(X_U - X_0)$
    for *any* $X_0 \\in \\mathcal{S}(\\mathcal{C})$. Both with the reference's $M$, $a_U$, $\\mathcal{W}$ and its
    projector and $X_0$ the least-squares solution of $A a = b$ (so not a restatement of the
    projection formula that computes $X_R$)."""
    system, s, t, st, a_R, R = setup
    a_R = np.asarray(a_R)
    scale = np.linalg.norm(R.M @ (R.a - R.a_U))
    np.testing.assert_allclose(R.E.T @ R.M @ (a_R - R.a_U), 0.0, atol=ref.TOL * scale)
    a_0 = np.linalg.lstsq(R.A, R.b, rcond=None)[0]  # another X_0 than the library's
    Pi = reference_projector(R)
    np.testing.assert_allclose(a_R - a_0, Pi @ (R.a_U - a_0), atol=ref.TOL * np.linalg.norm(a_R))


def test_corollary3_characterizes_X_R(setup):
    """(3.25): $X \\in \\mathcal{S}(\\mathcal{C})$ equals $X_R$ iff $\\tau^{-1}(X - X_U) \\in \\mathcal{W}^\\perp$,
    i.e. $E^\\top M(X - X_U) = 0$ for a basis $E$ of $\\mathcal{W}$ (reference $M$, $a_U$, $E$): true for the
    library's $X_R$, false for another element of $\\mathcal{S}(\\mathcal{C})$."""
    _, _, _, st, a_R, R = setup
    defect = lambda a: np.linalg.norm(R.E.T @ R.M @ (a - R.a_U)) / np.linalg.norm(R.M @ (R.a - R.a_U))
    assert defect(np.asarray(a_R)) <= ref.TOL
    np.testing.assert_allclose(R.A @ a_R, R.b, atol=ref.TOL * np.linalg.norm(R.b))
    other = a_R + st.D_basis @ jnp.ones(st.n - st.k)  # another element of S(C) (Lemma 1)
    np.testing.assert_allclose(R.A @ other, R.b, atol=ref.TOL * np.linalg.norm(R.b))
    assert defect(np.asarray(other)) > 1e-3


def test_constraint_force_in_W0(setup):
    """$F^c$ and the multipliers against the reference ($F^c = M(a_R - a_U)$ of the reference's own
    $M$, $a_U$; $F^c = C^\\top\\lambda$ from its KKT solve); $F^c$ annihilates the reference's $\\mathcal{W}$."""
    system, s, t, st, _, R = setup
    Fc = gm.constraint_force(system, s, t=t)
    np.testing.assert_allclose(Fc, R.Fc, rtol=ref.TOL, atol=ref.TOL * np.linalg.norm(R.Fc))
    np.testing.assert_allclose(Fc @ R.E, 0.0, atol=ref.TOL * np.linalg.norm(R.Fc))
    np.testing.assert_allclose(gm.multipliers(system, s, t=t), R.lam, rtol=ref.TOL)


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
