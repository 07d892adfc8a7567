"""gm.VariationalIntegrator: the properties discrete mechanics promises, each on a system where it
can be checked (closed forms, Noether, reversibility, bounded energy), plus gradients, ensembles,
float32 and input errors.

Compilations dominate the run time: every model is integrated by one compiled configuration
(`SaveAt(steps=True)`, `max_steps=MAX`), reused for all step sizes and directions. The
≥ 1e5-step energy study is `benchmarks/variational.py`.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest
from helpers import pendulum_state

import geomech as gm
from geomech.models import (
    BeadOnRotatingWire,
    CartesianPendulum,
    ChaplyginSleigh,
    DoublePendulum,
    Pursuit,
    RollingDisk,
    SphericalPendulum,
)

MAX = 5100  # max_steps of every run (one compilation per model)
NS = np.array([20, 40, 80, 160])  # steps per unit time in the convergence studies
VI = gm.VariationalIntegrator


def run(system, y0, t0, t1, dt, quadrature="midpoint", **kw) -> gm.Solution:
    """A variational run saving every step."""
    sol = gm.simulate(
        system,
        y0,
        t0,
        t1,
        integrator=VI(quadrature),
        dt0=dt,
        saveat=diffrax.SaveAt(steps=True),
        max_steps=MAX,
        **kw,
    )
    return sol


def tsit5(system, y0, t1, dt) -> gm.Solution:
    """Tsit5 with a fixed step, no stabilization, saving every step."""
    return gm.simulate(
        system,
        y0,
        0.0,
        t1,
        integrator=diffrax.Tsit5(),
        dt0=dt,
        stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(steps=True),
        max_steps=MAX,
    )


def reached(sol):
    """The saved steps (drops diffrax's unused `inf` slots)."""
    ok = np.isfinite(np.asarray(sol.ts))
    return jax.tree.map(lambda x: np.asarray(x)[ok], (sol.ts, sol.states, sol.energy))


def final(sol) -> gm.State:
    return jax.tree.map(lambda x: x[-1], reached(sol)[1])


def fitted_order(errors) -> float:
    return -np.polyfit(np.log(NS), np.log(np.asarray(errors)), 1)[0]


def assert_on_C(sol, tol=1e-13):
    """Every saved step on h = 0 and φ = 0 to the Newton tolerance (round-off)."""
    ok = np.isfinite(np.asarray(sol.ts))
    assert np.max(np.asarray(sol.position_residual)[ok], initial=0.0) <= tol
    assert np.max(np.asarray(sol.constraint_residual)[ok], initial=0.0) <= tol


# -- models with closed forms (beside the library's) --------------------------------------------


class KnifeOnIncline(eqx.Module):
    """A knife edge on a plane inclined at `alpha`, embedded in space: a mixed stack of one
    holonomic constraint (the plane) and one nonholonomic one (the blade).

    $q = (x, y, z, \\theta)$, $L = \\tfrac m2|\\dot r|^2 + \\tfrac J2\\dot\\theta^2 - m g z$; the
    plane $h = z + x\\tan\\alpha = 0$ descends along $x$, $\\xi = x/\\cos\\alpha$ is the distance
    down the slope and the blade keeps the in-plane velocity along $(\\cos\\theta, \\sin\\theta)$
    in $(\\xi, y)$: $\\dot\\xi\\sin\\theta - \\dot y\\cos\\theta = 0$ with
    $\\dot\\xi = \\dot x\\cos\\alpha - \\dot z\\sin\\alpha$.
    From rest at the origin with $\\dot\\theta = \\omega$: $\\theta = \\omega t$,
    $\\xi = \\frac{g\\sin\\alpha}{2\\omega^2}\\sin^2\\omega t$,
    $y = \\frac{g\\sin\\alpha}{2\\omega^2}(\\omega t - \\tfrac12\\sin 2\\omega t)$
    ([Bloch2003] §1.6, the knife edge on an inclined plane; [NeimarkFufaev1972]).
    """

    m: float = 1.0
    J: float = 0.5
    g: float = 9.81
    alpha: float = 0.4

    def lagrangian(self, q, v):
        return 0.5 * self.m * (v[:3] @ v[:3]) + 0.5 * self.J * v[3] ** 2 - self.m * self.g * q[2]

    def plane(self, q):
        return q[2] + q[0] * jnp.tan(self.alpha)

    def blade(self, q):
        ca, sa, s, c = jnp.cos(self.alpha), jnp.sin(self.alpha), jnp.sin(q[3]), jnp.cos(q[3])
        return jnp.stack([s * ca, -c, -s * sa, 0 * s])

    def system(self):
        plane, blade = gm.HolonomicConstraint(self.plane), gm.LinearConstraint(self.blade)
        return gm.LagrangianSystem(self.lagrangian, constraint=gm.Constraint.stack([plane, blade]))

    def closed_form(self, t, omega):
        c = self.g * jnp.sin(self.alpha) / (2 * omega**2)
        xi = c * jnp.sin(omega * t) ** 2
        y = c * (omega * t - 0.5 * jnp.sin(2 * omega * t))
        return jnp.stack([xi * jnp.cos(self.alpha), y, -xi * jnp.sin(self.alpha), omega * t])


class DampedOscillator(eqx.Module):
    """$L = \\tfrac12\\dot q^2 - \\tfrac12 q^2$ with the force $F = -c\\dot q$ (unconstrained):
    from $q = 1$, $\\dot q = 0$,
    $q = e^{-ct/2}(\\cos\\omega t + \\tfrac{c}{2\\omega}\\sin\\omega t)$,
    $\\dot q = -e^{-ct/2}\\sin(\\omega t)/\\omega$, $\\omega = \\sqrt{1 - c^2/4}$."""

    c: jax.Array = eqx.field(converter=jnp.asarray, default=0.0)  # an array: one compilation

    def lagrangian(self, q, v):
        return 0.5 * (v @ v) - 0.5 * (q @ q)

    def damping(self, q, v):
        return -self.c * v

    def system(self):
        return gm.LagrangianSystem(self.lagrangian, force=self.damping)

    def closed_form(self, t):
        w = jnp.sqrt(1 - self.c**2 / 4)
        decay = jnp.exp(-self.c * t / 2)
        q = decay * (jnp.cos(w * t) + self.c / (2 * w) * jnp.sin(w * t))
        return q, -decay * jnp.sin(w * t) / w


# -- second order, on C, against references and closed forms -----------------------------------


def _convergence(system, y0, exact_at_1, quadrature):
    """Errors of q and v at t = 1 for dt = 1/N, N in NS (and every step on C)."""
    eq, ev = [], []
    for N in NS:
        sol = run(system, y0, 0.0, 1.0, 1.0 / N, quadrature)
        assert sol.result == diffrax.RESULTS.successful
        assert_on_C(sol)
        q, v = exact_at_1
        end = final(sol)
        eq.append(np.max(np.abs(end.q - q)))
        ev.append(np.max(np.abs(end.v - v)))
    return fitted_order(eq), fitted_order(ev), eq


@pytest.mark.parametrize(
    "model, quadrature",
    [(DoublePendulum(), "midpoint"), (RollingDisk(), "trapezoid")],
    ids=["double-pendulum-RATTLE", "rolling-disk-DLA"],
)
def test_second_order_against_reference(model, quadrature):
    """Holonomic (Cartesian double pendulum) and nonholonomic (rolling disk): positions and
    velocities converge at order 2 to a Tsit5 reference with dt = 1e-3 (error ~1e-14)."""
    system, y0 = model.system(), model.initial_state()
    ref = final(tsit5(system, y0, 1.0, 1e-3))
    order_q, order_v, errors = _convergence(system, y0, (ref.q, ref.v), quadrature)
    assert abs(order_q - 2) <= 0.1 and abs(order_v - 2) <= 0.1, (order_q, order_v)
    assert errors[-1] <= 1e-3


def test_chaplygin_sleigh_closed_form_at_order_two():
    """[Goicolea]'s sleigh: (u, ω, θ) of the closed form at t = 1, order 2 (DLA)."""
    sleigh = ChaplyginSleigh()
    system, y0 = sleigh.system(), sleigh.initial_state(u0=0.5, omega0=1.0, theta0=0.3)
    u, w, th, _ = sleigh.closed_form(1.0, 0.5, 1.0, 0.3)
    errors = []
    for N in NS:
        sol = run(system, y0, 0.0, 1.0, 1.0 / N)
        assert_on_C(sol)
        end = final(sol)
        u_n, w_n = sleigh.body_velocities(end)
        errors.append(max(abs(u_n - u), abs(w_n - w), abs(end.q[2] - th)))
    assert abs(fitted_order(errors) - 2) <= 0.1
    assert errors[-1] <= 1e-5


def test_rheonomic_closed_forms_at_order_two():
    """Time-dependent systems of [Zanella]: the bead on the rotating wire (holonomic, (139)) and
    the pursuit curve (nonholonomic, (190)), both evaluated at the quadrature's times."""
    bead = BeadOnRotatingWire()
    r, rdot = bead.closed_form(1.0, 1.0, 0.0)
    pursuit = Pursuit()
    errors_bead, errors_pursuit = [], []
    for N in NS:
        sol = run(bead.system(), bead.initial_state(1.0, 0.0), 0.0, 1.0, 1.0 / N)
        assert_on_C(sol, tol=1e-12)
        r_n, rdot_n = bead.radius(reached(sol)[0][-1], final(sol))
        errors_bead.append(max(abs(r_n - r), abs(rdot_n - rdot)))
        sol = run(pursuit.system(), pursuit.initial_state(), 0.0, 0.8, 0.8 / N)
        assert_on_C(sol)
        x, y = final(sol).q
        errors_pursuit.append(abs(y - pursuit.path(x)))
    assert abs(fitted_order(errors_bead) - 2) <= 0.1, errors_bead
    assert abs(fitted_order(errors_pursuit) - 2) <= 0.1, errors_pursuit


def test_mixed_holonomic_and_nonholonomic_stack():
    """A stack of a holonomic row (the plane, kept by h(q_{k+1}) = 0) and a nonholonomic row (the
    blade, by the discrete Lagrange–d'Alembert equations): the closed form at order 2."""
    knife, omega = KnifeOnIncline(), 2.0
    y0 = gm.State(jnp.zeros(4), jnp.array([0.0, 0.0, 0.0, omega]))
    exact = knife.closed_form(1.0, omega)
    errors = []
    for N in NS:
        sol = run(knife.system(), y0, 0.0, 1.0, 1.0 / N)
        assert_on_C(sol)
        errors.append(np.max(np.abs(final(sol).q - exact)))
    assert abs(fitted_order(errors) - 2) <= 0.1, errors


@pytest.mark.parametrize("quadrature", ["midpoint", "trapezoid"])
def test_forces_by_discrete_lagrange_dalembert(quadrature):
    """Damping enters through the discrete forces f_d^± ([MW] §3.2): the damped
    oscillator's closed form at order 2; undamped, the midpoint variational integrator is the
    implicit midpoint rule and keeps the quadratic energy to round-off."""
    errors = []
    damped = DampedOscillator(c=0.3)
    q1, v1 = damped.closed_form(1.0)
    y0 = gm.State(jnp.ones(1), jnp.zeros(1))
    for N in NS:
        end = final(run(damped.system(), y0, 0.0, 1.0, 1.0 / N, quadrature))
        errors.append(max(abs(end.q[0] - q1), abs(end.v[0] - v1)))
    assert abs(fitted_order(errors) - 2) <= 0.1, errors
    free = run(DampedOscillator(c=0.0).system(), y0, 0.0, 50.0, 0.05, quadrature)
    E = reached(free)[2]
    drift = np.max(np.abs(E - E[0]))
    if quadrature == "midpoint":
        assert drift <= 1e-13
    else:  # Störmer–Verlet: bounded, O(dt^2), not exact
        assert 1e-6 <= drift <= 1e-3


def test_full_newton_gives_the_same_steps():
    """The default simplified Newton (optimistix.Chord, Jacobian of the first iterate) and full
    Newton (optimistix.Newton) solve the same discrete equations: the same trajectory to
    round-off."""
    model = SphericalPendulum()
    system, y0 = model.system(), model.initial_state()
    chord = run(system, y0, 0.0, 10.0, 0.05)
    newton = gm.simulate(
        system,
        y0,
        0.0,
        10.0,
        integrator=VI(root_finder=optx.Newton(rtol=1e-12, atol=1e-12)),
        dt0=0.05,
        saveat=diffrax.SaveAt(steps=True),
        max_steps=MAX,
    )
    np.testing.assert_allclose(reached(newton)[1].q, reached(chord)[1].q, rtol=0, atol=1e-12)
    np.testing.assert_allclose(reached(newton)[1].v, reached(chord)[1].v, rtol=0, atol=1e-12)


# -- structure: Noether, reversibility, bounded energy ------------------------------------------


def test_discrete_noether_spherical_pendulum():
    """L_d keeps the rotations about the vertical, so the discrete momentum map, the vertical
    angular momentum m(x ẏ − y ẋ), is conserved to round-off over 2000 steps (discrete Noether
    theorem), while the energy is only kept to O(dt^2)."""
    model = SphericalPendulum()
    sol = run(model.system(), model.initial_state(), 0.0, 100.0, 0.05)
    assert sol.result == diffrax.RESULTS.successful
    _, s, E = reached(sol)
    assert s.q.shape[0] >= 2000
    Lz = model.m * (s.q[:, 0] * s.v[:, 1] - s.q[:, 1] * s.v[:, 0])
    assert np.max(np.abs(Lz - Lz[0])) <= 1e-12
    assert 1e-4 <= np.max(np.abs(E - E[0])) <= 0.1  # not exact: the conservation is structural
    assert_on_C(sol)


@pytest.mark.parametrize(
    "model, quadrature",
    [(SphericalPendulum(), "midpoint"), (RollingDisk(), "trapezoid")],
    ids=["spherical-RATTLE", "rolling-disk-DLA"],
)
def test_reversibility(model, quadrature):
    """Both schemes are symmetric: 200 steps forward, then 200 back (t1 < t0, dt0 < 0) from the
    final state return to the initial state to round-off."""
    system, y0 = model.system(), model.initial_state()
    forward = run(system, y0, 0.0, 2.0, 0.01, quadrature)
    back = run(system, final(forward), 2.0, 0.0, -0.01, quadrature)
    assert back.result == diffrax.RESULTS.successful
    start = final(back)
    assert reached(back)[0][-1] == 0.0
    assert np.max(np.abs(start.q - y0.q)) <= 1e-12
    assert np.max(np.abs(start.v - y0.v)) <= 1e-12


@pytest.mark.parametrize(
    "model, dt, quadrature",
    [(DoublePendulum(), 0.01, "midpoint"), (RollingDisk(), 0.04, "trapezoid")],
    ids=["double-pendulum", "rolling-disk"],
)
def test_energy_bounded_while_tsit5_drifts(model, dt, quadrature):
    """5000 steps (the ≥ 1e5-step version is benchmarks/variational.py): the variational energy
    error oscillates without growth, while Tsit5 without projection at the same step (about the
    same work: 6 stages against ~5 Newton iterations) drifts steadily."""
    system, y0 = model.system(), model.initial_state()
    t1 = 5000 * dt

    def quarters(sol):
        _, _, E = reached(sol)
        return np.array([np.mean(x) for x in np.array_split(np.abs(E - E[0]), 4)])

    variational = quarters(run(system, y0, 0.0, t1, dt, quadrature))
    explicit = quarters(tsit5(system, y0, t1, dt))
    assert 0.8 <= variational[-1] / variational[0] <= 1.25, variational  # bounded, no drift
    assert explicit[-1] / explicit[0] >= 4 and np.all(np.diff(explicit) > 0), explicit  # drift


def test_saveat_ts_between_steps_on_C_and_second_order():
    """SaveAt(ts) between steps takes a partial variational step: the saved states lie on C to
    round-off and converge at order 2 (the dense output of a linear interpolation would not be
    on h = 0)."""
    model = SphericalPendulum()
    system, y0 = model.system(), model.initial_state()
    ts = jnp.array([0.0, 0.03, 0.37, 0.5, 0.81, 1.0])
    reference = final(run(system, y0, 0.0, 0.81, 0.81 / 4000))

    def at_ts(dt):
        sol = gm.simulate(
            system, y0, 0.0, 1.0, integrator=VI(), dt0=dt, saveat=diffrax.SaveAt(ts=ts)
        )
        assert np.max(sol.position_residual) <= 1e-13
        assert np.max(sol.constraint_residual) <= 1e-13
        np.testing.assert_array_equal(sol.states.q[0], y0.q)
        return np.max(np.abs(sol.states.q[4] - reference.q))

    e1, e2 = at_ts(0.1), at_ts(0.05)
    assert 3.5 <= e1 / e2 <= 4.5, (e1, e2)  # 0.81 is mid-step for both step sizes


# -- ensembles, gradients, float32 --------------------------------------------------------------


def test_ensemble_isolates_a_newton_failure():
    """Trajectory 2 turns so fast that dt·|v| > 2l: the discrete equations have no solution and
    Newton fails on its first step. It ends with a nonlinear-solver code and its last state (the
    initial one); the others succeed and are bit-identical to the same ensemble without the bad
    member, and equal to their solo runs to round-off (XLA's batched CPU kernels round
    differently from unbatched ones, as for diffrax.Tsit5)."""
    system = CartesianPendulum()()
    B, bad = 6, 2
    theta = jnp.linspace(0.1, 0.6, B)
    omega = jnp.ones(B).at[bad].set(60.0)
    kw = dict(
        integrator=VI(),
        dt0=0.05,
        saveat=diffrax.SaveAt(t0=True, t1=True),
        max_steps=64,
        throw=False,
    )
    sol = gm.simulate(system, pendulum_state(theta, omega), 0.0, 1.0, **kw)
    ok = sol.result == diffrax.RESULTS.successful
    np.testing.assert_array_equal(ok, jnp.arange(B) != bad)
    newton = (sol.result == diffrax.RESULTS.nonlinear_max_steps_reached) | (
        sol.result == diffrax.RESULTS.nonlinear_divergence
    )
    assert bool(newton[bad])
    assert int(sol.stats["num_steps"][bad]) == 1
    np.testing.assert_array_equal(sol.states.q[bad, -1], pendulum_state(theta, omega).q[bad])
    benign = gm.simulate(system, pendulum_state(theta, jnp.ones(B)), 0.0, 1.0, **kw)
    others = jnp.arange(B) != bad
    np.testing.assert_array_equal(sol.states.q[others], benign.states.q[others])
    np.testing.assert_array_equal(sol.states.v[others], benign.states.v[others])
    for i in (0, B - 1):
        solo = gm.simulate(system, pendulum_state(theta[i], 1.0), 0.0, 1.0, **kw)
        np.testing.assert_allclose(solo.states.q, sol.states.q[i], rtol=0, atol=1e-14)
        np.testing.assert_allclose(solo.states.v, sol.states.v[i], rtol=0, atol=1e-13)
    with pytest.raises(Exception, match="Nonlinear solve diverged"):
        gm.simulate(system, pendulum_state(theta[bad], 60.0), 0.0, 1.0, **{**kw, "throw": True})


def test_gradients_match_finite_differences():
    """d(loss)/d(l, θ0, ω0) through 20 variational steps (implicit differentiation of each Newton
    solve) against central differences."""

    def loss(p):
        l, theta, omega = p
        sol = gm.simulate(
            CartesianPendulum(l=l)(),
            pendulum_state(theta, omega, l),
            0.0,
            1.0,
            integrator=VI(),
            dt0=0.05,
        )
        return jnp.sum(sol.states.q[-1] ** 2 * jnp.array([1.0, 2.0])) + jnp.sum(sol.states.v[-1])

    p = jnp.array([1.1, 0.4, 0.8])
    grad = jax.jit(jax.grad(loss))(p)
    f = jax.jit(loss)
    eps = 1e-6
    fd = jnp.array([(f(p + eps * e) - f(p - eps * e)) / (2 * eps) for e in jnp.eye(3)])
    np.testing.assert_allclose(grad, fd, rtol=1e-7, atol=1e-8)


def test_float32():
    """A float32 pendulum: Newton converges at the float32 tolerance, the state stays float32 and
    on C to float32 round-off, and the energy error stays O(dt^2)."""
    system = CartesianPendulum()()
    y0 = jax.tree.map(lambda x: x.astype(jnp.float32), pendulum_state(0.5, 1.0))
    y0 = gm.project_to_constraints(system, y0)
    sol = gm.simulate(
        system,
        y0,
        0.0,
        10.0,
        integrator=VI(),
        dt0=0.01,
        saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, 10.0, 11, dtype=jnp.float32)),
        max_steps=1100,
    )
    assert sol.result == diffrax.RESULTS.successful
    assert sol.states.q.dtype == jnp.float32
    assert np.max(sol.position_residual) <= 1e-6 and np.max(sol.constraint_residual) <= 1e-5
    assert np.max(np.abs(sol.energy - sol.energy[0])) <= 1e-3


# -- bad input ----------------------------------------------------------------------------------


def test_bad_input_errors(no_typecheck):  # geomech's own messages, as users see them
    pendulum = CartesianPendulum()()
    y0 = pendulum_state(0.5, 1.0)
    with pytest.raises(ValueError, match="needs a fixed step: pass dt0"):
        gm.simulate(pendulum, y0, 0.0, 1.0, integrator=VI())
    with pytest.raises(ValueError, match="no adaptive"):
        gm.simulate(
            pendulum, y0, 0.0, 1.0, integrator=VI(), dt0=0.1,
            stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6),
        )  # fmt: skip
    with pytest.raises(ValueError, match="stabilization is not used"):
        gm.simulate(pendulum, y0, 0.0, 1.0, integrator=VI(), dt0=0.1, stabilization="projection")
    with pytest.raises(ValueError, match="W != D"):
        system = gm.LagrangianSystem(
            pendulum.lagrangian,
            constraint=pendulum.constraint,
            work_space=gm.Subspace(annihilator=jnp.array([[1.0, 0.0]])),
        )
        gm.simulate(system, y0, 0.0, 1.0, integrator=VI(), dt0=0.1)
    with pytest.raises(ValueError, match="known_work"):
        system = gm.LagrangianSystem(
            pendulum.lagrangian, constraint=pendulum.constraint, known_work=lambda q, v: 0.1 * v
        )
        gm.simulate(system, y0, 0.0, 1.0, integrator=VI(), dt0=0.1)
    with pytest.raises(TypeError, match="nonlinear in the velocities"):
        speed = gm.LagrangianSystem(
            lambda q, v: 0.5 * (v @ v), constraint=gm.Constraint(lambda q, v: v @ v - 1.0)
        )
        gm.simulate(speed, gm.State(jnp.zeros(2), jnp.array([1.0, 0.0])), 0.0, 1.0,
                    integrator=VI(), dt0=0.1)  # fmt: skip
    with pytest.raises(ValueError, match="quadrature"):
        VI("simpson")
    with pytest.raises(ValueError, match="max_steps"):
        VI(max_steps=0)
    with pytest.raises(TypeError, match="optimistix root finder"):
        VI(root_finder="newton")
    with pytest.raises(TypeError, match="BacksolveAdjoint .* is not supported"):
        jax.grad(
            lambda y: gm.simulate(
                pendulum, y, 0.0, 1.0, integrator=VI(), dt0=0.1, adjoint=diffrax.BacksolveAdjoint()
            ).states.q.sum()
        )(y0)
