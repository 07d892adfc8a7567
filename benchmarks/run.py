"""geomech benchmarks: the generic solver against hand-written closed-form right-hand sides.

    python benchmarks/run.py                 # full sizes (see --budget)
    python benchmarks/run.py --quick         # smoke test, a few seconds per case
    python benchmarks/run.py --device gpu    # the same on JAX's GPU backend

Prints one JSON document with two studies.

**cases** — for every case (the Chaplygin sleigh, the rolling disk, planar chains with N links) and
implementation ("generic": the library's right-hand side, `assemble` + `Projection`, exactly what
`gm.simulate` evaluates; "hand": a closed-form JAX acceleration written by hand, see `_cases.py`):

- `acc_per_s_single`: jitted single-state accelerations per second (includes dispatch),
- `acc_per_s_vmapped`: states per second of one vmapped call on B states,
- `traj_per_s[B]`: trajectories per second of a vmapped `diffrax.Tsit5` ensemble over
  t in [0, t1] at rtol = atol = 1e-8 (compiled once, timed on a later call); B = 1024 only for
  chains with N <= `--large-batch-max-links` links,
- `compile_s`: compile time (`lower().compile()`) of the ensemble solve at the smallest B,
- `steps_mean`, `steps_max`: accepted steps per trajectory (equal-work check between the two),

and `ratio_generic_over_hand` = generic time / hand time for each figure (1.0 is parity, larger
is slower). Both implementations are integrated by the very same diffrax driver from the same
initial states, so the ratios isolate the cost of the right-hand side.

**scaling** — time per step and trajectory against n = 2N for chains N = 2, 4, ..., 64 (n = 4 ...
128; ensemble of `--scaling-batch` over [0, `--scaling-t1`]) for both sides, with the fitted cost
exponent p of time ∝ n^p (least squares in log–log over all measured sizes).

Anything whose estimated time exceeds `--budget` seconds is skipped and reported as such
("skipped": reason). Gradients are measured by `gradients.py`, compile time by `compile_time.py`,
the MuJoCo comparison by `peer.py`.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402  (sets sys.path to this checkout)

if __name__ == "__main__":
    _common.preconfigure()

import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _cases import (  # noqa: E402, F401  (re-exported for tests)
    chain_hand,
    chain_states,
    disk_states,
    generic,
    make_ensemble,
    sleigh_hand,
    sleigh_states,
)

jax.config.update("jax_enable_x64", True)


def bench_impl(acc, make_states, batches, t1, rtol, budget, key, estimate=None):
    """Throughput figures of one right-hand side (see the module docstring). `estimate(B)`, if
    given, predicts the ensemble time at B before anything is measured (from the scaling study)."""
    res = {}
    model, s = make_states(key, max(batches))
    q, v = s.q, s.v
    single = eqx.filter_jit(acc)
    t0 = jnp.asarray(0.0)
    _common.block(single(model, t0, q[0], v[0]))
    n_calls = 200
    t = time.perf_counter()
    for i in range(n_calls):
        out = single(model, t0, q[i % q.shape[0]], v[i % q.shape[0]])
    _common.block(out)
    res["acc_per_s_single"] = n_calls / (time.perf_counter() - t)
    vm = eqx.filter_jit(jax.vmap(acc, in_axes=(None, None, 0, 0)))
    _common.block(vm(model, t0, q, v))
    dt, _ = _common.best_time(vm, model, t0, q, v)
    res["acc_per_s_vmapped"] = q.shape[0] / dt
    res["acc_vmapped_B"] = int(q.shape[0])

    ensemble = make_ensemble(acc, t1, rtol, rtol)
    res["traj_per_s"], res["steps_mean"], res["steps_max"], res["skipped"] = {}, {}, {}, {}
    per_traj = None
    for B in sorted(batches):
        guess = per_traj * B if per_traj is not None else (estimate(B) if estimate else None)
        if guess is not None and guess * 3 > budget:  # compile + warm-up + timed call
            res["skipped"][str(B)] = f"estimated {guess * 3:.0f} s > budget {budget:.0f} s"
            continue
        t = time.perf_counter()
        compiled = ensemble.lower(model, q[:B], v[:B]).compile()
        res.setdefault("compile_s", time.perf_counter() - t)  # at the smallest B
        _common.block(compiled(model, q[:B], v[:B]))  # warm-up
        dt, (_, _, stats) = _common.best_time(compiled, model, q[:B], v[:B], repeat=2)
        per_traj = dt / B
        steps = np.asarray(stats["num_accepted_steps"])
        res["traj_per_s"][str(B)] = B / dt
        res["steps_mean"][str(B)] = float(np.mean(steps))
        res["steps_max"][str(B)] = int(np.max(steps))
    return res


def ratios(gen, hand):
    """generic time / hand time for every figure (rates are inverted into times)."""
    r = {k: hand[k] / gen[k] for k in ("acc_per_s_single", "acc_per_s_vmapped")}
    r["traj_per_s"] = {
        B: hand["traj_per_s"][B] / gen["traj_per_s"][B]
        for B in gen["traj_per_s"]
        if B in hand["traj_per_s"]
    }
    if "compile_s" in gen and "compile_s" in hand:
        r["compile_s"] = gen["compile_s"] / hand["compile_s"]
    return r


def scaling(links, B, t1, rtol, budget, key):
    """Time per step and trajectory of both right-hand sides against n = 2N, and the exponents."""
    res = {"batch": B, "t1": t1, "n": [], "skipped": {}}
    for impl in ("generic", "hand"):
        res[impl] = {"n": [], "s_per_step": [], "steps_max": [], "compile_s": []}
    for N in sorted(links):
        n = 2 * N
        model, s = chain_states(N)(key, B)
        for impl, acc in (("generic", generic), ("hand", chain_hand)):
            r = res[impl]
            if len(r["n"]) >= 2:  # extrapolate the last two sizes before spending the time
                p = _common.fit_exponent(r["n"][-2:], r["s_per_step"][-2:])
                per_step = r["s_per_step"][-1] * (n / r["n"][-1]) ** max(p, 1.0)
                guess = 3 * per_step * B * r["steps_max"][-1] * 1.5
                if guess > budget:
                    res["skipped"][f"{impl} n={n}"] = (
                        f"estimated {guess:.0f} s > budget {budget:.0f} s"
                    )
                    continue
            t = time.perf_counter()
            compiled = make_ensemble(acc, t1, rtol, rtol).lower(model, s.q, s.v).compile()
            r["compile_s"].append(time.perf_counter() - t)
            _common.block(compiled(model, s.q, s.v))
            dt, (_, _, stats) = _common.best_time(compiled, model, s.q, s.v, repeat=2)
            # the vmapped loop runs max(num_steps) iterations, each evaluating all B states
            steps = int(np.max(np.asarray(stats["num_steps"])))
            r["n"].append(n)
            r["s_per_step"].append(dt / (B * steps))
            r["steps_max"].append(steps)
        print(f"[bench] scaling N={N} done", file=sys.stderr, flush=True)
    for impl in ("generic", "hand"):
        r = res[impl]
        if len(r["n"]) >= 2:
            r["exponent"] = _common.fit_exponent(r["n"], r["s_per_step"])
            big = [i for i, n in enumerate(r["n"]) if n >= 16]
            if len(big) >= 2:  # the asymptotic slope, without the dispatch-bound small sizes
                r["exponent_n_ge_16"] = _common.fit_exponent(
                    [r["n"][i] for i in big], [r["s_per_step"][i] for i in big]
                )
    common = [n for n in res["generic"]["n"] if n in res["hand"]["n"]]
    res["n"] = common
    res["ratio_generic_over_hand"] = [
        res["generic"]["s_per_step"][res["generic"]["n"].index(n)]
        / res["hand"]["s_per_step"][res["hand"]["n"].index(n)]
        for n in common
    ]
    return res


def estimator(scale, N, t1):
    """Predict the ensemble time at B for a chain of N links from the scaling study, if measured."""
    if scale is None or 2 * N not in scale["generic"]["n"]:
        return None
    i = scale["generic"]["n"].index(2 * N)
    per_step, steps = scale["generic"]["s_per_step"][i], scale["generic"]["steps_max"][i]
    return lambda B: per_step * B * steps * t1 / scale["t1"]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument("--quick", action="store_true", help="small sizes for a smoke test")
    p.add_argument("--batches", type=int, nargs="+", default=None)
    p.add_argument("--chains", type=int, nargs="+", default=None, help="numbers of links N")
    p.add_argument(
        "--large-batch-max-links",
        type=int,
        default=8,
        help="the largest batch runs only for chains with at most this many links",
    )
    p.add_argument("--t1", type=float, default=None)
    p.add_argument("--rtol", type=float, default=1e-8)
    p.add_argument("--budget", type=float, default=600.0, help="seconds allowed per measurement")
    p.add_argument("--cases", nargs="+", default=None, help="subset of: sleigh rolling_disk chain")
    p.add_argument("--scaling-links", type=int, nargs="*", default=None)
    p.add_argument("--scaling-batch", type=int, default=64)
    p.add_argument("--scaling-t1", type=float, default=1.0)
    args = p.parse_args(argv)
    _common.check_device(args.device)
    batches = args.batches or ([8] if args.quick else [64, 1024])
    chains = args.chains or ([2] if args.quick else [2, 8, 32, 64])
    t1 = args.t1 or (0.5 if args.quick else 10.0)
    links = args.scaling_links
    if links is None:
        links = [2, 4] if args.quick else [2, 4, 8, 16, 32, 64]
    scaling_batch = 4 if args.quick else args.scaling_batch
    scaling_t1 = 0.2 if args.quick else args.scaling_t1
    cases = [
        ("sleigh", sleigh_states, sleigh_hand, None),
        ("rolling_disk", disk_states, None, None),
    ]
    cases += [(f"chain_N{N}", chain_states(N), chain_hand, N) for N in chains]
    if args.cases:
        cases = [c for c in cases if any(c[0].startswith(x) for x in args.cases)]

    out = {
        "machine": _common.machine_info(),
        "settings": {
            "batches": batches,
            "large_batch_max_links": args.large_batch_max_links,
            "t1": t1,
            "rtol": args.rtol,
            "atol": args.rtol,
            "integrator": "Tsit5",
            "solver": "Projection",
            "dtype": "float64",
            "quick": args.quick,
            "budget_s": args.budget,
            "device": args.device,
        },
        "cases": {},
    }
    key = jax.random.PRNGKey(0)
    scale = None
    if links:
        scale = scaling(links, scaling_batch, scaling_t1, args.rtol, args.budget, key)
        out["scaling"] = scale
    for name, make_states, hand, N in cases:
        bs = batches
        if N is not None and N > args.large_batch_max_links:
            bs = [b for b in batches if b != max(batches)] or batches
        est = estimator(scale, N, t1) if N is not None else None
        entry = {
            "generic": bench_impl(generic, make_states, bs, t1, args.rtol, args.budget, key, est)
        }
        if hand is not None:
            entry["hand"] = bench_impl(hand, make_states, bs, t1, args.rtol, args.budget, key)
            entry["ratio_generic_over_hand"] = ratios(entry["generic"], entry["hand"])
        out["cases"][name] = entry
        print(f"[bench] {name} done", file=sys.stderr, flush=True)
    return _common.finish(out)


if __name__ == "__main__":
    main()
