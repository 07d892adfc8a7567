"""Rolling rigid bodies on SO(3) × ℝ² (docs/lie_groups.md): the rattleback's first `simulate`
(compile time, in a fresh process), a rattleback ensemble in trajectories per second, and the thin
disk on SO(3) × ℝ² against the Euler-angle `RollingDisk` (time per step, steps taken).

    python benchmarks/rolling_bodies.py                  # B = 1024, t ∈ [0, 10]
    python benchmarks/rolling_bodies.py --batch 8 --t1 1 # quick

The ensemble spins the rattleback at ω₃ ∈ [-5, 5] rad/s (a sweep through the reversal), Tsit5,
`rtol = atol = 1e-8`, saving the final state only. Prints one JSON document with the machine and
its load at start and end.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_device_argument, check_device, finish, machine_info, preconfigure  # noqa: E402


def _wait(x):
    import jax

    return jax.block_until_ready(x)


def rattleback_rows(batch: int, t1: float) -> dict:
    import diffrax
    import jax
    import jax.numpy as jnp

    import geomech as gm
    import geomech.models as gmm

    model = gmm.Rattleback()
    system = model.system()
    start = time.perf_counter()
    one = gm.simulate(system, model.initial_state(), 0.0, t1, saveat=diffrax.SaveAt(t1=True))
    _wait(one.ts)
    first_call = time.perf_counter() - start
    start = time.perf_counter()
    one = gm.simulate(system, model.initial_state(), 0.0, t1, saveat=diffrax.SaveAt(t1=True))
    _wait(one.ts)
    single_run = time.perf_counter() - start

    spins = jnp.linspace(-5.0, 5.0, batch)
    y0 = jax.vmap(lambda w: model.initial_state(omega=jnp.stack([0.0 * w, 0.0 * w, w])))(spins)
    run = lambda: gm.simulate(system, y0, 0.0, t1, saveat=diffrax.SaveAt(t1=True), throw=False)
    start = time.perf_counter()
    sol = run()
    _wait(sol.ts)
    ensemble_first = time.perf_counter() - start
    start = time.perf_counter()
    sol = run()
    _wait(sol.ts)
    ensemble_run = time.perf_counter() - start
    steps = sol.stats["num_steps"]
    return {
        "first_simulate_s": first_call,
        "first_simulate_compile_s": first_call - single_run,
        "single_run_s": single_run,
        "single_steps": int(one.stats["num_steps"]),
        "batch": batch,
        "ensemble_first_call_s": ensemble_first,
        "ensemble_run_s": ensemble_run,
        "trajectories_per_s": batch / ensemble_run,
        "ensemble_steps_mean": float(jnp.mean(steps)),
        "ensemble_steps_max": int(jnp.max(steps)),
        "successful": int(jnp.sum(sol.result == diffrax.RESULTS.successful)),
    }


def disk_rows(t1: float) -> dict:
    """The thin disk on SO(3) × ℝ² against the Euler-angle disk from the same upright rolling
    state, where both apply."""
    import diffrax

    import geomech as gm
    import geomech.models as gmm

    rows = {}
    for name, model in (("euler_angles", gmm.RollingDisk()), ("so3", gmm.RollingDiskSO3())):
        system, y0 = model.system(), model.initial_state()
        run = lambda system=system, y0=y0: gm.simulate(
            system, y0, 0.0, t1, saveat=diffrax.SaveAt(t1=True)
        )
        start = time.perf_counter()
        _wait(run().ts)
        first = time.perf_counter() - start
        times = []
        for _ in range(5):
            start = time.perf_counter()
            sol = run()
            _wait(sol.ts)
            times.append(time.perf_counter() - start)
        steps = int(sol.stats["num_steps"])
        rows[name] = {
            "first_call_s": first,
            "run_s": min(times),
            "steps": steps,
            "time_per_step_us": 1e6 * min(times) / steps,
        }
    return rows


def main(argv=None):
    device = preconfigure(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--batch", type=int, default=1024)
    parser.add_argument("--t1", type=float, default=10.0)
    args = parser.parse_args(argv)
    check_device(device)

    import jax

    jax.config.update("jax_enable_x64", True)
    out = {
        "machine": machine_info(),
        "settings": {"batch": args.batch, "t1": args.t1, "rtol": 1e-8, "atol": 1e-8},
    }
    out["rattleback"] = rattleback_rows(args.batch, args.t1)
    print(f"[bench] rattleback: {out['rattleback']}", file=sys.stderr, flush=True)
    out["disk"] = disk_rows(args.t1)
    return finish(out)


if __name__ == "__main__":
    main()
