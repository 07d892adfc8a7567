"""All principles of thesis ch. 4–5 as solvers: agreement, jit/vmap/grad, and each theorem as a test."""

import functools
from collections.abc import Callable
from typing import NamedTuple

import diffrax
import equinox as eqx
import hypothesis.extra.numpy as hnp
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import reference as ref
from helpers import accelerations, assert_rel_close
from helpers import solvers as every_solver
from hypothesis import given, settings
from manifold_systems import MANIFOLDS, random_states, system_on
from model_problems import problem as model_problem
from random_systems import perturbed_states, random_case, user_basis

import geomech as gm
from geomech.models import CartesianPendulum, ThesisExample2

# -- the catalogue ----------------------------------------------------------------------------
# Each entry: a system, a batch of states (`states[0]` on C, the others off C, at a later time),
# the same user functions as a `reference.Problem`, a symmetry action (or None) and a user basis
# of W. The random systems have q-dependent M, gyroscopic terms, constraints nonlinear in v and,
# as named, W ≠ D, time dependence, known work, holonomic and affine rows.

RANDOM = {
    "random_generalized": dict(symmetric=True),
    "random_ideal": dict(generalized=False, symmetric=True),
    "random_time_dependent": dict(time_dependent=True, symmetric=True),
    "random_known_work": dict(known_work=True, symmetric=True),
    "random_ideal_known_work": dict(generalized=False, known_work=True, time_dependent=True, symmetric=True),
    # no symmetry: L depends on every coordinate; W by a basis; holonomic, affine, nonlinear rows
    "random_mixed": dict(
        n=5, k=3, holonomic=True, affine=True, work_space="basis", time_dependent=True, known_work=True
    ),
}
CASES = ["thesis_example2", "pendulum_holonomic", "pendulum_linear", *RANDOM]


class Case(NamedTuple):
    system: gm.LagrangianSystem
    states: gm.State
    ts: jax.Array
    problem: ref.Problem
    action: gm.LieAlgebraAction | None
    basis: Callable


@functools.cache
def case(name) -> Case:
    if name == "thesis_example2":
        m = ThesisExample2()
        q = jnp.array([0.1, 1.3])
        state, t = gm.State(q, 0.5 * jnp.array([1.0, m.A(q)])), 0.0
        # U depends on q2 - q1: L is invariant under (q1, q2) -> (q1 + g, q2 + g); g_W = 0 here
        action = gm.LieAlgebraAction(lambda q: jnp.ones((2, 1), q.dtype))
        system, problem, basis = m(), model_problem(name, m), lambda q, v: jnp.array([[2.0], [-2.0]])
    elif name.startswith("pendulum"):
        th, t = 0.4, 0.0
        q = jnp.array([jnp.cos(th), jnp.sin(th)])
        state = gm.State(q, 0.7 * jnp.array([-q[1], q[0]]))
        action = gm.LieAlgebraAction(lambda q: jnp.array([[0.0], [1.0]], q.dtype))  # L = ½|v|² + g x
        m = CartesianPendulum(form=name.split("_")[1])
        system, problem, basis = m(), model_problem("pendulum", m), lambda q, v: jnp.array([[-q[1]], [q[0]]])
    else:
        system, state, t, problem, action = random_case(2, **RANDOM[name])
        basis = user_basis(problem, state.q.shape[0], RANDOM[name].get("k", 2))
    states, ts = perturbed_states(state, t, 3, seed=len(name))
    return Case(system, states, ts, problem, action, basis)


def solvers_for(name):
    """Every solver (`helpers.solvers`); Gauss and GibbsAppell(metric="D") do not take known work
    (they raise, see `test_known_work_rejected_where_principle_does_not_generalize`)."""
    c = case(name)
    return every_solver(basis=c.basis, action=c.action, known_work=c.system.known_work is not None)


@eqx.filter_jit
def _solve_all(system, states, ts, solvers):
    """Stages, every solver's acceleration, $a_U$ and the multipliers of `Multipliers`, at a batch
    of states (one compilation)."""

    def one(state, t):
        stages = gm.assemble(system, state, t)
        accs = {k: s.acceleration(stages) for k, s in solvers.items() if k != "multipliers"}
        accs["multipliers"], lam = solvers["multipliers"].acceleration_and_multipliers(stages)
        return stages, accs, dict(a_U=stages.a_U, lam=lam)

    return eqx.filter_vmap(one)(states, ts)


@functools.cache
def solved_batch(name):
    """`(stages, {solver: a_R}, public)` at every state of the case, compiled once per entry."""
    c = case(name)
    return _solve_all(c.system, c.states, c.ts, solvers_for(name))


@functools.cache
def reference(name) -> ref.Reference:
    c = case(name)
    return ref.solve(c.problem, c.ts, c.states.q, c.states.v)


def at(tree, i):
    return jax.tree.map(lambda x: x[i] if eqx.is_array(x) else x, tree)


def solved(name):
    """`(stages, a_R by Projection, {solver: a_R})` at the state on C."""
    stages, accs, _ = at(solved_batch(name), 0)
    return stages, accs["projection"], accs


def assert_small(x, scale, tol=1e-10, msg=""):
    assert float(jnp.linalg.norm(x)) <= tol * float(scale), (msg, float(jnp.linalg.norm(x)), float(scale))


def assert_rows_close(x, y, tol, msg="", floor=0.0):
    """Per state (leading axis): |x - y| <= tol max(|y|, floor)."""
    err = ref.rel_err(x, y, floor)
    assert np.all(err <= tol), (msg, err)


# -- every solver against the independent reference -------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_every_solver_matches_reference(name):
    """Every solver, on and off C, against the finite-difference / NumPy reference of
    `reference.py` (KKT, Udwadia–Kalaba and d'Alembert formulas agreeing to round-off), to the
    reference's accuracy `ref.TOL`; and the solvers with each other to 1e-10. The constraint force
    $F^c = M(a_R - a_U)$, the multipliers ($F^c - F^0 = C^\\top\\lambda$) and $a_U$ too."""
    stages, accs, extra = solved_batch(name)
    R = reference(name)
    assert np.max(np.abs(R.phi[0]), initial=np.max(np.abs(R.h[0]), initial=0)) <= 1e-12  # on C ...
    assert np.all(np.max(np.abs(R.phi[1:]), axis=1) > 1e-3)  # ... and the others are not
    for formula in (R.a_uk, R.a_dalembert):
        assert_rows_close(formula, R.a_kkt, 1e-11, "reference formulas")
    assert set(accs) == set(solvers_for(name)) and len(accs) >= 6
    for key, a in accs.items():
        assert_rows_close(a, R.a, ref.TOL, key)
        assert_rows_close(a, accs["projection"], 1e-10, key)
    assert_rows_close(extra["a_U"], R.a_U, ref.TOL, "a_U")
    Fc = np.einsum("sij,sj->si", stages.M, accs["projection"] - extra["a_U"])
    assert_rows_close(Fc, R.Fc, ref.TOL, "F^c")
    CT_lam = np.einsum("ski,sk->si", stages.C, extra["lam"])
    assert_rows_close(CT_lam, R.Fc - R.F0, ref.TOL, "C^T lambda")
    if case(name).problem.W_basis is None:  # C is the user's (or A): lambda itself is defined
        assert_rows_close(extra["lam"], R.lam, ref.TOL, "lambda")


def chart_reference(system: gm.LagrangianSystem, state: gm.State) -> jax.Array:
    """The constrained acceleration written out in the chart centred at $q$ with the manifold's
    public $\\oplus$ and dexp only: $\\ell(\\psi, \\dot\\psi) = L(q \\oplus \\psi,
    \\mathrm{dexp}_\\psi\\dot\\psi)$, the Lagrange equations of $\\ell$ with the multipliers of
    $\\tilde A(\\psi)\\dot\\psi = A(q\\oplus\\psi)\\,\\mathrm{dexp}_\\psi\\dot\\psi = 0$ (the
    thesis' (3.19) in these coordinates) at $\\psi = 0$, $\\dot\\psi = v$, and
    $a = \\tfrac{d}{dt}\\mathrm{dexp}_\\psi\\dot\\psi = \\ddot\\psi + \\partial_\\psi
    \\mathrm{dexp}_\\psi\\dot\\psi\\,[\\dot\\psi]$."""
    m, q, v = system.manifold, state.q, state.v
    zero = jnp.zeros_like(v)
    ell = lambda psi, psi_dot: system.lagrangian(m.oplus(q, psi), m.dexp(psi, psi_dot))
    M = jax.hessian(ell, argnums=1)(zero, v)
    rhs = jax.grad(ell, 0)(zero, v) - jax.jacfwd(jax.grad(ell, 1), 0)(zero, v) @ v
    if system.constraint is None:
        psi_ddot = jnp.linalg.solve(M, rhs)
    else:
        phi = lambda psi, psi_dot: system.constraint.A_of_q(m.oplus(q, psi)) @ m.dexp(psi, psi_dot)
        A, b = jax.jacfwd(phi, 1)(zero, v), -jax.jacfwd(phi, 0)(zero, v) @ v
        k = A.shape[0]
        K = jnp.block([[M, -A.T], [A, jnp.zeros((k, k))]])
        psi_ddot = jnp.linalg.solve(K, jnp.concatenate([rhs, b]))[: v.shape[0]]
    return psi_ddot + jax.jvp(lambda psi: m.dexp(psi, v), (zero,), (v,))[1]


def constraint_rate(system: gm.LagrangianSystem, state: gm.State, a: jax.Array) -> jax.Array:
    """$\\tfrac{d}{dt}[A(q)v]$ along $(\\dot q, \\dot v) = (v, a)$: $q \\oplus \\epsilon v$,
    $v + \\epsilon a$ to first order in $\\epsilon$."""
    m, A = system.manifold, system.constraint.A_of_q
    moved = lambda e: A(m.oplus(state.q, e * state.v)) @ (state.v + e * a)
    return jax.jvp(moved, (jnp.zeros(()),), (jnp.ones(()),))[1]


@pytest.mark.parametrize("name", MANIFOLDS)
def test_every_solver_on_every_manifold(name):
    """The system of `manifold_systems.py` on each manifold (ℝⁿ, S¹, SO(3), SE(3), SE(2),
    products): every solver's acceleration at random states on the constraint equals the chart
    reference above to 1e-10 of its scale, and the constraint is kept: $\\tfrac{d}{dt}
    [A(q)v] = 0$ along $(\\dot q, \\dot v) = (v, a)$."""
    system = system_on(name)
    states = random_states(system, seed=3)
    accs = accelerations(system, states, every_solver())
    reference = eqx.filter_jit(lambda system, states: [chart_reference(system, y) for y in states])
    for b, (state, expected) in enumerate(zip(states, reference(system, states), strict=True)):
        scale = float(jnp.max(jnp.abs(expected))) + float(jnp.max(jnp.abs(state.v))) ** 2
        assert scale > 1e-2
        for key, a in accs.items():
            np.testing.assert_allclose(a[b], expected, rtol=0, atol=1e-10 * scale, err_msg=key)
        if system.constraint is not None:
            rate = constraint_rate(system, state, accs["projection"][b])
            assert float(jnp.max(jnp.abs(rate))) <= 1e-10 * scale


@settings(max_examples=6, deadline=None, derandomize=True)
@given(
    hnp.arrays(np.float64, (2, 4, 5), elements=st.floats(-0.6, 0.6)),
    st.floats(0.0, 2.0),
)
def test_states_drawn_by_hypothesis_match_reference(d, t):
    """Property: at any state near the mixed random case's (off C; holonomic, affine and nonlinear
    rows, W by a basis, known work, time dependent), Projection, Kane and the multipliers equal the
    reference (the compiled batch of four states is reused)."""
    c = case("random_mixed")
    states = gm.State(c.states.q[0][None] + d[0], c.states.v[0][None] + d[1])
    ts = jnp.full((4,), t)
    _, accs, _ = _solve_all(c.system, states, ts, solvers_for("random_mixed"))
    R = ref.solve(c.problem, ts, states.q, states.v)
    for key in ("projection", "kane", "multipliers"):
        assert_rows_close(accs[key], R.a, ref.TOL, key)


@pytest.mark.parametrize("name", CASES)
def test_stages_match_reference(name):
    """The shared stages (`gm.assemble`) against the reference, on and off C: $M$, $Q$, $F^0$,
    $\\phi$, $A$, $b$, and $C$ where the user gives it (a wrong stage is named here, not only
    seen as a wrong acceleration)."""
    stages, _, _ = solved_batch(name)
    R = reference(name)
    for key in ("M", "Q", "A", "b"):
        assert_rows_close(getattr(stages, key), getattr(R, key), ref.TOL, key, floor=1.0)
    np.testing.assert_allclose(stages.F0, R.F0, rtol=1e-13, atol=0)
    np.testing.assert_allclose(stages.phi, R.phi, rtol=ref.TOL, atol=ref.TOL)
    if case(name).problem.annihilator is not None:
        np.testing.assert_allclose(stages.C, R.C, rtol=1e-13, atol=0)


def test_public_api_every_solver():
    """`acceleration` accepts every solver, and `constraint_force` and `multipliers` a non-default
    one (one compile); both against the reference."""
    c = case("thesis_example2")
    state, t = at(c.states, 0), float(c.ts[0])
    solvers = solvers_for("thesis_example2")

    @eqx.filter_jit
    def run(solvers):
        accs = {k: gm.acceleration(c.system, state, s, t) for k, s in solvers.items()}
        kane = solvers["kane_user"]
        return accs, gm.constraint_force(c.system, state, kane, t), gm.multipliers(c.system, state, kane, t)

    accs, F, lam = run(solvers)
    R = reference("thesis_example2")[0]
    for key, a in accs.items():
        assert_rel_close(a, R.a, tol=ref.TOL, msg=key)
    assert_rel_close(F, R.Fc, tol=ref.TOL)
    assert_rel_close(lam, R.lam, tol=ref.TOL)


def test_vmap_pendulum_closed_form():
    """A batch of pendulum states through every solver under `jax.vmap`; closed-form tension ([Zanella])."""
    model = CartesianPendulum(m=1.3, l=1.7, g=9.81, form="linear")
    system = model()
    th = jnp.linspace(-2.0, 2.5, 5)
    w = jnp.linspace(-1.0, 1.5, 5)
    q = model.l * jnp.stack([jnp.cos(th), jnp.sin(th)], axis=1)
    v = w[:, None] * jnp.stack([-q[:, 1], q[:, 0]], axis=1)
    out = _solve_all(system, gm.State(q, v), jnp.zeros(5), solvers_for("pendulum_linear"))[1]
    # a = g x̂ - (|v|²/l + g x/l) q/l  (tension along -r̂, x down)
    lam = (jnp.sum(v**2, 1) / model.l + model.g * q[:, 0] / model.l) / model.l
    a_exact = jnp.array([[model.g, 0.0]]) - lam[:, None] * q
    for key, a in out.items():
        assert a.shape == (5, 2)
        assert_rel_close(a, a_exact, msg=key)


def test_gradients_agree_between_solvers():
    """Reverse-mode gradients w.r.t. the Lagrangian's parameters and the state, through every solver,
    agree; one directional derivative is checked against finite differences. (The projector `P`
    that defines the symmetry is held fixed: moving it would break the invariance the momentum
    solver relies on.)"""
    name = "random_generalized"
    c = case(name)
    system, state, t = c.system, at(c.states, 0), c.ts[0]
    solvers = solvers_for(name)
    keys = list(solvers)
    w = jnp.array([0.3, -1.1, 0.7, 0.2])
    fields = lambda L: (L.B0, L.B1, L.g, L.K)

    def with_params(params):
        return eqx.tree_at(lambda s: fields(s.lagrangian), system, params)

    def losses(params, state):
        stages = gm.assemble(with_params(params), state, t)
        return jnp.stack([jnp.sin(w @ solvers[k].acceleration(stages)) for k in keys])

    params = fields(system.lagrangian)
    jac = eqx.filter_jit(jax.jacrev(losses, argnums=(0, 1)))(params, state)
    leaves = jax.tree_util.tree_leaves(jac)
    assert len(leaves) >= 6
    for leaf in leaves:  # leading axis: the solvers
        assert jnp.all(jnp.isfinite(leaf))
        for i in range(1, len(keys)):
            assert_rel_close(leaf[i], leaf[0], tol=1e-8, msg=keys[i])
    # finite differences along a parameter direction, reusing the compiled forward pass
    dB = jnp.asarray(np.random.default_rng(3).normal(size=params[1].shape))
    h = 1e-5

    def forward(eps):
        sys_eps = with_params((params[0], params[1] + eps * dB, *params[2:]))
        return jnp.sin(w @ _solve_all(sys_eps, c.states, c.ts, solvers)[1]["kane"][0])

    fd = (forward(h) - forward(-h)) / (2 * h)
    ad = jnp.sum(jac[0][1][keys.index("kane")] * dB)
    assert abs(float(fd - ad)) <= 1e-6 * (1 + abs(float(ad)))


# -- theorems ---------------------------------------------------------------------------------


def bracket_norm2(stages, u):
    return u @ stages.bracket @ u


@pytest.mark.parametrize("name", ["random_generalized", "thesis_example2"])
def test_prop4_gauss_minimality(name):
    """Prop. 4: moving off $X_R$ inside $\\mathcal{S}(\\mathcal{C})$ strictly increases $\\|\\cdot - X_U\\|_{[,]}$,
    by exactly $\\|\\delta\\|_{[,]}^2$ (Pythagoras, $\\mathcal{D} \\perp_{[,]} \\mathcal{W}^\\perp$)."""
    stages, a_R, _ = solved(name)
    base = bracket_norm2(stages, a_R - stages.a_U)
    rng = np.random.default_rng(0)
    for scale in (1e-3, 0.1, 3.0):
        delta = stages.D_basis @ jnp.asarray(rng.normal(size=stages.n - stages.k)) * scale
        a = a_R + delta
        assert_rel_close(stages.A @ a, stages.b)  # still in S(C)
        inc = bracket_norm2(stages, a - stages.a_U) - base
        assert inc > 0
        d2 = bracket_norm2(stages, delta)
        assert abs(float(inc - d2)) <= 1e-10 * float(base + d2)


@pytest.mark.parametrize(
    "name, ideal", [("random_generalized", False), ("thesis_example2", False), ("random_ideal", True)]
)
def test_observation8_cetaev(name, ideal):
    """Observation 8: the classical Gauss minimizer (M-norm) is $X_R$ iff $\\mathcal{W} = \\mathcal{D}$,
    and $[,] = \\langle,\\rangle_M$ exactly then: the Gram matrix of (4.1) formed from the
    projections, which `Stages.bracket` is (and which it skips for ideal constraints)."""
    stages, a_R, _ = solved(name)
    a_M, _ = stages.solve_saddle(stages.M, stages.A, stages.Q)  # argmin ||a - a_U||_M on A a = b
    assert_rel_close(stages.A @ a_M, stages.b)
    P, R, M = stages.Pi_D, stages.Pi_Wperp, stages.M
    G = P.T @ M @ P + R.T @ M @ R  # (4.1)
    assert_rel_close(stages.bracket, G)
    if ideal:
        assert_rel_close(a_M, a_R)
        assert_rel_close(G, M)
    else:
        assert float(jnp.linalg.norm(a_M - a_R)) > 1e-3 * float(jnp.linalg.norm(a_R))
        assert float(jnp.linalg.norm(G - M)) > 1e-3 * float(jnp.linalg.norm(M))


@pytest.mark.parametrize("name", ["random_generalized", "random_known_work", "random_time_dependent"])
def test_prop5_gibbs_appell_stationarity(name):
    """Prop. 5 / 5': $D G_{\\mathcal{W}}(a_R)(u) = F^0(u)$ on $\\mathcal{W}$ and $D G_{\\mathcal{D}}(a_R)(u) = 0$ on
    $\\mathcal{D}$ (ideal work), and no other allowed acceleration is stationary."""
    stages, a_R, _ = solved(name)
    E_W, E_D = stages.W_basis, stages.D_basis
    gW = jax.grad(gm.gibbs_appell_function(stages, "W"))
    scale = float(jnp.linalg.norm(stages.M @ (a_R - stages.a_U))) + 1.0
    assert_small(E_W.T @ (gW(a_R) - stages.F0), scale, tol=1e-12)
    delta = E_D @ jnp.ones(E_D.shape[1])
    assert float(jnp.linalg.norm(E_W.T @ (gW(a_R + delta) - stages.F0))) > 1e-3
    if stages.system.known_work is None:
        gD = jax.grad(gm.gibbs_appell_function(stages, "D"))
        assert_small(E_D.T @ gD(a_R), scale, tol=1e-12)
        assert float(jnp.linalg.norm(E_D.T @ gD(a_R + delta))) > 1e-3


@pytest.mark.parametrize("name", ["random_generalized", "thesis_example2", "random_time_dependent"])
def test_lemma4_and_observation13(name):
    """Lemma 4: with an $M$-orthonormal basis $e_i$ ($e_{1..n-k}$ spanning $\\mathcal{W}$, the rest
    $\\mathcal{W}^\\perp$) and $Y_U = \\sum y^i e_i$, $Y_R = \\sum_{i \\le n-k} y^i \\Pi_{\\mathcal{D}} e_i$.
    Observation 13: $\\Pi_{\\mathcal{D}}$
    maps $\\mathcal{W}$ isomorphically onto $\\mathcal{D}$."""
    stages, a_R, _ = solved(name)
    n, m = stages.n, stages.n - stages.k
    B = gm.orthonormal_basis(stages)
    assert_rel_close(B.T @ stages.M @ B, jnp.eye(n))
    assert_small(stages.C @ B[:, :m], jnp.linalg.norm(stages.C) * jnp.linalg.norm(B), tol=1e-12)
    y = jnp.linalg.solve(B, stages.a_U - stages.a_0)
    assert_rel_close(stages.a_0 + stages.project_D(B[:, :m]) @ y[:m], a_R)
    P = stages.project_D(stages.W_basis)  # Observation 13
    assert_small(stages.A @ P, jnp.linalg.norm(stages.A) * jnp.linalg.norm(P), tol=1e-12)
    s = jnp.linalg.svd(P / jnp.linalg.norm(P, axis=0, keepdims=True), compute_uv=False)
    assert float(s[-1]) > 1e-3


@pytest.mark.parametrize("name", ["random_generalized", "thesis_example2", "random_known_work"])
def test_bracket_orthogonal_construction(name):
    """(4.34)–(4.41): $b_i$ a $[,]$-orthonormal basis of $\\mathcal{D}$, $\\Gamma(b_i) \\in \\mathcal{W}$ with
    $\\Pi_{\\mathcal{D}}\\Gamma(b_i) = b_i$, $\\beta_j \\in \\mathcal{W}^\\perp$; writing $Y_{\\bar U}$ in this basis,
    $Y_R = \\sum \\tilde y_i b_i$ (so the construction also carries known work on $\\mathcal{W}$)."""
    stages, a_R, accs = solved(name)
    m = stages.n - stages.k
    b, B = gm.bracket_basis(stages)
    scale = jnp.linalg.norm(B) * (jnp.linalg.norm(stages.C) + jnp.linalg.norm(stages.A))
    assert_rel_close(b.T @ stages.bracket @ b, jnp.eye(m))
    assert_small(stages.A @ b, scale, tol=1e-12)
    assert_small(stages.C @ B[:, :m], scale, tol=1e-12)
    assert_rel_close(stages.project_D(B[:, :m]), b)
    assert_small(stages.W_basis.T @ stages.M @ B[:, m:], scale * jnp.linalg.norm(stages.M), tol=1e-12)
    y = jnp.linalg.solve(B, stages.a_Ubar - stages.a_0)
    assert_rel_close(stages.a_0 + b @ y[:m], a_R)
    assert_rel_close(accs["kane_bracket"], a_R)


def test_momentum_equation_along_trajectory():
    """Prop. 6' (5.45) on a plain diffrax trajectory of a random generalized system with external
    force and known work, $L$ invariant under the translations orthogonal to $u$ ($\\dim \\mathfrak{g} = 3$):
    for $\\xi(t) \\in \\mathfrak{g}_{\\mathcal{W}}$ (a null vector of $C\\,\\Xi$, by a cross product),
    $J^{nh}(\\xi)(t_1) - J^{nh}(\\xi)(t_0) = \\int D_vL(\\dot\\xi_Q) + F^e(\\xi_Q) + F^0(\\xi_Q)\\,dt$."""
    c = case("random_known_work")
    system, state, action, user = c.system, at(c.states, 0), c.action, c.problem
    assert not system.time_dependent
    solver = gm.NonholonomicMomentum(action)

    def xi_of(q, v):
        K = user.annihilator(0.0, q, v) @ action(q)
        return jnp.cross(K[0], K[1])  # spans ker(C Ξ) = g_W

    def rhs(t, y, args):
        q, v, _ = y
        a = gm.acceleration(system, gm.State(q, v), solver)
        xi, xi_dot = jax.jvp(xi_of, (q, v), (v, a))
        dLdv = jax.grad(user.lagrangian, argnums=2)(t, q, v)
        X = action(q)
        F = user.force(t, q, v) + user.known_work(t, q, v)
        return v, a, dLdv @ X @ xi_dot + F @ X @ xi

    y0 = (state.q, state.v, jnp.zeros(()))
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs), diffrax.Tsit5(), 0.0, 0.6, 0.01, y0,
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    q1, v1, integral = (x[-1] for x in sol.ys)
    J = lambda q, v: gm.nonholonomic_momentum(system, gm.State(q, v), action, xi_of(q, v))
    dJ = J(q1, v1) - J(state.q, state.v)
    assert float(jnp.abs(dJ)) > 1e-2  # not conserved: the equation has content
    assert abs(float(dJ - integral)) <= 1e-7 * (1 + abs(float(dJ)))
    assert float(jnp.max(jnp.abs(system.constraint_residual(gm.State(q1, v1))))) < 1e-7


# -- bad input --------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["random_known_work", "random_ideal_known_work"])
def test_known_work_rejected_where_principle_does_not_generalize(name):
    c = case(name)
    for solver in (gm.Gauss(), gm.GibbsAppell(metric="D")):
        assert not solver.supports_known_work
        with pytest.raises(ValueError, match="does not generalize"):
            gm.acceleration(c.system, at(c.states, 0), solver, c.ts[0])
    assert gm.GibbsAppell(metric="W").supports_known_work


def test_known_work_accepted_where_principle_generalizes():
    """Projection, Gibbs–Appell with $G_{\\mathcal{W}}$, Kane, the multipliers and the momentum
    equation generalize to known work (Prop. 2, 5', Lemma 3', Prop. 6', thesis §5.2): through the
    public `gm.acceleration` (which checks `supports_known_work`) each gives the reference $a_R$."""
    name = "random_known_work"
    c = case(name)
    solvers = solvers_for(name)
    assert c.system.known_work is not None and {"gauss", "gibbs_appell_D"}.isdisjoint(solvers)
    state, t = at(c.states, 1), c.ts[1]  # off C

    @eqx.filter_jit
    def run(solvers):
        return {k: gm.acceleration(c.system, state, s, t) for k, s in solvers.items()}

    R = reference(name)
    for key, a in run(solvers).items():
        assert solvers[key].supports_known_work
        assert_rows_close(a[None], R.a[1:2], ref.TOL, key)


def test_bad_configuration():
    with pytest.raises(ValueError, match="'W'"):
        gm.GibbsAppell(metric="M")
    with pytest.raises(ValueError, match="construction"):
        gm.Kane(construction="qr")
    with pytest.raises(TypeError):
        gm.NonholonomicMomentum(lambda q: q)
    system, state = case("thesis_example2").system, at(case("thesis_example2").states, 0)
    with pytest.raises(ValueError, match=r"\(n, n - k\)"):
        gm.acceleration(system, state, gm.Kane(basis=lambda q, v: jnp.eye(2)))


def test_kane_basis_not_spanning_W():
    c = case("thesis_example2")
    system, state, t = c.system, at(c.states, 0), 0.0
    m = ThesisExample2()
    # a basis of D = span (1, A(q)), not of W = span (1, -1)
    bad = gm.Kane(basis=lambda q, v: jnp.stack([jnp.ones_like(q[0]), m.A(q)])[:, None])
    with pytest.raises(Exception, match="do not form a basis of W"):
        gm.acceleration(system, state, bad, t)
    c = case("random_generalized")
    system, state, t, basis = c.system, at(c.states, 0), c.ts[0], c.basis
    dependent = gm.Kane(basis=lambda q, v: basis(q, v)[:, [0, 0]])
    with pytest.raises(Exception, match="do not form a basis of W"):
        gm.acceleration(system, state, dependent, t)


def test_action_not_leaving_L_invariant():
    """Thesis Example 2.3's action $(q^1, q^2) \\mapsto (q^1 + g, q^2 - g)$ does not leave the spring–Coulomb
    potential of Example 2 invariant (it depends on $q^2 - q^1$); the joint translation does."""
    c = case("thesis_example2")
    system, state, t, invariant_action = c.system, at(c.states, 0), 0.0, c.action
    gm.check_invariance(system, state, invariant_action, t)  # passes
    thesis_action = gm.LieAlgebraAction(lambda q: jnp.array([[1.0], [-1.0]], q.dtype))
    with pytest.raises(Exception, match="not invariant"):
        gm.acceleration(system, state, gm.NonholonomicMomentum(thesis_action), t)
    with pytest.raises(Exception, match="not invariant"):
        gm.check_invariance(system, state, thesis_action, t)


@pytest.mark.parametrize("n", [4, 10])
def test_accelerations_and_their_jacobians_at_small_and_large_n(n):
    """Below and above `_linalg._SMALL` = 8 (unrolled kernels / LAPACK): Projection, Kane and the
    multipliers on and off C against the reference; and the Jacobian of $a_R$ with respect to
    $(q, v)$ by forward-mode autodiff (the implicit derivative of `spd_solve`, the derivative of
    the small Cholesky kernel) against central differences of the same function."""
    c = random_case(5, n=n, k=3, holonomic=True, time_dependent=True, known_work=True)
    states, ts = perturbed_states(c.state, c.t, 2, seed=n)
    solvers = {"projection": gm.Projection(), "kane": gm.Kane(), "multipliers": gm.Multipliers()}

    def accelerations(qv, t):
        stages = gm.assemble(c.system, gm.State(qv[:n], qv[n:]), t)
        return jnp.stack([s.acceleration(stages) for s in solvers.values()])

    qv = jnp.concatenate([states.q, states.v], axis=1)
    both = lambda x, t: (accelerations(x, t), jax.jacfwd(accelerations)(x, t))
    accs, jac = eqx.filter_jit(jax.vmap(both))(qv, ts)
    R = ref.solve(c.problem, ts, states.q, states.v)
    for i, key in enumerate(solvers):
        assert_rows_close(accs[:, i], R.a, ref.TOL, key)
    # central differences of the same batch along a few coordinates (errors O(h²) ≈ 1e-10)
    h = 1e-5
    f = eqx.filter_jit(jax.vmap(accelerations))
    for j in (0, n - 1, n, 2 * n - 1):
        e = jnp.zeros(2 * n).at[j].set(h)
        fd = (f(qv + e[None], ts) - f(qv - e[None], ts)) / (2 * h)
        for i, key in enumerate(solvers):
            msg = f"d a_R / d x_{j} ({key})"
            assert_rows_close(jac[:, i, :, j], fd[:, i], 1e-6, msg, floor=1.0)


@pytest.mark.parametrize("shape", [(5, 2), (2, 5), (7, 7), (4, 1), (9, 3)])
def test_small_qr_is_lapacks(shape):
    """`_linalg.qr` (Householder reflections, unrolled where both sides are at most `_SMALL`)
    gives LAPACK's factors to round-off, signs included, reduced and complete, also for columns
    with nothing below the diagonal; and a least-squares solve by it LAPACK's, with derivatives."""
    from geomech import _linalg as la

    rng = np.random.default_rng(sum(shape))
    X = jnp.asarray(rng.normal(size=shape))
    structured = X.at[1:, 0].set(0.0).at[2:, 1].set(0.0) if min(shape) > 1 else X
    qr = jax.jit(la.qr, static_argnums=1)
    for M in (X, structured, -structured):
        for complete in (False, True):
            mine = qr(M, complete)
            lapack = jnp.linalg.qr(M, mode="complete" if complete else "reduced")
            for a, b in zip(mine, lapack, strict=True):
                assert a.shape == b.shape
                np.testing.assert_allclose(a, b, rtol=0, atol=1e-14)
    # and through it a least-squares solve with its derivatives (`Stages.solve_with_constraints`)
    y = jnp.asarray(rng.normal(size=shape[0]))
    mine = lambda M: la.solve_upper(*(lambda Q, R: (R, Q.T @ y))(*la.qr(M)))
    lapack = lambda M: jnp.linalg.lstsq(M, y)[0]
    if shape[0] >= shape[1]:
        for d in (lambda f: f, jax.jacfwd, jax.jacrev):
            np.testing.assert_allclose(jax.jit(d(mine))(X), d(lapack)(X), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("n", [0, 1, 3, 8])
def test_small_cholesky_and_triangular_solves_are_lapacks(n):
    """`_linalg.cholesky`, `solve_lower` and `solve_upper_transposed` (unrolled up to `_SMALL`,
    rows stacked once) give LAPACK's factor and solutions to round-off, for one right-hand side
    and several, empty matrices included."""
    from geomech import _linalg as la

    rng = np.random.default_rng(n)
    X = rng.normal(size=(n, n))
    M = jnp.asarray(X @ X.T + n * np.eye(n))
    L = jax.jit(la.cholesky)(M)
    assert L.shape == (n, n)
    np.testing.assert_allclose(L, jnp.linalg.cholesky(M), rtol=0, atol=1e-13 * (1 + n))
    for B in (jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=(n, 2)))):
        lower = jax.scipy.linalg.solve_triangular(L, B, lower=True)
        upper = jax.scipy.linalg.solve_triangular(L, B, lower=True, trans="T")
        np.testing.assert_allclose(jax.jit(la.solve_lower)(L, B), lower, rtol=1e-13, atol=1e-14)
        np.testing.assert_allclose(
            jax.jit(la.solve_upper_transposed)(L, B), upper, rtol=1e-13, atol=1e-14
        )


def test_kane_bases_are_the_documented_constructions():
    """`Kane().W_basis` is an $M$-orthonormal basis of $\\mathcal{W}$ (Observation 12);
    `Kane(construction="bracket").W_basis` is the basis $\\Gamma(b_i)$ of $\\mathcal{W}$ with
    $\\Pi_{\\mathcal{D}}\\Gamma(b_i) = b_i$ $[,]$-orthonormal (4.34)–(4.35) — two different bases of
    the same $\\mathcal{W}$, giving the same $a_R$."""
    c = case("random_generalized")
    stages = eqx.filter_jit(gm.assemble)(c.system, at(c.states, 1), c.ts[1])
    m = stages.n - stages.k
    E = gm.Kane().W_basis(stages)
    G = gm.Kane(construction="bracket").W_basis(stages)
    scale = jnp.linalg.norm(stages.C)
    for X in (E, G):
        assert X.shape == (stages.n, m)
        assert_small(stages.C @ X, scale * jnp.linalg.norm(X), tol=1e-12)  # in W = ker C
    assert_rel_close(E.T @ stages.M @ E, jnp.eye(m))
    P = stages.project_D(G)
    assert_rel_close(P.T @ stages.bracket @ P, jnp.eye(m))
    assert float(jnp.linalg.norm(G.T @ stages.M @ G - jnp.eye(m))) > 1e-3  # not M-orthonormal


def test_gibbs_appell_is_one_class_whose_metric_decides_known_work():
    """`GibbsAppell` is one final class: the metric is a static field, `supports_known_work` follows
    it, and a wrong metric is refused when the solver is built."""
    W, D = gm.GibbsAppell(metric="W"), gm.GibbsAppell(metric="D")
    assert type(W) is type(D) is gm.GibbsAppell
    assert (W.supports_known_work, D.supports_known_work) == (True, False)
    assert gm.GibbsAppell() == W and hash(W) != hash(D)
    assert jax.tree_util.tree_leaves(D) == []  # static: no traced leaves, one compiled program each
    with pytest.raises(ValueError, match="metric must be 'W'"):
        gm.GibbsAppell(metric="X")


def test_the_solver_registry_has_every_public_solver():
    """`helpers.solvers` (the tests' one registry) holds an instance of every public solver class,
    so a new solver is compared with the others by every test that loops over the registry."""
    public = {
        obj
        for name in dir(gm)
        if isinstance(obj := getattr(gm, name), type)
        and issubclass(obj, gm.AbstractSolver)
        and not name.startswith("Abstract")
    }
    action = gm.models.ChaplyginSleigh().action()
    registered = {type(s) for s in every_solver(basis=lambda *a: None, action=action).values()}
    assert public and public <= registered, public - registered
