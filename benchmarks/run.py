"""geomech benchmarks: the generic solver against hand-written closed-form right-hand sides.

    python benchmarks/run.py            # full sizes (slow on a laptop CPU; see --budget)
    python benchmarks/run.py --quick    # smoke test, a few seconds per case

Prints one JSON document. For every case (the Chaplygin sleigh, the rolling disk, planar chains with
N links) and implementation ("generic": `gm.acceleration` of the model's `LagrangianSystem` with
the default `Projection` solver; "hand": a closed-form JAX acceleration written by hand) it reports

- `acc_per_s_single`: jitted single-state accelerations per second (includes dispatch),
- `acc_per_s_vmapped`: states per second of one vmapped call on B states,
- `traj_per_s[B]`: trajectories per second of a vmapped `diffrax.Tsit5` ensemble over
  t in [0, t1] at rtol = atol = 1e-8 (compiled once, timed on the second call),
- `compile_s`: compile time (`lower().compile()`) of the ensemble solve at the smallest B,
- `grad_over_forward`: time of the reverse-mode gradient (diffrax's default
  `RecursiveCheckpointAdjoint`) of a scalar loss of the final states with respect to the initial
  states and the model parameters, over the time of the forward solve (ensemble of `--grad-batch`),
- `steps_mean`: mean accepted steps per trajectory (equal work check between implementations),

and, where a hand-written version exists, `ratio_generic_over_hand` = generic time / hand time for
each figure (so 1.0 is parity and larger is slower). Both implementations are integrated by the very
same diffrax driver, so the ratios isolate the cost of the right-hand side. Cases whose estimated
time exceeds `--budget` seconds are skipped and reported as such.
"""

import argparse
import json
import os
import platform
import sys
import time

# OpenBLAS (used by jaxlib's CPU LAPACK kernels) spawns threads for batched triangular solves; on a
# small or busy machine that thread contention slowed one vmapped call 300x. One thread per process.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
sys.path.insert(
    0, os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
)  # run from a checkout

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import geomech as gm  # noqa: E402
import geomech.models as gmm  # noqa: E402
from geomech._dynamics import constrained_acceleration  # noqa: E402
from geomech._stages import assemble  # noqa: E402

# -- hand-written closed-form accelerations (no autodiff, explicit formulas) ---------------------


def sleigh_hand(model: gmm.ChaplyginSleigh, t, q, v):
    """Seed 004 (7.66)–(7.68) with the multiplier in closed form:
    A M⁻¹ Aᵀ = 1/m and b = u ω, so R = m u ω."""
    s, c = jnp.sin(q[2]), jnp.cos(q[2])
    u, w = v[0] * c + v[1] * s, v[2]
    R = model.m * u * w
    return jnp.stack([-R * s / (2 * model.m), R * c / (2 * model.m), -R / (model.m * model.l)])


def chain_hand(model: gmm.PlanarChain, t, q, v):
    """Seed 001 (91) for N links: explicit rows d_i = r_i − r_{i−1}, b_i = −|ḋ_i|², and a dense
    N×N solve for the multipliers."""
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


# -- cases -----------------------------------------------------------------------------------------


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


# -- timing ----------------------------------------------------------------------------------------


def best_time(fn, *args, repeat=3, long_s=5.0):
    """The best of `repeat` timed calls (a single call when one takes over `long_s` seconds)."""
    out = None
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - t)
        if times[-1] > long_s:
            break
    return min(times), out


def make_ensemble(acc, t1, rtol, atol):
    """A jitted vmapped ensemble solve `(model, q0, v0) -> (final q, final v, steps)`."""

    def one(model, q0, v0):
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
            max_steps=16_384,
        )
        return sol.ys[0][-1], sol.ys[1][-1], sol.stats["num_accepted_steps"]

    @eqx.filter_jit
    def ensemble(model, q0, v0):
        return jax.vmap(one, in_axes=(None, 0, 0))(model, q0, v0)

    @eqx.filter_jit
    def loss_grad(model, q0, v0):
        def loss(diff):
            m, q0_, v0_ = diff
            qf, vf, _ = jax.vmap(one, in_axes=(None, 0, 0))(m, q0_, v0_)
            return jnp.mean(jnp.sum(qf**2, -1) + jnp.sum(vf**2, -1))

        return eqx.filter_grad(loss)((model, q0, v0))

    return ensemble, loss_grad


def bench_impl(acc, make_states, batches, t1, rtol, budget, key, grad_batch):
    res = {}
    model, s = make_states(key, max(batches))
    q, v = s.q, s.v
    single = eqx.filter_jit(acc)
    t0 = jnp.asarray(0.0)
    jax.block_until_ready(single(model, t0, q[0], v[0]))
    n_calls = 200
    t = time.perf_counter()
    for i in range(n_calls):
        out = single(model, t0, q[i % q.shape[0]], v[i % q.shape[0]])
    jax.block_until_ready(out)
    res["acc_per_s_single"] = n_calls / (time.perf_counter() - t)
    vm = eqx.filter_jit(jax.vmap(acc, in_axes=(None, None, 0, 0)))
    jax.block_until_ready(vm(model, t0, q, v))
    dt, _ = best_time(vm, model, t0, q, v)
    res["acc_per_s_vmapped"] = q.shape[0] / dt
    res["acc_vmapped_B"] = int(q.shape[0])

    ensemble, loss_grad = make_ensemble(acc, t1, rtol, rtol)
    res["traj_per_s"], res["steps_mean"], res["skipped"] = {}, {}, {}
    per_traj = None
    batches = sorted(batches)
    for B in batches:
        if per_traj is not None and per_traj * B * 3 > budget:
            res["skipped"][str(B)] = f"estimated {per_traj * B * 3:.0f} s > budget {budget:.0f} s"
            continue
        if B == batches[0]:
            t = time.perf_counter()
            ensemble.lower(model, q[:B], v[:B]).compile()
            res["compile_s"] = time.perf_counter() - t
        jax.block_until_ready(ensemble(model, q[:B], v[:B]))  # compiles this B
        dt, (_, _, steps) = best_time(ensemble, model, q[:B], v[:B], repeat=2)
        per_traj = dt / B
        res["traj_per_s"][str(B)] = B / dt
        res["steps_mean"][str(B)] = float(np.mean(np.asarray(steps)))
    # gradient / forward on a small ensemble (the ratio, not the size, is the figure)
    b0 = grad_batch
    jax.block_until_ready(ensemble(model, q[:b0], v[:b0]))  # compile both before timing
    jax.block_until_ready(loss_grad(model, q[:b0], v[:b0]))
    t_fwd, _ = best_time(ensemble, model, q[:b0], v[:b0], repeat=5)
    t_grad, _ = best_time(loss_grad, model, q[:b0], v[:b0], repeat=5)
    res["grad_over_forward"] = t_grad / t_fwd
    res["grad_B"] = b0
    return res


RATIO_KEYS_RATE = ("acc_per_s_single", "acc_per_s_vmapped")


def ratios(gen, hand):
    """generic time / hand time for every figure (rates are inverted into times)."""
    r = {k: hand[k] / gen[k] for k in RATIO_KEYS_RATE}
    r["traj_per_s"] = {
        B: hand["traj_per_s"][B] / gen["traj_per_s"][B]
        for B in gen["traj_per_s"]
        if B in hand["traj_per_s"]
    }
    r["compile_s"] = gen["compile_s"] / hand["compile_s"]
    r["grad_over_forward"] = gen["grad_over_forward"] / hand["grad_over_forward"]
    return r


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--quick", action="store_true", help="small sizes for a smoke test (B = 8, t1 = 0.5, N = 2)"
    )
    p.add_argument("--batches", type=int, nargs="+", default=None)
    p.add_argument("--chains", type=int, nargs="+", default=None, help="numbers of links N")
    p.add_argument("--t1", type=float, default=None)
    p.add_argument("--rtol", type=float, default=1e-8)
    p.add_argument("--budget", type=float, default=600.0, help="seconds allowed per ensemble size")
    p.add_argument("--grad-batch", type=int, default=8, help="ensemble size for gradient/forward")
    p.add_argument("--cases", nargs="+", default=None, help="subset of: sleigh rolling_disk chain")
    args = p.parse_args(argv)
    batches = args.batches or ([8] if args.quick else [64, 1024])
    chains = args.chains or ([2] if args.quick else [2, 8, 32])
    t1 = args.t1 or (0.5 if args.quick else 10.0)
    cases = [("sleigh", sleigh_states, sleigh_hand), ("rolling_disk", disk_states, None)]
    cases += [(f"chain_N{N}", chain_states(N), chain_hand) for N in chains]
    if args.cases:
        cases = [c for c in cases if any(c[0].startswith(x) for x in args.cases)]

    out = {
        "machine": {
            "platform": platform.platform(),
            "processor": platform.processor() or platform.machine(),
            "cpu_count": os.cpu_count(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()],
            "python": sys.version.split()[0],
            "loadavg_at_start": os.getloadavg(),
        },
        "settings": {
            "batches": batches,
            "t1": t1,
            "rtol": args.rtol,
            "atol": args.rtol,
            "integrator": "Tsit5",
            "solver": "Projection",
            "dtype": "float64",
            "quick": args.quick,
            "grad_batch": args.grad_batch,
            "budget_s": args.budget,
        },
        "cases": {},
    }
    key = jax.random.PRNGKey(0)
    for name, make_states, hand in cases:
        entry = {
            "generic": bench_impl(
                generic, make_states, batches, t1, args.rtol, args.budget, key, args.grad_batch
            )
        }
        if hand is not None:
            entry["hand"] = bench_impl(
                hand, make_states, batches, t1, args.rtol, args.budget, key, args.grad_batch
            )
            entry["ratio_generic_over_hand"] = ratios(entry["generic"], entry["hand"])
        out["cases"][name] = entry
        print(f"[bench] {name} done", file=sys.stderr, flush=True)
    out["machine"]["loadavg_at_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
