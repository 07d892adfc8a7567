"""All principles of thesis ch. 4–5 as solvers: agreement, jit/vmap/grad, and each theorem as a test."""

import functools

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from random_systems import random_system

import geomech as gm
from geomech.models import CartesianPendulum, ThesisExample2

# -- the catalogue ----------------------------------------------------------------------------


class TranslationInvariant(eqx.Module):
    """$L(t, q, v) = L_0(t, (u \\cdot q) u, v)$: invariant under the translations orthogonal to `u`."""

    L0: eqx.Module
    u: jax.Array

    def __call__(self, *args):
        *t, q, v = args
        return self.L0(*t, (self.u @ q) * self.u, v)


def annihilator_fn(system):
    """$C(t, q, v)$ with $\\mathcal{W} = \\ker C$, computed independently of the library's stages."""
    def C(t, q, v):
        if system.work_space is not None:
            return system.work_space.annihilator_matrix(t, q, v)
        return jax.jacfwd(lambda v_: system.constraint.residual(t, q, v_))(v)

    return C


def user_basis(system, R):
    """A non-orthonormal user basis of $\\mathcal{W}$: `null(C) @ R`, as `fn(q, v)` (or `fn(t, q, v)`)."""
    C = annihilator_fn(system)

    def fn(*args):
        t, q, v = args if system.time_dependent else (0.0, *args)
        Cm = C(t, q, v)
        return jnp.linalg.qr(Cm.T, mode="complete")[0][:, Cm.shape[0] :] @ R

    return fn


def known_work_force(q, v):
    return 0.4 * jnp.tanh(q) + 0.2 * v[::-1]


@functools.cache
def case(name):
    """`(system, state, t, action, kane_basis)` of a catalogue entry."""
    if name == "thesis_example2":
        m = ThesisExample2()
        q = jnp.array([0.1, 1.3])
        state = gm.State(q, 0.5 * jnp.array([1.0, m.A(q)]))
        # U depends on q2 - q1: L is invariant under (q1, q2) -> (q1 + g, q2 + g); g_W = 0 here
        action = gm.LieAlgebraAction(lambda q: jnp.ones((2, 1), q.dtype))
        return m(), state, 0.0, action, lambda q, v: jnp.array([[2.0], [-2.0]])
    if name.startswith("pendulum"):
        th = 0.4
        q = jnp.array([jnp.cos(th), jnp.sin(th)])
        state = gm.State(q, 0.7 * jnp.array([-q[1], q[0]]))
        action = gm.LieAlgebraAction(lambda q: jnp.array([[0.0], [1.0]], q.dtype))  # L = ½|v|² + g x
        system = CartesianPendulum(form=name.split("_")[1])()
        return system, state, 0.0, action, lambda q, v: jnp.array([[-q[1]], [q[0]]])
    kw = {
        "random_generalized": {},
        "random_ideal": {"generalized": False},
        "random_time_dependent": {"time_dependent": True},
        "random_known_work": {},
    }[name]
    system, state, t = random_system(2, **kw)
    rng = np.random.default_rng(1)
    u = rng.normal(size=4)
    u = jnp.asarray(u / np.linalg.norm(u))
    system = eqx.tree_at(lambda s: s.lagrangian, system, TranslationInvariant(system.lagrangian, u))
    if name == "random_known_work":
        system = gm.LagrangianSystem(
            system.lagrangian, force=system.force, constraint=system.constraint,
            work_space=system.work_space, known_work=known_work_force,
        )
    T = jnp.linalg.qr(u[:, None], mode="complete")[0][:, 1:]  # translations orthogonal to u (r = 3)
    action = gm.LieAlgebraAction.from_group_action(lambda g, q: q + T @ g, dim=3)
    return system, state, t, action, user_basis(system, jnp.asarray(rng.normal(size=(2, 2))) + 2 * jnp.eye(2))


CASES = [
    "thesis_example2", "pendulum_holonomic", "pendulum_linear", "random_generalized",
    "random_ideal", "random_time_dependent", "random_known_work",
]


def solvers_for(name):
    system, _, _, action, basis = case(name)
    solvers = {
        "gauss": gm.Gauss(),
        "gibbs_appell_W": gm.GibbsAppell(metric="W"),
        "gibbs_appell_D": gm.GibbsAppell(metric="D"),
        "kane": gm.Kane(),
        "kane_bracket": gm.Kane(construction="bracket"),
        "kane_user": gm.Kane(basis=basis),
        "momentum": gm.NonholonomicMomentum(action),
        "multipliers": gm.Multipliers(),
    }
    if system.known_work is not None:
        solvers = {k: s for k, s in solvers.items() if s.supports_known_work}
    return solvers


@eqx.filter_jit
def _solve_all(system, state, t, solvers):
    stages = gm.assemble(system, state, t)
    ref = gm.Projection().acceleration(stages)
    return stages, ref, {k: s.acceleration(stages) for k, s in solvers.items()}


@functools.cache
def solved(name):
    """`(stages, a_R by Projection, {solver: a_R})`, compiled once per catalogue entry."""
    system, state, t, _, _ = case(name)
    return _solve_all(system, state, t, solvers_for(name))


def assert_rel(x, ref, tol=1e-10, msg=""):
    err = float(jnp.linalg.norm(x - ref))
    assert err <= tol * float(jnp.linalg.norm(ref)), (msg, err, float(jnp.linalg.norm(ref)))


def assert_small(x, scale, tol=1e-10, msg=""):
    assert float(jnp.linalg.norm(x)) <= tol * float(scale), (msg, float(jnp.linalg.norm(x)), float(scale))


# -- all solvers agree ------------------------------------------------------------------------


@pytest.mark.parametrize("name", CASES)
def test_all_solvers_agree(name):
    stages, ref, accs = solved(name)
    Fc_ref = stages.M @ (ref - stages.a_U)
    assert_rel(stages.A @ ref, stages.b)  # X_R ∈ S(C)
    # F^c - F^0 ∈ W^0 (Cor. 1, 1')
    assert_small(stages.W_basis.T @ (Fc_ref - stages.F0), jnp.linalg.norm(Fc_ref) + jnp.linalg.norm(stages.Q))
    assert len(accs) >= 6
    for key, a in accs.items():
        assert_rel(a, ref, msg=key)
        assert_rel(stages.M @ (a - stages.a_U), Fc_ref, msg=key)  # constraint force


def test_public_api_every_solver():
    """`acceleration` accepts every solver; `constraint_force` and `multipliers` too (one compile)."""
    system, state, t, _, _ = case("thesis_example2")
    solvers = solvers_for("thesis_example2")

    @eqx.filter_jit
    def run(solvers):
        return {k: gm.acceleration(system, state, s, t) for k, s in solvers.items()}, gm.constraint_force(
            system, state, solvers["kane_user"], t
        )

    accs, F = run(solvers)
    a_ref = gm.acceleration(system, state)
    for key, a in accs.items():
        assert_rel(a, a_ref, msg=key)
    assert_rel(F, gm.constraint_force(system, state))
    stages, _, _ = solved("random_known_work")
    a, lam = gm.Multipliers().acceleration_and_multipliers(stages)
    system, state, t, _, _ = case("random_known_work")
    assert_rel(lam, gm.multipliers(system, state, t=t))
    assert_rel(stages.M @ (a - stages.a_U), stages.F0 + stages.C.T @ lam)


def test_vmap_pendulum_closed_form():
    """A batch of pendulum states through every solver under `jax.vmap`; closed-form tension (seed 001)."""
    model = CartesianPendulum(m=1.3, l=1.7, g=9.81, form="linear")
    system = model()
    th = jnp.linspace(-2.0, 2.5, 5)
    w = jnp.linspace(-1.0, 1.5, 5)
    q = model.l * jnp.stack([jnp.cos(th), jnp.sin(th)], axis=1)
    v = w[:, None] * jnp.stack([-q[:, 1], q[:, 0]], axis=1)
    solvers = dict(solvers_for("pendulum_linear"))

    @eqx.filter_jit
    def batched(q, v):
        return jax.vmap(lambda q_, v_: _solve_all(system, gm.State(q_, v_), 0.0, solvers)[2])(q, v)

    out = batched(q, v)
    # a = g x̂ - (|v|²/l + g x/l) q/l  (tension along -r̂, x down)
    lam = (jnp.sum(v**2, 1) / model.l + model.g * q[:, 0] / model.l) / model.l
    a_exact = jnp.array([model.g, 0.0]) - lam[:, None] * q
    for key, a in out.items():
        assert a.shape == (5, 2)
        assert_rel(a, a_exact, msg=key)


def test_gradients_agree_between_solvers():
    """Reverse-mode gradients w.r.t. the Lagrangian's parameters and the state, through every solver,
    agree; one directional derivative is checked against finite differences. (The direction `u`
    that defines the symmetry is held fixed: moving it would break the invariance the momentum
    solver relies on.)"""
    name = "random_generalized"
    system, state, t, _, _ = case(name)
    solvers = solvers_for(name)
    keys = list(solvers)
    w = jnp.array([0.3, -1.1, 0.7, 0.2])

    def with_params(L0):
        return eqx.tree_at(lambda s: s.lagrangian.L0, system, L0)

    def losses(L0, state):
        stages = gm.assemble(with_params(L0), state, t)
        return jnp.stack([jnp.sin(w @ solvers[k].acceleration(stages)) for k in keys])

    jac = eqx.filter_jit(jax.jacrev(losses, argnums=(0, 1)))(system.lagrangian.L0, state)
    leaves = jax.tree_util.tree_leaves(jac)
    assert len(leaves) >= 6
    for leaf in leaves:  # leading axis: the solvers
        assert jnp.all(jnp.isfinite(leaf))
        for i in range(1, len(keys)):
            assert_rel(leaf[i], leaf[0], tol=1e-8, msg=keys[i])
    # finite differences along a parameter direction, reusing the compiled forward pass
    L0 = system.lagrangian.L0
    dB = jnp.asarray(np.random.default_rng(3).normal(size=L0.B1.shape))
    h = 1e-5

    def forward(eps):
        sys_eps = with_params(eqx.tree_at(lambda L: L.B1, L0, L0.B1 + eps * dB))
        return jnp.sin(w @ _solve_all(sys_eps, state, t, solvers)[2]["kane"])

    fd = (forward(h) - forward(-h)) / (2 * h)
    ad = jnp.sum(jac[0].B1[keys.index("kane")] * dB)
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
        assert_rel(stages.A @ a, stages.b)  # still in S(C)
        inc = bracket_norm2(stages, a - stages.a_U) - base
        assert inc > 0
        d2 = bracket_norm2(stages, delta)
        assert abs(float(inc - d2)) <= 1e-10 * float(base + d2)


@pytest.mark.parametrize("name, ideal", [("random_generalized", False), ("thesis_example2", False), ("random_ideal", True)])
def test_observation8_cetaev(name, ideal):
    """Observation 8: the classical Gauss minimizer (M-norm) is $X_R$ iff $\\mathcal{W} = \\mathcal{D}$,
    and $[,] = \\langle,\\rangle_M$ exactly then."""
    stages, a_R, _ = solved(name)
    a_M, _ = stages.solve_saddle(stages.M, stages.A, stages.Q)  # argmin ||a - a_U||_M on A a = b
    assert_rel(stages.A @ a_M, stages.b)
    if ideal:
        assert_rel(a_M, a_R)
        assert_rel(stages.bracket, stages.M)
    else:
        assert float(jnp.linalg.norm(a_M - a_R)) > 1e-3 * float(jnp.linalg.norm(a_R))
        assert float(jnp.linalg.norm(stages.bracket - stages.M)) > 1e-3 * float(jnp.linalg.norm(stages.M))


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
    """Lemma 4: with an $M$-orthonormal basis $e_i$ ($e_{1..n-k}$ spanning $\\mathcal{W}$, the rest $\\mathcal{W}^\\perp$)
    and $Y_U = \\sum y^i e_i$, $Y_R = \\sum_{i \\le n-k} y^i \\Pi_{\\mathcal{D}} e_i$. Observation 13: $\\Pi_{\\mathcal{D}}$
    maps $\\mathcal{W}$ isomorphically onto $\\mathcal{D}$."""
    stages, a_R, _ = solved(name)
    n, m = stages.n, stages.n - stages.k
    B = gm.orthonormal_basis(stages)
    assert_rel(B.T @ stages.M @ B, jnp.eye(n))
    assert_small(stages.C @ B[:, :m], jnp.linalg.norm(stages.C) * jnp.linalg.norm(B), tol=1e-12)
    y = jnp.linalg.solve(B, stages.a_U - stages.a_0)
    assert_rel(stages.a_0 + stages.project_D(B[:, :m]) @ y[:m], a_R)
    P = stages.project_D(stages.W_basis)  # Observation 13
    assert_small(stages.A @ P, jnp.linalg.norm(stages.A) * jnp.linalg.norm(P), tol=1e-12)
    s = jnp.linalg.svd(P / jnp.linalg.norm(P, axis=0), compute_uv=False)
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
    assert_rel(b.T @ stages.bracket @ b, jnp.eye(m))
    assert_small(stages.A @ b, scale, tol=1e-12)
    assert_small(stages.C @ B[:, :m], scale, tol=1e-12)
    assert_rel(stages.project_D(B[:, :m]), b)
    assert_small(stages.W_basis.T @ stages.M @ B[:, m:], scale * jnp.linalg.norm(stages.M), tol=1e-12)
    y = jnp.linalg.solve(B, stages.a_Ubar - stages.a_0)
    assert_rel(stages.a_0 + b @ y[:m], a_R)
    assert_rel(accs["kane_bracket"], a_R)


def test_momentum_equation_along_trajectory():
    """Prop. 6' (5.45) on a plain diffrax trajectory of a random generalized system with external
    force and known work, $L$ invariant under the translations orthogonal to $u$ ($\\dim \\mathfrak{g} = 3$):
    for $\\xi(t) \\in \\mathfrak{g}_{\\mathcal{W}}$ (a null vector of $C\\,\\Xi$, by a cross product),
    $J^{nh}(\\xi)(t_1) - J^{nh}(\\xi)(t_0) = \\int D_vL(\\dot\\xi_Q) + F^e(\\xi_Q) + F^0(\\xi_Q)\\,dt$."""
    system, state, t, action, _ = case("random_known_work")
    C = annihilator_fn(system)
    solver = gm.NonholonomicMomentum(action)

    def xi_of(q, v):
        K = C(0.0, q, v) @ action(q)
        return jnp.cross(K[0], K[1])  # spans ker(C Ξ) = g_W

    def rhs(t, y, args):
        q, v, _ = y
        a = gm.acceleration(system, gm.State(q, v), solver)
        xi, xi_dot = jax.jvp(xi_of, (q, v), (v, a))
        dLdv = jax.grad(system.L, argnums=2)(t, q, v)
        X = action(q)
        F = system.external_force(t, q, v) + system.known_work_force(t, q, v)
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


def test_known_work_rejected_where_principle_does_not_generalize():
    system, state, t, _, _ = case("random_known_work")
    for solver in (gm.Gauss(), gm.GibbsAppell(metric="D")):
        assert not solver.supports_known_work
        with pytest.raises(ValueError, match="does not generalize"):
            gm.acceleration(system, state, solver, t)
    assert gm.GibbsAppell(metric="W").supports_known_work


def test_bad_configuration():
    with pytest.raises(ValueError, match="'W'"):
        gm.GibbsAppell(metric="M")
    with pytest.raises(ValueError, match="construction"):
        gm.Kane(construction="qr")
    with pytest.raises(TypeError):
        gm.NonholonomicMomentum(lambda q: q)
    system, state, t, _, _ = case("thesis_example2")
    with pytest.raises(ValueError, match=r"\(n, n - k\)"):
        gm.acceleration(system, state, gm.Kane(basis=lambda q, v: jnp.eye(2)))


def test_kane_basis_not_spanning_W():
    system, state, t, _, _ = case("thesis_example2")
    m = ThesisExample2()
    # a basis of D = span (1, A(q)), not of W = span (1, -1)
    bad = gm.Kane(basis=lambda q, v: jnp.stack([jnp.ones_like(q[0]), m.A(q)])[:, None])
    with pytest.raises(Exception, match="do not form a basis of W"):
        gm.acceleration(system, state, bad, t)
    system, state, t, _, basis = case("random_generalized")
    dependent = gm.Kane(basis=lambda q, v: basis(q, v)[:, [0, 0]])
    with pytest.raises(Exception, match="do not form a basis of W"):
        gm.acceleration(system, state, dependent, t)


def test_action_not_leaving_L_invariant():
    """Thesis Example 2.3's action $(q^1, q^2) \\mapsto (q^1 + g, q^2 - g)$ does not leave the spring–Coulomb
    potential of Example 2 invariant (it depends on $q^2 - q^1$); the joint translation does."""
    system, state, t, invariant_action, _ = case("thesis_example2")
    gm.check_invariance(system, state, invariant_action, t)  # passes
    thesis_action = gm.LieAlgebraAction(lambda q: jnp.array([[1.0], [-1.0]], q.dtype))
    with pytest.raises(Exception, match="not invariant"):
        gm.acceleration(system, state, gm.NonholonomicMomentum(thesis_action), t)
    with pytest.raises(Exception, match="not invariant"):
        gm.check_invariance(system, state, thesis_action, t)
