"""Seeded random constrained systems for property tests (shared by the test modules).

`random_system(seed, ...)` returns `(system, state, t)` with `state` on the constraint manifold:
a $q$-dependent SPD kinetic term, a gyroscopic term linear in $v$, a potential, an optional
external force, $k$ constraints nonlinear in $v$ and, if asked, a $\\mathcal{W} \\ne \\mathcal{D}$
satisfying (3.19). Time dependence is optional. Every parameter is a field, so gradients flow.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomech as gm


class RandomLagrangian(eqx.Module):
    B0: jax.Array
    B1: jax.Array
    g: jax.Array
    K: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def mass(self, q):
        n = q.shape[0]
        B = self.B0 + jnp.tensordot(jnp.sin(q), self.B1, axes=1)
        return B @ B.T + n * jnp.eye(n, dtype=q.dtype)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        T = 0.5 * v @ self.mass(q) @ v
        gyro = jnp.tanh(self.g @ q) @ v * (1.0 + 0.3 * jnp.sin(t))  # linear in v: gyroscopic
        V = 0.5 * q @ self.K @ q + jnp.sum(jnp.cos(q))
        return T + gyro - V


class RandomConstraint(eqx.Module):
    """$\\phi(q, v) = G(q) v + \\varepsilon\\,\\tanh(P v)^2 \\cdot 1 + c\\,\\sin(q) - \\phi_0$, shifted so
    that the chosen state lies on $\\mathcal{C}$."""

    G0: jax.Array
    G1: jax.Array
    P: jax.Array
    offset: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def raw(self, t, q, v):
        G = self.G0 + jnp.tensordot(jnp.cos(q), self.G1, axes=1)
        quad = 0.3 * jnp.tanh(self.P @ v) ** 2
        return G @ v + quad + 0.2 * jnp.sin(q[: G.shape[0]] + 0.5 * t)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        return self.raw(t, q, v) - self.offset


class RandomAnnihilator(eqx.Module):
    C0: jax.Array
    C1: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        return self.C0 + 0.2 * jnp.tanh(jnp.tensordot(q + 0.1 * v, self.C1, axes=1))


def random_system(seed, n=4, k=2, *, generalized=True, time_dependent=False, force=True, t=0.3):
    """A random system and a state on its constraint manifold at time `t`."""
    rng = np.random.default_rng(seed)
    r = lambda *s: jnp.asarray(rng.normal(size=s))
    lag = RandomLagrangian(0.5 * r(n, n), 0.3 * r(n, n, n), r(n, n), jnp.eye(n) + 0.1 * r(n, n) @ r(n, n).T, time_dependent)
    q, v = r(n), r(n)
    con = RandomConstraint(r(k, n) + jnp.eye(k, n), 0.3 * r(n, k, n), r(k, n), jnp.zeros(k), time_dependent)
    con = eqx.tree_at(lambda c: c.offset, con, con.raw(t if time_dependent else 0.0, q, v))
    ws = None
    if generalized:
        C0 = np.asarray(r(k, n))
        ws = gm.Subspace(annihilator=RandomAnnihilator(jnp.asarray(C0), 0.3 * r(n, k, n), time_dependent))
    F = None
    if force:
        Fm = 0.3 * r(n, n)
        F = (lambda t_, q_, v_: Fm @ v_ - 0.1 * q_) if time_dependent else (lambda q_, v_: Fm @ v_ - 0.1 * q_)
    system = gm.LagrangianSystem(
        lag, force=F, constraint=gm.Constraint(con), work_space=ws, time_dependent=time_dependent
    )
    return system, gm.State(q, v), t
