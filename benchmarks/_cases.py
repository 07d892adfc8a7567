"""The benchmark cases: models, random initial states, the library's right-hand side ("generic") and
hand-written closed-form JAX accelerations ("hand"), and one diffrax driver shared by both.

The hand-written right-hand sides use the structure a specialist would: closed-form multipliers for
the sleigh; for the chain the diagonal mass matrix and the N × N Schur complement
$S = A M^{-1} A^T$ of the N link constraints (never an n × n solve).
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp

import geomech as gm
import geomech.models as gmm
from geomech._dynamics import constrained_acceleration
from geomech._stages import assemble

# -- hand-written closed-form accelerations (no autodiff, explicit formulas) ---------------------


def sleigh_hand(model: gmm.ChaplyginSleigh, t, q, v):
    """[Goicolea] (7.66)–(7.68) with the multiplier in closed form:
    A M⁻¹ Aᵀ = 1/m and b = u ω, so R = m u ω."""
    s, c = jnp.sin(q[2]), jnp.cos(q[2])
    u, w = v[0] * c + v[1] * s, v[2]
    R = model.m * u * w
    return jnp.stack([-R * s / (2 * model.m), R * c / (2 * model.m), -R / (model.m * model.l)])


def chain_hand(model: gmm.PlanarChain, t, q, v):
    """[Zanella] (91) for N links: explicit rows d_i = r_i − r_{i−1}, b_i = −|ḋ_i|², the diagonal
    M⁻¹ and a dense N×N solve with the Schur complement S = A M⁻¹ Aᵀ for the multipliers."""
    N = model.N
    r, rd = q.reshape(N, 2), v.reshape(N, 2)
    zero = jnp.zeros((1, 2), q.dtype)
    d = r - jnp.concatenate([zero, r[:-1]])
    dd = rd - jnp.concatenate([zero, rd[:-1]])
    minv = 1.0 / model.masses
    # S = A M⁻¹ Aᵀ is tridiagonal:
    # S_ii = |d_i|²(1/m_i + 1/m_{i−1}), S_{i,i−1} = −d_i·d_{i−1}/m_{i−1}
    minv_prev = jnp.concatenate([jnp.zeros(1, q.dtype), minv[:-1]])
    diag = jnp.sum(d * d, 1) * (minv + minv_prev)
    off = -jnp.sum(d[1:] * d[:-1], 1) * minv[:-1]
    S = jnp.diag(diag) + jnp.diag(off, 1) + jnp.diag(off, -1)
    g_acc = jnp.stack([jnp.full(N, model.g), jnp.zeros(N)], 1)  # M⁻¹Q: gravity along +x (down)
    gd = g_acc - jnp.concatenate([zero, g_acc[:-1]])
    rhs = -jnp.sum(dd * dd, 1) - jnp.sum(d * gd, 1)  # b − A M⁻¹ Q
    lam = jnp.linalg.solve(S, rhs)
    f = lam[:, None] * d  # Aᵀλ: +λ_i d_i on bob i, −λ_i d_i on bob i−1
    f = f - jnp.concatenate([f[1:], zero])
    return (g_acc + minv[:, None] * f).reshape(-1)


def generic(model, t, q, v):
    """The library's right-hand side as a simulation uses it: shared stages without the value checks
    (`gm.acceleration` adds `eqx.error_if` checks of (3.7)/(3.19) that cost an SVD per call)."""
    stages = assemble(model.system(), gm.State(q, v), t, checks=False)
    return constrained_acceleration(stages, gm.Projection())


# -- cases: (model, batched initial states) --------------------------------------------------------


def sleigh_states(key, B):
    k1, k2, k3 = jax.random.split(key, 3)
    u0 = jax.random.uniform(k1, (B,), minval=-1.0, maxval=1.0)
    w0 = jax.random.uniform(k2, (B,), minval=0.5, maxval=1.5)
    th0 = jax.random.uniform(k3, (B,), minval=-jnp.pi, maxval=jnp.pi)
    model = gmm.ChaplyginSleigh(m=jnp.asarray(1.0), l=jnp.asarray(1.0))
    return model, jax.vmap(model.initial_state)(u0, w0, th0)


def disk_states(key, B):
    k1, k2 = jax.random.split(key)
    lean = jax.random.uniform(k1, (B,), minval=0.05, maxval=0.2)
    spin = jax.random.uniform(k2, (B,), minval=4.0, maxval=6.0)
    model = gmm.RollingDisk(m=jnp.asarray(1.0), R=jnp.asarray(1.0))
    return model, jax.vmap(lambda a, s: model.initial_state(lean=a, spin_rate=s))(lean, spin)


def chain_states(N):
    def make(key, B):
        k1, k2 = jax.random.split(key)
        angles = 0.2 * jax.random.uniform(k1, (B, N), minval=-1.0, maxval=1.0)
        rates = 0.2 * jax.random.uniform(k2, (B, N), minval=-1.0, maxval=1.0)
        model = gmm.PlanarChain(N)
        return model, jax.vmap(model.initial_state)(angles, rates)

    return make


# -- one driver for both right-hand sides ------------------------------------------------------


def solve_one(acc, model, q0, v0, t1, rtol, atol, max_steps=16_384):
    """One `diffrax.Tsit5` solve of $\\dot q = v$, $\\dot v = $ `acc(model, t, q, v)` over [0, t1]:
    `(final q, final v, stats)`."""
    term = diffrax.ODETerm(lambda t, y, m: (y[1], acc(m, t, y[0], y[1])))
    sol = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        0.0,
        t1,
        None,
        (q0, v0),
        args=model,
        saveat=diffrax.SaveAt(t1=True),
        stepsize_controller=diffrax.PIDController(rtol=rtol, atol=atol),
        max_steps=max_steps,
    )
    return sol.ys[0][-1], sol.ys[1][-1], sol.stats


def make_ensemble(acc, t1, rtol, atol):
    """A jitted vmapped ensemble solve `(model, q0, v0) -> (final q, final v, stats)`."""

    @eqx.filter_jit
    def ensemble(model, q0, v0):
        one = lambda m, q, v: solve_one(acc, m, q, v, t1, rtol, atol)
        return jax.vmap(one, in_axes=(None, 0, 0))(model, q0, v0)

    return ensemble


def final_state_loss(q, v):
    """The scalar loss of the gradient benchmarks: the batch mean of $|q(t_1)|^2 + |v(t_1)|^2$."""
    return jnp.mean(jnp.sum(q**2, -1) + jnp.sum(v**2, -1))
