"""Seeded random constrained systems for property tests (shared by the test modules).

`random_system(seed, ...)` returns `(system, state, t)` with `state` on the constraint manifold:
a $q$-dependent SPD kinetic term, a gyroscopic term linear in $v$, a potential, an optional
external force, $k$ constraints nonlinear in $v$ and, if asked, a $\\mathcal{W} \\ne \\mathcal{D}$
satisfying (3.19). Time dependence is optional. Every parameter is a field, so gradients flow.

`random_case(seed, ...)` also returns the same user functions as a `reference.Problem` (explicit
`(t, q, v)` callables, for the independent reference of `reference.py`) and, for a symmetric
Lagrangian, the `gm.LieAlgebraAction` of its symmetry. Options beyond `random_system`'s: known work
$F^0$, a holonomic row $h(t, q)$ and an affine row $A(t, q) v + c(t, q)$ stacked with the nonlinear
rows, $\\mathcal{W}$ given by a basis, and a Lagrangian invariant under the translations orthogonal
to a random unit vector $u$.
"""

from typing import NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import reference as ref

import geomech as gm


def _args(args, time_dependent):
    """`(t, q, v)` (or `(t, q)`) from a user function's arguments; `t = 0` if autonomous."""
    return args if time_dependent else (0.0, *args)


class RandomLagrangian(eqx.Module):
    B0: jax.Array
    B1: jax.Array
    g: jax.Array
    K: jax.Array
    time_dependent: bool = eqx.field(static=True)
    P: jax.Array | None = None  # L depends on q through P q only (P = u uᵀ: a symmetry)

    def mass(self, q):
        n = q.shape[0]
        B = self.B0 + jnp.tensordot(jnp.sin(q), self.B1, axes=1)
        return B @ B.T + n * jnp.eye(n, dtype=q.dtype)

    def __call__(self, *args):
        t, q, v = _args(args, self.time_dependent)
        if self.P is not None:
            q = self.P @ q
        T = 0.5 * v @ self.mass(q) @ v
        gyro = jnp.tanh(self.g @ q) @ v * (1.0 + 0.3 * jnp.sin(t))  # linear in v: gyroscopic
        V = 0.5 * q @ self.K @ q + jnp.sum(jnp.cos(q))
        return T + gyro - V


class RandomConstraint(eqx.Module):
    """$\\phi(q, v) = G(q) v + \\varepsilon\\,\\tanh(P v)^2 \\cdot 1 + c\\,\\sin(q) - \\phi_0$,
    shifted so that the chosen state lies on $\\mathcal{C}$."""

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
        t, q, v = _args(args, self.time_dependent)
        return self.raw(t, q, v) - self.offset


class RandomAnnihilator(eqx.Module):
    C0: jax.Array
    C1: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        t, q, v = _args(args, self.time_dependent)
        return self.C0 + 0.2 * jnp.tanh(jnp.tensordot(q + 0.1 * v, self.C1, axes=1))


class RandomBasis(eqx.Module):
    """A (non-orthonormal) basis of $\\mathcal{W}$ depending on $(t, q, v)$."""

    E0: jax.Array
    E1: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        t, q, v = _args(args, self.time_dependent)
        return self.E0 + 0.2 * jnp.tanh(jnp.tensordot(q - 0.1 * v + 0.3 * t, self.E1, axes=1))


class RandomForce(eqx.Module):
    F: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        _, q, v = _args(args, self.time_dependent)
        return self.F @ v - 0.1 * q


class RandomKnownWork(eqx.Module):
    """$F^0(t, q, v) = 0.4\\tanh(q) + 0.2\\,(1 + 0.5\\sin t) K v$."""

    K: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        t, q, v = _args(args, self.time_dependent)
        return 0.4 * jnp.tanh(q) + 0.2 * (1.0 + 0.5 * jnp.sin(t)) * (self.K @ v)


class RandomHolonomic(eqx.Module):
    """One row: $h(t, q) = w \\cdot \\sin q + \\tfrac12 q^\\top H q + 0.3\\,t\\,(c \\cdot q)
    - h_0$."""

    w: jax.Array
    H: jax.Array
    c: jax.Array
    offset: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def raw(self, t, q):
        return jnp.atleast_1d(self.w @ jnp.sin(q) + 0.5 * q @ self.H @ q + 0.3 * t * (self.c @ q))

    def __call__(self, *args):
        t, q = _args(args, self.time_dependent)
        return self.raw(t, q) - self.offset


class RandomAffineRows(eqx.Module):
    """The affine row $A(t, q) v + c(t, q)$: `A(...)` and `c(...)` for `gm.LinearConstraint`."""

    a0: jax.Array
    a1: jax.Array
    offset: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def A(self, *args):
        t, q = _args(args, self.time_dependent)
        return (self.a0 + 0.3 * jnp.cos(q + t) * self.a1)[None, :]

    def c_raw(self, t, q):
        return jnp.atleast_1d(0.2 * jnp.sin(q[0] + t) + 0.1 * q[1] ** 2)

    def c(self, *args):
        t, q = _args(args, self.time_dependent)
        return self.c_raw(t, q) - self.offset


class ConstantGenerators(eqx.Module):
    """$\\xi_Q(q) = T\\xi$: translations along the columns of `T`."""

    T: jax.Array

    def __call__(self, q):
        return self.T.astype(q.dtype)


# -- the user's functions as explicit (t, q, v) callables, for the reference ---------------------


class TQV(eqx.Module):
    """A user function called as `f(t, q, v)` (or `f(t, q)`), whatever its own convention."""

    f: object
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, t, *args):
        return self.f(t, *args) if self.time_dependent else self.f(*args)


class AffinePhi(eqx.Module):
    """$\\phi(t, q, v) = A(t, q) v + c(t, q)$ built from a `gm.LinearConstraint`'s functions."""

    A: object
    c: object

    def __call__(self, t, q, v):
        return jnp.atleast_2d(self.A(t, q)) @ v + self.c(t, q)


class RandomCase(NamedTuple):
    system: gm.LagrangianSystem
    state: gm.State
    t: float
    problem: ref.Problem
    action: gm.LieAlgebraAction | None


def random_case(
    seed,
    n=4,
    k=2,
    *,
    generalized=True,
    time_dependent=False,
    force=True,
    t=0.3,
    known_work=False,
    holonomic=False,
    affine=False,
    work_space="annihilator",
    symmetric=False,
) -> RandomCase:
    """A random system, a state on its constraint manifold at time `t`, the same functions as a
    `reference.Problem`, and the symmetry action (or `None`).

    The $k$ rows are: one holonomic row if `holonomic`, one affine row if `affine`, then the
    nonlinear rows. `work_space` is `"annihilator"` or `"basis"` (used if `generalized`).
    """
    td = time_dependent
    t_eval = t if td else 0.0
    rng = np.random.default_rng(seed)
    r = lambda *s: jnp.asarray(rng.normal(size=s))
    lag = RandomLagrangian(
        0.5 * r(n, n), 0.3 * r(n, n, n), r(n, n), jnp.eye(n) + 0.1 * r(n, n) @ r(n, n).T, td
    )
    q, v = r(n), r(n)
    k_v = k - int(holonomic) - int(affine)
    con = RandomConstraint(
        r(k_v, n) + jnp.eye(k_v, n), 0.3 * r(n, k_v, n), r(k_v, n), jnp.zeros(k_v), td
    )
    C0 = C1 = Fm = None
    if generalized:
        C0, C1 = r(k, n), 0.3 * r(n, k, n)
    if force:
        Fm = 0.3 * r(n, n)
    # draws for the options below come last, so that the systems above do not depend on them
    rows, ref_rows = [], []
    if holonomic:
        hol = RandomHolonomic(r(n), 0.3 * r(n, n), r(n), jnp.zeros(1), td)
        hol = eqx.tree_at(lambda c: c.offset, hol, hol.raw(t_eval, q))
        grad_h = jax.grad(lambda q_: hol.raw(t_eval, q_)[0])(q)
        h_t = jax.grad(lambda t_: hol.raw(t_, q)[0])(jnp.asarray(t_eval, q.dtype)) if td else 0.0
        v = v - (grad_h @ v + h_t) / (grad_h @ grad_h) * grad_h  # dh/dt = 0 at the state
        rows.append(gm.HolonomicConstraint(hol))
        ref_rows.append(ref.Position(TQV(hol, td)))
    if affine:
        aff = RandomAffineRows(r(n) + jnp.eye(n)[int(holonomic)], r(n), jnp.zeros(1), td)
        aff = eqx.tree_at(
            lambda c: c.offset, aff, aff.A(*([t_eval] if td else []), q) @ v + aff.c_raw(t_eval, q)
        )
        rows.append(gm.LinearConstraint(aff.A, aff.c))
        ref_rows.append(ref.Velocity(AffinePhi(TQV(aff.A, td), TQV(aff.c, td))))
    con = eqx.tree_at(lambda c: c.offset, con, con.raw(t_eval, q, v))
    rows.append(gm.Constraint(con))
    ref_rows.append(ref.Velocity(TQV(con, td)))
    ws = W_ref = None
    if generalized and work_space == "annihilator":
        W = RandomAnnihilator(C0, C1, td)
        ws, W_ref = gm.Subspace(annihilator=W), dict(annihilator=TQV(W, td))
    elif generalized:
        E = RandomBasis(r(n, n - k), 0.3 * r(n, n, n - k), td)
        ws, W_ref = gm.Subspace(basis=E), dict(W_basis=TQV(E, td))
    F = RandomForce(Fm, td) if force else None
    F0 = RandomKnownWork(r(n, n), td) if known_work else None
    action = None
    if symmetric:
        u = np.array(r(n))
        u /= np.linalg.norm(u)
        lag = eqx.tree_at(
            lambda L: L.P, lag, jnp.asarray(np.outer(u, u)), is_leaf=lambda x: x is None
        )
        T = jnp.linalg.qr(jnp.asarray(u)[:, None], mode="complete")[0][:, 1:]  # translations ⟂ u
        action = gm.LieAlgebraAction(ConstantGenerators(T))
    constraint = rows[0] if len(rows) == 1 else gm.Constraint.stack(rows)
    system = gm.LagrangianSystem(
        lag, force=F, constraint=constraint, work_space=ws, known_work=F0, time_dependent=td
    )
    problem = ref.Problem(
        TQV(lag, td),
        tuple(ref_rows),
        force=None if F is None else TQV(F, td),
        known_work=None if F0 is None else TQV(F0, td),
        **(W_ref or {}),
    )
    return RandomCase(system, gm.State(q, v), t, problem, action)


def random_system(seed, n=4, k=2, *, generalized=True, time_dependent=False, force=True, t=0.3):
    """A random system and a state on its constraint manifold at time `t`."""
    case = random_case(
        seed, n, k, generalized=generalized, time_dependent=time_dependent, force=force, t=t
    )
    return case.system, case.state, case.t


def perturbed_states(state, t, count, seed, scale=0.3, dt=0.25):
    """`state` at time `t` followed by `count` random states near it (off $\\mathcal{C}$) at time
    `t + dt`, stacked: `(states, ts)`."""
    rng = np.random.default_rng(seed)
    n = state.q.shape[0]
    dq, dv = (scale * rng.normal(size=(count, n)) for _ in range(2))
    q = jnp.concatenate([state.q[None], state.q[None] + dq])
    v = jnp.concatenate([state.v[None], state.v[None] + dv])
    ts = jnp.concatenate([jnp.full((1,), t, q.dtype), jnp.full((count,), t + dt, q.dtype)])
    return gm.State(q, v), ts


class UserBasis(eqx.Module):
    """A user's basis of $\\mathcal{W}$ for `gm.Kane(basis=...)`, built from a
    `reference.Problem`: its `W_basis`, or the null space of $C$ (of $\\partial\\phi/\\partial v$
    and $\\partial h/\\partial q$ when $\\mathcal{W} = \\mathcal{D}$, by `jax.jacfwd`), mixed by `R`
    so that it is not orthonormal. Called as `fn(q, v)` or `fn(t, q, v)`."""

    problem: ref.Problem
    R: jax.Array

    def __call__(self, *args):
        t, q, v = args if len(args) == 3 else (0.0, *args)
        p = self.problem
        if p.W_basis is not None:
            return p.W_basis(t, q, v) @ self.R
        if p.annihilator is not None:
            C = jnp.atleast_2d(p.annihilator(t, q, v))
        else:
            C = jnp.concatenate(
                [
                    jnp.atleast_2d(
                        jax.jacfwd(c.phi, argnums=2)(t, q, v)
                        if isinstance(c, ref.Velocity)
                        else jax.jacfwd(c.h, argnums=1)(t, q)
                    )
                    for c in p.constraints
                ]
            )
        return jnp.linalg.qr(C.T, mode="complete")[0][:, C.shape[0] :] @ self.R


def user_basis(problem, n, k, seed=0):
    """`UserBasis` with a fixed well-conditioned mixing `R = I + 0.3 N(0, 1)`."""
    rng = np.random.default_rng(seed)
    return UserBasis(problem, jnp.eye(n - k) + 0.3 * jnp.asarray(rng.normal(size=(n - k, n - k))))
