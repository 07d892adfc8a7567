"""simulate(): physics along trajectories, stabilization, ensembles, gradients, input errors.

Compilations dominate the run time, so the tests share a few compiled configurations
(module-level fixtures and jitted functions) and use short horizons.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import pendulum_state
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from manifold_systems import MANIFOLDS, energy, random_states, system_on
from random_systems import random_system

import geomech as gm
from geomech._dynamics import constrained_acceleration
from geomech._engine import batch_sharding
from geomech.models import CartesianPendulum, ThesisExample2

G = 9.81
PENDULUM = CartesianPendulum(m=1.0, l=1.0, g=G)
PSYS = PENDULUM()
TS = jnp.linspace(0.0, 10.0, 101)
TIGHT = dict(rtol=1e-10, atol=1e-10)


Y0 = pendulum_state(0.5, 2.0)


@pytest.fixture(scope="module")
def runs():
    return {
        stab: gm.simulate(
            PSYS, Y0, 0.0, 10.0, saveat=diffrax.SaveAt(ts=TS), stabilization=stab, **TIGHT
        )
        for stab in (None, "baumgarte", "projection")
    }


# -- physics along single trajectories ----------------------------------------------------------


def test_projection_conserves_energy_and_stays_on_C(runs):
    sol = runs["projection"]
    assert sol.states.q.shape == (101, 2) and sol.ts.shape == (101,)
    assert sol.result == diffrax.RESULTS.successful
    E0 = PSYS.energy(Y0)
    assert jnp.max(jnp.abs(sol.energy - E0)) <= 1e-8 * jnp.abs(E0)
    assert jnp.max(sol.position_residual) <= 1e-12
    assert jnp.max(sol.constraint_residual) <= 1e-12


def test_diagnostics_are_energy_and_residuals(runs):
    sol = runs[None]
    q, v = sol.states.q, sol.states.v
    np.testing.assert_allclose(
        sol.energy, 0.5 * jnp.sum(v**2, -1) - G * q[:, 0], rtol=1e-13, atol=1e-12
    )
    np.testing.assert_allclose(sol.position_residual, jnp.abs(jnp.sum(q**2, -1) - 1.0), atol=1e-15)
    np.testing.assert_allclose(sol.constraint_residual, jnp.abs(2 * jnp.sum(q * v, -1)), atol=1e-15)


def test_tension_along_trajectory(runs):
    """[Zanella]: the rod pulls along -q/l with tension m(|v|²/l + g x/l)."""
    sol = runs["projection"]
    Fc = jax.vmap(lambda s: gm.constraint_force(PSYS, s))(sol.states)
    q, v = sol.states.q, sol.states.v
    tension = jnp.sum(v**2, -1) + G * q[:, 0]
    np.testing.assert_allclose(Fc, -tension[:, None] * q, rtol=1e-9, atol=1e-9)


def test_drift_is_reported_and_stabilization_removes_it(runs):
    drift = {k: jnp.max(s.position_residual) for k, s in runs.items()}
    assert drift[None] > 1e-11  # without stabilization the drift is visible in the diagnostics
    assert drift["baumgarte"] < 0.1 * drift[None]
    assert drift["projection"] < 1e-3 * drift[None]
    # all three approximate the same exact solution (stabilization vanishes on C)
    for k in ("baumgarte", "projection"):
        np.testing.assert_allclose(runs[k].states.q, runs[None].states.q, atol=1e-6)


def test_y0_off_constraint_manifold_raises(runs):
    off = gm.State(1.01 * Y0.q, Y0.v)
    with pytest.raises(Exception, match="off the constraint manifold"):
        gm.simulate(PSYS, off, 0.0, 10.0, saveat=diffrax.SaveAt(ts=TS), **TIGHT)


def test_random_system_nonlinear_constraints_projection():
    """Constraints nonlinear in v, W != D, time dependent: projection keeps |phi| at round-off and
    follows the unstabilized solution; progress=True gives the same numbers."""
    system, state, t = random_system(3, n=4, k=2, generalized=True, time_dependent=True)
    ts = t + jnp.linspace(0.0, 1.0, 6)
    kw = dict(saveat=diffrax.SaveAt(ts=ts), **TIGHT)
    proj = gm.simulate(system, state, t, ts[-1], stabilization="projection", progress=True, **kw)
    free = gm.simulate(system, state, t, ts[-1], **kw)
    assert jnp.all(proj.result == diffrax.RESULTS.successful)
    scale = 1.0 + jnp.max(jnp.abs(proj.states.v))
    assert jnp.max(proj.constraint_residual) <= 1e-12 * scale
    assert jnp.max(free.constraint_residual) > jnp.max(proj.constraint_residual)
    np.testing.assert_allclose(proj.states.q, free.states.q, atol=1e-7)
    np.testing.assert_allclose(proj.states.v, free.states.v, atol=1e-7)
    E = jax.vmap(system.energy)(proj.states, ts)
    np.testing.assert_allclose(proj.energy, E, rtol=1e-13)


def test_solvers_give_the_same_trajectory():
    """Thesis Example 2 (W != D): every principle gives the same X_R, hence the same motion."""
    model = ThesisExample2()
    system, y0 = model(), model.initial_state()
    kw = dict(saveat=diffrax.SaveAt(t1=True), stabilization="projection", **TIGHT)
    ref = gm.simulate(system, y0, 0.0, 1.0, **kw)
    for solver in (gm.Kane(), gm.Multipliers()):
        sol = gm.simulate(system, y0, 0.0, 1.0, solver=solver, **kw)
        np.testing.assert_allclose(sol.states.q, ref.states.q, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(sol.states.v, ref.states.v, rtol=1e-12, atol=1e-12)


def test_implicit_integrator_with_projection(runs):
    ts = TS[:11]  # t in [0, 1]
    sol = gm.simulate(
        PSYS,
        Y0,
        0.0,
        1.0,
        integrator=diffrax.Kvaerno5(),
        saveat=diffrax.SaveAt(ts=ts),
        stabilization="projection",
        rtol=1e-8,
        atol=1e-8,
    )
    assert jnp.max(sol.constraint_residual) <= 1e-12
    np.testing.assert_allclose(sol.states.q, runs["projection"].states.q[:11], atol=1e-6)


def test_baumgarte_stages_impose_the_stabilized_constraint_dynamics():
    """Off C, the Baumgarte acceleration gives dφ/dt = A a - b = -α φ - β h on holonomic rows and
    -α φ on the others (stacked constraint: holonomic circle & linear row)."""
    con = gm.HolonomicConstraint(lambda q: q[:2] @ q[:2] - 1.0) & gm.LinearConstraint(
        lambda q: jnp.array([[0.3, 0.0, 1.0]])
    )
    system = gm.LagrangianSystem(
        lambda q, v: 0.5 * v @ v + 0.2 * jnp.sin(q[2]) * v[0] - q[0], constraint=con
    )
    state = gm.State(jnp.array([1.1, 0.2, 0.4]), jnp.array([0.5, -0.3, 0.7]))  # off C
    alpha, beta = 3.0, 5.0
    h = system.constraint.holonomic_rows(0.0, state.q)
    np.testing.assert_allclose(h, [state.q[:2] @ state.q[:2] - 1.0, 0.0])

    @eqx.filter_jit
    def defect(system, state):
        stages = gm.assemble(system, state)
        stab = gm.Baumgarte(alpha, beta).modify_stages(stages)
        a = constrained_acceleration(stab, gm.Projection())
        return stages.A @ a - stages.b, system.constraint_residual(state)

    Aa_b, phi = defect(system, state)
    np.testing.assert_allclose(Aa_b, -alpha * phi - beta * h, rtol=1e-12, atol=1e-12)


# -- project_to_constraints ---------------------------------------------------------------------


def test_project_to_constraints_pendulum_closed_form():
    q, v = jnp.array([1.3, 0.4]), jnp.array([0.3, -0.7])
    out = gm.project_to_constraints(PSYS, gm.State(q, v))
    r = q / jnp.linalg.norm(q)  # minimal correction with M = m I: radial
    np.testing.assert_allclose(out.q, r, rtol=1e-14)
    np.testing.assert_allclose(out.v, v - (v @ r) * r, rtol=1e-14, atol=1e-15)
    batch = gm.project_to_constraints(PSYS, gm.State(jnp.stack([q, 2 * q]), jnp.stack([v, v])))
    np.testing.assert_allclose(batch.q[1], r, rtol=1e-14)


def test_project_to_constraints_is_M_orthogonal():
    """ThesisExample2 (M = diag(m1, m2), A(q) v^1 = v^2): the velocity correction is M⁻¹Aᵀ·c."""
    system = ThesisExample2()()
    state = gm.State(jnp.array([0.2, 1.5]), jnp.array([0.7, -0.4]))
    out = gm.project_to_constraints(system, state)
    assert jnp.abs(system.constraint_residual(out)).max() <= 1e-14
    A = jax.jacfwd(lambda v: system.constraint_residual(gm.State(state.q, v)))(state.v)
    dv = system.mass_matrix(state) @ (out.v - state.v)  # must be parallel to Aᵀ
    np.testing.assert_allclose(dv[0] * A[0, 1] - dv[1] * A[0, 0], 0.0, atol=1e-14)
    np.testing.assert_array_equal(out.q, state.q)


def test_project_to_constraints_nonlinear_and_holonomic():
    system, state, t = random_system(5, n=4, k=2, generalized=False)
    off = gm.State(state.q, state.v + 0.05 * jnp.arange(1.0, 5.0))
    out = gm.project_to_constraints(system, off, t)
    assert jnp.max(jnp.abs(system.constraint_residual(out, t))) <= 1e-12
    M = system.mass_matrix(state, t)
    m_norm = lambda u: jnp.sqrt(u @ M @ u)
    assert m_norm(out.v - off.v) <= 1.01 * m_norm(
        state.v - off.v
    )  # (nearly) the nearest point of C
    two = gm.HolonomicConstraint(lambda q: q[:2] @ q[:2] - 1.0) & gm.LinearConstraint(
        lambda q: jnp.array([[0.0, 0.0, 1.0]])
    )
    sys3 = gm.LagrangianSystem(lambda q, v: 0.5 * v @ v, constraint=two)
    out3 = gm.project_to_constraints(
        sys3, gm.State(jnp.array([2.0, 0.0, 0.3]), jnp.array([0.5, 1.0, 1.0]))
    )
    np.testing.assert_allclose(out3.q, [1.0, 0.0, 0.3], atol=1e-14)
    np.testing.assert_allclose(out3.v, [0.0, 1.0, 0.0], atol=1e-14)


# -- ensembles ----------------------------------------------------------------------------------


def _singular_mass_pendulum():
    """A pendulum whose mass 1 + 2y vanishes at y = -1/2: L = ½(1 + 2y)|v|² + (1 + 2y) g x."""

    def lagrangian(q, v):
        mu = 1.0 + 2.0 * q[1]
        return 0.5 * mu * (v @ v) + mu * G * q[0]

    return gm.LagrangianSystem(lagrangian, constraint=gm.HolonomicConstraint(lambda q: q @ q - 1.0))


SINGULAR = (diffrax.RESULTS.nonfinite, diffrax.RESULTS.dt_min_reached)


def test_ensemble_equals_solo_runs_and_isolates_a_failure():
    """The singular trajectory blows up (mass → 0 with E conserved) near t = 0.055: it stops
    there with a singularity code, long before max_steps; the other 63 are their solo runs."""
    system = _singular_mass_pendulum()
    B, bad = 64, 17
    omega = jnp.zeros(B).at[bad].set(-8.0)  # only trajectory 17 swings down to y = -1/2
    y0 = pendulum_state(jnp.linspace(0.1, 0.3, B), omega)
    kw = dict(
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 5)),
        stabilization="projection",
        throw=False,
    )
    sol = gm.simulate(system, y0, 0.0, 1.0, **kw)
    assert sol.states.q.shape == (B, 5, 2) and sol.ts.shape == (B, 5) and sol.energy.shape == (B, 5)
    ok = sol.result == diffrax.RESULTS.successful
    assert not ok[bad] and int(jnp.sum(ok)) == B - 1
    assert bool((sol.result == SINGULAR[0])[bad] | (sol.result == SINGULAR[1])[bad])
    assert int(sol.stats["num_steps"][bad]) < 4096 // 4  # stopped, not max_steps
    assert not bool(jnp.any(jnp.isfinite(sol.states.q[bad, 1:])))  # t > 0.055 never reached
    for i in range(B):
        if i == bad:
            continue
        solo = gm.simulate(system, gm.State(y0.q[i], y0.v[i]), 0.0, 1.0, **kw)
        assert solo.result == diffrax.RESULTS.successful
        np.testing.assert_allclose(sol.states.q[i], solo.states.q, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(sol.states.v[i], solo.states.v, rtol=1e-12, atol=1e-12)
    with pytest.raises(Exception, match="ran into a singularity"):
        gm.simulate(system, jax.tree.map(lambda x: x[bad], y0), 0.0, 1.0, **{**kw, "throw": True})


def test_fixed_step_nonfinite_trajectory_stops():
    """With a fixed step the first NaN step is accepted by diffrax (which would then carry NaN
    to t1 and report success): it stops there with `nonfinite`, keeping the last finite state."""
    system = _singular_mass_pendulum()
    y0 = pendulum_state(jnp.array([0.1, 0.2]), jnp.array([-8.0, 0.0]))
    sol = gm.simulate(
        system, y0, 0.0, 1.0, integrator=diffrax.Euler(), dt0=1e-3, throw=False
    )  # SaveAt(t1=True): the state where each trajectory stopped
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.nonfinite, [True, False])
    assert bool((sol.result == diffrax.RESULTS.successful)[1])
    n = int(sol.stats["num_steps"][0])
    # the n-th step failed: the state kept, and the time reported, are those after n - 1 steps
    assert n < 100 and float(sol.ts[0, 0]) == pytest.approx((n - 1) * 1e-3)  # blow-up near t = 0.055
    assert float(sol.t_final[0]) == float(sol.ts[0, 0])
    assert bool(jnp.all(jnp.isfinite(sol.states.q[0]))) and float(sol.states.q[0, -1, 1]) < -0.4


# -- gradients ----------------------------------------------------------------------------------

FIT_TS = jnp.linspace(0.0, 1.5, 7)


def _trajectory(p, adjoint=None, stabilization="projection"):
    """Bob positions for parameters p = (l, theta0, omega0): a system parameter and y0."""
    l, theta, omega = p
    adjoint = diffrax.RecursiveCheckpointAdjoint() if adjoint is None else adjoint
    sol = gm.simulate(
        CartesianPendulum(l=l)(),
        pendulum_state(theta, omega, l),
        0.0,
        FIT_TS[-1],
        saveat=diffrax.SaveAt(ts=FIT_TS),
        stabilization=stabilization,
        adjoint=adjoint,
    )
    return sol.states.q


def _loss(p, target, **kw):
    return jnp.mean((_trajectory(p, **kw) - target) ** 2)


value_and_grad = jax.jit(jax.value_and_grad(_loss))
TARGET_P = jnp.array([1.3, 0.6, 0.0])


@pytest.fixture(scope="module")
def target():
    return jax.jit(_trajectory)(TARGET_P)


def test_gradient_matches_central_differences(target):
    p = jnp.array([1.1, 0.5, 0.3])
    _, g = value_and_grad(p, target)
    eps = 1e-5
    fd = jnp.array(
        [
            (value_and_grad(p + eps * e, target)[0] - value_and_grad(p - eps * e, target)[0])
            / (2 * eps)
            for e in jnp.eye(3)
        ]
    )
    np.testing.assert_allclose(g, fd, rtol=1e-6)


def test_backsolve_adjoint_gradient(target):
    p = jnp.array([1.1, 0.5, 0.3])
    _, g = value_and_grad(p, target)
    loss_b = lambda p: _loss(
        p, target, adjoint=diffrax.BacksolveAdjoint(), stabilization="baumgarte"
    )
    np.testing.assert_allclose(jax.jit(jax.grad(loss_b))(p), g, rtol=1e-5)


def test_fit_pendulum_length_by_gradient_descent(target):
    p = TARGET_P.at[0].set(1.0)
    losses = []
    for _ in range(10):
        L, g = value_and_grad(p, target)
        losses.append(L)
        p = p.at[0].add(-0.5 * g[0])  # descend in the length only
    assert losses[-1] < 1e-6 * losses[0]
    assert abs(float(p[0]) - 1.3) < 1e-4


def test_gradient_with_respect_to_system_module():
    """filter_grad through simulate w.r.t. the array fields of a system (random Lagrangian)."""
    system, state, t = random_system(7, n=3, k=1, generalized=False, force=False)
    kw = dict(saveat=diffrax.SaveAt(t1=True), **TIGHT)

    @eqx.filter_jit
    @eqx.filter_value_and_grad
    def final_momentum(lag):
        s = eqx.tree_at(lambda s: s.lagrangian, system, lag)
        return gm.simulate(s, state, t, t + 0.5, **kw).states.v[-1] @ jnp.arange(1.0, 4.0)

    lag = system.lagrangian
    g = final_momentum(lag)[1].K
    eps = 1e-6
    E = jnp.zeros_like(lag.K).at[0, 1].set(eps)
    fd = (
        final_momentum(eqx.tree_at(lambda m: m.K, lag, lag.K + E))[0]
        - final_momentum(eqx.tree_at(lambda m: m.K, lag, lag.K - E))[0]
    ) / (2 * eps)
    np.testing.assert_allclose(g[0, 1], fd, rtol=1e-5)


# -- input errors (raised before tracing) -------------------------------------------------------


def test_bad_inputs_raise_clear_errors(no_typecheck):
    ts = diffrax.SaveAt(ts=TS)
    with pytest.raises(TypeError, match="gm.State"):
        gm.simulate(PSYS, (Y0.q, Y0.v), 0.0, 1.0)
    with pytest.raises(ValueError, match="single leading axis"):
        gm.simulate(PSYS, gm.State(jnp.zeros((2, 3, 2)), jnp.zeros((2, 3, 2))), 0.0, 1.0)
    with pytest.raises(ValueError):
        gm.simulate(ThesisExample2()(), gm.State(jnp.ones(3), jnp.ones(3)), 0.0, 1.0)
    with pytest.raises(ValueError, match="fn="):
        gm.simulate(PSYS, Y0, 0.0, 1.0, saveat=diffrax.SaveAt(t1=True, fn=lambda t, y, a: y.q))
    with pytest.raises(ValueError, match="stabilization"):
        gm.simulate(PSYS, Y0, 0.0, 1.0, saveat=ts, stabilization="newton")
    with pytest.raises(ValueError, match="BacksolveAdjoint"):
        gm.simulate(
            PSYS, Y0, 0.0, 1.0, stabilization="projection", adjoint=diffrax.BacksolveAdjoint()
        )
    with pytest.raises(ValueError, match="dt0"):
        gm.simulate(PSYS, Y0, 0.0, 1.0, integrator=diffrax.Euler())
    with pytest.raises(ValueError, match="batch axis"):
        gm.simulate(PSYS, Y0, 0.0, 1.0, sharding=Mesh(np.array(jax.devices()[:1]), ("b",)))
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), Y0)
    with pytest.raises(TypeError, match="sharding"):
        gm.simulate(PSYS, batch, 0.0, 1.0, sharding="gpu")
    mesh = Mesh(np.array(jax.devices()[:1]), ("b",))
    with pytest.raises(ValueError, match="leading"):
        gm.simulate(PSYS, batch, 0.0, 1.0, sharding=NamedSharding(mesh, PartitionSpec(None, "b")))
    assert batch_sharding(mesh)[1] == PartitionSpec(("b",))
    assert batch_sharding(NamedSharding(mesh, PartitionSpec("b")))[1] == PartitionSpec("b")


def test_progress_shows_a_tqdm_bar(capfd):
    """progress=True shows diffrax's tqdm bar (tqdm is a test dependency), on stderr."""
    system = gm.LagrangianSystem(lambda q, v: 0.5 * v @ v - q[0])
    state = gm.State(jnp.zeros(1), jnp.ones(1))
    sol = gm.simulate(system, state, 0.0, 1.0, progress=True)
    assert sol.result == diffrax.RESULTS.successful
    out, err = capfd.readouterr()
    assert "100.00%|" in err and "100.00%" not in out, (out, err)



def test_strict_dtype_promotion_on_coordinates():
    """geomech promotes no dtype implicitly (diffrax's rule): every solver's acceleration and an
    integration (final state, and saves) run under `jax_numpy_dtype_promotion="strict"` (a `bool | int` in the
    engine's save bookkeeping was the one case found). Coordinates only: jaxlie's group products
    mix integer and float arrays, so groups cannot run strict."""
    from geomech.models import ChaplyginSleigh

    model = ChaplyginSleigh()
    system, y0 = model.system(), model.initial_state()
    with jax.numpy_dtype_promotion("strict"):
        for solver in (gm.Projection(), gm.Gauss(), gm.Kane(), gm.GibbsAppell(), gm.Multipliers()):
            assert jnp.all(jnp.isfinite(gm.acceleration(system, y0, solver=solver)))
        for saveat in (diffrax.SaveAt(t1=True), diffrax.SaveAt(ts=jnp.linspace(0.0, 0.5, 5))):
            sol = gm.simulate(system, y0, 0.0, 0.5, saveat=saveat)
            assert jnp.all(jnp.isfinite(sol.states.q))


@pytest.mark.parametrize("name", MANIFOLDS)
def test_simulate_on_every_manifold(name):
    """On each manifold (`manifold_systems.py`: no forces, an ideal constraint) the simulated
    motion keeps its energy and its constraint to the solver's tolerance, and stays on the
    manifold (the point's defect at round-off); the last state is a consistent one."""
    system = system_on(name)
    y0 = random_states(system, seed=7, count=1)[0]
    sol = gm.simulate(
        system, y0, 0.0, 2.0, rtol=1e-10, atol=1e-10, saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 2.0, 5))
    )  # fmt: skip
    assert sol.result == diffrax.RESULTS.successful
    E = jax.vmap(lambda q, v: energy(system, gm.State(q, v)))(sol.states.q, sol.states.v)
    np.testing.assert_allclose(E, E[0], rtol=1e-8)
    scale = float(jnp.max(jnp.abs(y0.v)))
    assert float(jnp.max(sol.constraint_residual)) <= 1e-8 * scale
    defect = jax.vmap(system.manifold.point_defect)(sol.states.q)
    assert float(jnp.max(defect)) <= 1e-12
    moved = float(jnp.max(jnp.abs(system.manifold.ominus(jax.tree.map(lambda x: x[-1], sol.states.q), y0.q))))
    assert moved > 1e-2  # it moved
    last = jax.tree.map(lambda x: x[-1], sol.states)
    assert gm.validate(system, last).ok
