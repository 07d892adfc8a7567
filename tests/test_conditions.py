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
        "FAILURES": tuple(getattr(failure, n) for n in failure._name_to_item if n != "none"),
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
    assert set(gm.Failure._name_to_item) == names | {"none"}
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
