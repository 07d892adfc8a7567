"""The cost of the manifold abstraction (the chart centred at q, docs/lie_groups.md) on ℝⁿ:
`gm.simulate` of the existing ℝⁿ benchmark ensembles (a planar chain, the rolling disk) in this
checkout against the last commit before Lie groups were introduced (target: at most 3 %).

    python benchmarks/manifold_overhead.py [--baseline REF] [--rounds 5] [--repeat 5]

The baseline is checked out in a temporary git worktree (REF: by default the parent of the commit
that added geomech/_lie.py). One process per checkout compiles every case once; then each round
asks both for the best of `--repeat` timed runs, one after the other, alternating which goes
first. The figures are the best over all rounds, so a loaded machine (load recorded) slows both
alike; `steps` shows both do the same work.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import add_device_argument, check_device, finish, machine_info, preconfigure  # noqa: E402

CASES = ("chain", "rolling_disk")


def _worker(root: str, args) -> None:
    """Time `gm.simulate` of every case with the geomech of the checkout `root`: compile (one JSON
    line of first-call times), then one JSON line of best-of-`repeat` run times per line read."""
    sys.path.insert(0, root)  # before this checkout (`_common` put it on the path)
    import diffrax
    import jax
    import jax.numpy as jnp
    from _common import best_time, timed

    import geomech as gm
    import geomech.models as gmm

    assert Path(gm.__file__).resolve().is_relative_to(Path(root).resolve()), gm.__file__
    k1, k2 = jax.random.split(jax.random.PRNGKey(0))
    B = args.batch
    cases = {}
    if "chain" in args.cases:
        N = args.chain_links
        model = gmm.PlanarChain(N)
        angles = 0.2 * jax.random.uniform(k1, (B, N), minval=-1.0, maxval=1.0)
        rates = 0.2 * jax.random.uniform(k2, (B, N), minval=-1.0, maxval=1.0)
        cases["chain"] = model, jax.vmap(model.initial_state)(angles, rates)
    if "rolling_disk" in args.cases:
        model = gmm.RollingDisk(m=jnp.asarray(1.0), R=jnp.asarray(1.0))
        lean = jax.random.uniform(k1, (B,), minval=0.05, maxval=0.2)
        spin = jax.random.uniform(k2, (B,), minval=4.0, maxval=6.0)
        cases["rolling_disk"] = model, jax.vmap(lambda a, s: model.initial_state(lean=a, spin_rate=s))(lean, spin)
    runs = {
        name: (lambda system=model.system(), y0=y0: gm.simulate(
            system, y0, 0.0, args.t1, rtol=1e-8, atol=1e-8, saveat=diffrax.SaveAt(t1=True)
        ))
        for name, (model, y0) in cases.items()
    }
    first = {}
    for name, run in runs.items():
        first[name], sol = timed(run)
        first[name] = {"first_call_s": first[name], "steps": int(jnp.sum(sol.stats["num_steps"]))}
    print(json.dumps(first), flush=True)
    for _ in sys.stdin:
        times = {name: best_time(run, repeat=args.repeat, long_s=1e9)[0] for name, run in runs.items()}
        print(json.dumps(times), flush=True)


def _read(worker, side: str) -> dict:
    line = worker.stdout.readline()
    if not line:
        raise SystemExit(f"the {side} worker stopped (exit status {worker.wait()}).")
    return json.loads(line)


def _default_baseline() -> str:
    added = subprocess.run(
        ["git", "log", "--diff-filter=A", "--format=%H", "--", "geomech/_lie.py"],
        cwd=HERE.parent, capture_output=True, text=True, check=True,
    ).stdout.split()
    return f"{added[-1]}^"


def main(argv=None):
    device = preconfigure(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--baseline", default=None, help="git commit (default: before Lie groups)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--t1", type=float, default=2.0)
    parser.add_argument("--chain-links", type=int, default=4)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=CASES)
    parser.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    check_device(device)
    if args.worker is not None:
        return _worker(args.worker, args)

    machine = machine_info()  # the load at the start
    baseline = args.baseline or _default_baseline()
    commit = subprocess.run(
        ["git", "rev-parse", baseline], cwd=HERE.parent, capture_output=True, text=True, check=True
    ).stdout.strip()
    passed = list(argv if argv is not None else sys.argv[1:])
    first, runs = {}, {"this": [], "baseline": []}
    with tempfile.TemporaryDirectory() as tmp:
        other = str(Path(tmp) / "baseline")
        subprocess.run(["git", "worktree", "add", "--detach", other, commit], cwd=HERE.parent,
                       capture_output=True, check=True)
        workers = {}
        try:
            for side, root in (("this", str(HERE.parent)), ("baseline", other)):
                workers[side] = subprocess.Popen(
                    [sys.executable, str(HERE / "manifold_overhead.py"), *passed, "--worker", root],
                    stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ),
                )
                first[side] = _read(workers[side], side)  # compiled (one at a time)
            for r in range(args.rounds):  # interleaved, alternating which goes first
                for side in ("this", "baseline") if r % 2 == 0 else ("baseline", "this"):
                    workers[side].stdin.write("go\n")
                    workers[side].stdin.flush()
                    runs[side].append(_read(workers[side], side))
                print(f"[bench] round {r + 1}/{args.rounds} done", file=sys.stderr, flush=True)
        finally:
            for w in workers.values():
                w.stdin.close()
                w.wait(timeout=60)
            subprocess.run(["git", "worktree", "remove", "--force", other], cwd=HERE.parent,
                           capture_output=True, check=False)

    out = {"machine": machine, "baseline_commit": commit, "batch": args.batch, "t1": args.t1,
           "rounds": args.rounds, "repeat": args.repeat, "chain_links": args.chain_links}
    for case in args.cases:
        best = {side: min(run[case] for run in runs[side]) for side in runs}
        out[case] = {
            "best_run_s": best,
            "all_best_run_s": {side: [run[case] for run in runs[side]] for side in runs},
            "first_call_s": {side: first[side][case]["first_call_s"] for side in runs},
            "steps": {side: first[side][case]["steps"] for side in runs},
            "change_percent": 100 * (best["this"] / best["baseline"] - 1),
        }
    return finish(out)


if __name__ == "__main__":
    main()
