"""gm.VariationalIntegrator on Lie groups (docs/variational.md, "On Lie groups"): the Lie-group
variational integrator and the discrete Lagrange–d'Alembert scheme on groups, each property
checked against an independent reference (the Jacobi-elliptic solution of Euler's equations,
SciPy on the Euler–Poisson and Suslov equations written here, the Chaplygin sled's closed form),
plus discrete Noether, the group element at round-off, ensembles, float32 and input errors.

One compiled configuration per system (parameters as module fields, `SaveAt(steps=True)`,
`max_steps=MAX`), reused for every step size. The 10⁵-step study is
`benchmarks/variational_lie.py`.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from scipy.integrate import solve_ivp
from scipy.special import ellipj

import geomech as gm

MAX = 1000  # max_steps of every run
E3 = jnp.array([0.0, 0.0, 1.0])
VI = gm.VariationalIntegrator
NS = np.array([20, 40, 80, 160])  # steps per unit time in the convergence studies


class RigidBody(eqx.Module):
    """$L = \\tfrac12\\omega^\\top I\\omega - mg\\ell\\,(R e_3)\\cdot e_3$ (a heavy top for mgl ≠ 0)."""

    I: jax.Array
    mgl: jax.Array

    def __call__(self, R, w):
        return 0.5 * w @ self.I @ w - self.mgl * R.apply(E3) @ E3


PRINCIPAL = np.array([1.0, 2.0, 3.5])
AXES = np.asarray(jaxlie.SO3.exp(jnp.array([0.4, -0.3, 0.7])).as_matrix())  # body → principal
INERTIA = jnp.asarray(AXES @ np.diag(PRINCIPAL) @ AXES.T)  # off-diagonal entries


def body(I=INERTIA, mgl=0.0, **kw) -> gm.LagrangianSystem:
    return gm.LagrangianSystem(RigidBody(jnp.asarray(I), jnp.asarray(mgl)), manifold=gm.SO3(), **kw)


def run(system, y0, t1, dt, quadrature="midpoint", **kw) -> gm.Solution:
    """A variational run from t = 0 saving every step."""
    return gm.simulate(
        system, y0, 0.0, t1, integrator=VI(quadrature), dt0=dt,
        saveat=diffrax.SaveAt(t0=True, steps=True), max_steps=MAX, **kw,
    )  # fmt: skip


def reached(sol):
    """(ts, states, energy) of the saved steps (drops diffrax's unused `inf` slots)."""
    ok = np.isfinite(np.asarray(sol.ts))
    return jax.tree.map(lambda x: np.asarray(x)[ok], (sol.ts, sol.states, sol.energy))


def final(sol):
    return jax.tree.map(lambda x: x[-1], reached(sol)[1])


def fitted_order(errors) -> float:
    return -np.polyfit(np.log(NS), np.log(np.asarray(errors)), 1)[0]


def hat(w):
    return jnp.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def rotation_matrix_unnormalized(wxyz):
    """$R$ from a quaternion as stored (no renormalization): $R^\\top R = |q|^4 I$."""
    w, u = wxyz[0], wxyz[1:]
    return (w**2 - u @ u) * jnp.eye(3) + 2 * jnp.outer(u, u) + 2 * w * hat(u)


def euler_closed_form(w0, t):
    """ω(t) of Euler's equations for the inertia `INERTIA` from `w0`, whose principal components
    are (a, 0, c) with a, c > 0 and M² > 2E I₂: the Jacobi-elliptic solution (Landau & Lifshitz,
    *Mechanics*, §37), rotated back to the body axes."""
    I1, I2, I3 = PRINCIPAL
    p = AXES.T @ np.asarray(w0)
    assert abs(p[1]) < 1e-14 and p[0] > 0 and p[2] > 0
    E2, M2 = PRINCIPAL @ p**2, (PRINCIPAL * p) @ (PRINCIPAL * p)
    assert M2 > E2 * I2
    k2 = (I2 - I1) * (E2 * I3 - M2) / ((I3 - I2) * (M2 - E2 * I1))
    tau = np.asarray(t) * np.sqrt((I3 - I2) * (M2 - E2 * I1) / (I1 * I2 * I3))
    sn, cn, dn, _ = ellipj(tau, k2)
    principal = np.stack(
        [
            np.sqrt((E2 * I3 - M2) / (I1 * (I3 - I1))) * cn,
            np.sqrt((E2 * I3 - M2) / (I2 * (I3 - I2))) * sn,
            np.sqrt((M2 - E2 * I1) / (I3 * (I3 - I1))) * dn,
        ],
        axis=-1,
    )
    return principal @ AXES.T


W0 = jnp.asarray(AXES @ np.array([0.8, 0.0, 1.1]))
R0 = jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9]))


def spatial_momentum(R, w, I=INERTIA):
    return np.einsum("tij,tj->ti", R, np.asarray(w) @ np.asarray(I))


# -- the free rigid body: Lie-group variational integrator ---------------------------------------


def test_free_rigid_body_noether_group_and_bounded_energy():
    """10³ steps: the spatial angular momentum R I ω conserved to the Newton tolerance (discrete
    Noether), the stored quaternion on SO(3) at round-off without renormalization, the energy
    error O(h²) and bounded (no drift from the first half to the second)."""
    h = 0.01
    sol = run(body(), gm.State(R0, W0), MAX * h, h)
    ts, states, energy = reached(sol)
    assert sol.result == diffrax.RESULTS.successful and len(ts) == MAX + 1
    R = jax.vmap(rotation_matrix_unnormalized)(states.q.wxyz)
    defect = jnp.linalg.norm(jnp.einsum("tji,tjk->tik", R, R) - jnp.eye(3)[None], axis=(1, 2))
    assert float(jnp.max(defect)) < 1e-13
    m = spatial_momentum(np.asarray(R), states.v)
    assert np.max(np.abs(m - m[0])) <= 1e-12 * np.linalg.norm(m[0])
    dE = np.abs(energy - energy[0]) / energy[0]
    half = len(dE) // 2
    assert 1e-8 < np.max(dE) < 5 * h**2  # it is not exact, and O(h²)
    assert np.max(dE[half:]) <= 1.5 * np.max(dE[:half])  # bounded: no drift


def test_free_rigid_body_second_order_against_elliptic_closed_form():
    """ω at t = 1 against the Jacobi-elliptic solution and R against a Tsit5 reference at
    rtol = 1e-12 (itself checked against the closed form): fitted orders within 0.15 of 2."""
    system, y0 = body(), gm.State(R0, W0)
    exact_w = euler_closed_form(W0, 1.0)
    reference = gm.simulate(system, y0, 0.0, 1.0, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(reference.states.v[-1], exact_w, atol=1e-10)
    exact_R = np.asarray(reference.states.q.as_matrix()[-1])
    err_w, err_R = [], []
    for n in NS:
        end = final(run(system, y0, 1.0, 1.0 / n))
        err_w.append(np.linalg.norm(end.v - exact_w))
        err_R.append(np.linalg.norm(np.asarray(jaxlie.SO3(end.q.wxyz).as_matrix()) - exact_R))
    assert abs(fitted_order(err_w) - 2) < 0.15, err_w
    assert abs(fitted_order(err_R) - 2) < 0.15, err_R


# -- the heavy top ------------------------------------------------------------------------------


@pytest.mark.parametrize("quadrature", ["midpoint", "trapezoid"])
def test_heavy_top_energy_bounded_noether_and_order(quadrature):
    """A heavy top (off-diagonal inertia): over 10³ steps the energy error is O(h²) and bounded
    and the vertical spatial angular momentum e₃·R I ω is conserved (discrete Noether for the
    rotations about e₃); ω and γ = Rᵀe₃ converge at order 2 to SciPy on the Euler–Poisson
    equations I ω̇ = Iω × ω + mgℓ γ × e₃, γ̇ = γ × ω, written here from the physics."""
    mgl = 2.0
    system, y0 = body(mgl=mgl), gm.State(R0, W0)
    h = 0.01
    ts, states, energy = reached(run(system, y0, MAX * h, h, quadrature))
    R = np.asarray(jaxlie.SO3(states.q.wxyz).as_matrix())
    vertical = spatial_momentum(R, states.v)[:, 2]
    assert np.max(np.abs(vertical - vertical[0])) <= 1e-12 * np.abs(vertical[0])
    dE = np.abs(energy - energy[0]) / np.abs(energy[0])
    half = len(dE) // 2
    assert np.max(dE) < 5 * h**2 and np.max(dE[half:]) <= 1.5 * np.max(dE[:half])

    Inp = np.asarray(INERTIA)

    def euler_poisson(t, y):
        w, g = y[:3], y[3:]
        wdot = np.linalg.solve(Inp, np.cross(Inp @ w, w) + mgl * np.cross(g, [0, 0, 1.0]))
        return np.concatenate([wdot, np.cross(g, w)])

    g0 = np.asarray(R0.inverse().apply(E3))
    ref = solve_ivp(euler_poisson, (0, 1), np.concatenate([W0, g0]), rtol=1e-13, atol=1e-13,
                    method="DOP853").y[:, -1]  # fmt: skip
    errors = []
    for n in NS:
        end = final(run(system, y0, 1.0, 1.0 / n, quadrature))
        gamma = np.asarray(jaxlie.SO3(end.q.wxyz).inverse().apply(E3))
        errors.append(np.linalg.norm(np.concatenate([end.v, gamma]) - ref))
    assert abs(fitted_order(errors) - 2) < 0.15, errors


class Damping(eqx.Module):
    """The body torque $F = -c\\,I\\omega$: then $\\frac{d}{dt}(R I\\omega) = -c\\,R I\\omega$, so the
    spatial angular momentum is $m(t) = e^{-ct} m(0)$ (Euler's equations with the torque)."""

    I: jax.Array
    c: jax.Array

    def __call__(self, R, w):
        return -self.c * self.I @ w


def test_forces_on_so3_by_discrete_lagrange_dalembert():
    """A damped free body (the body torque −c I ω): the spatial angular momentum R I ω converges
    at order 2 to its closed form e^{−ct} m(0), for both quadratures (forces on the group by the
    discrete Lagrange–d'Alembert principle, the midpoint rule with the left-trivialized
    variation at the midpoint)."""
    c = 0.7
    system = body(force=Damping(INERTIA, jnp.asarray(c)))
    y0 = gm.State(R0, W0)
    m0 = np.asarray(R0.as_matrix()) @ np.asarray(INERTIA @ W0)
    for quadrature in ("midpoint", "trapezoid"):
        errors = []
        for n in NS:
            end = final(run(system, y0, 1.0, 1.0 / n, quadrature))
            m1 = np.asarray(jaxlie.SO3(end.q.wxyz).as_matrix()) @ np.asarray(INERTIA) @ end.v
            errors.append(np.linalg.norm(m1 - np.exp(-c) * m0))
        assert abs(fitted_order(errors) - 2) < 0.15, (quadrature, errors)


# -- nonholonomic: discrete Lagrange–d'Alembert on groups -----------------------------------------


def test_suslov_problem_on_so3():
    """The Suslov problem ⟨ω, e₃⟩ = 0 (off-diagonal inertia): the constraint held at every step
    to the Newton tolerance, the energy error O(h²) and bounded over 10³ steps, and ω of order 2
    against SciPy on the reduced equations I ω̇ = Iω × ω + λ e₃, ω₃ = 0 written here."""
    system = body(constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 0.0, 1.0]])))
    w0 = jnp.array([0.9, -0.6, 0.0])
    y0 = gm.State(R0, w0)
    h = 0.01
    sol = run(system, y0, MAX * h, h)
    ts, states, energy = reached(sol)
    assert len(ts) == MAX + 1
    assert np.max(np.asarray(sol.constraint_residual)[np.isfinite(np.asarray(sol.ts))]) <= 1e-14
    np.testing.assert_allclose(np.linalg.norm(states.q.wxyz, axis=-1), 1.0, atol=1e-14)
    dE = np.abs(energy - energy[0]) / energy[0]
    half = len(dE) // 2
    assert np.max(dE) < 5 * h**2 and np.max(dE[half:]) <= 1.5 * np.max(dE[:half]), np.max(dE)

    Inp = np.asarray(INERTIA)

    def suslov(t, w12):
        w = np.concatenate([w12, [0.0]])
        return np.linalg.solve(Inp[:2, :2], np.cross(Inp @ w, w)[:2])  # rows 1, 2: no λ

    ref = solve_ivp(suslov, (0, 1), np.asarray(w0[:2]), rtol=1e-13, atol=1e-13, method="DOP853")
    errors = [np.linalg.norm(final(run(system, y0, 1.0, 1.0 / n)).v[:2] - ref.y[:, -1]) for n in NS]
    assert abs(fitted_order(errors) - 2) < 0.15, errors


def test_chaplygin_sled_on_se2_against_closed_form():
    """The Chaplygin sled on SE(2), body velocity (u, v_y, ω) at the blade, centre of mass at a
    along the body x axis, knife edge v_y = 0 (a `LinearConstraint`): u̇ = a ω²,
    (J + m a²) ω̇ = -m a u ω (Bloch, *Nonholonomic Mechanics*, §1.7), so with c = m a/(J + m a²)
    and V² = u² + (a/c) ω²: u = V tanh(cVt + θ₀), ω = ω₀ cosh θ₀ / cosh(cVt + θ₀). Constraint
    held at every step, energy bounded, order 2."""
    m, J, a = 1.3, 0.4, 0.7

    def L(g, v):
        u, vy, w = v
        return 0.5 * m * (u**2 + (vy + a * w) ** 2) + 0.5 * J * w**2

    system = gm.LagrangianSystem(
        L, constraint=gm.LinearConstraint(lambda g: jnp.array([[0.0, 1.0, 0.0]])), manifold=gm.SE2()
    )
    u0, w0 = -0.5, 1.7
    y0 = gm.State(jaxlie.SE2.from_xy_theta(0.3, -1.2, 2.5), jnp.array([u0, 0.0, w0]))
    c = m * a / (J + m * a**2)
    V = np.sqrt(u0**2 + a / c * w0**2)
    th0 = np.arctanh(u0 / V)

    def exact(t):
        th = c * V * t + th0
        return np.array([V * np.tanh(th), 0.0, w0 * np.cosh(th0) / np.cosh(th)])

    h = 0.01
    sol = run(system, y0, MAX * h, h)
    ts, states, energy = reached(sol)
    assert np.max(np.asarray(sol.constraint_residual)[np.isfinite(np.asarray(sol.ts))]) <= 1e-14
    np.testing.assert_allclose(states.v, np.stack([exact(t) for t in ts]), atol=5 * h**2)
    dE = np.abs(energy - energy[0]) / energy[0]
    assert np.max(dE) < 5 * h**2, np.max(dE)
    errors = [np.linalg.norm(final(run(system, y0, 1.0, 1.0 / n)).v - exact(1.0)) for n in NS]
    assert abs(fitted_order(errors) - 2) < 0.15, errors


# -- holonomic constraints on a group (RATTLE-type) ------------------------------------------------


def test_pivoted_top_on_so3_times_r3_holonomic():
    """A heavy top as a free body on SO(3) × ℝ³ held at its pivot by h(R, x) = x − ℓ R e₃ = 0:
    positions on h = 0 and velocities on Dh v = 0 at every step, the vertical angular momentum
    about the pivot e₃·(R I_c ω + m x × ẋ) conserved (discrete Noether), and ω converging at
    order 2 to SciPy's Euler–Poisson solution of the same top."""
    Ic_diag, m, g, ell = np.array([0.6, 0.9, 0.5]), 1.5, 9.81, 0.4
    Ic = jnp.diag(jnp.asarray(Ic_diag))
    I = np.diag(Ic_diag) + m * ell**2 * (np.eye(3) - np.outer(E3, E3))  # about the pivot

    def L(q, v):
        w, xdot = v[:3], v[3:]
        return 0.5 * w @ Ic @ w + 0.5 * m * xdot @ xdot - m * g * q[1][2]

    system = gm.LagrangianSystem(
        L, constraint=gm.HolonomicConstraint(lambda q: q[1] - ell * q[0].apply(E3)),
        manifold=gm.Product(gm.SO3(), gm.Euclidean(3)),
    )  # fmt: skip
    w0 = jnp.array([0.5, -0.3, 4.0])
    y0 = gm.State((R0, ell * R0.apply(E3)), jnp.concatenate([w0, ell * R0.apply(jnp.cross(w0, E3))]))
    h = 0.01
    sol = run(system, y0, 2.0, h)
    ok = np.isfinite(np.asarray(sol.ts))
    assert np.max(np.asarray(sol.position_residual)[ok]) <= 1e-14
    assert np.max(np.asarray(sol.constraint_residual)[ok]) <= 1e-13
    _, states, _ = reached(sol)
    (Rq, x), v = states.q, states.v
    R = np.asarray(jaxlie.SO3(Rq.wxyz).as_matrix())
    J = spatial_momentum(R, v[:, :3], Ic)[:, 2] + m * np.cross(x, v[:, 3:])[:, 2]
    assert np.max(np.abs(J - J[0])) <= 1e-12 * np.abs(J[0])

    def euler_poisson(t, y):
        w, gam = y[:3], y[3:]
        wdot = np.linalg.solve(I, np.cross(I @ w, w) + m * g * ell * np.cross(gam, [0, 0, 1.0]))
        return np.concatenate([wdot, np.cross(gam, w)])

    g0 = np.asarray(R0.inverse().apply(E3))
    ref = solve_ivp(euler_poisson, (0, 1), np.concatenate([w0, g0]), rtol=1e-13, atol=1e-13,
                    method="DOP853").y[:3, -1]  # fmt: skip
    errors = [np.linalg.norm(final(run(system, y0, 1.0, 1.0 / n)).v[:3] - ref) for n in NS]
    assert abs(fitted_order(errors) - 2) < 0.15, errors


# -- ensembles, dense output, float32, input errors ------------------------------------------------


def test_ensemble_and_dense_output_on_so3():
    """A batch of three heavy tops (one started upright, where Euler angles are singular) equals
    the three solo runs; `SaveAt(ts=...)` between the steps gives states on SO(3) that converge
    at order 2 (dense output by partial variational steps)."""
    system = body(mgl=2.0)
    R = jaxlie.SO3(jnp.stack([R0.wxyz, jnp.array([1.0, 0, 0, 0]), jaxlie.SO3.exp(jnp.array([0, 1.0, 0])).wxyz]))
    w = jnp.stack([W0, jnp.array([0.3, 0.0, 2.0]), jnp.array([-1.0, 0.5, 0.2])])
    ts = jnp.linspace(0.0, 1.0, 7)  # between the steps of h = 0.1, 0.05, 0.0125

    def solve(y0, h):
        return gm.simulate(system, y0, 0.0, 1.0, integrator=VI(), dt0=h, saveat=diffrax.SaveAt(ts=ts))

    batch = solve(gm.State(R, w), 0.1)
    assert batch.states.q.wxyz.shape == (3, 7, 4) and batch.states.v.shape == (3, 7, 3)
    np.testing.assert_allclose(jnp.linalg.norm(batch.states.q.wxyz, axis=-1), 1.0, atol=1e-14)
    for b in range(3):
        solo = solve(gm.State(jaxlie.SO3(R.wxyz[b]), w[b]), 0.1)
        np.testing.assert_allclose(batch.states.v[b], solo.states.v, rtol=1e-13, atol=1e-13)
        np.testing.assert_allclose(batch.states.q.wxyz[b], solo.states.q.wxyz, rtol=1e-13, atol=1e-13)
    half, fine = solve(gm.State(R, w), 0.05), solve(gm.State(R, w), 0.0125)
    ratio = np.max(np.abs(batch.states.v - fine.states.v), axis=(0, 2))[1:] / np.max(
        np.abs(half.states.v - fine.states.v), axis=(0, 2)
    )[1:]
    assert np.all(ratio > 3.0), ratio  # 4 + O(h) for the errors of an order-2 method


def test_float32_on_so3():
    """A float32 free rigid body: the state stays float32, the quaternion on the sphere and the
    spatial angular momentum conserved to float32 round-off, the energy error O(h²)."""
    f32 = lambda x: jnp.asarray(x, jnp.float32)
    system = body(I=f32(INERTIA))
    y0 = gm.State(jaxlie.SO3(f32(R0.wxyz)), f32(W0))
    sol = gm.simulate(
        system, y0, 0.0, 5.0, integrator=VI(), dt0=0.01, max_steps=500,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 5.0, 11, dtype=jnp.float32)),
    )  # fmt: skip
    assert sol.result == diffrax.RESULTS.successful
    assert sol.states.q.wxyz.dtype == jnp.float32 and sol.states.v.dtype == jnp.float32
    assert float(jnp.max(jnp.abs(jnp.linalg.norm(sol.states.q.wxyz, axis=-1) - 1))) < 1e-6
    m = spatial_momentum(np.asarray(sol.states.q.as_matrix()), sol.states.v)
    assert np.max(np.abs(m - m[0])) < 1e-5 * np.linalg.norm(m[0])
    assert float(jnp.max(jnp.abs(sol.energy / sol.energy[0] - 1))) < 1e-3


def test_bad_input_on_groups(no_typecheck):
    """Errors before tracing for what has no variational discretization on a group either."""
    state = gm.State(R0, W0.at[2].set(0.0))
    simulate = lambda system, **kw: gm.simulate(system, state, 0.0, 1.0, integrator=VI(), **kw)
    nonlinear = body(constraint=gm.Constraint(lambda R, w: jnp.atleast_1d(w @ w - W0 @ W0)))
    with pytest.raises(TypeError, match="no discretization for constraints nonlinear in v"):
        simulate(nonlinear, dt0=0.1)
    linear = gm.LinearConstraint(lambda R: jnp.array([[0.0, 0.0, 1.0]]))
    with pytest.raises(ValueError, match="W != D"):
        simulate(body(constraint=linear, work_space=gm.Subspace(annihilator=jnp.array([[0.0, 1.0, 0.0]]))), dt0=0.1)
    with pytest.raises(ValueError, match="stabilization is not used"):
        simulate(body(constraint=linear), dt0=0.1, stabilization="projection")
    with pytest.raises(ValueError, match="needs a fixed step"):
        simulate(body())


def test_chaplygin_sphere_integrals_bounded():
    """The Chaplygin sphere (radius r, centre of mass at the centre, off-diagonal inertia I about
    it) rolling on the plane, on SO(3) × ℝ² with v = (ω, ẋ) and ẋ = r [(Rω) × e₃]_xy: the
    constraint held at every step; the energy, (M, γ) and (M, M), with γ = Rᵀe₃ and
    M = Iω + m r² (ω − (ω·γ)γ) the angular momentum about the contact point (Borisov & Mamaev,
    *Rolling of a rigid body on a plane and sphere*, 2002), are bounded over 10³ steps: O(h²),
    no drift from the first half to the second; the quaternion stays on the sphere."""
    m, r = 2.0, 0.5
    P = jnp.eye(3)[:2]

    def L(q, v):
        return 0.5 * v[:3] @ INERTIA @ v[:3] + 0.5 * m * v[3:] @ v[3:]

    def A_of_q(q):
        rows = lambda w: -r * P @ jnp.cross(q[0].apply(w), E3)
        return jnp.concatenate([jax.jacfwd(rows)(jnp.zeros(3)), jnp.eye(2)], axis=1)

    system = gm.LagrangianSystem(
        L, constraint=gm.LinearConstraint(A_of_q), manifold=gm.Product(gm.SO3(), gm.Euclidean(2))
    )
    w0 = jnp.array([1.0, -0.5, 2.0])
    y0 = gm.State((R0, jnp.array([0.1, -0.2])), jnp.concatenate([w0, r * P @ jnp.cross(R0.apply(w0), E3)]))
    h = 0.01
    sol = run(system, y0, MAX * h, h)
    ok = np.isfinite(np.asarray(sol.ts))
    assert sol.result == diffrax.RESULTS.successful
    assert np.max(np.asarray(sol.constraint_residual)[ok]) <= 1e-14
    _, states, energy = reached(sol)
    wxyz, w = states.q[0].wxyz, states.v[:, :3]
    np.testing.assert_allclose(np.linalg.norm(wxyz, axis=-1), 1.0, atol=1e-14)
    gamma = np.asarray(jax.vmap(lambda q: jaxlie.SO3(q).inverse().apply(E3))(wxyz))
    M = w @ np.asarray(INERTIA) + m * r**2 * (w - np.sum(w * gamma, -1, keepdims=True) * gamma)
    half = len(energy) // 2
    for name, x in (("E", energy), ("(M, γ)", np.sum(M * gamma, -1)), ("(M, M)", np.sum(M * M, -1))):
        dx = np.abs(x - x[0]) / np.abs(x[0])
        assert np.max(dx) < 5 * h**2, (name, np.max(dx))
        assert np.max(dx[half:]) <= 1.5 * np.max(dx[:half]) + 1e-12, (name, dx)
    assert np.linalg.norm(states.q[1][-1] - states.q[1][0]) > 0.1  # it rolled


def test_gradients_on_so3_match_finite_differences():
    """Reverse-mode gradients through `simulate` on SO(3) (implicit differentiation of each step's
    solves) of a loss of the final ω and quaternion, with respect to the inertia and mgℓ, match
    central differences."""

    def loss(p):
        system = body(I=INERTIA + jnp.diag(p[:3]), mgl=p[3])
        sol = gm.simulate(system, gm.State(R0, W0), 0.0, 0.5, integrator=VI(), dt0=0.05, max_steps=20)
        return jnp.sum(sol.states.v[-1] ** 2) + sol.states.q.wxyz[-1] @ jnp.array([1.0, -2.0, 3.0, 0.5])

    p = jnp.array([0.1, -0.2, 0.05, 1.5])
    grad = jax.grad(loss)(p)
    eps = 1e-6
    fd = jnp.array([(loss(p + eps * e) - loss(p - eps * e)) / (2 * eps) for e in jnp.eye(4)])
    np.testing.assert_allclose(grad, fd, rtol=1e-7, atol=1e-8)
