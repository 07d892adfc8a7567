"""Rigid bodies at the speed of hand-written code: geomech's `gm.simulate` of the
rattleback, Chaplygin's ball, the heavy top and Suslov's problem against hand-written Newton–Euler
right-hand sides (`_rigid_hand.py`), side by side in one process; and the thin disk on
SO(3) × ℝ² (`gm.models.RollingDiskSO3`) against the Euler-angle disk (`gm.models.RollingDisk`).

    python benchmarks/rigid_bodies.py                        # everything (slow: see README)
    python benchmarks/rigid_bodies.py --quick                # smoke test (the test suite)
    python benchmarks/rigid_bodies.py --models rattleback --batches 1 256 --solvers projection
    python benchmarks/rigid_bodies.py --all-solvers-max-batch 256   # B = 1024: Projection only

Protocol: float64, `diffrax.Tsit5()` with `PIDController(rtol=1e-8, atol=1e-8)` on both sides, t ∈
[0, `--t1`] (5), saving the final state. For every model and batch size B (1: one unbatched
trajectory; otherwise B nearby initial states on the constraint manifold, from the model's
`initial_state` under `jax.vmap`): geomech's `gm.simulate(..., solver=S, throw=False)` for each
solver S (at B = 1 also inside the caller's `jax.jit`, "S (in jit)": the per-step cost without the
front end's checks on the host, about 1 ms a call), and the hand-written right-hand sides
integrated by `diffrax.diffeqsolve` under `jax.jit` (+ `jax.vmap`). Every program is called once
(`first_call_s`, compile included), then rounds call all of them in turn (interleaved) and the
minimum is kept: `--repeat` rounds (5), or fewer, but at least `--min-rounds` (2), once the rounds
of one model and B have taken `--round-budget-s` (no limit by default; `rounds` says how many were
done).

Printed per model and B: for each side the best wall time, mean steps per trajectory and
µs per trajectory-step (wall / (B × mean steps)); for each solver the ratios geomech / best hand
(per trajectory-step and wall), the step-count ratio, the largest difference of the final states
from the best hand-written run (`difference_from_hand_t1`: quaternion sign-aligned, x, ω, by
part), and each side's own error at t1 (`error_t1`) against a reference solution (the hand
right-hand side at rtol = atol = `--reference-tol`, 1e-12), which says whether a difference
between the two sides is the tolerance's or a bug's. The disk: µs per trajectory-step of each
solver on both configuration spaces, and the largest difference of the final states (the
Euler-angle run mapped by `RollingDiskSO3.from_euler`). One JSON document on stdout (with a
Markdown `table`), with the machine and its load at start and end.
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_device_argument,
    block,
    check_device,
    finish,
    git_commit,
    machine_info,
    preconfigure,
    timed,
)

SOLVER_NAMES = ("projection", "gauss", "gibbs_appell_W", "gibbs_appell_D", "kane", "multipliers")
RTOL = ATOL = 1e-8


def solvers(names):
    import geomech as gm

    make = {
        "projection": gm.Projection,
        "gauss": gm.Gauss,
        "gibbs_appell_W": lambda: gm.GibbsAppell(metric="W"),
        "gibbs_appell_D": lambda: gm.GibbsAppell(metric="D"),
        "kane": gm.Kane,
        "multipliers": gm.Multipliers,
    }
    return {name: make[name]() for name in names}


def _final(states):
    """The last saved state of a `Solution.states` (time axis second to last in every leaf)."""
    import jax

    return jax.tree_util.tree_map(lambda a: a[..., -1, :], states)


def geomech_program(system, y0, t1, solver, within_jit=False):
    """A call of `gm.simulate` as a user writes it (geomech compiles it on the first call); with
    `within_jit`, the same call inside the caller's `jax.jit` (as in a jitted loss), without the
    front end's checks on the host at every call."""
    import diffrax
    import jax

    import geomech as gm

    simulate = lambda y0: gm.simulate(
        system, y0, 0.0, t1, solver=solver, rtol=RTOL, atol=ATOL,
        saveat=diffrax.SaveAt(t1=True), throw=False,
    )
    if within_jit:
        simulate = jax.jit(simulate)
    return lambda: block(simulate(y0))


def hand_program(rhs, y0, t1, batched, tol=RTOL):
    """The same integration of a hand-written right-hand side, `jax.jit` (+ `jax.vmap`)."""
    import diffrax
    import jax

    def solve(y):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(rhs), diffrax.Tsit5(), 0.0, t1, None, y,
            saveat=diffrax.SaveAt(t1=True), max_steps=1_000_000, throw=False,
            stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
        )
        return sol.ys[-1], sol.stats["num_steps"], sol.result == diffrax.RESULTS.successful

    f = jax.jit(jax.vmap(solve) if batched else solve)
    return lambda: f(y0)


def interleaved(programs: dict, repeat: int, min_rounds: int, budget_s: float | None) -> dict:
    """First call of every program, then rounds calling each in turn: `repeat` rounds, or fewer
    (at least `min_rounds`) once the rounds have taken `budget_s` seconds. `{name: (first_s,
    [run_s, ...], last output)}`."""
    res = {}
    for name, run in programs.items():
        first, out = timed(run)
        res[name] = (first, [], out)
        print(f"[bench]   {name}: first call {first:.2f} s", file=sys.stderr, flush=True)
    start = time.perf_counter()
    for k in range(repeat):
        if k >= min_rounds and budget_s is not None and time.perf_counter() - start > budget_s:
            break
        for name, run in programs.items():
            dt, out = timed(run)
            res[name] = (res[name][0], res[name][1] + [dt], out)
    return res


def _figures(first, runs, steps, batch, successful):
    import numpy as np

    best = min(runs)
    steps_mean = float(np.mean(np.asarray(steps)))
    return {
        "first_call_s": first,
        "best_s": best,
        "runs_s": runs,
        "steps_mean": steps_mean,
        "steps_max": int(np.max(np.asarray(steps))),
        "us_per_trajectory_step": 1e6 * best / (batch * steps_mean),
        "successful": int(np.sum(np.asarray(successful))),
    }


def _to_hand(to_hand, states, batched):
    import jax

    return jax.vmap(to_hand)(states) if batched else to_hand(states)


def model_rows(name, batch, solver_names, t1, timing, key, reference_tol):
    """The figures of one model at one batch size (module docstring)."""
    import _rigid_hand as H
    import diffrax

    model, hands = H.case(name)
    system = model.system()
    batched = batch > 1
    y0 = H.initial_states(name, model, key, batch if batched else None)
    first_hand = next(iter(hands.values()))
    y0_hand = _to_hand(first_hand.to_hand, y0, batched)
    programs = {f"hand:{v}": hand_program(h.rhs, y0_hand, t1, batched) for v, h in hands.items()}
    for s, solver in solvers(solver_names).items():
        programs[f"geomech:{s}"] = geomech_program(system, y0, t1, solver)
        if not batched:  # one trajectory: the front end's fixed cost per call shows; without it
            programs[f"geomech-jit:{s}"] = geomech_program(system, y0, t1, solver, within_jit=True)
    res = interleaved(programs, **timing)

    out = {"B": batch, "rounds": len(res[next(iter(programs))][1]), "hand": {}, "geomech": {}}
    if reference_tol:
        y_ref, steps_ref, _ = block(hand_program(first_hand.rhs, y0_hand, t1, batched, reference_tol)())
        out["reference"] = {"rtol = atol": reference_tol, "steps_mean": float(steps_ref.mean())}
    for v in hands:
        first, runs, (y1, steps, ok) = res[f"hand:{v}"]
        out["hand"][v] = _figures(first, runs, steps, batch, ok)
        if reference_tol:
            out["hand"][v]["error_t1"] = H.state_differences(y1, y_ref)
    best = min(hands, key=lambda v: out["hand"][v]["best_s"])
    out["hand_best"] = best
    hand, y1_best = out["hand"][best], res[f"hand:{best}"][2][0]
    for v in hands:
        out["hand"][v]["difference_from_best_t1"] = H.state_differences(res[f"hand:{v}"][2][0], y1_best)
    labels = {s: f"geomech:{s}" for s in solver_names}
    if not batched:
        labels |= {f"{s} (in jit)": f"geomech-jit:{s}" for s in solver_names}
    for s, program in labels.items():
        first, runs, sol = res[program]
        ok = sol.result == diffrax.RESULTS.successful
        row = _figures(first, runs, sol.stats["num_steps"], batch, ok)
        y1 = _to_hand(first_hand.to_hand, _final(sol.states), batched)
        row["steps_ratio_geomech_over_hand"] = row["steps_mean"] / hand["steps_mean"]
        row["ratio_per_step"] = row["us_per_trajectory_step"] / hand["us_per_trajectory_step"]
        row["ratio_wall"] = row["best_s"] / hand["best_s"]
        row["difference_from_hand_t1"] = H.state_differences(y1, y1_best)
        if reference_tol:
            row["error_t1"] = H.state_differences(y1, y_ref)
        out["geomech"][s] = row
    return out


def disk_rows(batch, solver_names, t1, timing, key):
    """`RollingDiskSO3` against `RollingDisk` (Euler angles), each solver, from the same states."""
    import diffrax
    import jax
    import jax.numpy as jnp
    from _rigid_hand import state_differences

    import geomech.models as gmm

    euler, so3 = gmm.RollingDisk(), gmm.RollingDiskSO3()
    batched = batch > 1
    nominal = jnp.array([0.1, 0.5, 0.0, 5.0])  # lean, yaw rate, lean rate, spin rate (defaults)
    spread = jnp.array([[1.0, 1.0, 0.0, 1.0]])
    p = nominal[None] + 0.02 * jax.random.normal(key, (batch, 4)) * spread
    make = lambda p: euler.initial_state(lean=p[0], yaw_rate=p[1], lean_rate=p[2], spin_rate=p[3])
    y_euler = jax.vmap(make)(p) if batched else make(nominal)
    y_so3 = jax.vmap(so3.from_euler)(y_euler) if batched else so3.from_euler(y_euler)
    sides = {"euler_angles": (euler.system(), y_euler), "so3": (so3.system(), y_so3)}
    programs = {
        f"{side}:{s}": geomech_program(system, y0, t1, solver)
        for s, solver in solvers(solver_names).items()
        for side, (system, y0) in sides.items()
    }
    res = interleaved(programs, **timing)

    def flat(state):  # (wxyz, x, v) of the SO(3) disk
        R, x = state.q
        return jnp.concatenate([R.wxyz, x, state.v], -1)

    out = {"B": batch, "rounds": len(res[next(iter(programs))][1]), "solvers": {}}
    for s in solver_names:
        row = {}
        for side in sides:
            first, runs, sol = res[f"{side}:{s}"]
            ok = sol.result == diffrax.RESULTS.successful
            row[side] = _figures(first, runs, sol.stats["num_steps"], batch, ok)
        a, b = row["so3"], row["euler_angles"]
        row["ratio_per_step_so3_over_euler"] = a["us_per_trajectory_step"] / b["us_per_trajectory_step"]
        row["ratio_wall_so3_over_euler"] = a["best_s"] / b["best_s"]
        row["steps_ratio_so3_over_euler"] = a["steps_mean"] / b["steps_mean"]
        end_euler = _final(res[f"euler_angles:{s}"][2].states)
        mapped = jax.vmap(so3.from_euler)(end_euler) if batched else so3.from_euler(end_euler)
        end_so3 = _final(res[f"so3:{s}"][2].states)
        row["difference_t1"] = state_differences(flat(end_so3), flat(mapped))
        out["solvers"][s] = row
    return out


def summary(out) -> list[str]:
    """Markdown table rows of the results (also printed to stderr)."""
    lines = [
        "| model | B | solver | geomech µs/step | hand µs/step | ratio | steps geomech / hand | "
        "rounds | geomech − hand at t1 | error at t1 geomech / hand |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, rows in out["models"].items():
        for r in rows:
            h = r["hand"][r["hand_best"]]
            for s, g in r["geomech"].items():
                err = (
                    f"{g['error_t1']['all']:.1e} / {h['error_t1']['all']:.1e}" if "error_t1" in g
                    else "–"
                )
                lines.append(
                    f"| {name} | {r['B']} | {s} | {g['us_per_trajectory_step']:.3g} | "
                    f"{h['us_per_trajectory_step']:.3g} ({r['hand_best']}) | "
                    f"{g['ratio_per_step']:.2f} | {g['steps_mean']:.0f} / {h['steps_mean']:.0f} | "
                    f"{r['rounds']} | {g['difference_from_hand_t1']['all']:.1e} | {err} |"
                )
    for r in out.get("disk", []):
        for s, g in r["solvers"].items():
            lines.append(
                f"| disk SO(3)×ℝ² / Euler angles | {r['B']} | {s} | "
                f"{g['so3']['us_per_trajectory_step']:.3g} | "
                f"{g['euler_angles']['us_per_trajectory_step']:.3g} (Euler-angle disk) | "
                f"{g['ratio_per_step_so3_over_euler']:.2f} | "
                f"{g['so3']['steps_mean']:.0f} / {g['euler_angles']['steps_mean']:.0f} | "
                f"{r['rounds']} | {g['difference_t1']['all']:.1e} | – |"
            )
    return lines


def main(argv=None):
    device = preconfigure(argv)
    import _rigid_hand

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument(
        "--quick", action="store_true",
        help="smoke test: the rattleback, B = 2, t1 = 0.1, Projection, one round, no disk",
    )
    parser.add_argument("--models", nargs="+", choices=_rigid_hand.CASES, default=None)
    parser.add_argument("--batches", nargs="+", type=int, default=None, help="(1 256 1024)")
    parser.add_argument("--solvers", nargs="+", choices=SOLVER_NAMES, default=None)
    parser.add_argument("--all-solvers-max-batch", type=int, default=None,
                        help="above this B, Projection only (default: every B all solvers)")
    parser.add_argument("--disk-batches", nargs="*", type=int, default=None,
                        help="batch sizes of the disk comparison (1 256; none with --quick)")
    parser.add_argument("--t1", type=float, default=None, help="end time (5; 0.1 with --quick)")
    parser.add_argument("--repeat", type=int, default=None, help="interleaved rounds (5)")
    parser.add_argument("--min-rounds", type=int, default=2,
                        help="rounds done even past --round-budget-s (2)")
    parser.add_argument("--round-budget-s", type=float, default=None,
                        help="no new round after this many seconds of rounds for one model and "
                        "B, once --min-rounds are done (default: no limit)")
    parser.add_argument("--disk-all-solvers-max-batch", type=int, default=1,
                        help="disk: above this B, Projection only (1)")
    parser.add_argument("--reference-tol", type=float, default=None,
                        help="rtol = atol of the reference solution (hand-written, Tsit5) that "
                        "both sides' final states are compared with (1e-12; 0: none)")
    args = parser.parse_args(argv)
    check_device(device)

    import jax

    jax.config.update("jax_enable_x64", True)
    quick = args.quick
    models = args.models or (["rattleback"] if quick else list(_rigid_hand.CASES))
    batches = args.batches or ([2] if quick else [1, 256, 1024])
    names = args.solvers or (["projection"] if quick else list(SOLVER_NAMES))
    disk_batches = args.disk_batches if args.disk_batches is not None else ([] if quick else [1, 256])
    t1 = args.t1 or (0.1 if quick else 5.0)
    repeat = args.repeat or (1 if quick else 5)
    reference_tol = args.reference_tol if args.reference_tol is not None else (0 if quick else 1e-12)
    timing = {"repeat": repeat, "min_rounds": min(args.min_rounds, repeat),
              "budget_s": args.round_budget_s}

    def names_at(batch, limit):
        if limit is not None and batch > limit:
            return [s for s in names if s == "projection"] or names[:1]
        return names

    out = {
        "machine": machine_info(),
        "settings": {
            "geomech_commit": git_commit(),
            "integrator": "diffrax.Tsit5", "rtol": RTOL, "atol": ATOL, "t1": t1,
            "repeat": repeat, "min_rounds": timing["min_rounds"],
            "round_budget_s": args.round_budget_s, "quick": quick, "batches": batches,
            "solvers": names, "all_solvers_max_batch": args.all_solvers_max_batch,
            "disk_batches": disk_batches,
            "disk_all_solvers_max_batch": args.disk_all_solvers_max_batch,
            "reference_tol": reference_tol,
            "timing": "minimum of `repeat` interleaved calls after a first (compiling) call",
            "us_per_trajectory_step": "best wall / (B x mean steps per trajectory)",
        },
        "models": {},
    }
    key = jax.random.PRNGKey(0)
    start = time.perf_counter()
    for name in models:
        out["models"][name] = []
        for batch in batches:
            print(f"[bench] {name} B={batch}", file=sys.stderr, flush=True)
            row = model_rows(
                name, batch, names_at(batch, args.all_solvers_max_batch), t1, timing, key,
                reference_tol,
            )
            out["models"][name].append(row)
    if disk_batches:
        out["disk"] = []
        for batch in disk_batches:
            print(f"[bench] disk B={batch}", file=sys.stderr, flush=True)
            solver_names = names_at(batch, args.disk_all_solvers_max_batch)
            out["disk"].append(disk_rows(batch, solver_names, t1, timing, key))
    out["wall_s"] = time.perf_counter() - start
    out["table"] = summary(out)
    print("\n".join(out["table"]), file=sys.stderr, flush=True)
    return finish(out)


if __name__ == "__main__":
    main()
