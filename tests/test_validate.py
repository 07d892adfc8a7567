"""`gm.validate` collects every problem at a state, with the tolerances of `assemble`/`simulate`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from manifold_systems import MANIFOLDS, on_constraint, random_states, system_on

import geomech as gm
from geomech import _checks
from geomech.models import CartesianPendulum, ChaplyginSleigh, ThesisExample2

PENDULUM = CartesianPendulum().system()
ON_C = CartesianPendulum().initial_state()  # on the circle of radius 1, tangent velocity
FREE = lambda q, v: 0.5 * v @ v - q @ q
X3 = jnp.array([0.3, 0.4, 0.1])


def _ex2_at_3_19():
    """Thesis Example 2 with A ≡ m1/m2: (3.19) fails everywhere."""
    model = eqx.tree_at(lambda m: m.A, ThesisExample2(m1=1.0, m2=2.0), lambda q: 0.5 + 0.0 * q[0])
    return model(), gm.State(jnp.array([0.0, 2.0]), jnp.array([1.0, 0.5]))


def _case(system, q, v, t=0.0):
    return system, gm.State(jnp.asarray(q), jnp.asarray(v)), t


CASES = {
    "valid": (_case(PENDULUM, ON_C.q, ON_C.v), ()),
    "singular M": (
        _case(CartesianPendulum(m=0.0).system(), ON_C.q, ON_C.v),
        ("mass_matrix",),
    ),
    "indefinite M": (
        _case(
            gm.LagrangianSystem(lambda q, v: 0.5 * (v[0] ** 2 - v[1] ** 2)), [0.3, 0.4], [1.0, 0.0]
        ),
        ("mass_matrix",),
    ),
    "off C, both levels": (_case(PENDULUM, 2 * ON_C.q, ON_C.v + 1.0), ("off_constraint",) * 2),
    "off C, velocity only": (_case(PENDULUM, ON_C.q, ON_C.v + ON_C.q), ("off_constraint",)),
    "NaN position": (_case(PENDULUM, [jnp.nan, 0.0], ON_C.v), ("nonfinite",)),
    "inf velocity": (_case(PENDULUM, ON_C.q, [jnp.inf, 0.0]), ("nonfinite",)),
    "NaN time": (_case(PENDULUM, ON_C.q, ON_C.v, jnp.nan), ("nonfinite",)),
    "Lagrangian NaN": (
        _case(
            gm.LagrangianSystem(lambda q, v: 0.5 * v @ v + jnp.log(q[0])), [-1.0, 0.0], [0.0, 1.0]
        ),
        ("nonfinite",),
    ),
    "force NaN": (
        _case(gm.LagrangianSystem(FREE, force=lambda q, v: jnp.sqrt(q)), [-1.0, 1.0], [0.0, 0.0]),
        ("nonfinite",),
    ),
    "M NaN, L finite": (  # |v_0| is not twice differentiable at v_0 = 0
        _case(
            gm.LagrangianSystem(lambda q, v: v @ v + jnp.sqrt(v[0] ** 2)), [0.0, 0.0], [0.0, 1.0]
        ),
        ("nonfinite",),
    ),
    "inadmissible and singular M": (
        _case(
            gm.LagrangianSystem(
                lambda q, v: 0.5 * v[0] ** 2,
                constraint=gm.Constraint(
                    lambda q, v: jnp.array([v[0] + v[1], 2 * v[0] + 2 * v[1]])
                ),
            ),
            X3,
            [1.0, -1.0, 0.5],
        ),
        ("mass_matrix", "admissibility"),
    ),
    "inadmissible, off C, singular M": (
        _case(
            gm.LagrangianSystem(
                lambda q, v: 0.5 * v[0] ** 2,
                constraint=gm.Constraint(
                    lambda q, v: jnp.array([v[0] + v[1], 2 * v[0] + 2 * v[1]])
                ),
            ),
            X3,
            [1.0, 1.0, 0.5],
        ),
        ("mass_matrix", "admissibility", "off_constraint"),
    ),
    "(3.19)": (_ex2_at_3_19() + (0.0,), ("condition_3_19",)),
    "rank-deficient W basis": (
        _case(
            gm.LagrangianSystem(
                FREE,
                constraint=gm.LinearConstraint(lambda q: jnp.array([[1.0, 1.0, 0.0]])),
                # rank deficient at this state (a constant one is refused by gm.Subspace itself)
                work_space=gm.Subspace(
                    basis=lambda q, v: jnp.array([[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]]) * q[0]
                ),
            ),
            X3,
            [1.0, -1.0, 0.0],
        ),
        ("work_space",),
    ),
    "wrong n": (_case(ChaplyginSleigh().system(), ON_C.q, ON_C.v), ("shape",)),
    "batched": (_case(PENDULUM, jnp.stack([ON_C.q] * 2), jnp.stack([ON_C.v] * 2)), ("shape",)),
    "vector t": (_case(PENDULUM, ON_C.q, ON_C.v, jnp.zeros(2)), ("shape",)),
    "Lagrangian not scalar": (_case(gm.LagrangianSystem(lambda q, v: v), [0.0], [1.0]), ("shape",)),
}


@pytest.mark.parametrize("name", list(CASES))
def test_every_problem_is_reported(name):
    (system, state, t), codes = CASES[name]
    report = gm.validate(system, state, t)
    assert report.codes() == codes, str(report)
    assert report.ok is (not codes) and bool(report) is (not codes)
    for p in report.problems:
        assert isinstance(p, gm.Problem) and "\n" not in p.message and p.message
        if p.code in ("mass_matrix", "admissibility", "condition_3_19", "work_space"):
            assert not p.value > p.tolerance  # a margin that failed (NaN included)
        if p.code == "off_constraint":
            assert p.value > p.tolerance
    text = str(report)
    assert text.startswith("valid") if not codes else f"{len(codes)} problem" in text


def test_messages_name_the_culprit():
    assert "Lagrangian" in str(gm.validate(*CASES["Lagrangian NaN"][0]))
    assert "force F^e" in str(gm.validate(*CASES["force NaN"][0]))
    assert "∂²L/∂v∂v" in str(gm.validate(*CASES["M NaN, L finite"][0]))
    assert "project_to_constraints" in str(gm.validate(*CASES["off C, both levels"][0]))
    assert "t is not finite" in str(gm.validate(*CASES["NaN time"][0]))


def test_raise_if_invalid_lists_every_problem():
    report = gm.validate(*CASES["inadmissible, off C, singular M"][0])
    with pytest.raises(ValueError) as e:
        report.raise_if_invalid()
    for code in ("mass_matrix", "admissibility", "off_constraint"):
        assert f"[{code}]" in str(e.value)
    ok = gm.validate(*CASES["valid"][0])
    assert ok.raise_if_invalid() is ok


def test_predicates_treat_nan_as_failing():
    nan, tol = jnp.asarray(jnp.nan), jnp.asarray(1e-12)
    assert not _checks.holds((nan, tol)) and not _checks.within(nan, tol)
    M = jnp.eye(2).at[0, 0].set(jnp.nan)
    assert not _checks.holds(_checks.mass_matrix_margin(M, jnp.linalg.cholesky(M)))
    assert not _checks.holds(_checks.admissibility_margin(jnp.full((1, 2), jnp.nan)))
    nan_phi = _checks.velocity_residual(jnp.array([nan]), jnp.ones((1, 2)), jnp.zeros(2), jnp.eye(2))
    assert not _checks.within(nan_phi, 1.0)


def test_runtime_checks_agree_with_validate():
    """`assemble`'s `eqx.error_if` checks use the same predicates: they fire exactly where
    `validate` finds the problem, NaN states included (a NaN state used to pass silently)."""
    (system, state, _), _ = CASES["(3.19)"]
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"condition \(3.19\)"):
        gm.acceleration(system, state)
    with pytest.raises(eqx.EquinoxRuntimeError, match="NaN or inf entries in q or v"):
        gm.acceleration(PENDULUM, gm.State(jnp.array([jnp.nan, 0.0]), ON_C.v))
    assert np.all(np.isfinite(gm.acceleration(PENDULUM, ON_C)))


@pytest.mark.parametrize("scale", [0.5, 0.9, 1.1, 2.0])
def test_on_constraint_tolerance_is_shared(scale):
    """`gm.on_constraint` (used by `simulate`) and `validate` draw the line at the same residual."""
    tol = _checks.constraint_tolerance(jnp.float64)
    # φ = 2 (x ẋ + y ẏ) for h = x² + y² − l² and M = m I: a radial velocity δ on the unit circle
    # gives |φ| = 2 δ against the size of its terms |∂φ/∂v| |v| = 2 |v| = 2 √(|v₀|² + δ²)
    speed = float(jnp.linalg.norm(ON_C.v))
    ratio = scale * tol  # δ / √(speed² + δ²)
    delta = ratio * speed / np.sqrt(1 - ratio**2)
    state = gm.State(ON_C.q, ON_C.v + delta * ON_C.q)
    on_c = bool(gm.on_constraint(PENDULUM, state))
    assert on_c == (scale < 1.0)
    assert gm.validate(PENDULUM, state).ok == on_c


def test_float32_tolerances():
    state = gm.State(ON_C.q.astype(jnp.float32), (ON_C.v + 1e-3 * ON_C.q).astype(jnp.float32))
    problem = gm.validate(CartesianPendulum().system(), state).problems[0]
    assert problem.code == "off_constraint" and problem.tolerance == pytest.approx(1e-4)


@pytest.mark.parametrize("name", MANIFOLDS)
def test_validate_and_project_on_every_manifold(name):
    """On each manifold (`manifold_systems.py`): a state on the constraint validates clean, one
    moved off it along $M^{-1}A^\\top$ is `off_constraint`, a NaN velocity `nonfinite`;
    `gm.project_to_constraints` returns the $M$-orthogonal projection written out (the point
    kept: the constraint is nonholonomic) and a batch projects as its members do."""
    system = system_on(name)
    state = random_states(system, seed=5, count=1)[0]
    assert gm.validate(system, state).ok
    nan = gm.State(state.q, state.v.at[0].set(jnp.nan))
    assert gm.validate(system, nan).codes() == ("nonfinite",)
    if system.constraint is None:
        return
    A = system.constraint.A_of_q(state.q)
    off = gm.State(state.q, state.v + 1e-3 * jnp.linalg.solve(system.lagrangian.M, A[0]))
    assert gm.validate(system, off).codes() == ("off_constraint",)
    projected = gm.project_to_constraints(system, off)
    scale = float(jnp.max(jnp.abs(off.v)))
    np.testing.assert_allclose(projected.v, on_constraint(system, off.q, off.v), atol=1e-13 * scale)
    np.testing.assert_allclose(
        system.manifold.parameters(projected.q), system.manifold.parameters(off.q), atol=1e-14
    )
    assert gm.validate(system, projected).ok
    batch = jax.tree_util.tree_map(lambda a, b: jnp.stack([a, b]), off, state)
    both = gm.project_to_constraints(system, batch)
    np.testing.assert_allclose(both.v[0], projected.v, atol=1e-13 * scale)
