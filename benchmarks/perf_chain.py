"""N-link chain: the generic `Projection` right-hand side against the hand-written Schur one
(issue 15, item 1).

    python benchmarks/perf_chain.py [--N 8 32 64] [--B 64] [--t1 1.0] [--repeat 5]

Both right-hand sides come from `benchmarks/run.py` (`generic`, `chain_hand`) and are integrated
by the same vmapped Tsit5 driver; the two are timed interleaved in one process, best of `--repeat`,
so that the load of a shared machine hits both alike. Prints one line per N: vmapped accelerations
(µs per state) and ensemble wall time, generic / hand.
"""

import argparse
import importlib.util
import os
import pathlib
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import equinox as eqx  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("geomech_bench_run", HERE / "run.py")
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)


def interleaved(fns, args, repeat):
    best = [float("inf")] * len(fns)
    for _ in range(repeat):
        for i, f in enumerate(fns):
            t = time.perf_counter()
            jax.block_until_ready(f(*args))
            best[i] = min(best[i], time.perf_counter() - t)
    return best


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--N", type=int, nargs="+", default=[8, 32, 64])
    p.add_argument("--B", type=int, default=64)
    p.add_argument("--t1", type=float, default=1.0)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--no-ensemble", action="store_true")
    a = p.parse_args()
    print(f"load {os.getloadavg()}")
    for N in a.N:
        model, s = run.chain_states(N)(jax.random.PRNGKey(0), a.B)
        t0 = jax.numpy.asarray(0.0)
        accs = [
            eqx.filter_jit(jax.vmap(f, in_axes=(None, None, 0, 0)))
            for f in (run.generic, run.chain_hand)
        ]
        tc = []
        for f in accs:
            t = time.perf_counter()
            jax.block_until_ready(f(model, t0, s.q, s.v))
            tc.append(time.perf_counter() - t)
        g, h = interleaved(accs, (model, t0, s.q, s.v), a.repeat * 4)
        line = (
            f"N={N:3d} B={a.B} acc: generic {1e6 * g / a.B:8.2f} us/state"
            f"  hand {1e6 * h / a.B:8.2f}"
            f"  ratio {g / h:5.2f}  (compile {tc[0]:.1f}s / {tc[1]:.1f}s)"
        )
        if not a.no_ensemble:
            ens = [run.make_ensemble(f, a.t1, 1e-8, 1e-8)[0] for f in (run.generic, run.chain_hand)]
            for e in ens:
                jax.block_until_ready(e(model, s.q, s.v))
            g, h = interleaved(ens, (model, s.q, s.v), a.repeat)
            line += f" | ensemble t1={a.t1}: generic {g:.3f}s hand {h:.3f}s ratio {g / h:5.2f}"
        print(line, flush=True)
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
