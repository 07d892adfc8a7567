"""Configuration spaces that are Lie groups (docs/lie_groups.md): the stages in the chart centred at q
against equations of motion written by hand in body coordinates (Euler, Euler–Poisson, Suslov,
Chaplygin sled, a rolling body on SO(3) × ℝ²), and the Runge–Kutta–Munthe-Kaas integration."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from helpers import accelerations, solvers

import geomech as gm

SOLVERS = solvers()  # the tests' one registry (a user basis and the momentum equation aside)

E3 = jnp.array([0.0, 0.0, 1.0])


def hat(w):
    return jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def random_inertia(rng):
    """A symmetric positive definite inertia with off-diagonal terms (I₁₃ ≠ 0)."""
    B = rng.normal(size=(3, 3))
    return jnp.asarray(B @ B.T + 0.5 * np.eye(3))


def random_rotation(rng):
    return jaxlie.SO3.exp(jnp.asarray(rng.normal(size=3) * 2.0))


class RigidBody(eqx.Module):
    """$L = \\tfrac12\\omega^\\top I\\omega - mg\\ell\\,(R e_3)\\cdot e_3$ (a heavy top for mgl ≠ 0;
    parameters as fields: one compilation for every inertia)."""

    I: jax.Array
    mgl: float = 0.0

    def __call__(self, R, w):
        return 0.5 * w @ self.I @ w - self.mgl * R.apply(E3) @ E3


def rigid_body(I, mgl=0.0):
    return RigidBody(I, jnp.asarray(mgl))


def random_states(rng, count=3):
    """A batch of `count` random rotations and body angular velocities."""
    R = jaxlie.SO3.exp(jnp.asarray(rng.normal(size=(count, 3)) * 2.0))
    return R, jnp.asarray(rng.normal(size=(count, 3)))


def kkt(M, rhs, A, b):
    """The acceleration of $M a = rhs + A^\\top\\lambda$, $A a = b$ (Lagrange's multipliers)."""
    n, k = M.shape[0], A.shape[0]
    K = jnp.block([[M, -A.T], [A, jnp.zeros((k, k))]])
    return jnp.linalg.solve(K, jnp.concatenate([rhs, b]))[:n]


@pytest.mark.parametrize("name", SOLVERS)
def test_free_rigid_body_gives_euler_equations(name):
    rng = np.random.default_rng(0)
    I = random_inertia(rng)
    system = gm.LagrangianSystem(rigid_body(I), manifold=gm.SO3())
    R, w = random_states(rng)
    a = jax.vmap(lambda R, w: gm.acceleration(system, gm.State(R, w), SOLVERS[name]))(R, w)
    euler = jnp.linalg.solve(I, jnp.cross(w @ I, w).T).T  # I ω̇ = Iω × ω
    np.testing.assert_allclose(a, euler, rtol=1e-12, atol=1e-12)


def test_unconstrained_acceleration_on_a_group():
    rng = np.random.default_rng(6)
    I = random_inertia(rng)
    system = gm.LagrangianSystem(rigid_body(I), manifold=gm.SO3())
    R, w = random_rotation(rng), jnp.asarray(rng.normal(size=3))
    a = gm.unconstrained_acceleration(system, gm.State(R, w))
    np.testing.assert_allclose(a, jnp.linalg.solve(I, jnp.cross(I @ w, w)), rtol=1e-12)


def test_heavy_top_gives_euler_poisson_equations():
    rng = np.random.default_rng(1)
    I, mgl = random_inertia(rng), 2.7
    system = gm.LagrangianSystem(rigid_body(I, mgl), manifold=gm.SO3())
    R, w = random_states(rng)
    gamma = jax.vmap(lambda R: R.inverse().apply(E3))(R)  # the vertical in the body frame
    # I ω̇ = Iω × ω + mgℓ γ × e₃ (centre of mass at ℓ e₃ in the body)
    torque = jnp.cross(w @ I, w) + mgl * jnp.cross(gamma, E3)
    expected = jnp.linalg.solve(I, torque.T).T
    for name, a in accelerations(system, gm.State(R, w), SOLVERS).items():
        np.testing.assert_allclose(a, expected, rtol=1e-11, atol=1e-12, err_msg=name)


def test_suslov_problem():
    """ω₂ = 0 (a `LinearConstraint` A(R) = [[0, 1, 0]]): I ω̇ = Iω × ω + λ e₂ with ω̇₂ = 0."""
    rng = np.random.default_rng(2)
    I = random_inertia(rng)
    system = gm.LagrangianSystem(
        rigid_body(I), constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SO3(),
    )
    e2 = jnp.array([[0.0, 1.0, 0.0]])
    R, w = random_states(rng)
    w = w.at[:, 1].set(0.0)
    expected = jax.vmap(lambda w: kkt(I, jnp.cross(I @ w, w), e2, jnp.zeros(1)))(w)
    for name, a in accelerations(system, gm.State(R, w), SOLVERS).items():
        np.testing.assert_allclose(a, expected, atol=1e-12, err_msg=name)
    Fc = jax.vmap(lambda R, w: gm.constraint_force(system, gm.State(R, w)))(R, w)
    np.testing.assert_allclose(Fc[:, [0, 2]], 0.0, atol=1e-12)  # along e₂ only (ideal)


def test_chaplygin_sled_on_se2():
    """Body velocity (u, v_y, ω) at the contact point, centre of mass at a along the body x axis,
    knife edge v_y = 0: u̇ = a ω², (J + m a²) ω̇ = -m a u ω (Bloch, Nonholonomic Mechanics §1.7)."""
    m, J, a = 1.3, 0.4, 0.7

    def L(g, v):
        u, vy, w = v
        return 0.5 * m * (u**2 + (vy + a * w) ** 2) + 0.5 * J * w**2

    system = gm.LagrangianSystem(
        L, constraint=gm.LinearConstraint(lambda g: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SE2(),
    )
    g = jaxlie.SE2.from_xy_theta(0.3, -1.2, 2.5)
    u, w = 0.8, -1.7
    expected = jnp.array([a * w**2, 0.0, -m * a * u * w / (J + m * a**2)])
    for name, got in accelerations(system, [gm.State(g, jnp.array([u, 0.0, w]))], SOLVERS).items():
        np.testing.assert_allclose(got[0], expected, rtol=1e-12, atol=1e-12, err_msg=name)


def test_rolling_body_on_so3_times_plane():
    """q = (R, x) on SO(3) × ℝ², v = (ω, ẋ): a body of radius r rolling on the plane
    (ẋ = r [(Rω) × e₃]_xy), held by a spring k x·[R e₁]_xy. By hand: the constraint is
    A v = 0 with A = [r P ê₃ R, I₂] and b = 0 (ẍ = r [(R ω̇) × e₃]_xy since Ṙω = R(ω × ω) = 0);
    forces τ = -k e₁ × (Rᵀ x̃) on SO(3) and -k [R e₁]_xy on ℝ²."""
    rng = np.random.default_rng(3)
    I, m, r, k = random_inertia(rng), 2.0, 0.5, 3.0
    P = jnp.eye(3)[:2]

    def L(q, v):
        R, x = q
        w, xdot = v[:3], v[3:]
        return 0.5 * w @ I @ w + 0.5 * m * xdot @ xdot - k * x @ (P @ R.apply(jnp.eye(3)[0]))

    def A_of_q(q):
        R, _ = q
        rows = lambda w: -r * P @ jnp.cross(R.apply(w), E3)
        return jnp.concatenate([jax.jacfwd(rows)(jnp.zeros(3)), jnp.eye(2)], axis=1)

    system = gm.LagrangianSystem(
        L, constraint=gm.LinearConstraint(A_of_q), manifold=gm.Product(gm.SO3(), gm.Euclidean(2))
    )
    states, expectations = [], []
    for _ in range(3):
        R, x, w = random_rotation(rng), jnp.asarray(rng.normal(size=2)), jnp.asarray(rng.normal(size=3))
        xdot = r * P @ jnp.cross(R.apply(w), E3)
        states.append(gm.State((R, x), jnp.concatenate([w, xdot])))
        Rm, x3 = R.as_matrix(), jnp.concatenate([x, jnp.zeros(1)])
        A = jnp.concatenate([r * P @ hat(E3) @ Rm, jnp.eye(2)], axis=1)
        M = jax.scipy.linalg.block_diag(I, m * jnp.eye(2))
        rhs = jnp.concatenate([jnp.cross(I @ w, w) - k * jnp.cross(jnp.eye(3)[0], Rm.T @ x3), -k * P @ Rm[:, 0]])
        expectations.append(kkt(M, rhs, A, jnp.zeros(2)))
    for name, got in accelerations(system, states, SOLVERS).items():
        np.testing.assert_allclose(got, jnp.stack(expectations), rtol=1e-10, atol=1e-11, err_msg=name)


def test_se3_free_body():
    """A free rigid body on SE(3) with body twist (V, ω) in jaxlie's order (linear, angular):
    m V̇ = m V × ω, I ω̇ = Iω × ω (the Kirchhoff / Euler equations of a body with its centre of
    mass at the origin of the body frame)."""
    rng = np.random.default_rng(4)
    I, m = random_inertia(rng), 1.7
    L = lambda T, v: 0.5 * m * v[:3] @ v[:3] + 0.5 * v[3:] @ I @ v[3:]
    system = gm.LagrangianSystem(L, manifold=gm.SE3())
    T = jaxlie.SE3.exp(jnp.asarray(rng.normal(size=6)))
    V, w = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3))
    a = gm.acceleration(system, gm.State(T, jnp.concatenate([V, w])))
    expected = jnp.concatenate([jnp.cross(V, w), jnp.linalg.solve(I, jnp.cross(I @ w, w))])
    np.testing.assert_allclose(a, expected, rtol=1e-12, atol=1e-12)


def test_holonomic_constraint_on_a_group():
    """A heavy top as a body on SO(3) × ℝ³ held at its pivot by h(R, x) = x - ℓ R e₃ = 0
    (x the centre of mass): the same rotational acceleration as the top on SO(3)."""
    rng = np.random.default_rng(5)
    I, m, g, ell = random_inertia(rng), 1.5, 9.81, 0.4
    Ic = I - m * ell**2 * (jnp.eye(3) - jnp.outer(E3, E3))  # inertia about the centre of mass

    def L(q, v):
        w, xdot = v[:3], v[3:]
        return 0.5 * w @ Ic @ w + 0.5 * m * xdot @ xdot - m * g * q[1][2]

    system = gm.LagrangianSystem(
        L, constraint=gm.HolonomicConstraint(lambda q: q[1] - ell * q[0].apply(E3)),
        manifold=gm.Product(gm.SO3(), gm.Euclidean(3)),
    )
    top = gm.LagrangianSystem(rigid_body(I, m * g * ell), manifold=gm.SO3())
    R, w = random_rotation(rng), jnp.asarray(rng.normal(size=3))
    xdot = ell * R.apply(jnp.cross(w, E3))
    state = gm.State((R, ell * R.apply(E3)), jnp.concatenate([w, xdot]))
    assert gm.on_constraint(system, state)
    a = gm.acceleration(system, state)
    np.testing.assert_allclose(a[:3], gm.acceleration(top, gm.State(R, w)), rtol=1e-10, atol=1e-12)


def test_state_shapes_on_groups():
    R = jaxlie.SO3.identity()
    with pytest.raises(ValueError, match="v of shape"):
        gm.State(R, jnp.zeros(4))
    system = gm.LagrangianSystem(rigid_body(jnp.eye(3)), manifold=gm.SE3())
    with pytest.raises(ValueError, match="jaxlie.SE3"):
        gm.acceleration(system, gm.State(R, jnp.zeros(3)))


# -- integration on the group (Runge–Kutta–Munthe-Kaas) --------------------------------------------


def rotation_matrix_unnormalized(wxyz):
    """$R = (w^2 - u\\cdot u) I + 2uu^\\top + 2w\\hat u$ from a quaternion as stored (no
    renormalization, unlike `jaxlie.SO3.as_matrix`): $R^\\top R = |q|^4 I$."""
    w, u = wxyz[0], wxyz[1:]
    return (w**2 - u @ u) * jnp.eye(3) + 2 * jnp.outer(u, u) + 2 * w * hat(u)


def test_free_rigid_body_stays_on_so3_over_many_steps():
    """10⁴ fixed Tsit5 steps without stabilization: every stored quaternion gives
    ‖RᵀR − I‖ at round-off; energy and the spatial angular momentum R I ω are conserved."""
    I = jnp.diag(jnp.array([1.0, 2.0, 3.5]))
    system = gm.LagrangianSystem(rigid_body(I), manifold=gm.SO3())
    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9])), jnp.array([0.4, -1.1, 0.7]))
    n = 10_000
    sol = gm.simulate(
        system, y0, 0.0, 10.0, integrator=diffrax.Tsit5(), dt0=10.0 / n, max_steps=n,
        stepsize_controller=diffrax.ConstantStepSize(), saveat=diffrax.SaveAt(steps=True),
    )
    assert isinstance(sol.states.q, jaxlie.SO3)
    assert int(sol.stats["num_steps"]) == n
    wxyz = sol.states.q.wxyz
    R = jax.vmap(rotation_matrix_unnormalized)(wxyz)
    defect = jnp.linalg.norm(jnp.einsum("tji,tjk->tik", R, R) - jnp.eye(3)[None], axis=(1, 2))
    assert float(jnp.max(defect)) < 1e-13
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-12)
    momentum = jnp.einsum("tij,tj->ti", R, sol.states.v @ I)  # spatial R I ω
    np.testing.assert_allclose(momentum, jnp.broadcast_to(momentum[0], momentum.shape), atol=1e-12)


def test_convergence_order_on_so3():
    """The fitted order of Tsit5 (5) and Bosh3 (3) as Munthe-Kaas methods on SO(3) with a fixed
    step (heavy top over [0, 1]), errors in R and ω against the step h/16."""
    system = gm.LagrangianSystem(rigid_body(jnp.diag(jnp.array([1.0, 1.6, 2.3])), 3.0), manifold=gm.SO3())
    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.5, 0.2, -0.3])), jnp.array([1.0, -2.0, 3.0]))

    def end(integrator, h):
        sol = gm.simulate(
            system, y0, 0.0, 1.0, integrator=integrator, dt0=h, max_steps=1100,
            stepsize_controller=diffrax.ConstantStepSize(),
        )
        return jnp.concatenate([sol.states.q.as_matrix()[-1].ravel(), sol.states.v[-1]])

    for integrator, order in ((diffrax.Tsit5(), 5), (diffrax.Bosh3(), 3)):
        hs = np.array([1 / 16, 1 / 32, 1 / 64])
        reference = end(integrator, hs[-1] / 16)
        errors = [float(jnp.linalg.norm(end(integrator, h) - reference)) for h in hs]
        fitted = np.polyfit(np.log(hs), np.log(errors), 1)[0]
        assert abs(fitted - order) < 0.3, (integrator, errors, fitted)


def test_heavy_top_through_upright_against_euler_poisson():
    """A heavy top started upright (R = I, where ZXZ angles are singular), adaptive Tsit5 with
    dense output at `ts`, an ensemble of two; against SciPy on the Euler–Poisson equations
    I ω̇ = Iω × ω + mgℓ γ × e₃, γ̇ = γ × ω (γ = Rᵀe₃), written here from the physics."""
    from scipy.integrate import solve_ivp

    I, mgl = jnp.diag(jnp.array([1.0, 1.0, 0.4])), 1.5
    system = gm.LagrangianSystem(rigid_body(I, mgl), manifold=gm.SO3())
    R0 = jaxlie.SO3(jnp.stack([jnp.array([1.0, 0, 0, 0]), jaxlie.SO3.exp(jnp.array([0.1, 0, 0])).wxyz]))
    w0 = jnp.array([[0.3, 0.0, 6.0], [0.0, 0.2, 4.0]])
    ts = jnp.linspace(0.0, 3.0, 7)
    sol = gm.simulate(system, gm.State(R0, w0), 0.0, 3.0, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    assert sol.states.q.wxyz.shape == (2, 7, 4) and sol.states.v.shape == (2, 7, 3)
    np.testing.assert_allclose(jnp.linalg.norm(sol.states.q.wxyz, axis=-1), 1.0, atol=1e-13)
    Inp = np.asarray(I)

    def euler_poisson(t, y):
        w, g = y[:3], y[3:]
        wdot = np.linalg.solve(Inp, np.cross(Inp @ w, w) + mgl * np.cross(g, [0, 0, 1.0]))
        return np.concatenate([wdot, np.cross(g, w)])

    for b in range(2):
        g0 = np.asarray(jax.tree_util.tree_map(lambda x, b=b: x[b], R0).inverse().apply(E3))
        ref = solve_ivp(euler_poisson, (0, 3), np.concatenate([w0[b], g0]), t_eval=np.asarray(ts),
                        rtol=1e-12, atol=1e-12, method="DOP853")
        R_b = jax.tree_util.tree_map(lambda x, b=b: x[b], sol.states.q)
        gamma = jax.vmap(lambda R: R.inverse().apply(E3))(R_b)
        np.testing.assert_allclose(sol.states.v[b], ref.y[:3].T, atol=1e-7)
        np.testing.assert_allclose(gamma, ref.y[3:].T, atol=1e-7)
    np.testing.assert_allclose(sol.energy, sol.energy[:, :1] * jnp.ones((1, 7)), rtol=1e-8)


def test_simulate_on_a_product_with_rolling_constraint():
    """SO(3) × ℝ² (tuple points, flat velocities) through `simulate`: a heavy body rolling on the
    plane (no spring, so the energy is conserved), constraint and energy held to tolerance, saved
    points on SO(3)."""
    r, P = 0.5, jnp.eye(3)[:2]
    system = rolling_body(jnp.diag(jnp.array([1.0, 1.5, 0.7])), 2.0, r)
    R, w = jaxlie.SO3.exp(jnp.array([0.2, -0.4, 0.3])), jnp.array([1.0, -0.5, 2.0])
    xdot = r * P @ jnp.cross(R.apply(w), E3)
    y0 = gm.State((R, jnp.array([0.1, -0.2])), jnp.concatenate([w, xdot]))
    ts = jnp.linspace(0.0, 2.0, 5)
    sol = gm.simulate(system, y0, 0.0, 2.0, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    Rs, xs = sol.states.q
    assert Rs.wxyz.shape == (5, 4) and xs.shape == (5, 2) and sol.states.v.shape == (5, 5)
    np.testing.assert_allclose(jnp.linalg.norm(Rs.wxyz, axis=-1), 1.0, atol=1e-13)
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-8)
    assert float(jnp.max(sol.constraint_residual)) < 1e-8
    assert not np.allclose(xs[-1], xs[0])  # it moved


# -- symmetry and a user basis on a group ------------------------------------------------------------


def vertical_rotations():
    """Rotations about the spatial e₃ acting on SO(3) by left multiplication, from the group
    action itself (`from_group_action`), and the generator written out: ξ_Q(R) = Rᵀe₃."""
    by_action = gm.LieAlgebraAction.from_group_action(lambda g, R: jaxlie.SO3.exp(g[0] * E3) @ R, 1)
    return by_action, gm.LieAlgebraAction(lambda R: R.inverse().apply(E3)[:, None])


def test_heavy_top_vertical_angular_momentum():
    """The heavy top with the rotations about the vertical: J^nh = (Iω)·(Rᵀe₃), the vertical
    angular momentum; the momentum equation as equations of motion (`NonholonomicMomentum`)
    gives Euler–Poisson's acceleration, and J is conserved along its motion."""
    I = random_inertia(np.random.default_rng(11))
    top = gm.LagrangianSystem(rigid_body(I, 1.3), manifold=gm.SO3())
    by_action, written_out = vertical_rotations()
    R, w = random_states(np.random.default_rng(12))
    gamma = jax.vmap(lambda R: R.inverse().apply(E3))(R)
    np.testing.assert_allclose(jax.vmap(by_action)(R)[..., 0], gamma, atol=1e-14)
    J = jax.vmap(lambda R, w: gm.nonholonomic_momentum(top, gm.State(R, w), by_action, xi=jnp.ones(1)))(R, w)
    np.testing.assert_allclose(J, jnp.einsum("bi,ij,bj->b", w, I, gamma), rtol=1e-13)
    expected = jnp.linalg.solve(I, (jnp.cross(w @ I, w) + 1.3 * jnp.cross(gamma, E3)).T).T
    for action in (by_action, written_out):
        jax.vmap(lambda R, w, a=action: gm.check_invariance(top, gm.State(R, w), a))(R, w)
        a = jax.vmap(lambda R, w, a=action: gm.acceleration(top, gm.State(R, w), gm.NonholonomicMomentum(a)))(R, w)
        np.testing.assert_allclose(a, expected, rtol=1e-11, atol=1e-12)
    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.3, -0.7, 1.1])), jnp.array([0.2, -0.4, 2.9]))
    sol = gm.simulate(
        top, y0, 0.0, 3.0, solver=gm.NonholonomicMomentum(written_out), rtol=1e-10, atol=1e-10,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 3.0, 7)),
    )
    J = jax.vmap(lambda R, w: (I @ w) @ R.inverse().apply(E3))(sol.states.q, sol.states.v)
    np.testing.assert_allclose(J, J[0], rtol=1e-8)
    assert float(jnp.max(jnp.abs(sol.states.v - y0.v[None]))) > 0.1  # it moved


def test_momentum_equation_on_so3_with_a_constraint_and_a_force():
    """The Suslov problem (ω₂ = 0) with a damping torque F^e = −cω and the rotations of space
    (left multiplication, ξ_Q(R) = Rᵀξ, r = 3): along the curve ξ(t) = R(t)u in g_W (u ⊥ e₂ in
    the body), dJ^nh(ξ(t))/dt computed from each solver's acceleration equals the right-hand
    side of (4.11), D_vL([ξ̇]_Q) + F^e(ξ_Q) = Iω·(ω × u) − cω·u."""
    I, c = random_inertia(np.random.default_rng(13)), 0.7
    space = gm.LieAlgebraAction(lambda R: R.inverse().as_matrix())
    suslov = gm.LagrangianSystem(
        rigid_body(I), force=lambda R, w: -c * w,
        constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 1.0, 0.0]])), manifold=gm.SO3(),
    )
    u = jnp.array([jnp.cos(0.4), 0.0, jnp.sin(0.4)])
    R, w = random_states(np.random.default_rng(14))
    w = w.at[:, 1].set(0.0)
    every = accelerations(
        suslov, gm.State(R, w), {**SOLVERS, "momentum": gm.NonholonomicMomentum(space)}
    )
    for name, accs in every.items():
        for b in range(3):
            Rb, wb, a = jaxlie.SO3(R.wxyz[b]), w[b], accs[b]

            def J(s, Rb=Rb, wb=wb, a=a):  # J^nh(ξ(t)) along R(t) = R exp(sω), ω(t) = ω + s a
                Rs = Rb @ jaxlie.SO3.exp(s * wb)
                return gm.nonholonomic_momentum(suslov, gm.State(Rs, wb + s * a), space, xi=Rs.apply(u))

            dJ = jax.jvp(J, (0.0,), (1.0,))[1]
            rhs = (I @ wb) @ jnp.cross(wb, u) - c * wb @ u
            np.testing.assert_allclose(dJ, rhs, rtol=1e-10, atol=1e-12, err_msg=name)


def test_kane_user_basis_on_a_group():
    """`Kane(basis=fn)` on SO(3): `fn` receives the point R and returns body velocities spanning
    W (here depending on R); the Suslov acceleration as Lagrange's multipliers give it. A basis
    with a column off W is reported."""
    I = random_inertia(np.random.default_rng(15))
    suslov = gm.LagrangianSystem(
        rigid_body(I), constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SO3(),
    )

    def basis(R, w):
        gamma = R.inverse().apply(E3)
        return jnp.stack([jnp.array([1.0 + 0.5 * gamma[0], 0.0, 0.5 * gamma[2]]), jnp.array([0.0, 0.0, 1.0])], 1)

    R, w = random_states(np.random.default_rng(16))
    w = w.at[:, 1].set(0.0)
    e2 = jnp.array([[0.0, 1.0, 0.0]])
    expected = jax.vmap(lambda w: kkt(I, jnp.cross(I @ w, w), e2, jnp.zeros(1)))(w)
    a = jax.vmap(lambda R, w: gm.acceleration(suslov, gm.State(R, w), gm.Kane(basis=basis)))(R, w)
    np.testing.assert_allclose(a, expected, rtol=1e-11, atol=1e-12)
    off_W = gm.Kane(basis=lambda R, w: jnp.stack([R.inverse().apply(E3), jnp.array([0.0, 0.0, 1.0])], 1))
    with pytest.raises(Exception, match="do not form a basis of W"):
        gm.acceleration(suslov, gm.State(jaxlie.SO3.exp(jnp.array([0.3, 0.4, 0.1])), w[0]), off_W)


def test_what_does_not_run_on_groups_yet_says_so():
    """Clear errors, before tracing, for what is not available on Lie groups."""
    system = gm.LagrangianSystem(
        rigid_body(jnp.eye(3) + 0.1), constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SO3(),
    )
    state = gm.State(jaxlie.SO3.identity(), jnp.array([1.0, 0.0, 0.5]))
    with pytest.raises(ValueError, match="explicit diffrax Runge"):
        gm.simulate(system, state, 0.0, 1.0, integrator=diffrax.Kvaerno5())
    with pytest.raises(ValueError, match="simulate_vakonomic integrates with an explicit"):
        gm.simulate_vakonomic(system, state, None, 0.0, 1.0, integrator=diffrax.Kvaerno5())
    with pytest.raises(ValueError, match="omega .* not available on Lie groups"):
        gm.simulate_vakonomic(system, state, None, 0.0, 1.0, omega=lambda R, w: jnp.eye(3))
    with pytest.raises(ValueError, match="BacksolveAdjoint is not available on Lie groups"):
        gm.simulate(system, state, 0.0, 1.0, adjoint=diffrax.BacksolveAdjoint())


# -- vakonomic dynamics on a group -------------------------------------------------------------------


def zxz(q):
    """The rotation of ZXZ Euler angles q = (φ, θ, ψ): R = R_z(φ) R_x(θ) R_z(ψ)."""
    return jaxlie.SO3.from_z_radians(q[0]) @ jaxlie.SO3.from_x_radians(q[1]) @ jaxlie.SO3.from_z_radians(q[2])


def zxz_body_velocity(q, q_dot):
    """ω with R ω̂ = Ṙ along the angles (RᵀṘ from the matrix, no jaxlie tangent)."""
    R, R_dot = jax.jvp(lambda q: zxz(q).as_matrix(), (q,), (q_dot,))
    W = R.T @ R_dot
    return jnp.array([W[2, 1], W[0, 2], W[1, 0]])


def test_vakonomic_on_so3_against_euler_angles():
    """The vakonomic Suslov problem with gravity (ω₂ = 0, a heavy top with I₁₂, I₁₃ ≠ 0) on SO(3)
    against the same system written in ZXZ angles (L and the constraint composed with
    ω(q, q̇), coordinates, away from θ = 0, π): the same rotations, body velocities and
    multipliers, μ₀ ≠ 0 (so vakonomic ≠ Četaev)."""
    I = jnp.array([[1.0, 0.1, 0.2], [0.1, 1.6, 0.0], [0.2, 0.0, 2.3]])
    top = rigid_body(I, 1.3)
    row = jnp.array([[0.0, 1.0, 0.0]])
    on_group = gm.LagrangianSystem(top, constraint=gm.LinearConstraint(lambda R: row), manifold=gm.SO3())
    L = lambda q, q_dot: top(zxz(q), zxz_body_velocity(q, q_dot))
    A = lambda q: row @ jax.jacfwd(lambda u: zxz_body_velocity(q, u))(jnp.zeros(3))
    angles = gm.LagrangianSystem(L, constraint=gm.LinearConstraint(A))
    q0, w0 = jnp.array([0.3, 1.1, -0.4]), jnp.array([0.7, 0.0, 1.2])
    q_dot0 = jnp.linalg.solve(jax.jacfwd(lambda u: zxz_body_velocity(q0, u))(jnp.zeros(3)), w0)
    ts, mu0 = jnp.linspace(0.0, 2.0, 9), jnp.array([0.4])
    run = lambda system, y0: gm.simulate_vakonomic(
        system, y0, mu0, 0.0, 2.0, saveat=diffrax.SaveAt(ts=ts), rtol=1e-11, atol=1e-11
    )
    ref, sol = run(angles, gm.State(q0, q_dot0)), run(on_group, gm.State(zxz(q0), w0))
    assert isinstance(sol.states.q, jaxlie.SO3) and sol.mu.shape == (9, 1)
    assert float(jnp.min(jnp.abs(jnp.sin(ref.states.q[:, 1])))) > 0.3  # away from the singularity
    R_ref = jax.vmap(lambda q: zxz(q).as_matrix())(ref.states.q)
    np.testing.assert_allclose(sol.states.q.as_matrix(), R_ref, atol=1e-9)
    np.testing.assert_allclose(sol.states.v, jax.vmap(zxz_body_velocity)(ref.states.q, ref.states.v), atol=1e-9)
    np.testing.assert_allclose(sol.mu, ref.mu, atol=1e-9)
    assert float(jnp.ptp(sol.mu)) > 0.5  # the multiplier moved
    np.testing.assert_allclose(sol.vakonomic_energy, sol.vakonomic_energy[0], rtol=1e-9)
    assert float(jnp.max(sol.constraint_residual)) < 1e-10


def test_vakonomic_equals_cetaev_for_a_holonomic_constraint_on_a_group():
    """For φ = ḣ the vakonomic equations of L + μ·ḣ are the holonomic ones with multiplier
    μ̇, whatever μ₀: the pivoted top on SO(3) × ℝ³ (a batch of μ₀) moves as `gm.simulate`."""
    I, ell = random_inertia(np.random.default_rng(10)), 0.4
    top = pivoted_top(I, 1.5, 9.81, ell)
    R, w = jaxlie.SO3.exp(jnp.array([0.3, -0.7, 1.1])), jnp.array([0.2, -0.4, 2.9])
    y0 = gm.State((R, ell * R.apply(E3)), jnp.concatenate([w, ell * R.apply(jnp.cross(w, E3))]))
    ts = jnp.linspace(0.0, 1.5, 7)
    cetaev = gm.simulate(top, y0, 0.0, 1.5, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    mu0 = jnp.array([[0.0, 0.0, 0.0], [0.5, -1.0, 2.0]])
    vak = gm.simulate_vakonomic(top, y0, mu0, 0.0, 1.5, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    for b in range(2):
        np.testing.assert_allclose(vak.states.q[0].as_matrix()[b], cetaev.states.q[0].as_matrix(), atol=1e-8)
        np.testing.assert_allclose(vak.states.q[1][b], cetaev.states.q[1], atol=1e-8)
        np.testing.assert_allclose(vak.states.v[b], cetaev.states.v, atol=1e-8)
    assert float(jnp.max(jnp.abs(cetaev.states.v[-1] - y0.v))) > 0.1  # it moved


def rolling_body(I, m, r):
    """A body of radius r rolling on the plane, q = (R, x) on SO(3) × ℝ², v = (ω, ẋ):
    ẋ = r [(Rω) × e₃]_xy (`LinearConstraint`), no potential."""
    P = jnp.eye(3)[:2]

    def L(q, v):
        return 0.5 * v[:3] @ I @ v[:3] + 0.5 * m * v[3:] @ v[3:]

    def A_of_q(q):
        rows = lambda w: -r * P @ jnp.cross(q[0].apply(w), E3)
        return jnp.concatenate([jax.jacfwd(rows)(jnp.zeros(3)), jnp.eye(2)], axis=1)

    return gm.LagrangianSystem(
        L, constraint=gm.LinearConstraint(A_of_q), manifold=gm.Product(gm.SO3(), gm.Euclidean(2))
    )


def test_stabilization_on_groups():
    """Loose tolerances over a long run: the pivoted top's drift off h = 0 and φ = 0 (holonomic
    on SO(3) × ℝ³) is smaller with Baumgarte (the residual in the chart centred at q), and it and
    the rolling body's off φ = 0 (SO(3) × ℝ²) are at round-off with projection (Gauss–Newton in
    that chart), than without stabilization."""
    ell = 0.4
    top = pivoted_top(jnp.array([[1.0, 0.1, 0.2], [0.1, 1.6, 0.0], [0.2, 0.0, 2.3]]), 1.5, 9.81, ell)
    R, w = jaxlie.SO3.exp(jnp.array([0.3, -0.7, 1.1])), jnp.array([0.2, -0.4, 2.9])
    y0 = gm.State((R, ell * R.apply(E3)), jnp.concatenate([w, ell * R.apply(jnp.cross(w, E3))]))
    saveat = diffrax.SaveAt(ts=jnp.linspace(0.0, 30.0, 61))
    run = lambda system, y0, s: gm.simulate(
        system, y0, 0.0, 30.0, stabilization=s, rtol=1e-6, atol=1e-6, saveat=saveat
    )
    free, baumgarte, projected = (run(top, y0, s) for s in (None, "baumgarte", "projection"))
    drift = lambda sol: (float(jnp.max(sol.position_residual)), float(jnp.max(sol.constraint_residual)))
    (h_free, phi_free), (h_b, phi_b), (h_p, phi_p) = drift(free), drift(baumgarte), drift(projected)
    assert h_free > 1e-5 and h_b < h_free / 100 and phi_b < phi_free / 10, (drift(free), drift(baumgarte))
    assert h_p < 1e-13 and phi_p < 1e-13
    Rp, xp = projected.states.q
    np.testing.assert_allclose(xp, ell * jax.vmap(lambda R: R.apply(E3))(Rp), atol=1e-13)
    np.testing.assert_allclose(projected.energy, projected.energy[0], rtol=1e-3)
    body = rolling_body(jnp.diag(jnp.array([1.0, 1.5, 0.7])), 2.0, 0.5)
    R, w = jaxlie.SO3.exp(jnp.array([0.2, -0.4, 0.3])), jnp.array([1.0, -0.5, 2.0])
    xdot = 0.5 * jnp.eye(3)[:2] @ jnp.cross(R.apply(w), E3)
    y0 = gm.State((R, jnp.array([0.1, -0.2])), jnp.concatenate([w, xdot]))
    sols = (run(body, y0, s) for s in (None, "projection"))  # Baumgarte: the top above (CI time)
    phi_free, phi_p = (float(jnp.max(s.constraint_residual)) for s in sols)
    assert phi_free > 1e-9 and phi_p < 1e-13, (phi_free, phi_p)


def test_reverse_mode_gradient_through_simulate_on_so3():
    """d/dI₃ of a function of the final state (heavy top, fixed Tsit5 steps, the default
    RecursiveCheckpointAdjoint) against a central difference."""
    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9])), jnp.array([0.4, -1.1, 0.7]))

    def loss(I3):
        I = jnp.diag(jnp.stack([jnp.asarray(1.0), jnp.asarray(2.0), I3]))
        system = gm.LagrangianSystem(rigid_body(I, 2.0), manifold=gm.SO3())
        sol = gm.simulate(
            system, y0, 0.0, 1.0, dt0=0.01, stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=200,
        )
        return sol.states.q.as_matrix()[-1, 0, 2] + sol.states.v[-1, 0]

    h = 1e-5
    central = (loss(3.5 + h) - loss(3.5 - h)) / (2 * h)
    np.testing.assert_allclose(jax.grad(loss)(3.5), central, rtol=1e-7)


def test_forward_mode_through_simulate_on_so3():
    """`jax.jacfwd` of the final state (heavy top, fixed Tsit5 steps) in (I₃, mgℓ) against central
    differences; `diffrax.ForwardMode()` given explicitly gives the same Jacobian."""
    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9])), jnp.array([0.4, -1.1, 0.7]))

    def final(p, adjoint=diffrax.RecursiveCheckpointAdjoint()):
        I = jnp.diag(jnp.stack([jnp.asarray(1.0), jnp.asarray(2.0), p[0]]))
        system = gm.LagrangianSystem(rigid_body(I, p[1]), manifold=gm.SO3())
        sol = gm.simulate(
            system, y0, 0.0, 1.0, dt0=0.01, stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=200, adjoint=adjoint,
        )
        return jnp.concatenate([sol.states.q.as_matrix()[-1].ravel(), sol.states.v[-1]])

    p, h = jnp.array([3.5, 2.0]), 1e-5
    J = jax.jacfwd(final)(p)
    central = jnp.stack([(final(p.at[i].add(h)) - final(p.at[i].add(-h))) / (2 * h) for i in range(2)], 1)
    np.testing.assert_allclose(J, central, atol=1e-8 * float(jnp.max(jnp.abs(central))))
    assert float(jnp.min(jnp.max(jnp.abs(central), axis=0))) > 1e-2  # both parameters matter
    np.testing.assert_array_equal(jax.jacfwd(lambda p: final(p, diffrax.ForwardMode()))(p), J)


def test_optimistix_default_least_squares_through_simulate_on_so3():
    """The heavy top's $I_3$ (about the centre of mass) and $mg\\ell$ fitted by
    `optx.least_squares` with its default options (a forward-mode Jacobian of a function
    optimistix traces once, then linearizes) from the attitude and angular velocity of a
    noiseless run, starting 20 % off: the library model `gm.models.HeavyTop`."""
    import optimistix as optx

    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9])), jnp.array([0.4, -1.1, 3.0]))
    ts = jnp.linspace(0.0, 1.0, 6)

    def observed(p):  # p = (I3, m g ell) with m = 1, g = 9.81: ell = p[1] / g
        top = gm.models.HeavyTop(I1=2.0, I2=2.5, I3=p[0], ell=p[1] / 9.81)
        sol = gm.simulate(
            top.system(), y0, 0.0, 1.0, saveat=diffrax.SaveAt(ts=ts), dt0=0.01,
            stepsize_controller=diffrax.ConstantStepSize(), max_steps=200,
        )  # fmt: skip
        return jnp.concatenate([sol.states.q.as_matrix().reshape(-1), sol.states.v.ravel()])

    truth = jnp.array([1.5, 2.0])
    data = observed(truth)
    solver = optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10)
    fit = optx.least_squares(lambda p, _: observed(p) - data, solver, 1.2 * truth, max_steps=50)
    np.testing.assert_allclose(fit.value, truth, rtol=1e-6)


def pivoted_top(I, m, g, ell):
    """A body on SO(3) × ℝ³ (centre of mass x) held at its pivot by h(R, x) = x − ℓ R e₃ = 0,
    with inertia `I` about the centre of mass."""

    def L(q, v):
        w, xdot = v[:3], v[3:]
        return 0.5 * w @ I @ w + 0.5 * m * xdot @ xdot - m * g * q[1][2]

    return gm.LagrangianSystem(
        L, constraint=gm.HolonomicConstraint(lambda q: q[1] - ell * q[0].apply(E3)),
        manifold=gm.Product(gm.SO3(), gm.Euclidean(3)),
    )


def test_validate_on_groups():
    """A Suslov state on ω₂ = 0 validates clean; off it, and with a NaN quaternion, the right
    problems; the pivoted top off its pivot (the holonomic residual measured against the size
    of the chart's coordinates)."""
    I = random_inertia(np.random.default_rng(7))
    suslov = gm.LagrangianSystem(
        rigid_body(I), constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SO3(),
    )
    R = jaxlie.SO3.exp(jnp.array([0.3, -0.7, 1.1]))
    assert gm.validate(suslov, gm.State(R, jnp.array([1.0, 0.0, 0.5]))).ok
    off = gm.validate(suslov, gm.State(R, jnp.array([1.0, 1e-3, 0.5])))
    assert off.codes() == ("off_constraint",)
    # |φ| / (|A D^-½| |D^½ v| + 0) written out (D = diag I)
    d = jnp.diagonal(I)
    v = jnp.array([1.0, 1e-3, 0.5])
    size = jnp.linalg.norm(jnp.sqrt(d) * v) / jnp.sqrt(d[1])
    np.testing.assert_allclose(off.problems[0].value, 1e-3 / size, rtol=1e-12)
    nan = gm.validate(suslov, gm.State(jaxlie.SO3(jnp.array([jnp.nan, 0.0, 0.0, 1.0])), v.at[1].set(0.0)))
    assert nan.codes() == ("nonfinite",) and "q is not finite" in nan.problems[0].message
    top = pivoted_top(I, 1.5, 9.81, 0.4)
    w = jnp.array([0.2, -0.4, 0.9])
    xdot = 0.4 * R.apply(jnp.cross(w, E3))
    good = gm.State((R, 0.4 * R.apply(E3)), jnp.concatenate([w, xdot]))
    assert gm.validate(top, good).ok
    moved = gm.State((R, 0.4 * R.apply(E3) + jnp.array([0.0, 0.0, 1e-3])), good.v)
    assert gm.validate(top, moved).codes() == ("off_constraint",)


def test_consistent_state_on_a_group():
    """The pivoted top: held tangent directions of the chart centred at R (rotation about the
    body's third axis, ψ₂ = 0) and held x₀, x₁, ẋ-free; the result is on the pivot by the
    formula x = ℓ R e₃, ẋ = ℓ R (ω × e₃) written out."""
    I, ell = random_inertia(np.random.default_rng(8)), 0.4
    top = pivoted_top(I, 1.5, 9.81, ell)
    R = jaxlie.SO3.exp(jnp.array([0.3, -0.7, 1.1]))
    x = ell * R.apply(E3) + jnp.array([0.02, -0.03, 0.01])
    state = gm.State((R, x), jnp.array([0.2, -0.4, 0.9, 0.0, 0.0, 0.0]))
    c = gm.consistent_state(top, state, fixed_q=(2, 3, 4), fixed_v=(0, 1, 2))
    Rc, xc = c.q
    np.testing.assert_allclose(xc, ell * Rc.apply(E3), atol=1e-13)
    np.testing.assert_array_equal(xc[:2], x[:2])
    psi = (R.inverse() @ Rc).log()  # Rc = R ⊕ ψ with the held direction ψ₂ = 0
    np.testing.assert_allclose(psi[2], 0.0, atol=1e-14)
    assert float(jnp.linalg.norm(psi)) > 1e-3  # it moved
    np.testing.assert_array_equal(c.v[:3], state.v[:3])
    np.testing.assert_allclose(c.v[3:], ell * Rc.apply(jnp.cross(c.v[:3], E3)), atol=1e-13)
    assert gm.validate(top, c).ok


@pytest.mark.parametrize("axis, stable", [(0, True), (1, False), (2, True)])
def test_linearize_free_rigid_body_about_principal_axes(axis, stable):
    """Steady rotation ω about a principal axis j: Euler's equations linearized give
    λ² = (I_j − I_k)(I_i − I_j) ω² / (I_i I_k) on the other axes i, k (the middle axis is
    unstable, the others are not), at any R (the tangent directions held, `fixed_q`)."""
    Id = jnp.array([1.0, 2.0, 3.0])
    system = gm.LagrangianSystem(rigid_body(jnp.diag(Id)), manifold=gm.SO3())
    w = 1.3
    state = gm.State(jaxlie.SO3.exp(jnp.array([0.3, 0.1, -0.2])), w * jnp.eye(3)[axis])
    lin = gm.linearize(system, state, coordinates=(), speeds=(0, 1, 2), fixed_q=(0, 1, 2))
    i, k = (j for j in range(3) if j != axis)
    lam2 = (Id[axis] - Id[k]) * (Id[i] - Id[axis]) * w**2 / (Id[i] * Id[k])
    lam = jnp.sqrt(lam2.astype(complex))
    expected = np.sort_complex(np.array([0.0, lam, -lam]))
    np.testing.assert_allclose(np.sort_complex(np.asarray(lin.eigenvalues)), expected, atol=1e-12)
    assert (float(jnp.max(lin.eigenvalues.real)) > 1e-6) != stable
    np.testing.assert_allclose(lin.rate, 0.0, atol=1e-12)


@pytest.mark.parametrize("mgl", [-2.7, 2.7])
def test_linearize_heavy_top_at_rest(mgl):
    """The top at rest with its axis vertical, hanging (mgℓ < 0) or upright (mgℓ > 0):
    linearized in all three tangent directions δ of the chart centred at R = 1 and ω, the
    physical pendulum's λ² = mgℓ / I₁, mgℓ / I₂ (and 0 twice, rotation about the vertical)."""
    Id = jnp.array([1.0, 2.0, 3.0])
    system = gm.LagrangianSystem(rigid_body(jnp.diag(Id), mgl), manifold=gm.SO3())
    state = gm.State(jaxlie.SO3.identity(), jnp.zeros(3))
    lin = gm.linearize(system, state, coordinates=(0, 1, 2), speeds=(0, 1, 2))
    lam = np.sqrt(np.array(mgl / Id[:2], dtype=complex))
    expected = np.sort_complex(np.concatenate([lam, -lam, [0.0, 0.0]]))
    np.testing.assert_allclose(np.sort_complex(np.asarray(lin.eigenvalues)), expected, atol=1e-7)
    np.testing.assert_allclose(lin.rate, 0.0, atol=1e-14)


def test_project_to_constraints_on_a_group():
    """The pivoted top moved off its pivot: the projection lands on x = ℓ R e₃, ẋ = ℓ R (ω × e₃)
    (written out), its velocity correction M-orthogonal to C: M Δv = Aᵀλ with
    A = [ℓ R ê₃, 1] (φ = ẋ + ℓ R (e₃ × ω)); a batch projects as its members do."""
    I, ell = random_inertia(np.random.default_rng(9)), 0.4
    top = pivoted_top(I, 1.5, 9.81, ell)
    R = jaxlie.SO3.exp(jnp.array([0.3, -0.7, 1.1]))
    state = gm.State(
        (R, ell * R.apply(E3) + jnp.array([0.03, -0.02, 0.01])),
        jnp.array([0.2, -0.4, 0.9, 0.1, 0.3, -0.2]),
    )
    p = gm.project_to_constraints(top, state)
    Rp, xp = p.q
    np.testing.assert_allclose(jnp.linalg.norm(Rp.wxyz), 1.0, atol=1e-14)
    np.testing.assert_allclose(xp, ell * Rp.apply(E3), atol=1e-12)
    np.testing.assert_allclose(p.v[3:], ell * Rp.apply(jnp.cross(p.v[:3], E3)), atol=1e-12)
    M = jax.scipy.linalg.block_diag(I, 1.5 * jnp.eye(3))
    lam = (M @ (p.v - state.v))[3:]
    np.testing.assert_allclose((M @ (p.v - state.v))[:3], (ell * Rp.as_matrix() @ hat(E3)).T @ lam, atol=1e-12)
    assert gm.validate(top, p).ok
    batch = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), state, p)
    out = gm.project_to_constraints(top, batch)
    np.testing.assert_allclose(out.v[0], p.v, atol=1e-12)
    np.testing.assert_allclose(out.q[1][1], xp, atol=1e-12)


@pytest.mark.parametrize("known", [False, True])
def test_work_space_and_known_work_on_a_group(known):
    """W ≠ D and a known work on SO(3): Suslov's constraint ω₃ = 0 (D = ker e₃ᵀ) with a work space
    W = ker C, C = (e₃ + 0.3 e₁)ᵀ, and optionally F⁰(R, ω) = -0.2 Iω + 0.1 Rᵀe₃ with F^c(u) = F⁰(u)
    on W. By hand: F^c - F⁰ annihilates W, so I ω̇ = Iω × ω + F⁰ + Cᵀλ with e₃·ω̇ = 0 (the thesis'
    generalized nonholonomic system (3.19), §5.2)."""
    rng = np.random.default_rng(21)
    I = random_inertia(rng)
    C = jnp.array([[0.3, 0.0, 1.0]])
    F0 = (lambda R, w: -0.2 * I @ w + 0.1 * R.inverse().apply(E3)) if known else None
    system = gm.LagrangianSystem(
        rigid_body(I), constraint=gm.LinearConstraint(lambda R: E3[None]),
        work_space=gm.Subspace(annihilator=lambda R, w: C), known_work=F0, manifold=gm.SO3(),
    )  # fmt: skip
    R, w = random_states(rng)
    w = w.at[:, 2].set(0.0)  # on the constraint
    got = accelerations(system, gm.State(R, w), solvers(known_work=known))
    for b in range(3):
        Rb = jaxlie.SO3(R.wxyz[b])
        rhs = jnp.cross(I @ w[b], w[b]) + (F0(Rb, w[b]) if known else 0.0)
        K = jnp.block([[I, -C.T], [E3[None], jnp.zeros((1, 1))]])
        expected = jnp.linalg.solve(K, jnp.concatenate([rhs, jnp.zeros(1)]))[:3]
        for name, a in got.items():
            np.testing.assert_allclose(a[b], expected, rtol=1e-10, atol=1e-11, err_msg=name)
