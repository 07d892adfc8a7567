"""The Udwadia–Kalaba decomposition $F^c = F^c_{id} + F^c_{ni}$ (thesis §5.1) and its properties.

Non-ideal constraints with known work on $\\mathcal{D}$ ($\\mathcal{W} = \\mathcal{D}$, $F^c(u) = F^0(u)$ on
$\\mathcal{D}$), on a seeded random system (nonlinear constraints, gyroscopic terms, external force).
"""

import functools

import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from helpers import rel_close
from random_systems import random_case

import geomech as gm


def F0(q, v):
    return 0.5 * jnp.tanh(q) - 0.3 * v + 0.1


def with_known_work(system, F):
    return gm.LagrangianSystem(
        system.lagrangian, force=system.force, constraint=system.constraint,
        work_space=system.work_space, known_work=F,
    )


@eqx.filter_jit
def _solve(system, ideal, state, t):
    stages = gm.assemble(system, state, t)
    a_R = gm.Projection().acceleration(stages)
    Fc = stages.M @ (a_R - stages.a_U)
    ideal_stages = gm.assemble(ideal, state, t)
    a_ideal = gm.Projection().acceleration(ideal_stages)
    return stages, a_R, Fc, gm.udwadia_kalaba(system, state, t=t), ideal_stages, a_ideal


@functools.cache
def systems(generalized=False):
    """`(system with known work F^0, the same system with ideal constraints, state, t)`."""
    ideal, state, t, _, _ = random_case(5, generalized=generalized)
    return with_known_work(ideal, F0), ideal, state, t


@functools.cache
def reference():
    """The independent reference (`reference.py`) of the ideal-W system with known work."""
    _, state, t, problem, _ = random_case(5, generalized=False)
    problem = eqx.tree_at(
        lambda p: p.known_work, problem, lambda t, q, v: F0(q, v), is_leaf=lambda x: x is None
    )
    return ref.solve(problem, jnp.array([t]), state.q[None], state.v[None])[0]


@functools.cache
def solved(generalized=False):
    return _solve(*systems(generalized))


def small(x, scale, tol=1e-12):
    return float(jnp.linalg.norm(x)) <= tol * float(scale)


def test_invariant_form_equals_pseudo_inverse_form():
    """(5.28)–(5.29) equal (5.10)–(5.11) with $B = A M^{-1/2}$ and the Moore–Penrose $B^+$, all
    of $M$, $A$, $F^c$ on the right from the independent reference (finite differences, NumPy)."""
    _, _, Fc, (F_id, F_ni), _, _ = solved()
    R = reference()
    w, V = np.linalg.eigh(R.M)
    Mh, Mmh = V @ np.diag(np.sqrt(w)) @ V.T, V @ np.diag(1 / np.sqrt(w)) @ V.T
    B = R.A @ Mmh  # (5.9)
    P = np.linalg.pinv(B) @ B
    assert rel_close(F_id, Mh @ P @ Mmh @ R.Fc, tol=ref.TOL)  # (5.10)
    assert rel_close(F_ni, Mh @ (np.eye(len(w)) - P) @ Mmh @ R.Fc, tol=ref.TOL)  # (5.11)
    assert rel_close(F_id + F_ni, Fc)  # (5.8)


def test_P1_P2():
    """P1: $F^c_{id}$ does no work on $\\mathcal{D}$ and $M^{-1}F^c_{ni} \\in \\mathcal{D}$.
    P2: $\\langle F^c_{id}, F^c_{ni}\\rangle_{M^{-1}} = 0$ (5.27)."""
    stages, _, Fc, (F_id, F_ni), _, _ = solved()
    scale = jnp.linalg.norm(Fc) * (1 + jnp.linalg.norm(stages.A))
    assert small(stages.D_basis.T @ F_id, scale)
    assert small(stages.A @ stages.solve_M(F_ni), scale)
    assert small(F_id @ stages.solve_M(F_ni), jnp.linalg.norm(Fc) ** 2)
    assert float(jnp.linalg.norm(F_ni)) > 1e-3 * float(jnp.linalg.norm(Fc))  # non-ideal indeed


def test_P3_gauss_for_non_ideal_constraints():
    """P3: among the forces $G$ with which $M^{-1}(Q + F^c_{ni} + G)$ satisfies the constraints,
    $F^c_{id}$ has the least $\\|\\cdot\\|_{M^{-1}}$ (and is the only one in $\\mathcal{D}^0$)."""
    stages, _, Fc, (F_id, F_ni), _, _ = solved()
    norm2 = lambda G: G @ stages.solve_M(G)
    allowed = lambda G: stages.A @ stages.solve_M(stages.Q + F_ni + G)
    assert rel_close(allowed(F_id), stages.b)
    rng = np.random.default_rng(0)
    for s in (1e-3, 1.0):
        G = F_id + stages.M @ stages.D_basis @ jnp.asarray(s * rng.normal(size=stages.n - stages.k))
        assert rel_close(allowed(G), stages.b)
        assert norm2(G) > norm2(F_id)
    # G = Aᵀμ ∈ D⁰ is allowed for exactly one μ, giving F_id
    S = stages.A @ stages.solve_M(stages.A.T)
    mu = jnp.linalg.solve(S, stages.b - stages.A @ stages.solve_M(stages.Q + F_ni))
    assert rel_close(stages.A.T @ mu, F_id)


def test_properties_1_2_3():
    """Property 1: $X_R = X_R^{id} + X_{F^c_{ni}}$. Property 2: any $\\tilde F$ with the same work as $F^c$
    on $\\mathcal{D}$ (e.g. $F^0$, or $F^c + A^\\top\\mu$) gives the same $F_{ni}$. Property 3: $X_R^{id}$ is
    the classical Gauss minimizer."""
    stages, a_R, Fc, (F_id, F_ni), ideal_stages, a_id = solved()
    system, _, state, t = systems()
    assert rel_close(a_R, a_id + stages.solve_M(F_ni))  # (5.39)
    assert not rel_close(a_R, a_id, tol=1e-3)
    F0_here = stages.F0
    assert small(stages.D_basis.T @ (F0_here - Fc), jnp.linalg.norm(Fc))  # F^0 has the work of F^c on D
    for F_tilde in (F0_here, Fc + stages.A.T @ jnp.array([0.7, -1.3])):
        _, F_ni_tilde = gm.udwadia_kalaba(system, state, F_tilde, t=t)
        assert rel_close(F_ni_tilde, F_ni)
        assert rel_close(a_R, a_id + stages.solve_M(F_ni_tilde))  # (5.40)
    a_gauss, _ = stages.solve_saddle(stages.M, stages.A, stages.Q)  # min ||a - a_U||_M on A a = b
    assert rel_close(a_gauss, a_id)


def test_observation19():
    """$\\Pi^{id}_{\\mathcal{D}}(\\beta(\\alpha)) = \\beta(P_{\\beta^{-1}\\mathcal{D}}(\\alpha))$ with
    $\\beta = M^{-1}$ and
    $\\Pi^{id}_{\\mathcal{D}}$ the $M$-orthogonal projection onto $\\mathcal{D}$ (3.27)."""
    stages, _, _, _, ideal_stages, _ = solved()
    Pi = ideal_stages.Pi_D
    assert rel_close(stages.M @ Pi, (stages.M @ Pi).T)  # M-orthogonal (M Π symmetric)
    rng = np.random.default_rng(1)
    for _ in range(3):
        alpha = jnp.asarray(rng.normal(size=stages.n))
        _, P_alpha = gm.udwadia_kalaba_split(stages, alpha)
        assert rel_close(Pi @ stages.solve_M(alpha), stages.solve_M(P_alpha))


def test_generalized_known_work_not_a_udwadia_kalaba_split():
    """§5.2: with $\\mathcal{W} \\ne \\mathcal{D}$ and known work, $F^c = F^0 + G^c$ with $G^c \\in \\mathcal{W}^0$ but
    $X_U + X_{G^c} \\notin \\mathcal{S}(\\mathcal{C})$ and $M^{-1}F^0 \\notin \\mathcal{D}$, unlike $F^c_{ni}$ in §5.1.
    Still, $X_R$ satisfies Cor. 1' (5.43): $\\tau^{-1}(X_R - X_{\\bar U}) \\in \\mathcal{W}^\\perp$."""
    stages, a_R, Fc, _, _, _ = solved(generalized=True)
    G = Fc - stages.F0
    assert small(stages.W_basis.T @ G, jnp.linalg.norm(Fc))  # G^c ∈ W⁰
    a_W = stages.a_U + stages.solve_M(G)
    assert not rel_close(stages.A @ a_W, stages.b, tol=1e-3)
    assert float(jnp.linalg.norm(stages.A @ stages.solve_M(stages.F0))) > 1e-3
    assert small(stages.W_basis.T @ stages.M @ (a_R - stages.a_Ubar), jnp.linalg.norm(Fc))  # (5.43)


def test_decomposition_with_another_solver():
    """`udwadia_kalaba` accepts any solver that generalizes to known work, and rejects the others."""
    _, _, _, (F_id, F_ni), _, _ = solved()
    system, _, state, t = systems()
    F_id2, F_ni2 = gm.udwadia_kalaba(system, state, solver=gm.Kane(), t=t)
    assert rel_close(F_id2, F_id) and rel_close(F_ni2, F_ni)
    with pytest.raises(ValueError, match="does not generalize"):
        gm.udwadia_kalaba(system, state, solver=gm.Gauss(), t=t)
