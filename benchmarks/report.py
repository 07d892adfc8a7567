"""Markdown tables for benchmarks/README.md from the JSON the benchmark scripts print.

    python benchmarks/report.py run=benchmarks/results/run/cpu2.json gradients=benchmarks/results/gradients/cpu2.json \\
        compile=benchmarks/results/compile_time/cpu2.json peer=benchmarks/results/peer/cpu2.json

Each `kind=path` argument names the script whose output the file holds; the tables are printed in
that order, with the machine line of each file.
"""

import json
import sys


def _f(x, digits=3):
    if x is None:
        return "–"
    if isinstance(x, str):
        return x
    if x == 0:
        return "0"
    if abs(x) >= 1e4 or abs(x) < 1e-2:
        return f"{x:.{digits - 1}e}"
    return f"{x:.{digits}g}"


def machine_line(d):
    m = d["machine"]
    return (
        f"Machine: {m['cpu_count']} CPU cores ({m['processor']}), {m['platform']}, JAX {m['jax']} "
        f"({m['backend']}: {m['devices'][0]}), float64. `uptime` at start: "
        f"*{m['uptime_at_start']}*; at end: *{m['uptime_at_end']}*."
    )


def run_tables(d):
    out = [machine_line(d), ""]
    s = d["settings"]
    out.append(
        f"Ensembles over t ∈ [0, {s['t1']:g}], Tsit5, rtol = atol = {s['rtol']:g}; "
        f"budget {s['budget_s']:.0f} s per measurement."
    )
    out += [
        "",
        "| case | B | generic traj/s | hand traj/s | **generic/hand** | steps (mean) "
        "| compile s generic / hand |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, e in d["cases"].items():
        gen, hand = e["generic"], e.get("hand")
        Bs = sorted({*gen["traj_per_s"], *gen["skipped"]}, key=int)
        for B in Bs:
            if B in gen["skipped"]:
                out.append(f"| {name} | {B} | skipped ({gen['skipped'][B]}) | | | | |")
                continue
            h = hand["traj_per_s"].get(B) if hand else None
            r = e["ratio_generic_over_hand"]["traj_per_s"].get(B) if hand else None
            comp = f"{_f(gen.get('compile_s'))} / {_f(hand.get('compile_s')) if hand else '–'}"
            out.append(
                f"| {name} | {B} | {_f(gen['traj_per_s'][B])} | {_f(h)} | "
                f"**{_f(r)}** | {_f(gen['steps_mean'][B])} | {comp} |"
            )
    if "scaling" in d:
        sc = d["scaling"]
        out += [
            "",
            f"Time per step and trajectory, chains, B = {sc['batch']}, t ∈ [0, {sc['t1']:g}]:",
            "",
            "| n = 2N | generic s/step | hand s/step | generic/hand |",
            "|---|---|---|---|",
        ]
        for i, n in enumerate(sc["n"]):
            g = sc["generic"]["s_per_step"][sc["generic"]["n"].index(n)]
            h = sc["hand"]["s_per_step"][sc["hand"]["n"].index(n)]
            out.append(f"| {n} | {_f(g)} | {_f(h)} | {_f(sc['ratio_generic_over_hand'][i])} |")
        for impl in ("generic", "hand"):
            r = sc[impl]
            if "exponent" in r:
                extra = (
                    f", n ≥ 16: **{r['exponent_n_ge_16']:.2f}**" if "exponent_n_ge_16" in r else ""
                )
                out.append(
                    f"\nCost exponent ({impl}, time/step ∝ n^p, n = {r['n'][0]}…{r['n'][-1]}): "
                    f"p = {r['exponent']:.2f}{extra}."
                )
        for k, v in sc["skipped"].items():
            out.append(f"\nSkipped: {k} ({v}).")
    return out


def gradient_tables(d):
    s = d["settings"]
    out = [
        machine_line(d),
        "",
        f"B = {s['B']}, t ∈ [0, {s['t1']:g}], rtol = atol = {s['rtol']:g}, {s['adjoint']}, "
        f"max_steps = {s['max_steps']}; loss {s['loss']}.",
        "",
        "| case | forward s gen / hand | gradient s gen / hand | **grad/fwd generic** "
        "| grad/fwd hand | **generic grad / hand grad** | grad compile s gen / hand "
        "| FD rel. err gen / hand | gen vs hand grad |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, c in d["cases"].items():
        g, h = c["generic"], c["hand"]
        out.append(
            f"| {name} (n={c['n']}) | {_f(g['forward_s'])} / {_f(h['forward_s'])} "
            f"| {_f(g['grad_s'])} / {_f(h['grad_s'])} | **{_f(g['grad_over_forward'])}** "
            f"| {_f(h['grad_over_forward'])} | **{_f(c['generic_over_hand']['grad_s'])}** "
            f"| {_f(g['grad_compile_s'])} / {_f(h['grad_compile_s'])} "
            f"| {_f(g['fd_check']['max_rel_err'])} / {_f(h['fd_check']['max_rel_err'])} "
            f"| {_f(c['grad_rel_diff_generic_hand'])} |"
        )
    return out


def compile_tables(d):
    out = [
        machine_line(d),
        "",
        f"{d['settings']['simulate']}; t1 = {d['settings']['t1']:g}. Seconds; every model in a "
        "fresh process.",
        "",
        "| model | n | k (hol. + nonhol.) | L ops (after CSE) | build | first `acceleration` "
        "| **first `simulate`** | trace + compile of `simulate` | run | **first `jacfwd`** "
        "| trace + compile of jitted `jacfwd` | persistent cache: first `simulate` cold → warm |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in d["models"].items():
        if "error" in r:
            out.append(f"| {name} | error: {r['error'][-200:]!r} |")
            continue
        ops = f"{r['ops']} ({r['ops_after_cse']})" if "ops" in r else "–"
        pc = r.get("persistent_cache", {})
        cache = (
            f"{_f(pc.get('cold_first_simulate_s'))} → {_f(pc.get('warm_first_simulate_s'))}"
            if pc
            else "–"
        )
        out.append(
            f"| {name} | {r['n']} | {r['holonomic']} + {r['nonholonomic']} | {ops} "
            f"| {_f(r['build_s'])} | {_f(r.get('first_acceleration_s'))} "
            f"| **{_f(r['first_simulate_s'])}** "
            f"| {_f(r.get('simulate_trace_s'))} + {_f(r.get('simulate_compile_s'))} "
            f"| {_f(r['simulate_run_s'])} | **{_f(r.get('first_jacfwd_s'))}** "
            f"| {_f(r.get('jacfwd_trace_s'))} + {_f(r.get('jacfwd_compile_s'))} | {cache} |"
        )
    return out


def peer_tables(d):
    s = d["settings"]
    out = [machine_line(d), "", f"MuJoCo {s['mujoco']}; {s['error']}; reference: {s['reference']}."]
    out += ["", "Match of the dynamics (relative to the largest acceleration; final-state error):"]
    for k, m in d["match"].items():
        out.append(
            f"- {k}: MuJoCo qacc vs closed form {_f(m['mujoco_vs_reference_acc'])}, geomech joint "
            f"vs closed form {_f(m['geomech_joint_vs_reference_acc'])}, geomech Cartesian vs "
            f"MuJoCo {_f(m['geomech_cartesian_vs_mujoco_acc'])}; MuJoCo RK4 h = "
            f"{m['trajectory_h']:g} to t = {m['trajectory_t1']:g} vs reference "
            f"{_f(m['mujoco_vs_reference_final_state'])}."
        )
    for st in d["studies"].values():
        out += [
            "",
            f"N = {st['N']} links, B = {st['B']}, t1 = {st['t1']:g} (reference error ≈ "
            f"{_f(st['reference_error_estimate'])}):",
            "",
            "| method | setting | wall s (whole batch) | max error | steps (mean) |",
            "|---|---|---|---|---|",
        ]
        for key, label in (
            ("mujoco", "MuJoCo RK4"),
            ("geomech_cartesian", "geomech Cartesian + constraints, Tsit5"),
            ("geomech_joint", "geomech joint angles, Tsit5"),
            ("sympy_scipy", "SymPy + SciPy DOP853"),
        ):
            if key not in st:
                continue
            for r in st[key]["rows"]:
                setting = f"h = {r['h']:g}" if "h" in r else f"tol = {r['tol']:g}"
                wall = _f(r["wall_s"])
                if key == "sympy_scipy":
                    wall += f" (scaled from {st[key]['timed_batch']})"
                out.append(
                    f"| {label} | {setting} | {wall} | {_f(r['error'])} "
                    f"| {_f(r.get('steps_mean'))} |"
                )
        for x in st.get("skipped", []):
            out.append(f"\nSkipped: {x}.")
    return out


KINDS = {"run": run_tables, "gradients": gradient_tables, "compile": compile_tables}
KINDS["peer"] = peer_tables


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    for arg in argv:
        kind, path = arg.split("=", 1)
        with open(path) as f:
            data = json.load(f)
        print("\n".join(KINDS[kind](data)) + "\n")


if __name__ == "__main__":
    main()
