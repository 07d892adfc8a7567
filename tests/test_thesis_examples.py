"""Thesis Examples 2.1–2.4: $Y_R$ of Example 2 through Gauss, Gibbs–Appell, the momentum equation and Kane.

Closed forms (thesis §3.2): $a_R = (Y_R, A Y_R + b)$ with $b = (\\partial A/\\partial q \\cdot v)\\,v^1$ (3.29) and
$Y_R = (m_1 Y_U^1 + m_2(b - Y_U^2)) / (m_1 - m_2 A)$, $Y_U = -(\\partial_1 U/m_1, \\partial_2 U/m_2)$.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import pytest

import geomech as gm
from geomech.models import ThesisExample2

MODEL = ThesisExample2(m1=1.0, m2=2.0, kappa=3.0, a=1.0, coulomb=0.5)
Q0 = jnp.array([0.1, 1.3])


def state_on_C(model, q, v1):
    return gm.State(q, v1 * jnp.array([1.0, model.A(q)]))


def closed_form(model, U, state):
    """$a_R$ of Example 2 from (3.29) and the formula for $Y_R$, with the potential `U`."""
    q, v = state.q, state.v
    m1, m2 = model.m1, model.m2
    Y_U = -jax.grad(U)(q) / jnp.array([m1, m2])
    A = model.A(q)
    b = jax.grad(model.A)(q) @ v * v[0]  # (3.29)
    Y_R = (m1 * Y_U[0] + m2 * (b - Y_U[1])) / (m1 - m2 * A)
    return jnp.array([Y_R, A * Y_R + b]), Y_U, A, b


def thesis_U(q):
    """Example 2's potential with the errata of `ThesisExample2` (squared spring, repulsive Coulomb)."""
    r = q[1] - q[0]
    return 0.5 * MODEL.kappa * (r - MODEL.a) ** 2 + MODEL.coulomb / r


STATE = state_on_C(MODEL, Q0, 0.7)
SYSTEM = MODEL()


def assert_close(x, y, tol=1e-12):
    assert float(jnp.max(jnp.abs(x - y))) <= tol * (1.0 + float(jnp.max(jnp.abs(y))))


@eqx.filter_jit
def _stages_and(solver):
    stages = gm.assemble(SYSTEM, STATE)
    return stages, solver.acceleration(stages)


def test_example_2_1_gauss():
    """Example 2.1: the minimizer of $\\|\\tau^{-1}(X - X_U)\\|_{[,]}$ over $\\mathcal{S}(\\mathcal{C})$ (4.3) is
    $X_R$; the projections entering $[,]$ are those of (3.31)."""
    stages, a = _stages_and(gm.Gauss())
    a_R, _, A, _ = closed_form(MODEL, thesis_U, STATE)
    assert_close(a, a_R)
    m1, m2 = MODEL.m1, MODEL.m2
    d = m2 * A - m1
    Pi_D = jnp.array([[-m1, m2], [-m1 * A, m2 * A]]) / d  # (3.31)
    Pi_Wp = jnp.array([[m2 * A, -m2], [m1 * A, -m1]]) / d
    assert_close(stages.Pi_D, Pi_D)
    assert_close(stages.Pi_Wperp, Pi_Wp)
    # at the minimum the D-component of τ⁻¹(X_R - X_U) vanishes (Example 2.1)
    assert_close(Pi_D @ (a - stages.a_U), jnp.zeros(2))


@pytest.mark.parametrize("metric", ["W", "D"])
def test_example_2_2_gibbs_appell(metric):
    """Example 2.2: $D_X G_{\\mathcal{W}}(X)(u) = \\langle \\tau^{-1}(X - X_U), u\\rangle_M$ and
    $D_X G_{\\mathcal{D}}(X)(u) = [\\tau^{-1}(X - X_U), u]$; the unique stationary field is $X_R$."""
    stages, a = _stages_and(gm.GibbsAppell(metric=metric))
    a_R, _, _, _ = closed_form(MODEL, thesis_U, STATE)
    assert_close(a, a_R)
    G = gm.gibbs_appell_function(stages, metric)
    X, u = jnp.array([0.3, -1.2]), jnp.array([0.7, 0.4])
    H = stages.M if metric == "W" else stages.bracket
    assert_close(jax.grad(G)(X) @ u, (X - stages.a_U) @ H @ u)


def invariant_U(q):
    """A potential of $q^1 + q^2$ (a harmonic well), invariant under $(q^1, q^2) \\mapsto (q^1 + g, q^2 - g)$."""
    return 0.5 * MODEL.kappa * (q[0] + q[1] - MODEL.a) ** 2


def invariant_A(q):
    return 0.3 + 0.1 * jnp.sin(q[0] + q[1])  # A < m1/m2 = 0.5: (3.19) holds everywhere


def test_example_2_3_momentum():
    """Example 2.3. The thesis's spring–Coulomb potential depends on $q^2 - q^1$, so it is *not*
    invariant under the action $(q^1, q^2) \\mapsto (q^1 + g, q^2 - g)$ it uses; we take instead a
    potential and an $A(q)$ that are functions of $q^1 + q^2$ (both invariant), keeping the masses,
    the constraint $A(q) \\dot q^1 = \\dot q^2$ and $\\mathcal{W} = \\mathrm{span}\\{(1, -1)\\}$ of Example 2.
    Then $\\mathfrak{g}_{\\mathcal{W}} = \\mathfrak{g}$, $J^{nh}(\\xi) = (m_1 v^1 - m_2 v^2)\\xi$ (4.16), the
    momentum solver reproduces $Y_R$, and $m_1 v^1 - m_2 v^2$ is conserved along a diffrax trajectory."""
    model = eqx.tree_at(lambda m: m.A, MODEL, invariant_A)
    L = lambda q, v: 0.5 * (model.m1 * v[0] ** 2 + model.m2 * v[1] ** 2) - invariant_U(q)
    system = gm.LagrangianSystem(
        L, constraint=gm.LinearConstraint(model.constraint_row),
        work_space=gm.Subspace(annihilator=model.W_annihilator),
    )
    action = gm.LieAlgebraAction.from_group_action(lambda g, q: q + g[0] * jnp.array([1.0, -1.0]), dim=1)
    solver = gm.NonholonomicMomentum(action)
    state = state_on_C(model, Q0, 0.7)
    gm.check_invariance(system, state, action)
    m1, m2 = model.m1, model.m2
    J = gm.nonholonomic_momentum(system, state, action, jnp.array([1.0]))
    assert_close(J, m1 * state.v[0] - m2 * state.v[1])  # (4.16)
    a_R, _, _, _ = closed_form(model, invariant_U, state)
    assert_close(gm.acceleration(system, state, solver), a_R)

    def rhs(t, y, args):
        q, v = y
        return v, gm.acceleration(system, gm.State(q, v), solver)

    ts = jnp.linspace(0.0, 2.0, 9)
    sol = diffrax.diffeqsolve(
        diffrax.ODETerm(rhs), diffrax.Tsit5(), 0.0, 2.0, 0.01, (state.q, state.v),
        saveat=diffrax.SaveAt(ts=ts), stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    q, v = sol.ys
    momentum = m1 * v[:, 0] - m2 * v[:, 1]
    assert float(jnp.max(jnp.abs(momentum - momentum[0]))) < 1e-8
    assert float(jnp.max(jnp.abs(v[:, 0] - v[0, 0]))) > 1e-2  # the motion is not trivial
    assert float(jnp.max(jnp.abs(jax.vmap(invariant_A)(q) * v[:, 0] - v[:, 1]))) < 1e-8  # stays on C


def test_example_2_4_kane_bracket_basis():
    """Example 2.4: with $b \\propto (1, A)$ spanning $\\mathcal{D}$, $\\Gamma((1, A)) =
    \\frac{m_1 - m_2 A}{m_1 + m_2}(1, -1)$ (4.40), $\\beta \\propto (1, m_1/m_2)$ spanning $\\mathcal{W}^\\perp$
    (3.30); writing $Y_U$ in $\\{\\Gamma(b), \\beta\\}$ (4.41), $Y_R = y^1_U\\, b$; Kane's equations in
    this basis, in an $M$-orthonormal one and in the user basis $(1, -1)$ all give $Y_R$."""
    stages, a = _stages_and(gm.Kane(construction="bracket"))
    a_R, Y_U, A, b_th = closed_form(MODEL, thesis_U, STATE)
    assert_close(a, a_R)
    m1, m2 = MODEL.m1, MODEL.m2
    b, B = gm.bracket_basis(stages)
    c = b[0, 0]
    assert_close(b[:, 0], c * jnp.array([1.0, A]))
    assert_close(B[:, 0], c * (m1 - m2 * A) / (m1 + m2) * jnp.array([1.0, -1.0]))  # (4.40)
    beta = B[:, 1]
    assert_close(beta / beta[0], jnp.array([1.0, m1 / m2]))  # (3.30)
    # (4.41) with the thesis's X_0 = (v; 0, b): Y_U = τ⁻¹(X_U - X_0) = (Y_U¹, Y_U² - b)
    y = jnp.linalg.solve(B, Y_U - jnp.array([0.0, b_th]))
    assert_close(jnp.array([0.0, b_th]) + y[0] * b[:, 0], a_R)
    for solver in (gm.Kane(), gm.Kane(basis=lambda q, v: jnp.array([[1.0], [-1.0]]))):
        assert_close(_stages_and(solver)[1], a_R)
