"""Per-trajectory failure codes (issue 10 item 1): a member of an ensemble whose initial state fails
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
    np.testing.assert_array_equal(sol.failure == gm.Failure.none, [True, True, False])
    np.testing.assert_array_equal(sol.result == diffrax.RESULTS.successful, [True, True, False])
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


@pytest.mark.parametrize("name", ["off_constraint", "mass_matrix"])
def test_throw_names_the_failing_indices_and_the_condition(name):
    system, states, solver = CASES[name]()
    message = gm.Failure[getattr(gm.Failure, name)]
    with pytest.raises(ValueError, match=r"trajectories \[2\] \(1 of 3\)") as info:
        gm.simulate(system, states, 0.0, 0.5, solver=solver, **KW)
    assert message in str(info.value)


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
