"""The manifolds of the contract suite (`tests/test_geometry.py`) and one constrained system on each,
for the feature tests that apply on any configuration space: they are parametrized over
`MANIFOLDS` (ℝⁿ, S¹, SO(3), SE(3), SE(2) and products), as jaxlie tests every group with one suite.

The system on a manifold of dimension n: $L = \\tfrac12 v^\\top M v - \\tfrac12 k\\,|p(q) - p_0|^2$
with a constant symmetric positive definite $M$ (n × n, in the manifold's velocity frame) and
$p(q)$ the point's stored parameters (`AbstractManifold.parameters`), and, for n ≥ 2, one linear
nonholonomic constraint $a(q)\\cdot v = 0$, $a(q) = e + 0.2\\tanh(P\\,p(q))$. It has no forces
and an ideal constraint, so its energy $\\tfrac12 v^\\top M v + U$ is conserved; on the constraint,
$M$-orthogonal projection of a velocity is written out in `on_constraint`."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomech as gm

MANIFOLDS = {
    "R3": gm.Euclidean(3),
    "S1": gm.Circle(),
    "SO3": gm.SO3(),
    "SE3": gm.SE3(),
    "SE2": gm.SE2(),
    "R2xS1": gm.Product(gm.Euclidean(2), gm.Circle()),
    "SO3xR2": gm.Product(gm.SO3(), gm.Euclidean(2)),
    "SE2xSO3": gm.Product(gm.SE2(), gm.SO3()),
}
COORDINATES = {"R3", "S1", "R2xS1"}


def random_point(manifold, rng):
    """A point of `manifold` away from the identity (and, on S¹, from the branch cut)."""
    if isinstance(manifold, gm.Product):
        points = [random_point(f, rng) for f in manifold.factors]
        return manifold.layout.join(points)
    if isinstance(manifold, gm.AbstractCoordinateManifold):
        return jnp.asarray(rng.uniform(-1.0, 1.0, manifold.dim))
    return manifold.oplus(manifold.group.identity(), jnp.asarray(rng.normal(size=manifold.dim)))


class Quadratic(eqx.Module):
    """$L = \\tfrac12 v^\\top M v - \\tfrac12 k\\,|p(q) - p_0|^2$ (parameters as fields)."""

    manifold: gm.AbstractManifold
    M: jax.Array
    k: jax.Array
    p0: jax.Array

    def __call__(self, q, v):
        d = self.manifold.parameters(q) - self.p0
        return 0.5 * v @ self.M @ v - 0.5 * self.k * d @ d


class Row(eqx.Module):
    """$A(q) = [e + 0.2\\tanh(P\\,p(q))]$, one row."""

    manifold: gm.AbstractManifold
    e: jax.Array
    P: jax.Array

    def __call__(self, q):
        return (self.e + 0.2 * jnp.tanh(self.P @ self.manifold.parameters(q)))[None]


def system_on(name: str, seed: int = 0, mass_scale=1.0) -> gm.LagrangianSystem:
    """The system on `MANIFOLDS[name]` (`mass_scale` multiplies $M$: a parameter to
    differentiate by)."""
    manifold = MANIFOLDS[name]
    rng = np.random.default_rng(seed)
    n = manifold.dim
    p = manifold.parameters(random_point(manifold, rng)).shape[-1]
    B = rng.normal(size=(n, n))
    M = jnp.asarray((B @ B.T + n * np.eye(n)) / n) * mass_scale
    L = Quadratic(manifold, M, jnp.asarray(1.3), jnp.asarray(rng.normal(size=p)))
    constraint = None
    if n >= 2:
        e = jnp.asarray(rng.normal(size=n) + 1.0)
        constraint = gm.LinearConstraint(Row(manifold, e, jnp.asarray(rng.normal(size=(n, p)))))
    return gm.LagrangianSystem(L, constraint=constraint, manifold=manifold)


def energy(system: gm.LagrangianSystem, state: gm.State):
    """$\\tfrac12 v^\\top M v + U$ of `system_on`'s Lagrangian."""
    L = system.lagrangian
    return 0.5 * state.v @ L.M @ state.v - L(state.q, jnp.zeros_like(state.v))


def on_constraint(system: gm.LagrangianSystem, q, v):
    """`v` projected $M$-orthogonally onto $A(q)\\,v = 0$:
    $v - M^{-1}A^\\top (A M^{-1} A^\\top)^{-1} A v$ (`v` itself without a constraint)."""
    if system.constraint is None:
        return v
    M, A = system.lagrangian.M, system.constraint.A_of_q(q)
    MiAt = jnp.linalg.solve(M, A.T)
    return v - MiAt @ jnp.linalg.solve(A @ MiAt, A @ v)


def random_states(system: gm.LagrangianSystem, seed: int, count: int = 3) -> list[gm.State]:
    """`count` random states of `system` on its constraint."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(count):
        q = random_point(system.manifold, rng)
        v = jnp.asarray(rng.normal(size=system.manifold.dim))
        out.append(gm.State(q, on_constraint(system, q, v)))
    return out
