"""A rolling body's plane is a unilateral contact (`gm.AbstractContact`): `simulate` stops a
trajectory where the plane would have to pull (`gm.Failure.lift_off`) or where the contact point
is no longer defined, a thin disk lying flat (`contact_undefined`), at the time it happens.

Independent values: a thin disk (radius a, moments A = ma²/4 about a diameter) let go from rest at
a lean θ₀ does not spin or roll: its contact point stays fixed and it falls about the tangent to
its rim there, a hinged plate with I = A + ma² = 5ma²/4, so θ̇² = (8g/5a)(cos θ₀ − cos θ),
θ̈ = (4g/5a) sin θ and N = m(g + z̈_G) = mg(0.2 + 2.4c² − 1.6c₀c) with c = cos θ. The times of
lift-off (N = 0) and of lying flat (θ = π/2) are quadratures of dθ/θ̇."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from scipy.integrate import quad

import geomech as gm
import geomech.models as gmm

G, A = 9.81, 1.0  # the models' defaults: g = 9.81, radius 1


def _fall_time(theta0, theta1):
    """The time the hinged disk takes from rest at `theta0` to `theta1` (a quadrature). dθ/θ̇ is
    singular like (θ − θ₀)^(−1/2) at the rest point, where QUADPACK cannot reach 1e-13: with
    θ = θ₀ + s² and cos θ₀ − cos θ = 2 sin(θ₀ + s²/2) sin(s²/2) the integrand is smooth and free
    of cancellation."""
    k = 8 * G / (5 * A)
    rate = lambda s: 2 * s / np.sqrt(2 * k * np.sin(theta0 + 0.5 * s * s) * np.sin(0.5 * s * s))
    return quad(rate, 0.0, np.sqrt(theta1 - theta0), limit=200, epsabs=1e-13, epsrel=1e-13)[0]


def _lift_off_angle(theta0):
    """The first root of 2.4c² − 1.6c₀c + 0.2 = 0 below c₀ (None: N stays positive)."""
    c0 = np.cos(theta0)
    disc = (1.6 * c0) ** 2 - 4 * 2.4 * 0.2
    return None if disc < 0 else float(np.arccos((1.6 * c0 + np.sqrt(disc)) / 4.8))


MODELS = {"so3": gmm.RollingDiskSO3(), "euler": gmm.RollingDisk()}


def _at_rest(model, lean):
    return model.initial_state(lean=lean, yaw_rate=0.0, spin_rate=0.0)


def test_normal_force_of_the_resting_disk_is_newtons():
    """At rest at lean θ₀ (z̈_G = −a sin θ₀ θ̈): N = mg(1 − 0.8 sin²θ₀), for both charts."""
    theta0 = 0.7
    expected = G * (1 - 0.8 * np.sin(theta0) ** 2)
    for model in MODELS.values():
        system, y0 = model.system(), _at_rest(model, theta0)
        a = gm.acceleration(system, y0)
        N, scale = system.contact.normal_force(0.0, y0, a)
        np.testing.assert_allclose(N, expected, rtol=1e-12)
        assert scale >= G


@pytest.mark.parametrize("chart", sorted(MODELS))
def test_a_disk_falling_flat_stops_where_it_lies_flat(chart):
    """From rest at θ₀ = 1 rad the plane pushes all the way down (min N = mg(0.2 − 0.267c₀²) > 0)
    and the disk lies flat at the quadrature's time: stopped there, `contact_undefined`, instead
    of being integrated through flat (the contact point jumping to the opposite rim) — in Euler
    angles it no longer steps below the table (θ > π/2)."""
    model, theta0 = MODELS[chart], 1.0
    assert _lift_off_angle(theta0) is None
    t_flat = _fall_time(theta0, np.pi / 2)
    system, y0 = model.system(), _at_rest(model, theta0)
    sol = gm.simulate(system, y0, 0.0, 2.0, saveat=diffrax.SaveAt(t1=True), throw=False)
    assert sol.failure == gm.Failure.contact_undefined
    assert sol.result == diffrax.RESULTS.event_occurred
    np.testing.assert_allclose(sol.t_final, t_flat, rtol=1e-7)
    last = gm.State(jax_tree_last(sol.states.q), sol.states.v[-1])
    assert system.contact.margin(sol.t_final, last) <= 1e-6  # flat, on the near side
    if chart == "euler":
        assert sol.states.q[-1, 3] <= np.pi / 2
    with pytest.raises(eqx.EquinoxRuntimeError, match="contact_undefined"):
        gm.simulate(system, y0, 0.0, 2.0)


def jax_tree_last(q):
    """The last saved point (of a `jaxlie` group, or a tuple of points: each one's last)."""
    return jax.tree_util.tree_map(lambda x: x[-1], q)


def test_lift_off_stops_at_the_time_the_normal_force_vanishes():
    """From rest at θ₀ = 0.3 rad the normal force falls through zero at cos θ = 0.4525 before the
    disk is flat (the issue's run reported success through flat at t* = 0.8587 s): stopped at the
    quadrature's time, `lift_off`, in both charts."""
    theta0 = 0.3
    t_lift = _fall_time(theta0, _lift_off_angle(theta0))
    assert t_lift < _fall_time(theta0, np.pi / 2)
    for model in MODELS.values():
        sol = gm.simulate(model.system(), _at_rest(model, theta0), 0.0, 2.0, throw=False)
        assert sol.failure == gm.Failure.lift_off
        np.testing.assert_allclose(sol.t_final, t_lift, rtol=1e-7)


def test_a_fixed_step_stops_at_the_start_of_the_step_across_lift_off():
    """With a constant step size no step is refused: the run stops at the start of the first
    step that ends where the plane would pull, the last multiple of dt before the quadrature's
    time, with the state there."""
    theta0, dt = 0.3, 0.01
    t_lift = _fall_time(theta0, _lift_off_angle(theta0))
    model = MODELS["euler"]
    system, y0 = model.system(), _at_rest(model, theta0)
    sol = gm.simulate(
        system, y0, 0.0, 2.0, dt0=dt, stepsize_controller=diffrax.ConstantStepSize(),
        saveat=diffrax.SaveAt(t1=True), throw=False,
    )
    assert sol.failure == gm.Failure.lift_off and sol.result == diffrax.RESULTS.event_occurred
    np.testing.assert_allclose(sol.t_final, np.floor(t_lift / dt) * dt, rtol=1e-12)
    last = gm.State(sol.states.q[-1], sol.states.v[-1])
    N, _ = system.contact.normal_force(sol.t_final, last, gm.acceleration(system, last))
    assert N > 0  # the state kept is one the model holds


def test_a_failing_member_stops_and_the_others_are_their_solo_runs():
    """A batch of a disk rolling upright (stays up), one falling flat and one lifting off: each
    flagged with its own code and time, the rolling one bit-identical to its solo run."""
    model = MODELS["so3"]
    rolling = model.initial_state()
    states = [rolling, _at_rest(model, 1.0), _at_rest(model, 0.3)]
    batch = gm.State(
        jax_tree_stack([s.q for s in states]), jnp.stack([s.v for s in states])
    )
    system = model.system()
    saveat = diffrax.SaveAt(ts=jnp.linspace(0.0, 1.0, 5))
    sol = gm.simulate(system, batch, 0.0, 1.0, saveat=saveat, throw=False)
    expected = [gm.Failure.none, gm.Failure.contact_undefined, gm.Failure.lift_off]
    assert all(np.asarray(sol.failure == f)[i] for i, f in enumerate(expected))
    np.testing.assert_allclose(sol.t_final[1:], [_fall_time(1.0, np.pi / 2), _fall_time(
        0.3, _lift_off_angle(0.3))], rtol=1e-7)
    assert np.all(np.isinf(sol.ts[1, 3:]))  # not reached after the stop
    # the rolling member: bit for bit as in the same batch with it in the failing slots, and to
    # round-off as alone (XLA:CPU vectorizes other batch sizes differently, test_failures.py)
    good = gm.State(jax_tree_stack([rolling.q] * 3), jnp.stack([rolling.v] * 3))
    ref = gm.simulate(system, good, 0.0, 1.0, saveat=saveat, throw=False)  # the same program
    assert np.all(np.asarray(ref.failure == gm.Failure.none))
    np.testing.assert_array_equal(sol.states.v[0], ref.states.v[0])
    np.testing.assert_array_equal(sol.ts[0], ref.ts[0])
    solo = gm.simulate(system, rolling, 0.0, 1.0, saveat=saveat)
    np.testing.assert_allclose(sol.states.v[0], solo.states.v, rtol=1e-12, atol=1e-12)


def jax_tree_stack(trees):
    return jax.tree_util.tree_map(lambda *x: jnp.stack(x), *trees)


def test_initial_states_out_of_the_model_are_refused():
    """A disk lying flat at t0 (`validate` names it; `simulate` flags it, not integrated) and a
    disk whose start needs the plane to pull (a fast lean rate: z̈_G ≈ −a cos θ θ̇² < −g)."""
    euler = MODELS["euler"]
    flat = _at_rest(MODELS["so3"], np.pi / 2)
    report = gm.validate(MODELS["so3"].system(), flat)
    assert "contact_undefined" in [p.code for p in report.problems]
    sol = gm.simulate(MODELS["so3"].system(), flat, 0.0, 1.0, throw=False)
    assert sol.failure == gm.Failure.contact_undefined and sol.t_final == 0.0
    pulled = euler.initial_state(lean=0.5, lean_rate=10.0, yaw_rate=0.0, spin_rate=0.0)
    sol = gm.simulate(euler.system(), pulled, 0.0, 1.0, throw=False)
    assert sol.failure == gm.Failure.lift_off and sol.result == diffrax.RESULTS.singular
    with pytest.raises(ValueError, match="lifts off"):
        gm.simulate(euler.system(), pulled, 0.0, 1.0)
    report = gm.validate(euler.system(), pulled)
    assert "lift_off" in [p.code for p in report.problems]


def test_a_contact_can_be_left_out(no_typecheck):
    """`contact=None` holds the body on the plane regardless (no events): the old behaviour, for
    runs that know they stay in the model."""
    rolling = gm.RollingBody(gm.RigidBody(1.0, jnp.array([0.25, 0.5, 0.25])), gm.ThinDisk(1.0, 1))
    assert isinstance(rolling.system().contact, gm.PlaneContact)
    assert rolling.system(contact=None).contact is None
    with pytest.raises(ValueError, match="BacksolveAdjoint"):
        y0 = gm.State((jaxlie.SO3.from_x_radians(0.3), jnp.zeros(2)), jnp.zeros(5))
        gm.simulate(rolling.system(), y0, 0.0, 1.0, adjoint=diffrax.BacksolveAdjoint())
    with pytest.raises(TypeError, match="contact must be"):
        gm.LagrangianSystem(lambda q, v: v @ v, constraint=rolling.constraint(), contact=object())
