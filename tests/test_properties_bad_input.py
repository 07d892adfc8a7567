"""Property of the bad-input table: over random systems and random corruptions of the inputs, `simulate`
gives a clear error or a correct result, never a non-finite success.

Every draw has the same structure (n = 3, k = 1, a batch of two: the clean state on C and a
corrupted copy), so `simulate` compiles once; tolerances are values of the controller, not
static.
"""

import diffrax
import equinox as eqx
import jax.numpy as jnp
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_systems import random_system

import geomech as gm

N, K = 3, 1
SAVE = diffrax.SaveAt(ts=jnp.linspace(0.0, 0.4, 3))
STATE_CORRUPTIONS = ("none", "nan", "inf", "off_C", "fast")
ARGUMENT_CORRUPTIONS = ("negative_tol", "zero_tols", "nan_tol", "bad_t1", "wrong_shape")


def _corrupt_state(state, kind, index, scale):
    q, v = np.array(state.q), np.array(state.v)
    if kind == "nan":
        q[index] = np.nan
    elif kind == "inf":
        v[index] = np.inf
    elif kind == "off_C":
        v[index] += scale
    elif kind == "fast":  # on C, large speeds: may be hard to integrate, never garbage
        v *= 1.0 + 10.0 * scale
    return gm.State(q, v)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(STATE_CORRUPTIONS + ARGUMENT_CORRUPTIONS),
    index=st.integers(0, N - 1),
    scale=st.floats(0.01, 2.0),
    tol=st.floats(1e-10, 1e-5),
)
def test_clear_error_or_correct_result(seed, kind, index, scale, tol):
    system, state, t0 = random_system(seed, n=N, k=K)
    if kind == "fast":  # scale the velocity on C: φ is nonlinear in v, so project again
        state = gm.project_to_constraints(system, _corrupt_state(state, kind, index, scale), t0)
    bad = state if kind == "fast" else _corrupt_state(state, kind, index, scale)
    y0 = _pair(state, bad)
    kw = dict(rtol=tol, atol=tol, t1=t0 + 0.4)
    if kind == "negative_tol":
        kw["rtol"] = -tol
    elif kind == "zero_tols":
        kw.update(rtol=0.0, atol=0.0)
    elif kind == "nan_tol":
        kw["atol"] = float("nan")
    elif kind == "bad_t1":
        kw["t1"] = [float("nan"), float("inf"), -float("inf")][index]
    elif kind == "wrong_shape":
        y0 = gm.State(jnp.ones((2, N + 1)), jnp.ones((2, N + 1)))
    saveat = diffrax.SaveAt(ts=t0 + SAVE.subs.ts) if kind != "bad_t1" else SAVE
    try:
        sol = gm.simulate(system, y0, t0, saveat=saveat, throw=False, **kw)
    except (ValueError, TypeError, eqx.EquinoxRuntimeError) as e:
        assert kind in ARGUMENT_CORRUPTIONS, f"{kind}: {e}"  # a clear error for bad arguments
        assert str(e).strip()
        return
    assert kind in STATE_CORRUPTIONS, f"{kind} was accepted"
    ok = np.asarray(sol.result == diffrax.RESULTS.successful)
    for i in np.nonzero(ok)[0]:  # never a non-finite success
        assert np.all(np.isfinite(sol.states.q[i])) and np.all(np.isfinite(sol.states.v[i]))
        assert np.all(np.isfinite(sol.energy[i]))
    # a correct result for the clean member: exactly the run without the corrupted one (which
    # may itself stop early: a random W can reach a singular configuration, reported as such)
    clean = gm.simulate(system, _pair(state, state), t0, saveat=saveat, throw=False, **kw)
    np.testing.assert_array_equal(sol.states.q[0], clean.states.q[0])
    np.testing.assert_array_equal(sol.states.v[0], clean.states.v[0])
    assert (sol.result == clean.result)[0]
    expected = {"nan": "nonfinite_state", "inf": "nonfinite_state", "off_C": "off_constraint"}
    if kind in expected:
        assert (sol.failure == getattr(gm.Failure, expected[kind]))[1] and not ok[1]
    if kind in ("none", "fast"):
        assert (sol.failure == gm.Failure.none)[1]
    if kind == "none":  # the same state twice: the same trajectory
        np.testing.assert_array_equal(sol.states.q[0], sol.states.q[1])


def _pair(a, b):
    return gm.State(jnp.stack([a.q, b.q]), jnp.stack([a.v, b.v]))
