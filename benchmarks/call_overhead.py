"""The fixed cost of one `gm.simulate` call, side by side in one process: the same call of one
trajectory (B = 1) with the pre-trace shape checks kept from the first call (geomech's behaviour)
and with them traced again on every call (as before: `_system._shapes_key` patched to keep
nothing), beside the hand-written right-hand side of `_rigid_hand.py` in `jax.jit`. Each is
timed at `t1` and at a short `t1` (one or two steps), so the fixed cost of a call and the cost of
a step are read apart: per step = (call(t1) - call(short)) / (steps(t1) - steps(short)).

    python benchmarks/call_overhead.py [--models heavy_top suslov rattleback chaplygin_sphere]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_device_argument, check_device, finish, machine_info, preconfigure  # noqa: E402

RTOL = ATOL = 1e-8


def main(argv=None):
    device = preconfigure(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument(
        "--models", nargs="+", default=["heavy_top", "suslov", "rattleback", "chaplygin_sphere"]
    )
    parser.add_argument("--t1", type=float, default=5.0)
    parser.add_argument("--short", type=float, default=1e-3, help="the short end time")
    parser.add_argument("--repeat", type=int, default=30, help="interleaved rounds")
    args = parser.parse_args(argv)
    check_device(device)

    import time

    import _rigid_hand as H
    import diffrax
    import jax
    import numpy as np
    from rigid_bodies import hand_program

    import geomech as gm
    from geomech import _system

    keep = _system._shapes_key

    def geomech_call(system, y0, t1, cached):
        def run():
            _system._shapes_key = keep if cached else (lambda *a: None)
            sol = gm.simulate(
                system, y0, 0.0, t1, rtol=RTOL, atol=ATOL, saveat=diffrax.SaveAt(t1=True),
                throw=False,
            )
            return jax.block_until_ready(sol), int(np.asarray(sol.stats["num_steps"]))

        return run

    def hand_call(rhs, y0, t1):
        f = hand_program(rhs, y0, t1, batched=False)
        return lambda: (out := jax.block_until_ready(f()), int(np.asarray(out[1])))

    out = {"machine": machine_info(), "t1": args.t1, "short": args.short, "models": {}}
    for name in args.models:
        model, hands = H.case(name)
        system = model.system()
        y0 = H.initial_states(name, model, jax.random.PRNGKey(0), None)
        hand = next(iter(hands.values()))
        y0_hand = hand.to_hand(y0)
        calls = {}
        for t1, tag in ((args.t1, "t1"), (args.short, "short")):
            calls[f"checks kept:{tag}"] = geomech_call(system, y0, t1, True)
            calls[f"checks traced:{tag}"] = geomech_call(system, y0, t1, False)
            calls[f"hand:{tag}"] = hand_call(hand.rhs, y0_hand, t1)
        steps = {k: f()[1] for k, f in calls.items()}  # compiles every program
        times = {k: [] for k in calls}
        for _ in range(args.repeat):
            for k, f in calls.items():
                t = time.perf_counter()
                f()
                times[k].append(time.perf_counter() - t)
        res = {}
        for who in ("checks kept", "checks traced", "hand"):
            long, short = f"{who}:t1", f"{who}:short"
            t_long, t_short = min(times[long]), min(times[short])
            res[who] = {
                "call_ms": 1e3 * t_long,
                "steps": steps[long],
                "short_call_ms": 1e3 * t_short,
                "short_steps": steps[short],
                "us_per_step": 1e6 * (t_long - t_short) / max(steps[long] - steps[short], 1),
            }
        res["call_ratio_to_hand"] = {
            w: res[w]["call_ms"] / res["hand"]["call_ms"] for w in ("checks kept", "checks traced")
        }
        res["step_ratio_to_hand"] = res["checks kept"]["us_per_step"] / res["hand"]["us_per_step"]
        out["models"][name] = res
        print(
            f"[bench] {name}: call {res['checks traced']['call_ms']:.2f} -> "
            f"{res['checks kept']['call_ms']:.2f} ms (hand {res['hand']['call_ms']:.2f}), "
            f"per step {res['checks kept']['us_per_step']:.1f} us (hand "
            f"{res['hand']['us_per_step']:.1f})",
            file=sys.stderr,
            flush=True,
        )
    _system._shapes_key = keep
    return finish(out)


if __name__ == "__main__":
    main()
