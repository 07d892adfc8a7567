"""Bad input gets a clear error that names the problem (docs/errors.md)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm
from geomech.models import ThesisExample2

# these tests check geomech's own messages for bad arguments, as users see them (without the
# annotation checker of the test suite)
pytestmark = pytest.mark.usefixtures("no_typecheck")

FREE = lambda q, v: 0.5 * v @ v - q @ q
S2 = gm.State(jnp.array([0.3, 0.4]), jnp.array([1.0, -1.0]))
S3 = gm.State(jnp.array([0.3, 0.4, 0.1]), jnp.array([1.0, 1.0, -2.0]))
RUNTIME = eqx.EquinoxRuntimeError


@pytest.mark.parametrize(
    "L", [lambda q, v: 0.5 * (v[0] ** 2 - v[1] ** 2), lambda q, v: 0.5 * v[0] ** 2 - q[1] ** 2],
    ids=["indefinite", "singular"],
)
def test_bad_mass_matrix(L):
    with pytest.raises(RUNTIME, match="mass matrix .* not positive definite"):
        gm.acceleration(gm.LagrangianSystem(L), S2)


def test_bad_mass_matrix_under_jit_and_vmap():
    system = gm.LagrangianSystem(lambda q, v: 0.5 * (v[0] ** 2 - v[1] ** 2))
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), S2)
    f = eqx.filter_jit(jax.vmap(lambda s: gm.acceleration(system, s)))
    with pytest.raises(RUNTIME, match="not positive definite"):
        f(batch)


def test_inadmissible_constraint():
    """rank ∂φ/∂v < k (3.7): two proportional rows."""
    c = gm.Constraint(lambda q, v: jnp.array([v[0] + v[1], 2 * v[0] + 2 * v[1]]))
    s = gm.State(S3.q, jnp.array([1.0, -1.0, 0.5]))
    with pytest.raises(RUNTIME, match=r"not admissible \(3.7\)"):
        gm.acceleration(gm.LagrangianSystem(FREE, constraint=c), s)


def test_W_violating_3_19():
    model = eqx.tree_at(lambda m: m.A, ThesisExample2(m1=1.0, m2=2.0), lambda q: 0.5 + 0.0 * q[0])
    s = gm.State(jnp.array([0.0, 2.0]), jnp.array([1.0, 0.5]))
    with pytest.raises(RUNTIME, match=r"condition \(3.19\)"):
        gm.acceleration(model(), s)
    with pytest.raises(RUNTIME, match=r"\(3.19\)"):
        gm.constraint_force(model(), s)


def test_W_wrong_dimension():
    c = gm.LinearConstraint(lambda q: jnp.array([[1.0, 1.0, 0.0]]))
    ws = gm.Subspace(basis=lambda q, v: jnp.eye(3)[:, :1])  # dim W = 1 ≠ dim D = 2
    system = gm.LagrangianSystem(FREE, constraint=c, work_space=ws)
    with pytest.raises(ValueError, match=r"work_space basis has shape \(3, 1\).*must be \(3, 2\)"):
        gm.acceleration(system, gm.State(S3.q, jnp.array([1.0, -1.0, 0.0])))


@pytest.mark.parametrize(
    "kwargs,state,match",
    [
        (dict(lagrangian=lambda q, v: v * v), S2, "must return a scalar"),
        (dict(lagrangian=FREE, force=lambda q, v: jnp.ones(3)), S2, r"force must return a covector of shape \(2,\)"),
        (
            dict(lagrangian=FREE, constraint=gm.Constraint(lambda q, v: jnp.ones((1, 2)) @ jnp.outer(v, v))),
            S2,
            "1-D array",
        ),
        (dict(lagrangian=FREE, constraint=gm.Constraint(lambda q, v: v)), S2, "need 1 <= k <= n - 1"),
        (dict(lagrangian=FREE, manifold=gm.Euclidean(3)), S2, "dimension 3"),
        (dict(lagrangian=lambda q, v: v @ jnp.eye(3) @ v), S2, "the Lagrangian failed on a state with n = 2"),
        (
            dict(lagrangian=FREE, constraint=gm.LinearConstraint(lambda q: jnp.ones((1, 3)))),
            S2,
            "the constraint failed",
        ),
    ],
    ids=["L-not-scalar", "force-shape", "phi-2d", "k-equals-n", "manifold-dim", "L-matmul", "A-shape"],
)
def test_shape_errors(kwargs, state, match):
    with pytest.raises(ValueError, match=match):
        gm.acceleration(gm.LagrangianSystem(**kwargs), state)


def test_batched_state_to_pointwise_function():
    batch = gm.State(jnp.ones((4, 2)), jnp.ones((4, 2)))
    with pytest.raises(ValueError, match="jax.vmap"):
        gm.acceleration(gm.LagrangianSystem(FREE), batch)


def test_configuration_errors():
    c = gm.HolonomicConstraint(lambda q: q @ q - 1)
    with pytest.raises(TypeError, match="constraint must be"):
        gm.LagrangianSystem(FREE, constraint=lambda q, v: v[0])
    with pytest.raises(ValueError, match="no constraint"):
        gm.LagrangianSystem(FREE, work_space=gm.Subspace(annihilator=jnp.ones((1, 2))))
    with pytest.raises(ValueError, match="no constraint"):
        gm.LagrangianSystem(FREE, known_work=lambda q, v: q)
    with pytest.raises(ValueError, match="exactly one"):
        gm.Subspace()
    with pytest.raises(TypeError, match="solver must be"):
        gm.acceleration(gm.LagrangianSystem(FREE, constraint=c), S2, solver="gauss")
    with pytest.raises(TypeError, match="callable"):
        gm.LagrangianSystem(3.0)


def test_state_off_constraint_manifold():
    system = gm.LagrangianSystem(FREE, constraint=gm.HolonomicConstraint(lambda q: q @ q - 1.0))
    on = gm.State(jnp.array([0.6, 0.8]), jnp.array([-0.8, 0.6]))
    np.testing.assert_array_equal(gm.check_on_constraint(system, on).q, on.q)
    slightly_off = gm.State(on.q * (1 + 1e-10), on.v)
    gm.check_on_constraint(system, slightly_off)  # within the stated tolerance (1e-8)
    off = gm.State(on.q * 1.01, on.v)
    with pytest.raises(RUNTIME, match="off the constraint manifold"):
        gm.check_on_constraint(system, off)
    with pytest.raises(RUNTIME, match="off the constraint manifold"):
        eqx.filter_jit(gm.check_on_constraint)(system, gm.State(on.q, on.v + 0.1 * on.q))
    # evaluations slightly off C (as inside an integrator) keep working
    assert jnp.all(jnp.isfinite(gm.acceleration(system, gm.State(on.q * (1 + 1e-6), on.v))))


class _Damping(eqx.Module):
    c: jax.Array

    def __call__(self, q, v):
        return -self.c * v


_RUN_PATHS = {
    "eager": (lambda f: f, RUNTIME),
    "eqx.filter_jit": (eqx.filter_jit, RUNTIME),
    # plain jax.jit: JAX's own error type, with geomech's (equinox's) message in its text
    "jax.jit": (jax.jit, jax.errors.JaxRuntimeError),
    "jax.vmap": (lambda f: lambda c: jax.vmap(f)(jnp.stack([c, c])), RUNTIME),
    "jax.grad": (jax.grad, RUNTIME),
}


@pytest.mark.parametrize("path", sorted(_RUN_PATHS))
def test_run_time_failure_raises_on_every_path(path):
    """A failure during the run (here `max_steps` reached) raises whatever the caller reads
    (only the states here) and under every transformation, with the error type documented in
    docs/errors.md; both types are `RuntimeError`s."""
    sleigh = gm.models.ChaplyginSleigh()

    def final_x(c):
        system = gm.LagrangianSystem(
            sleigh.lagrangian, force=_Damping(c), constraint=gm.LinearConstraint(sleigh.row)
        )
        return gm.simulate(system, sleigh.initial_state(), 0.0, 1.0, max_steps=2).states.q[-1, 0]

    transform, error = _RUN_PATHS[path]
    with pytest.raises(error, match="maximum number of solver steps") as caught:
        transform(final_x)(jnp.asarray(0.5))
    assert isinstance(caught.value, RuntimeError)
