"""Compile time of the rigid bodies, each first call in a fresh process: geomech's first
`gm.simulate` of the rattleback, Chaplygin's ball, the heavy top and Suslov's problem (one
trajectory, t ∈ [0, `--t1`] = [0, 1], Tsit5, rtol = atol = 1e-8, each solver) against the first
call of the hand-written counterpart (`_rigid_hand.py`, `jax.jit` of `diffrax.diffeqsolve`, the
same settings); the SO(3) disk against the Euler-angle disk; and the first
`jax.jacfwd(gm.acceleration)` of the bicycle (`benchmarks/bicycle.py`, measured by
`compile_time.py --worker bicycle --only jacfwd`).

    python benchmarks/rigid_bodies_compile.py                       # everything
    python benchmarks/rigid_bodies_compile.py --solvers projection --no-bicycle

Each worker process builds the model and its initial state, then times the first call (trace,
compile, run) and a second identical call (run only), so compile ≈ first − second. The ratio
geomech / hand uses the hand-written variant with the smaller first call. One JSON document on
stdout, with the machine and its load at start and end.
"""

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402
from rigid_bodies import SOLVER_NAMES  # noqa: E402

CASES = ("rattleback", "chaplygin_sphere", "heavy_top", "suslov")  # _rigid_hand.CASES
HERE = os.path.dirname(os.path.abspath(__file__))


def worker(model_name: str, side: str, t1: float) -> dict:
    """Time the first and the second call of one program (`side`: `geomech:<solver>`,
    `hand:<variant>`, or for the disk `so3:<solver>` / `euler_angles:<solver>`)."""
    import diffrax
    import jax

    jax.config.update("jax_enable_x64", True)
    import _rigid_hand as H
    import rigid_bodies as rb

    import geomech.models as gmm

    kind, variant = side.split(":")
    if model_name == "disk":
        euler, so3 = gmm.RollingDisk(), gmm.RollingDiskSO3()
        model = so3 if kind == "so3" else euler
        y0 = so3.initial_state() if kind == "so3" else euler.initial_state()
        program = rb.geomech_program(model.system(), y0, t1, rb.solvers([variant])[variant])
    else:
        model, hands = H.case(model_name)
        y0 = H.initial_states(model_name, model, None, None)
        if kind == "hand":
            hand = hands[variant]
            program = rb.hand_program(hand.rhs, _common.block(hand.to_hand(y0)), t1, False)
        else:
            program = rb.geomech_program(model.system(), y0, t1, rb.solvers([variant])[variant])
    first, out = _common.timed(program)
    second, out = _common.timed(program)
    steps = out[1] if kind == "hand" else out.stats["num_steps"]
    ok = out[2] if kind == "hand" else out.result == diffrax.RESULTS.successful
    return {
        "first_call_s": first,
        "second_call_s": second,
        "compile_s": first - second,
        "steps": int(steps),
        "successful": bool(ok),
    }


def _spawn(cmd, timeout) -> dict:
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    wall = time.perf_counter() - t
    if proc.returncode != 0:
        return {"error": proc.stderr[-3000:]}
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["process_wall_s"] = wall
    return res


def run_worker(model, side, args) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", model, "--side", side]
    cmd += ["--t1", str(args.t1), "--device", args.device]
    return _spawn(cmd, args.timeout)


def bicycle_jacfwd(args) -> dict:
    """`compile_time.py`'s worker for the bicycle, the first `jax.jacfwd` only."""
    cmd = [sys.executable, os.path.join(HERE, "compile_time.py"), "--worker", "bicycle"]
    cmd += ["--only", "jacfwd", "--device", args.device]
    return _spawn(cmd, args.timeout)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument("--models", nargs="+", choices=CASES, default=list(CASES))
    p.add_argument("--solvers", nargs="+", choices=SOLVER_NAMES, default=list(SOLVER_NAMES))
    p.add_argument("--t1", type=float, default=1.0)
    p.add_argument("--disk", action=argparse.BooleanOptionalAction, default=True,
                   help="the SO(3) disk against the Euler-angle disk (Projection)")
    p.add_argument("--bicycle", action=argparse.BooleanOptionalAction, default=True,
                   help="the first jax.jacfwd(gm.acceleration) of the bicycle")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per worker process")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--side", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        _common.preconfigure(["--device", args.device])
        res = worker(args.worker, args.side, args.t1)
        print(json.dumps(res))
        return res
    _common.preconfigure(["--device", args.device])
    _common.check_device(args.device)
    import _rigid_hand

    assert _rigid_hand.CASES == CASES
    out = {
        "machine": _common.machine_info(),
        "settings": {
            "geomech_commit": _common.git_commit(),
            "t1": args.t1,
            "program": "gm.simulate(system, y0, 0, t1, solver=S, rtol=atol=1e-8, "
            "saveat=SaveAt(t1=True), throw=False), one trajectory; hand: jax.jit of "
            "diffrax.diffeqsolve (Tsit5, PIDController(1e-8, 1e-8)) of _rigid_hand.py",
            "fresh_process_per_program": True,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
        },
        "models": {},
    }
    for name in args.models:
        _, hands = _rigid_hand.case(name)
        row = {"hand": {}, "geomech": {}}
        for v in hands:
            row["hand"][v] = run_worker(name, f"hand:{v}", args)
            print(f"[bench] {name} hand:{v} {row['hand'][v]}", file=sys.stderr, flush=True)
        firsts = {v: r["first_call_s"] for v, r in row["hand"].items() if "error" not in r}
        hand_first = min(firsts.values()) if firsts else float("nan")
        row["hand_first_call_s"] = hand_first
        for s in args.solvers:
            r = run_worker(name, f"geomech:{s}", args)
            if "error" not in r:
                r["first_call_ratio_over_hand"] = r["first_call_s"] / hand_first
            row["geomech"][s] = r
            print(f"[bench] {name} geomech:{s} {r}", file=sys.stderr, flush=True)
        out["models"][name] = row
    if args.disk:
        row = {s: run_worker("disk", f"{s}:projection", args) for s in ("euler_angles", "so3")}
        if not any("error" in r for r in row.values()):
            row["first_call_ratio_so3_over_euler"] = (
                row["so3"]["first_call_s"] / row["euler_angles"]["first_call_s"]
            )
        out["disk_projection"] = row
        print(f"[bench] disk {row}", file=sys.stderr, flush=True)
    if args.bicycle:
        out["bicycle_jacfwd"] = bicycle_jacfwd(args)
        print(f"[bench] bicycle {out['bicycle_jacfwd']}", file=sys.stderr, flush=True)
    return _common.finish(out)


if __name__ == "__main__":
    main()
