"""Units do not change the verdict: every condition of the table in
`geomech/_checks.py` is invariant under a change of units of lengths, masses and time.

The issue's examples, then a metamorphic property test: a random system and its copy in other
units (lengths x 10^a, masses x 10^b, time x 10^c) get the same `gm.validate` verdict, the same
`gm.Failure` flags and the same trajectory after rescaling."""

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import geomech as gm
from geomech.models import ChaplyginSleigh


def _pendulum(l, m=1.0, g=9.81):
    return gm.LagrangianSystem(
        lambda q, v: 0.5 * m * v @ v - m * g * q[1],
        constraint=gm.HolonomicConstraint(lambda q: q @ q - l**2),
    )


def test_a_micrometre_pendulum_refuses_a_state_at_twice_its_length():
    l = 1e-6
    system = _pendulum(l)
    state = gm.State(jnp.array([2 * l, 0.0]), jnp.array([0.0, 0.0]))
    assert gm.validate(system, state).codes() == ("off_constraint",)
    assert not gm.on_constraint(system, state)
    assert gm.validate(system, gm.State(jnp.array([l, 0.0]), jnp.array([0.0, 0.0]))).ok


def test_a_slow_sleigh_with_a_full_violation_is_off_C():
    system = ChaplyginSleigh().system()
    # φ = −ẋ sin θ + ẏ cos θ − ω l/2 = 5e-10 at θ = 0: as large as the motion itself
    state = gm.State(jnp.zeros(3), jnp.array([0.0, 5e-10, 0.0]))
    assert gm.validate(system, state).codes() == ("off_constraint",)
    assert not gm.on_constraint(system, state)
    # the same motion on C is accepted at any speed
    assert gm.validate(system, gm.State(jnp.zeros(3), jnp.array([5e-10, 0.0, 0.0]))).ok


def _millimetre_states(l=1e4, count=30):
    theta = jnp.linspace(0.1, 3.0, count)
    q = l * jnp.stack([jnp.sin(theta), -jnp.cos(theta)], axis=1)
    v = 2e3 * jnp.stack([jnp.cos(theta), jnp.sin(theta)], axis=1)
    return gm.State(q, v)


def test_a_pendulum_in_millimetres_accepts_its_exact_states():
    """A 10 m pendulum in mm (l = 1e4): states exact to the last bit are on C, and the fixes that
    an off-C verdict suggests converge on them."""
    system = _pendulum(1e4, g=9.81e3)
    states = _millimetre_states()
    for i in range(states.q.shape[0]):
        state = gm.State(states.q[i], states.v[i])
        assert gm.validate(system, state).ok, str(gm.validate(system, state))
        fixed = gm.consistent_state(system, state, fixed_q=(0,), fixed_v=(0,))
        np.testing.assert_allclose(fixed.q, state.q, rtol=1e-12)
        np.testing.assert_allclose(fixed.v, state.v, rtol=1e-9, atol=1e-9 * 2e3)
    projected = gm.project_to_constraints(system, states)
    np.testing.assert_allclose(projected.q, states.q, rtol=1e-12)


def test_a_mass_matrix_with_coordinates_in_different_units_is_regular():
    """M = diag(1e-7, 1e7): two coordinates in very different units, as regular as the identity."""
    system = gm.LagrangianSystem(lambda q, v: 0.5 * (1e-7 * v[0] ** 2 + 1e7 * v[1] ** 2) - q[0] - q[1])
    state = gm.State(jnp.zeros(2), jnp.ones(2))
    assert gm.validate(system, state).ok
    np.testing.assert_allclose(gm.acceleration(system, state), [-1e7, -1e-7], rtol=1e-14)


# -- the metamorphic property ----------------------------------------------------------------------


class Sleigh(eqx.Module):
    """A knife-edge sleigh on a spring: $L = \\tfrac12 m(\\dot x^2 + \\dot y^2) + \\tfrac12 m r^2
    \\omega^2 - \\tfrac12 k(x^2 + y^2)$, $-\\dot x\\sin\\theta + \\dot y\\cos\\theta - a\\omega = 0$;
    lengths `r`, `a`, mass `m`, stiffness `k` (mass / time²). With `holonomic`, a pendulum
    instead: $x^2 + y^2 = a^2$ under gravity `k / m` (length / time²)."""

    m: jnp.ndarray
    r: jnp.ndarray
    a: jnp.ndarray
    k: jnp.ndarray
    holonomic: bool = eqx.field(static=True)

    def lagrangian(self, q, v):
        kinetic = 0.5 * self.m * (v[0] ** 2 + v[1] ** 2) + 0.5 * self.m * self.r**2 * v[2] ** 2
        if self.holonomic:
            return kinetic - self.k * self.r * q[1]
        return kinetic - 0.5 * self.k * (q[0] ** 2 + q[1] ** 2)

    def row(self, q):
        th = q[2]
        return jnp.stack([-jnp.sin(th), jnp.cos(th), -self.a + 0 * th])[None]

    def circle(self, q):
        return (q[0] ** 2 + q[1] ** 2 - self.a**2)[None]

    def system(self):
        if self.holonomic:
            return gm.LagrangianSystem(self.lagrangian, constraint=gm.HolonomicConstraint(self.circle))
        return gm.LagrangianSystem(self.lagrangian, constraint=gm.LinearConstraint(self.row))

    def state(self, angle, u, omega):
        """A state on C: position angle (pendulum) or heading (sleigh), speed `u`, turn rate."""
        if self.holonomic:
            e = jnp.stack([jnp.sin(angle), -jnp.cos(angle)])
            q = jnp.concatenate([self.a * e, angle[None]])
            v = jnp.concatenate([u * jnp.stack([-e[1], e[0]]), omega[None]])
            return gm.State(q, v)
        c, s = jnp.cos(angle), jnp.sin(angle)
        q = jnp.stack([self.a * c, self.a * s, angle])
        v = jnp.stack([u * c - self.a * omega * s, u * s + self.a * omega * c, omega])
        return gm.State(q, v)

    def in_units(self, L, Mf, T):
        """The same system with lengths x L, masses x Mf, times x T."""
        return Sleigh(self.m * Mf, self.r * L, self.a * L, self.k * Mf / T**2, self.holonomic)


def _scale_state(state, L, T):
    length = jnp.array([L, L, 1.0])  # x, y are lengths, θ an angle
    return gm.State(state.q * length, state.v * length / T)


DEFECTS = ("none", "off_velocity", "off_position", "singular")


@settings(max_examples=8, deadline=None, derandomize=True)
@given(
    holonomic=st.booleans(),
    a=st.integers(-6, 6),
    b=st.integers(-6, 6),
    c=st.integers(-6, 6),
    defect=st.sampled_from(DEFECTS),
    params=st.tuples(*[st.floats(0.5, 2.0)] * 4),
    motion=st.tuples(st.floats(-3.0, 3.0), st.floats(0.2, 2.0), st.floats(-1.0, 1.0)),
)
def test_units_do_not_change_the_verdict(holonomic, a, b, c, defect, params, motion):
    m, r, arm, k = (jnp.asarray(x) for x in params)
    model = Sleigh(m, 0.0 * r if defect == "singular" else r, arm, k, holonomic)
    state = model.state(*(jnp.asarray(x) for x in motion))
    if defect == "off_velocity":  # 0.1 % of the speed across the constraint
        across = jnp.array([-jnp.sin(state.q[2]), jnp.cos(state.q[2]), 0.0])
        state = gm.State(state.q, state.v + 1e-3 * motion[1] * across)
    if defect == "off_position":
        state = gm.State(state.q * jnp.array([1.001, 1.001, 1.0]), state.v)
    L, Mf, T = 10.0**a, 10.0**b, 10.0**c
    other = model.in_units(L, Mf, T)
    other_state = _scale_state(state, L, T)

    report, other_report = gm.validate(model.system(), state), gm.validate(other.system(), other_state)
    assert report.codes() == other_report.codes(), f"{report}\n---\n{other_report}"
    # (the sleigh's constraint does not involve x, y: scaling them keeps it on C)
    assert report.ok == (defect == "none" or (defect == "off_position" and not holonomic))

    # same flags, same trajectory after rescaling (a fixed step: exact up to rounding)
    kw = dict(
        integrator=diffrax.Tsit5(), stepsize_controller=diffrax.ConstantStepSize(), throw=False,
        saveat=diffrax.SaveAt(t1=True),
    )
    sol = gm.simulate(model.system(), state, 0.0, 0.5, dt0=0.05, **kw)
    other_sol = gm.simulate(other.system(), other_state, 0.0, 0.5 * T, dt0=0.05 * T, **kw)
    assert bool(sol.failure == other_sol.failure) and bool(sol.result == other_sol.result)
    if bool(sol.result == diffrax.RESULTS.successful):
        end = gm.State(other_sol.states.q[-1], other_sol.states.v[-1])
        back = _scale_state(end, 1 / L, 1 / T)  # in the first system's units
        np.testing.assert_allclose(back.q, sol.states.q[-1], rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(back.v, sol.states.v[-1], rtol=1e-9, atol=1e-9)
