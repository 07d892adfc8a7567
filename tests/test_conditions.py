"""The one table of state conditions (`geomech/_checks.py`): a condition added to it shows up in
all four consumers — `assemble`'s runtime checks, `simulate`'s and `simulate_vakonomic`'s
per-trajectory preconditions, and `gm.validate` — with its message, code and `gm.Failure`."""

import sys

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm
import geomech._vakonomic._simulate  # noqa: F401 (the consumers' modules, imported before the fixture patches them)
import geomech._validate
from geomech import _checks

LIMIT = 10.0
SPEED = _checks.Condition(
    "speed_limit", "speed", "the speed is above the test's limit", "slow down", "residual",
    lambda at: (jnp.max(jnp.abs(at.v)), jnp.asarray(LIMIT)), detail="|v|∞",
    failure="speed_limit",
)


@pytest.fixture
def speed_limit(monkeypatch, no_typecheck):
    """The table with one more row, as if it had been written in `_checks.py`: the table and the
    `gm.Failure` enumeration built from it, wherever geomech's modules hold them. (Without the
    suite's annotation checker: the annotations `Failure` of already-defined functions name the
    enumeration of the unextended table; a row written in the source is there before they are.)"""
    table = _checks.CONDITIONS + (SPEED,)
    failure = _checks.failure_enumeration(table)
    new = {
        "CONDITIONS": table,
        "Failure": failure,
        "FAILURES": tuple(
            getattr(failure, n) for n in dict.fromkeys(c.failure for c in table if c.failure)
        ),
    }
    old = {name: getattr(_checks, name) for name in new}
    for module in [m for name, m in sys.modules.items() if name.split(".")[0] == "geomech"]:
        for name, value in new.items():
            if getattr(module, name, None) is old[name]:
                monkeypatch.setattr(module, name, value)
    return failure


def _pendulum():
    # a new system per test: its programs are traced with the extended table
    return gm.LagrangianSystem(
        lambda q, v: 0.5 * v @ v - q[1], constraint=gm.HolonomicConstraint(lambda q: q @ q - 1.0)
    )


SLOW = gm.State(jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]))
FAST = gm.State(jnp.array([1.0, 0.0]), jnp.array([0.0, 2 * LIMIT]))
BOTH = gm.State(jnp.stack([SLOW.q, FAST.q]), jnp.stack([SLOW.v, FAST.v]))


def test_the_table_is_the_failure_enumeration():
    names = {c.failure for c in _checks.CONDITIONS if c.failure}
    assert set(gm.Failure._name_to_item) == names | set(diffrax.RESULTS._name_to_item)
    assert len(_checks.FAILURES) == len(names)
    for c in _checks.CONDITIONS:
        assert c.kind in ("finite", "margin", "residual") and c.consumers <= _checks.CONSUMERS
        assert set(c.after) <= {d.name for d in _checks.CONDITIONS}
    assert len({c.name for c in _checks.CONDITIONS}) == len(_checks.CONDITIONS)


def test_an_added_condition_reaches_assemble(speed_limit):
    system = _pendulum()
    assert np.all(np.isfinite(gm.acceleration(system, SLOW)))
    with pytest.raises(eqx.EquinoxRuntimeError, match="the speed is above the test's limit: slow down"):
        gm.acceleration(system, FAST)


def test_an_added_condition_reaches_validate(speed_limit):
    system = _pendulum()
    assert gm.validate(system, SLOW).ok
    report = gm.validate(system, FAST)
    assert report.codes() == ("speed",) and report.problems[0].value == 2 * LIMIT
    assert "slow down (|v|∞ = 20, needs <= 10)" in str(report)


def test_an_added_condition_reaches_simulate(speed_limit):
    sol = gm.simulate(_pendulum(), BOTH, 0.0, 0.1, throw=False)
    np.testing.assert_array_equal(sol.failure == speed_limit.speed_limit, [False, True])
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.successful, [True, False])
    assert "the speed is above the test's limit: slow down" in speed_limit[sol.failure]
    with pytest.raises(ValueError, match=r"trajectories \[1\] \(1 of 2\): the speed is above"):
        gm.simulate(_pendulum(), BOTH, 0.0, 0.1)


def test_an_added_condition_reaches_simulate_vakonomic(speed_limit):
    sol = gm.simulate_vakonomic(_pendulum(), BOTH, None, 0.0, 0.1, throw=False)
    np.testing.assert_array_equal(sol.failure == speed_limit.speed_limit, [False, True])
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.successful, [True, False])


def test_impasse_margin_vanishes_with_a_one_dimensional_kernel():
    """g = v₁ + v₀²/2, M = I: at v = 0, ker G = span e₀ and M_μ there is 1 + μ (a 1 x 1 matrix,
    whose σ_min/σ_max was always 1): the margin is 1 + μ relative to M, zero at μ = -1, and a
    run starting there is stopped as an impasse."""
    system = gm.LagrangianSystem(
        lambda q, v: 0.5 * v @ v, constraint=gm.Constraint(lambda q, v: v[1] + 0.5 * v[0] ** 2)
    )
    state = gm.State(jnp.zeros(2), jnp.zeros(2))
    for mu, margin in ((-1.0, 0.0), (0.0, 1.0), (1.0, 2.0), (-3.0, 2.0)):
        assert float(gm.impasse_margin(system, state, jnp.array([mu]))) == pytest.approx(margin, abs=1e-14)
    sol = gm.simulate_vakonomic(system, state, jnp.array([[-1.0], [1.0]]), 0.0, 0.1, throw=False)
    np.testing.assert_array_equal(sol.impasse, [True, False])
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.event_occurred, [True, False])
