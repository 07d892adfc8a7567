"""Per-trajectory failure codes: a member of an ensemble whose initial state fails
a precondition is flagged with its `gm.Failure` and not integrated; every other member is returned
bit for bit as in the same run without it. With `throw=True` the error names the indices."""

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm

TS = jnp.linspace(0.0, 0.5, 4)
KW = dict(saveat=diffrax.SaveAt(ts=TS))


def _plane(**kw):
    return gm.LagrangianSystem(lambda q, v: 0.5 * v @ v - q[0], **kw)


def _states(qs, vs):
    return gm.State(jnp.asarray(qs, float), jnp.asarray(vs, float))


def _singular_mass():
    # M = diag(x², 1): singular at x = 0 (regularity (2.6) fails)
    system = gm.LagrangianSystem(lambda q, v: 0.5 * (q[0] ** 2 * v[0] ** 2 + v[1] ** 2) - q[1])
    return system, _states([[1.0, 0.0], [2.0, 0.5], [0.0, 0.3]], [[0.0, 0.1]] * 3)


def _inadmissible():
    # φ = x v_y: ∂φ/∂v = (0, x) has rank 0 at x = 0 (admissibility (3.7) fails there, on C)
    system = _plane(constraint=gm.Constraint(lambda q, v: q[0] * v[1]))
    return system, _states([[1.0, 0.0], [1.5, 1.0], [0.0, 0.0]], [[0.2, 0.0], [0.1, 0.0], [0.2, 0.3]])


def _condition_3_19():
    # φ = v_y, W = ker (cos x, sin x): A M⁻¹ Cᵀ = sin x, singular at x = 0
    W = gm.Subspace(annihilator=lambda q, v: jnp.stack([jnp.cos(q[0]), jnp.sin(q[0])])[None])
    system = _plane(constraint=gm.LinearConstraint(lambda q: jnp.array([[0.0, 1.0]])), work_space=W)
    return system, _states([[1.0, 0.0], [1.2, 1.0], [0.0, 0.0]], [[0.0, 0.0], [0.1, 0.0], [0.0, 0.0]])


def _nonfinite_force():
    # F^e = (√y, 0): NaN for y < 0, where M, A and (3.19) are fine
    system = _plane(
        constraint=gm.LinearConstraint(lambda q: jnp.array([[0.0, 1.0]])),
        force=lambda q, v: jnp.stack([jnp.sqrt(q[1]), 0.0]),
    )
    return system, _states([[0.0, 1.0], [1.0, 2.0], [0.0, -1.0]], [[0.1, 0.0]] * 3)


def _not_invariant():
    # L = |v|²/2 - x y² is invariant under x-translations only where y = 0 (4.13)
    L = lambda q, v: 0.5 * v @ v - q[0] * q[1] ** 2
    system = gm.LagrangianSystem(L, constraint=gm.LinearConstraint(lambda q: jnp.array([[0.0, 0.0, 1.0]])))
    action = gm.LieAlgebraAction(lambda q: jnp.array([[1.0], [0.0], [0.0]]))
    states = _states([[0.0, 0.0, 0.0], [1.0, 0.0, 1.0], [0.0, 1.0, 0.0]], [[0.3, 0.0, 0.0]] * 3)
    return system, states, gm.NonholonomicMomentum(action)


def _sleigh(bad):
    model = gm.models.ChaplyginSleigh()
    s0 = model.initial_state()
    states = jax.tree_util.tree_map(lambda x: jnp.stack([x, 1.1 * x, 0.9 * x]), s0)
    states = jax.vmap(lambda s: gm.project_to_constraints(model.system(), s))(states)
    if bad == "off_constraint":
        states = gm.State(states.q, states.v.at[2, 0].add(0.5))
    else:
        states = gm.State(states.q.at[2, 1].set(jnp.nan), states.v)
    return model.system(), states


CASES = {
    "nonfinite_state": lambda: (*_sleigh("nonfinite_state"), gm.Projection()),
    "off_constraint": lambda: (*_sleigh("off_constraint"), gm.Projection()),
    "mass_matrix": lambda: (*_singular_mass(), gm.Projection()),
    "admissibility": lambda: (*_inadmissible(), gm.Projection()),
    "condition_3_19": lambda: (*_condition_3_19(), gm.Projection()),
    "nonfinite_acceleration": lambda: (*_nonfinite_force(), gm.Projection()),
    "not_invariant": _not_invariant,
}
EXPECTED = {"not_invariant": "nonfinite_acceleration"}


@pytest.mark.parametrize("name", list(CASES))
def test_failing_member_is_flagged_and_the_others_are_untouched(name):
    system, states, solver = CASES[name]()
    expected = getattr(gm.Failure, EXPECTED.get(name, name))
    sol = gm.simulate(system, states, 0.0, 0.5, solver=solver, throw=False, **KW)
    np.testing.assert_array_equal(sol.failure == expected, [False, False, True])
    np.testing.assert_array_equal(sol.failure == gm.Failure.successful, [True, True, False])
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.successful, [True, True, False])
    np.testing.assert_array_equal(sol.outcome == expected, [False, False, True])
    np.testing.assert_array_equal(sol.outcome == gm.Failure.successful, [True, True, False])
    assert (sol.result == diffrax.RESULTS.singular)[2]
    # the failing member: its y0 at t0, not reached afterwards
    np.testing.assert_array_equal(sol.ts[2], [0.0, np.inf, np.inf, np.inf])
    np.testing.assert_array_equal(sol.states.q[2, 0], states.q[2])
    assert np.all(np.isinf(sol.states.q[2, 1:])) and sol.t_final[2] == 0.0
    # the others: bit for bit the run without the failing member
    good = jax.tree_util.tree_map(lambda x: x[:2], states)
    ref = gm.simulate(system, good, 0.0, 0.5, solver=solver, **KW)
    assert np.all(ref.result == diffrax.RESULTS.successful)
    for field in ("ts", "energy", "constraint_residual", "t_final"):
        np.testing.assert_array_equal(getattr(sol, field)[:2], getattr(ref, field), err_msg=field)
    np.testing.assert_array_equal(sol.states.q[:2], ref.states.q)
    np.testing.assert_array_equal(sol.states.v[:2], ref.states.v)
    # a solo run of the failing state alone is flagged the same way
    solo = gm.simulate(system, jax.tree_util.tree_map(lambda x: x[2], states), 0.0, 0.5,
                       solver=solver, throw=False, **KW)  # fmt: skip
    assert solo.failure == expected and solo.result == diffrax.RESULTS.singular


def test_failure_extends_diffrax_results():
    """`gm.Failure` extends `diffrax.RESULTS`: `outcome` carries diffrax's code where no
    precondition failed (members that run out of steps), the precondition where one did;
    `Failure.none` is the earlier name of `Failure.successful`."""
    system, states, solver = CASES["mass_matrix"]()
    sol = gm.simulate(system, states, 0.0, 0.5, solver=solver, throw=False, max_steps=1, **KW)
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.max_steps_reached, [1, 1, 0])
    np.testing.assert_array_equal(sol.failure == gm.Failure.successful, [1, 1, 0])
    expected = [gm.Failure.max_steps_reached] * 2 + [gm.Failure.mass_matrix]
    for i, item in enumerate(expected):
        assert (sol.outcome == item)[i], (i, gm.Failure[sol.outcome])
    assert gm.Failure.promote(diffrax.RESULTS.nonfinite) == gm.Failure.nonfinite
    assert gm.Failure.none is gm.Failure.successful
    assert set(diffrax.RESULTS._name_to_item) < set(gm.Failure._name_to_item)


@pytest.mark.parametrize("name", ["off_constraint", "mass_matrix", "nonfinite_acceleration"])
def test_throw_names_the_failing_indices_and_the_condition(name):
    system, states, solver = CASES[name]()
    message = gm.Failure[getattr(gm.Failure, name)]
    with pytest.raises(ValueError, match=r"trajectories \[2\] \(1 of 3\)") as info:
        gm.simulate(system, states, 0.0, 0.5, solver=solver, **KW)
    assert message in str(info.value)


@pytest.mark.parametrize("name", ["nonfinite_acceleration", "not_invariant", "mass_matrix"])
def test_host_and_traced_runs_agree(name):
    """Outside jit the finiteness of a_R is checked lazily (only after the integrator stopped a
    trajectory at its start); under jit it is checked in the program. Same flags, same results."""
    system, states, solver = CASES[name]()
    run = lambda y: gm.simulate(system, y, 0.0, 0.5, solver=solver, throw=False, **KW)
    host, traced = run(states), jax.jit(run)(states)
    expected = getattr(gm.Failure, EXPECTED.get(name, name))
    np.testing.assert_array_equal(traced.failure == expected, [False, False, True])
    np.testing.assert_array_equal(host.failure == traced.failure, [True] * 3)
    np.testing.assert_array_equal(host.result == traced.result, [True] * 3)
    for field in ("ts", "energy", "t_final"):
        np.testing.assert_array_equal(getattr(host, field), getattr(traced, field), err_msg=field)
    np.testing.assert_array_equal(host.states.q, traced.states.q)


def test_full_preconditions_are_computed_only_when_a_trajectory_stops_at_its_start(monkeypatch):
    """The program of a host call leaves out the check of a finite a_R (a second copy of Q, the
    largest derivative program); the separate full check runs only when the integrator stopped
    a trajectory as non-finite, and the batch is run again only if that check flags one."""
    import geomech._integrate as integrate_module

    calls = []
    full = integrate_module._initial_failures

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return full(*args, **kwargs)

    monkeypatch.setattr(integrate_module, "_initial_failures", spy)
    system, states, solver = CASES["nonfinite_acceleration"]()
    good = jax.tree_util.tree_map(lambda x: x[:2], states)
    assert np.all(gm.simulate(system, good, 0.0, 0.5, **KW).result == diffrax.RESULTS.successful)
    assert calls == []
    sol = gm.simulate(system, states, 0.0, 0.5, throw=False, **KW)
    assert len(calls) == 1
    np.testing.assert_array_equal(sol.failure == gm.Failure.nonfinite_acceleration, [0, 0, 1])
    # a trajectory that becomes singular later is no failed precondition: checked, not re-run
    singular_later = _plane(force=lambda q, v: jnp.stack([jnp.sqrt(0.2 - q[1]), 0.0]))  # NaN past y = 0.2
    y0 = _states([[0.0, 0.0]], [[0.0, 1.0]])
    later = gm.simulate(singular_later, y0, 0.0, 0.5, throw=False, **KW)
    assert len(calls) == 2 and np.all(later.failure == gm.Failure.none)
    assert np.all(later.result == diffrax.RESULTS.nonfinite) and 0.15 < later.t_final[0] < 0.25


def test_throw_under_jit_names_the_condition():
    system, states, _ = CASES["off_constraint"]()
    f = jax.jit(lambda y: gm.simulate(system, y, 0.0, 0.5, **KW).states.q)
    with pytest.raises(Exception, match="off the constraint manifold"):
        f(states)


def test_gradients_of_the_good_members_are_finite():
    """A flagged member does not poison the gradient of a loss over the batch."""
    system, states, _ = CASES["off_constraint"]()

    def loss(scale):
        y = gm.State(states.q, states.v * scale)
        sol = gm.simulate(system, y, 0.0, 0.5, throw=False, **KW)
        ok = sol.failure == gm.Failure.none
        return jnp.sum(jnp.where(ok[:, None], sol.states.q[:, -1], 0.0))

    g = jax.grad(loss)(1.0)
    assert np.isfinite(g) and g != 0.0


# -- a member meeting NaN mid-run: its NaNs reach no gradient ----------------------------------

# Each case: `make(k, singular)` -> a system with a parameter k whose user function, with
# `singular`, turns NaN in a region that one member (`bad`) enters mid-run and the others never
# reach (without `singular` it is the same function without the NaN branch), and a batch `y0`.
# (A case on a Lie group is to be added beside the one in coordinates.)


def _knife_edge_nan_past_x1():
    # the README's knife edge with a damping torque -k θ̇ that is NaN past x = 1: member 2 (fast)
    # crosses x = 1 at t ≈ 0.81, the others stay below it over [0, 2]
    L = lambda q, v: v[0] ** 2 + v[1] ** 2 + 0.25 * v[2] ** 2
    row = lambda q: jnp.array([[-jnp.sin(q[2]), jnp.cos(q[2]), -0.5]])

    def make(k, singular):
        nan = (lambda q: jnp.where(q[0] > 1.0, jnp.nan, 1.0)) if singular else (lambda q: 1.0)
        force = lambda q, v: nan(q) * jnp.stack([0.0, 0.0, -k * v[2]])
        return gm.LagrangianSystem(L, constraint=gm.LinearConstraint(row), force=force)

    w = jnp.array([0.5, 0.8, 3.0, 1.0])
    y0 = gm.State(jnp.zeros((4, 3)), jnp.stack([0.5 * w, 0.5 * w, w], axis=1))
    return make, y0, 2


NAN_MID_RUN = {"coordinates": _knife_edge_nan_past_x1}


@pytest.mark.parametrize("name", list(NAN_MID_RUN))
def test_a_member_meeting_nan_mid_run_reaches_no_gradient(name):
    """The NaNs a member meets mid-run (its rejected trial steps, the failed step it stops at, the
    `inf` of its saves not reached) reach neither the gradient of the other members nor that of
    its own states before the stop: the gradient of a loss that masks them out is the gradient
    of the same members with a function that has no NaN branch (which they never reach), and
    that one agrees with central differences."""
    make, y0, bad = NAN_MID_RUN[name]()
    ts = jnp.linspace(0.0, 2.0, 5)
    run = lambda k, singular: gm.simulate(make(k, singular), y0, 0.0, 2.0, throw=False,
                                          saveat=diffrax.SaveAt(ts=ts))  # fmt: skip

    def losses(sol, ok, reached):
        """(over the successful members, over every saved state reached)"""
        value = jnp.sum(sol.states.q**2, axis=-1) + sol.energy  # (B, T)
        return jnp.stack([
            jnp.sum(jnp.where(ok[:, None], value, 0.0)), jnp.sum(jnp.where(reached, value, 0.0))
        ])  # fmt: skip

    def singular(k):
        sol = run(k, True)
        ok = sol.result == diffrax.RESULTS.successful
        return losses(sol, ok, jnp.isfinite(sol.ts)), (ok, jnp.isfinite(sol.ts), sol.t_final)

    k = 0.3
    g, (ok, reached, t_final) = jax.jacrev(singular, has_aux=True)(k)
    expected_ok = np.arange(len(ok)) != bad
    np.testing.assert_array_equal(ok, expected_ok)  # the bad member stopped, the others finished
    assert 0.0 < t_final[bad] < 2.0 and np.all(reached[bad] == (ts <= t_final[bad]))
    assert np.any(reached[bad, 1:])  # it has saved states after t0 to differentiate
    # the reference: the same members without the NaN branch, the same masks
    reference = jax.jit(lambda k: losses(run(k, False), ok, reached))
    g_ref = jax.jacrev(reference)(k)
    assert np.all(np.isfinite(g))
    np.testing.assert_allclose(g, g_ref, rtol=1e-10)
    h = 1e-5
    fd = (reference(k + h) - reference(k - h)) / (2 * h)
    np.testing.assert_allclose(g_ref, fd, rtol=1e-6)
    # forward mode (`jax.jacfwd`, diffrax.ForwardMode) too
    g_fwd = jax.jacfwd(lambda k: singular(k)[0])(k)
    np.testing.assert_allclose(g_fwd, g_ref, rtol=1e-10)


def test_rank_deficient_work_space_is_flagged_and_raised():
    # φ = v_y, W = ker (x, 0): the annihilator has rank 0 at x = 0 (a work space of rank n − k fails)
    W = gm.Subspace(annihilator=lambda q, v: jnp.stack([q[0], 0.0 * q[0]])[None])
    system = _plane(constraint=gm.LinearConstraint(lambda q: jnp.array([[0.0, 1.0]])), work_space=W)
    states = _states([[1.0, 0.0], [1.2, 1.0], [0.0, 0.0]], [[0.1, 0.0], [0.2, 0.0], [0.1, 0.0]])
    sol = gm.simulate(system, states, 0.0, 0.5, throw=False, **KW)
    np.testing.assert_array_equal(sol.failure == gm.Failure.work_space, [False, False, True])
    with pytest.raises(ValueError, match=r"trajectories \[2\] \(1 of 3\): the work space W is rank"):
        gm.simulate(system, states, 0.0, 0.5, **KW)
    f = jax.jit(lambda y: gm.simulate(system, y, 0.0, 0.5, **KW).states.q)
    with pytest.raises(Exception, match="the work space W is rank deficient"):
        f(states)


# -- simulate_vakonomic: the same per-trajectory preconditions ------------------------------------

# a unit pendulum in Cartesian coordinates, h = |q|² − 1 (vakonomic on g = 2 q·v = 0)
PENDULUM = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v - q[1], constraint=gm.HolonomicConstraint(lambda q: q @ q - 1.0)
)
GOOD_Q = jnp.array([[1.0, 0.0], [0.6, -0.8]])
GOOD_V = jnp.array([[0.0, 1.0], [0.4, 0.3]])
GOOD_MU = jnp.array([[0.0], [0.2]])


def _vakonomic_batch(bad: bool):
    """Four members; with `bad`, member 2 is off C and member 3 has a NaN multiplier, else both
    are copies of the good members 0 and 1 (the same batch shape, so the same compiled program)."""
    q = jnp.concatenate([GOOD_Q, jnp.array([[1.1, 0.0]]) if bad else GOOD_Q[:1], GOOD_Q[1:]])
    v = jnp.concatenate([GOOD_V, GOOD_V])
    mu = jnp.concatenate([GOOD_MU, GOOD_MU[:1], jnp.array([[jnp.nan]]) if bad else GOOD_MU[1:]])
    return gm.State(q, v), mu


def test_vakonomic_failing_members_are_flagged_and_the_others_are_untouched():
    y0, mu0 = _vakonomic_batch(bad=True)
    sol = gm.simulate_vakonomic(PENDULUM, y0, mu0, 0.0, 0.5, throw=False, **KW)
    for item, expected in [
        (gm.Failure.none, [True, True, False, False]),
        (gm.Failure.off_constraint, [False, False, True, False]),
        (gm.Failure.nonfinite_multipliers, [False, False, False, True]),
    ]:
        np.testing.assert_array_equal(sol.failure == item, expected)
    np.testing.assert_array_equal(
        sol.result == diffrax.RESULTS.successful, [True, True, False, False]
    )
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.singular, [False, False, True, True])
    np.testing.assert_array_equal(sol.impasse, [False] * 4)
    np.testing.assert_array_equal(sol.t_final, [0.5, 0.5, 0.0, 0.0])
    # a failing member keeps its y0 and mu0 at t0 and is inf afterwards
    np.testing.assert_array_equal(sol.states.q[2, 0], y0.q[2])
    np.testing.assert_array_equal(sol.mu[3, 0], mu0[3])
    assert np.all(np.isinf(sol.states.q[2:, 1:])) and np.all(np.isinf(sol.mu[2:, 1:]))
    # the good members: bit for bit as in the same batch with good states in the failing slots
    ref = gm.simulate_vakonomic(PENDULUM, *_vakonomic_batch(bad=False), 0.0, 0.5, throw=False, **KW)
    for field in ("states", "mu", "vakonomic_energy", "energy", "t_final", "ts"):
        a, b = getattr(sol, field), getattr(ref, field)
        for x, y in zip(jax.tree_util.tree_leaves(a), jax.tree_util.tree_leaves(b), strict=True):
            np.testing.assert_array_equal(x[:2], y[:2], err_msg=field)
    # and to round-off as in a batch of the good members alone (XLA:CPU compiles other batch
    # sizes to differently vectorized loops, so bit equality holds only for the same shape)
    alone = gm.simulate_vakonomic(PENDULUM, gm.State(GOOD_Q, GOOD_V), GOOD_MU, 0.0, 0.5, **KW)
    np.testing.assert_allclose(sol.states.q[:2], alone.states.q, rtol=1e-13, atol=1e-14)
    np.testing.assert_allclose(sol.mu[:2], alone.mu, rtol=1e-13, atol=1e-14)


def test_vakonomic_throw_names_the_failing_indices():
    y0, mu0 = _vakonomic_batch(bad=True)
    with pytest.raises(ValueError, match=r"(?s)simulate_vakonomic: .*trajectories \[2\] \(1 of 4\): the state is "
                       r"off the constraint manifold.*trajectories \[3\] \(1 of 4\): the initial multipliers"):
        gm.simulate_vakonomic(PENDULUM, y0, mu0, 0.0, 0.5, **KW)
    f = jax.jit(lambda y, m: gm.simulate_vakonomic(PENDULUM, y, m, 0.0, 0.5, **KW).states.q)
    # under jit one check names the first condition of the table that any trajectory fails
    first = r"simulate_vakonomic: an initial state fails a precondition \(the state is off the constraint"
    with pytest.raises(Exception, match=first):
        f(y0, mu0)
    good_y0, _ = _vakonomic_batch(bad=False)  # then only member 3 fails: its multiplier is named
    with pytest.raises(Exception, match=r"fails a precondition \(the initial multipliers"):
        f(good_y0, mu0)


# -- times are honest: t_final and the last saved time are those of the state kept ----------------

INF = np.inf
# a free particle at unit speed from x = 0 whose force turns NaN past x = 0.35 (t = 0.35)
SINGULAR_PAST = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v, force=lambda q, v: jnp.where(q[0] > 0.35, jnp.nan, 0.0) * v
)


def _particle(x0, speed=1.0):
    return gm.State(jnp.array([x0]), jnp.array([speed]))


@pytest.mark.parametrize(
    "saveat, ts",
    [
        (diffrax.SaveAt(t1=True), [0.4]),
        (diffrax.SaveAt(steps=True), [0.1, 0.2, 0.3, 0.4]),  # the kept state once, at its time
        (diffrax.SaveAt(steps=True, t1=True), [0.1, 0.2, 0.3, 0.4]),
        # SaveAt(ts=...): every requested time keeps its slot (inf where not reached: 0.45 lies
        # in the failed step), the t1 save (the state kept) is in the last slot
        (diffrax.SaveAt(ts=jnp.array([0.1, 0.45, 0.5]), t1=True), [0.1, INF, INF, 0.4]),
        (diffrax.SaveAt(t0=True, ts=jnp.array([0.2, 0.6])), [0.0, 0.2, INF]),
        (diffrax.SaveAt(t0=True, ts=jnp.array([0.2, 0.6, 0.7]), t1=True), [0.0, 0.2, INF, INF, 0.4]),
    ],
)
def test_a_fixed_step_stopped_by_nan_reports_the_time_of_the_state_kept(saveat, ts):
    """Euler with dt0 = 0.1: the step from t = 0.4 (x = 0.4, force NaN) fails, the state at
    t = 0.4 is kept; t_final and the saved times say 0.4, never 0.5, and the saves after it are
    inf (diffrax's convention for times not reached)."""
    sol = gm.simulate(SINGULAR_PAST, _particle(0.0), 0.0, 1.0, integrator=diffrax.Euler(), dt0=0.1,
                      saveat=saveat, throw=False, max_steps=12)  # fmt: skip
    assert sol.result == diffrax.RESULTS.nonfinite
    np.testing.assert_allclose(sol.t_final, 0.4, rtol=1e-12)
    n = len(ts)
    np.testing.assert_allclose(sol.ts[:n], ts, rtol=1e-12)
    assert np.all(np.isinf(sol.ts[n:])) and np.all(np.isinf(sol.states.q[n:]))
    # each saved state is the one at its time (x = t at unit speed), inf where not reached
    np.testing.assert_allclose(sol.states.q[:n, 0], ts, rtol=1e-12)


def test_a_failed_members_t1_save_is_in_its_own_slot():
    """SaveAt(ts=..., t1=True) has one slot per requested time and the t1 slot last, for every
    member of a batch: the one stopped at t = 0.4 (force NaN past x = 0.35) holds inf at the
    times not reached and its last state in the t1 slot, the one that finished is unchanged; so
    does a run stopped by max_steps (at t = 0.3)."""
    saveat = diffrax.SaveAt(ts=jnp.array([0.1, 0.25, 0.45, 0.5]), t1=True)
    run = lambda y, max_steps: gm.simulate(SINGULAR_PAST, y, 0.0, 0.6, integrator=diffrax.Euler(),
                                           dt0=0.1, saveat=saveat, throw=False, max_steps=max_steps)  # fmt: skip
    sol = run(gm.State(jnp.array([[0.0], [0.0]]), jnp.array([[1.0], [0.5]])), 8)
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.nonfinite, [True, False])
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.successful, [False, True])
    expected = np.array([[0.1, 0.25, INF, INF, 0.4], [0.1, 0.25, 0.45, 0.5, 0.6]])
    np.testing.assert_allclose(sol.ts, expected, rtol=1e-12)
    np.testing.assert_allclose(sol.t_final, [0.4, 0.6], rtol=1e-12)
    np.testing.assert_allclose(sol.states.q[..., 0], [[1.0], [0.5]] * expected, rtol=1e-12)  # x = v t
    short = run(_particle(-10.0), 3)
    assert short.result == diffrax.RESULTS.max_steps_reached
    np.testing.assert_allclose(short.ts, [0.1, 0.25, INF, INF, 0.3], rtol=1e-12)
    np.testing.assert_allclose(short.states.q[:, 0], [-9.9, -9.75, INF, INF, -9.7], rtol=1e-12)


def test_a_variational_integrator_failing_its_first_step_reports_t0():
    """The variational integrator's first step from x = 0.4 fails (its nonlinear solve meets the
    NaN force): y0 is kept, at t0."""
    sol = gm.simulate(SINGULAR_PAST, _particle(0.4), 0.0, 1.0, integrator=gm.VariationalIntegrator(),
                      dt0=0.1, saveat=diffrax.SaveAt(steps=True), throw=False, max_steps=4)  # fmt: skip
    assert not diffrax.is_successful(sol.result)
    assert sol.t_final == 0.0
    assert np.all(np.isinf(sol.ts)) and np.all(np.isinf(sol.states.q))
    one = gm.simulate(SINGULAR_PAST, _particle(0.4), 0.0, 1.0, integrator=gm.VariationalIntegrator(),
                      dt0=0.1, saveat=diffrax.SaveAt(t1=True), throw=False)  # fmt: skip
    np.testing.assert_array_equal(one.ts, [0.0])
    np.testing.assert_array_equal(one.states.q[0], [0.4])
    assert one.t_final == 0.0


def test_honest_times_backwards_and_in_a_batch():
    """Integrating backwards (x = -t at unit speed -1 ... here x grows as t falls), and a batch
    whose other member finishes: each member reports its own time, the finished one unchanged."""
    back = gm.simulate(SINGULAR_PAST, _particle(0.0, -1.0), 0.0, -1.0, integrator=diffrax.Euler(),
                       dt0=-0.1, saveat=diffrax.SaveAt(steps=True), throw=False, max_steps=12)  # fmt: skip
    np.testing.assert_allclose(back.t_final, -0.4, rtol=1e-12)
    np.testing.assert_allclose(back.ts[:4], [-0.1, -0.2, -0.3, -0.4], rtol=1e-12)
    assert np.all(np.isinf(back.ts[4:]))
    batch = gm.State(jnp.array([[0.0], [0.0]]), jnp.array([[1.0], [0.5]]))
    run = lambda y: gm.simulate(SINGULAR_PAST, y, 0.0, 0.6, integrator=diffrax.Euler(), dt0=0.1,
                                saveat=diffrax.SaveAt(steps=True), throw=False, max_steps=8)  # fmt: skip
    sol = run(batch)
    np.testing.assert_allclose(sol.t_final, [0.4, 0.6], rtol=1e-12)
    np.testing.assert_allclose(sol.ts[0, :4], [0.1, 0.2, 0.3, 0.4], rtol=1e-12)
    assert np.all(np.isinf(sol.ts[0, 4:]))
    solo = run(jax.tree_util.tree_map(lambda x: x[1], batch))
    np.testing.assert_array_equal(sol.ts[1], solo.ts)
    np.testing.assert_array_equal(sol.states.q[1], solo.states.q)


# -- points off the group ------------------------------------------------------------------------


def test_a_point_off_the_group_is_refused_and_normalize_repairs_it():
    """A quaternion of norm 2 (or 1 + 1e-6, or 0) is not a rotation: `validate`, `acceleration`
    and `simulate` refuse it (`off_manifold`, a relative and unit-free test of |q| − 1), the other
    members of the batch are integrated bit for bit as alone, and `manifold.normalize` gives the
    point it was meant to be (the heavy top's accelerations from the Euler–Poisson equations,
    tests/test_rigid_models.py)."""
    import jaxlie

    import geomech.models as gmm

    top = gmm.HeavyTop()
    system, y = (
        top.system(),
        top.initial_state(omega0=(0.3, 0.2, 6.0), R0=jaxlie.SO3.exp(jnp.array([0.4, 0.1, 0.0]))),
    )
    wxyz = y.q.wxyz
    for scale in (2.0, 1.0 + 1e-6, 0.0):
        off = gm.State(jaxlie.SO3(scale * wxyz), y.v)
        report = gm.validate(system, off)
        assert [p.code for p in report.problems] == ["off_manifold"], report
        with pytest.raises(Exception, match="not a point of the manifold"):
            gm.acceleration(system, off)
    assert not gm.validate(system, gm.State(jaxlie.SO3(wxyz * (1 + 1e-13)), y.v)).problems
    repaired = gm.State(system.manifold.normalize(jaxlie.SO3(2.0 * wxyz)), y.v)
    np.testing.assert_allclose(
        gm.acceleration(system, repaired), gm.acceleration(system, y), rtol=1e-14
    )
    # in a batch: flagged, the others bit for bit the run without it
    vs = jnp.stack([y.v, 0.5 * y.v, y.v])
    batch = gm.State(jaxlie.SO3(jnp.stack([wxyz, wxyz, 2.0 * wxyz])), vs)
    kw = dict(saveat=diffrax.SaveAt(ts=TS), throw=False)
    sol = gm.simulate(system, batch, 0.0, 0.5, **kw)
    np.testing.assert_array_equal(sol.failure == gm.Failure.off_manifold, [False, False, True])
    good = gm.simulate(system, gm.State(jaxlie.SO3(jnp.stack([wxyz, wxyz])), vs[:2]), 0.0, 0.5, **kw)
    np.testing.assert_array_equal(sol.states.v[:2], good.states.v)
    np.testing.assert_array_equal(sol.states.q.wxyz[:2], good.states.q.wxyz)


def test_an_se2_point_off_the_group_is_refused():
    """The Chaplygin sled on SE(2) with its unit complex number scaled by 3 (it would drive a
    circle three times too large): refused by `validate`."""
    import jaxlie

    group = gm.SE2()
    q = jaxlie.SE2.from_xy_theta(0.1, 0.2, 0.3)
    off = jaxlie.SE2(q.unit_complex_xy.at[:2].multiply(3.0))
    assert float(group.point_defect(off)) == pytest.approx(2.0)
    assert float(group.point_defect(group.normalize(off))) < 1e-15
    system = gm.LagrangianSystem(
        lambda g, v: 0.5 * v @ v,
        constraint=gm.LinearConstraint(lambda g: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=group,
    )
    report = gm.validate(system, gm.State(off, jnp.array([1.0, 0.0, 0.2])))
    assert [p.code for p in report.problems] == ["off_manifold"]
