"""The models on SO(3) and SO(3) × ℝ³ (geomech/models/_rigid.py) against independent references: the
Jacobi-elliptic solution of Euler's equations [LandauLifshitz1976] §37, SciPy integrations of the
Euler–Poisson equations and of the reduced Suslov equations written here from the physics, the
conserved quantities, and every solver at random states against Lagrange's multipliers in NumPy."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from helpers import accelerations, solvers
from model_problems import ON_GROUPS
from scipy.integrate import solve_ivp
from scipy.special import ellipj, ellipkinc

import geomech as gm
import geomech.models as gmm

E3 = np.array([0.0, 0.0, 1.0])
RIGID = ("free_rigid_body", "heavy_top", "pivoted_top", "suslov", "veselova")  # this file's


def hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def simulate(model, y0, t1, points):
    ts = jnp.linspace(model.t0, t1, points)
    sol = gm.simulate(
        model.system(), y0, model.t0, t1, saveat=diffrax.SaveAt(ts=ts), rtol=1e-11, atol=1e-11
    )
    assert sol.result == diffrax.RESULTS.successful
    return np.asarray(ts), sol


def matrices(R):
    return np.asarray(jax.vmap(lambda R: R.as_matrix())(R))


def test_registry_on_groups():
    """The models on groups are the registry's entries with `point_parameters` (`ON_GROUPS`: not
    covered by the coordinate reference of tests/test_models.py; this file's `RIGID` here), each
    well described and valid at its initial state."""
    on_groups = {name for name, cls in gmm.MODELS.items() if cls.point_parameters is not None}
    assert on_groups == set(ON_GROUPS) and on_groups >= set(RIGID)
    for name in ON_GROUPS:
        model = gmm.MODELS[name]()
        y0 = model.initial_state()
        assert len(model.coordinates) == len(model.units) == y0.v.shape[0]
        leaves = jax.tree.leaves(y0.q)
        assert sum(x.shape[-1] for x in leaves) == len(model.point_parameters)
        assert gm.validate(model.system(), y0, model.t0).ok


def test_free_rigid_body_against_jacobi_elliptic_solution():
    """[LandauLifshitz1976] §37, for $I_1 < I_2 < I_3$ and $M^2 > 2EI_2$: $\\omega_1 = A\\,\\mathrm{cn}\\,\\tau$,
    $\\omega_2 = B\\,\\mathrm{sn}\\,\\tau$, $\\omega_3 = C\\,\\mathrm{dn}\\,\\tau$ with
    $\\tau = \\nu t + \\tau_0$; also the spatial angular momentum $R I\\omega$ and the energy."""
    I = np.array([1.0, 2.0, 3.0])
    model = gmm.FreeRigidBody(*I)
    w0 = np.array([0.4, 0.3, 1.0])
    R0 = jaxlie.SO3.exp(jnp.array([0.3, -0.5, 0.8]))
    ts, sol = simulate(model, model.initial_state(w0, R0), 8.0, 41)
    E2, M2 = np.sum(I * w0**2), np.sum((I * w0) ** 2)  # 2E and M²
    assert M2 > E2 * I[1] and w0[2] > 0
    I1, I2, I3 = I
    A = np.sqrt((E2 * I3 - M2) / (I1 * (I3 - I1)))
    B = np.sqrt((E2 * I3 - M2) / (I2 * (I3 - I2)))
    C = np.sqrt((M2 - E2 * I1) / (I3 * (I3 - I1)))
    nu = np.sqrt((I3 - I2) * (M2 - E2 * I1) / (I1 * I2 * I3))
    k2 = (I2 - I1) * (E2 * I3 - M2) / ((I3 - I2) * (M2 - E2 * I1))
    tau0 = ellipkinc(np.arctan2(w0[1] / B, w0[0] / A), k2)  # sn τ₀ = ω₂/B, cn τ₀ = ω₁/A
    sn, cn, dn, _ = ellipj(nu * ts + tau0, k2)
    exact = np.stack([A * cn, B * sn, C * dn], -1)
    np.testing.assert_allclose(exact[0], w0, atol=1e-14)
    np.testing.assert_allclose(sol.states.v, exact, atol=1e-8)
    Rm = matrices(sol.states.q)
    M_spatial = np.einsum("tij,tj->ti", Rm, I * np.asarray(sol.states.v))
    np.testing.assert_allclose(M_spatial, M_spatial[:1] + 0 * M_spatial, atol=1e-9)
    np.testing.assert_allclose(sol.energy, 0.5 * E2, rtol=1e-10)


def euler_poisson_reference(model, R0, w0, ts):
    """The heavy top from the physics, in NumPy: $I_O\\dot\\omega = I_O\\omega\\times\\omega +
    \\tau$ with the torque of gravity about the pivot $\\tau = \\ell e_3\\times R^\\top(-mg e_3)$,
    $\\dot R = R\\hat\\omega$, $I_O = I_c + m\\ell^2(1 - e_3e_3^\\top)$; SciPy DOP853, rtol 1e-12."""
    m, ell, g = float(model.body.mass), float(model.ell), float(model.g)
    Ic = np.asarray(model.body.inertia)
    IO = Ic + m * ell**2 * (np.eye(3) - np.outer(E3, E3))

    def rhs(t, y):
        R, w = y[:9].reshape(3, 3), y[9:]
        torque = np.cross(ell * E3, R.T @ (-m * g * E3))
        return np.concatenate(
            [(R @ hat(w)).ravel(), np.linalg.solve(IO, np.cross(IO @ w, w) + torque)]
        )

    y0 = np.concatenate([np.asarray(R0.as_matrix()).ravel(), w0])
    ref = solve_ivp(rhs, (ts[0], ts[-1]), y0, t_eval=ts, method="DOP853", rtol=1e-12, atol=1e-12)
    return ref.y[:9].T.reshape(-1, 3, 3), ref.y[9:].T


def test_heavy_top_through_upright_against_euler_poisson():
    """Started upright (R = 1, where ZXZ angles are singular), the axis then leaving the vertical:
    R and ω against SciPy."""
    model = gmm.HeavyTop()
    y0 = model.initial_state()
    np.testing.assert_allclose(y0.q.as_matrix(), np.eye(3))  # upright
    ts, sol = simulate(model, y0, 3.0, 31)
    R_ref, w_ref = euler_poisson_reference(model, y0.q, np.asarray(y0.v), ts)
    np.testing.assert_allclose(matrices(sol.states.q), R_ref, atol=1e-7)
    np.testing.assert_allclose(sol.states.v, w_ref, atol=1e-6)
    axis = R_ref[:, :, 2]  # the symmetry axis R e₃: it leaves the vertical and moves about it
    assert np.min(axis[1:, 2]) < 0.9
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-9)


def test_sleeping_top_linearized_says_what_it_holds():
    """The upright top spinning at n about its axis (Maxwell's sleeping top): stable iff
    $C^2 n^2 > 4 A m g \\ell$ ([Goldstein2002, §5.7]; $A = I_1 + m\\ell^2$ about the pivot,
    $C = I_3$). Linearized in the frame that turns with the spin (`body_symmetries`) the
    eigenvalues give that verdict on either side of the threshold; held in a chart that does not
    turn, `rate` is zero but `held_rate` reports the spin, so nobody reads the eigenvalues of a
    state that is not a steady motion of that chart."""
    top = gmm.HeavyTop()
    A = float(top.body.inertia[0, 0]) + float(top.body.mass * top.ell**2)
    C, mgl = float(top.body.inertia[2, 2]), float(top.body.mass * top.g * top.ell)
    n_c = np.sqrt(4 * A * mgl) / C
    sets = dict(coordinates=(0, 1), speeds=(0, 1), fixed_q=(2,), fixed_v=(2,))
    for n, stable in [(0.9 * n_c, False), (1.1 * n_c, True)]:
        state = top.initial_state(omega0=(0.0, 0.0, n))
        lin = gm.linearize(top.system(), state, body_symmetries=(2,), **sets)
        growth = float(jnp.max(lin.eigenvalues.real))
        assert (abs(growth) < 1e-9) if stable else (growth > 0.1), (n, growth)
        np.testing.assert_allclose(lin.rate, 0.0, atol=1e-12)
        still = gm.linearize(top.system(), state, **sets)  # no body symmetry declared
        np.testing.assert_allclose(still.rate, 0.0, atol=1e-12)
        np.testing.assert_allclose(still.held_rate, [n, 0.0], atol=1e-12)


@pytest.mark.parametrize("model", [gmm.HeavyTop(), gmm.Suslov()], ids=type)
def test_float32_bodies_run_in_float32(model):
    """A float32 state of a body whose parameters are float64 (the model's inertia, Suslov's
    A(q)) runs in float32, as on coordinates: every stage in the state's dtype."""
    y0 = model.initial_state()
    y32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), y0)
    a32, a64 = gm.acceleration(model.system(), y32), gm.acceleration(model.system(), y0)
    assert a32.dtype == jnp.float32
    np.testing.assert_allclose(a32, a64, rtol=1e-5, atol=1e-5 * float(jnp.max(jnp.abs(a64))))
    sol = gm.simulate(model.system(), y32, 0.0, 0.5, rtol=1e-5, atol=1e-5)
    assert sol.result == diffrax.RESULTS.successful
    assert {x.dtype for x in jax.tree_util.tree_leaves(sol.states)} == {jnp.dtype(jnp.float32)}


def test_pivoted_top_turns_like_the_top_on_so3():
    """The body on SO(3) × ℝ³ held at its pivot: the rotation and ω of `HeavyTop`, pivot held."""
    top, pivoted = gmm.HeavyTop(), gmm.PivotedTop()
    R0 = jaxlie.SO3.exp(jnp.array([0.2, -0.1, 0.4]))
    w0 = jnp.array([0.5, -0.3, 5.0])
    ts, sol = simulate(pivoted, pivoted.initial_state(w0, R0), 2.0, 11)
    R_ref, w_ref = euler_poisson_reference(top, R0, np.asarray(w0), ts)
    R, x = sol.states.q
    np.testing.assert_allclose(matrices(R), R_ref, atol=1e-7)
    np.testing.assert_allclose(sol.states.v[:, :3], w_ref, atol=1e-6)
    np.testing.assert_allclose(x, float(top.ell) * R_ref[:, :, 2], atol=1e-7)  # h = x - ℓRe₃
    np.testing.assert_allclose(sol.energy, sol.energy[0], rtol=1e-9)


def suslov_reduced(model, w0, ts):
    """The reduced Suslov equations of the derivation, in NumPy ($I_{12} = 0$, $\\omega_3 = 0$):
    $I_1\\dot\\omega_1 = -u\\omega_2$, $I_2\\dot\\omega_2 = u\\omega_1$, $u = I_{13}\\omega_1 + I_{23}\\omega_2$."""
    I = np.asarray(model.body.inertia)

    def rhs(t, w):
        u = I[0, 2] * w[0] + I[1, 2] * w[1]
        return np.array([-u * w[1] / I[0, 0], u * w[0] / I[1, 1]])

    ref = solve_ivp(rhs, (ts[0], ts[-1]), w0, t_eval=ts, method="DOP853", rtol=1e-12, atol=1e-12)
    return ref.y.T


@pytest.mark.parametrize("w0", [(1.0, -0.5), (-1.0, 0.6)])  # cos χ₀ > 0 and < 0
def test_suslov_closed_form(w0):
    """The tanh/sech closed form against the reduced ODE (NumPy) and the simulated model."""
    model = gmm.Suslov()
    w0 = np.asarray(w0)
    ts, sol = simulate(model, model.initial_state(w0), 10.0, 51)
    closed = np.stack(model.closed_form(jnp.asarray(ts), jnp.asarray(w0)), -1)
    np.testing.assert_allclose(closed, suslov_reduced(model, w0, ts), atol=1e-9)
    np.testing.assert_allclose(sol.states.v[:, :2], closed, atol=1e-7)
    np.testing.assert_allclose(sol.states.v[:, 2], 0.0, atol=1e-9)
    assert np.ptp(closed[:, 0]) > 0.3  # the solution moves (tends to a steady rotation)


def test_veselova_conserved_quantities():
    """$\\tfrac12\\omega^\\top I\\omega$ and $|I\\omega|^2 - (I\\omega\\cdot\\gamma)^2$ conserved,
    $\\langle\\omega, \\gamma\\rangle = 0$ held ($\\gamma = R^\\top e_3$)."""
    model = gmm.Veselova()
    ts, sol = simulate(model, model.initial_state(), 10.0, 51)
    I = np.asarray(model.body.inertia)
    w = np.asarray(sol.states.v)
    gamma = matrices(sol.states.q)[:, 2, :]  # Rᵀe₃: the third row of R
    Iw = w @ I
    F = np.sum(Iw**2, -1) - np.sum(Iw * gamma, -1) ** 2
    np.testing.assert_allclose(F, F[0], rtol=1e-8)
    np.testing.assert_allclose(0.5 * np.sum(w * Iw, -1), sol.energy[0], rtol=1e-9)
    np.testing.assert_allclose(np.sum(w * gamma, -1), 0.0, atol=1e-9)
    assert np.ptp(np.sum(Iw * gamma, -1)) > 0.05  # the vertical momentum does change


def kkt(M, rhs, A, b):
    n, k = M.shape[0], A.shape[0]
    K = np.block([[M, -A.T], [A, np.zeros((k, k))]])
    return np.linalg.solve(K, np.concatenate([rhs, b]))[:n]


def reference_acceleration(name, model, R, w):
    """Lagrange's multipliers in NumPy from the equations of motion written by hand."""
    I = np.asarray(model.body.inertia)
    Rm = np.asarray(R.as_matrix())
    gamma = Rm.T @ E3
    if name in ("heavy_top", "pivoted_top"):
        m, ell, g = float(model.body.mass), float(model.ell), float(model.g)
        IO = I + m * ell**2 * (np.eye(3) - np.outer(E3, E3))
        wdot = np.linalg.solve(IO, np.cross(IO @ w, w) + m * g * ell * np.cross(gamma, E3))
        if name == "heavy_top":
            return wdot
        xddot = ell * Rm @ (np.cross(wdot, E3) + np.cross(w, np.cross(w, E3)))
        return np.concatenate([wdot, xddot])
    rows = {"free_rigid_body": np.zeros((0, 3)), "suslov": E3[None], "veselova": gamma[None]}
    # for both constraints d/dt ⟨ω, e⟩ = ⟨ω̇, e⟩ (γ̇·ω = (γ × ω)·ω = 0): b = 0
    return kkt(I, np.cross(I @ w, w), rows[name], np.zeros(len(rows[name])))


def random_state(name, model, rng):
    R = jaxlie.SO3.exp(jnp.asarray(rng.normal(size=3) * 2.0))
    w = rng.normal(size=3)
    if name == "suslov":
        w[2] = 0.0
    if name == "veselova":
        gamma = np.asarray(R.inverse().apply(jnp.asarray(E3)))
        w = w - (w @ gamma) * gamma
    if name == "pivoted_top":
        return R, w, model.initial_state(w, R)
    return R, w, gm.State(R, jnp.asarray(w))


@pytest.mark.parametrize("name", RIGID)
def test_every_solver_at_random_states(name):
    model = gmm.MODELS[name]()
    system = model.system()
    rng = np.random.default_rng(len(name))
    drawn = [random_state(name, model, rng) for _ in range(3)]
    every = accelerations(system, [state for _, _, state in drawn], solvers())
    for i, (R, w, _) in enumerate(drawn):
        expected = reference_acceleration(name, model, R, w)
        for solver, a in every.items():
            np.testing.assert_allclose(a[i], expected, rtol=1e-10, atol=1e-11, err_msg=solver)


def test_parameters_are_array_fields():
    """One compilation for every inertia: vmap over `I1` and grad by it (Euler's equations)."""
    w = jnp.array([0.4, -0.7, 1.1])
    R = jaxlie.SO3.exp(jnp.array([0.1, 0.2, 0.3]))

    @eqx.filter_jit
    def wdot1(I1):
        return gm.acceleration(gmm.FreeRigidBody(I1, 2.0, 3.0).system(), gm.State(R, w))[0]

    I1s = jnp.array([1.0, 1.5])
    np.testing.assert_allclose(jax.vmap(wdot1)(I1s), (2.0 - 3.0) * w[1] * w[2] / I1s, rtol=1e-12)
    np.testing.assert_allclose(
        jax.grad(wdot1)(1.5), -(2.0 - 3.0) * w[1] * w[2] / 1.5**2, rtol=1e-10
    )
