"""`geomech run`: one simulation, compiled ahead of time so that compile and run time are
reported separately from a single execution (`--repeat N` runs the compiled simulation again)."""

import dataclasses
import sys
import time
import warnings

import diffrax
import equinox as eqx
import jax
import numpy as np

import geomech as gm

from .. import _cache
from ..plot import point_array
from . import _output, _setup
from ._parse import EXIT_FAILED

# the codes of `diffrax.RESULTS` a trajectory of `gm.simulate` can end with, by name
RESULT_NAMES = (
    "successful",
    "max_steps_reached",
    "dt_min_reached",
    "nonfinite",
    "event_occurred",
    "max_steps_rejected",
    "internal_error",
)


@dataclasses.dataclass
class Timed:
    """A solution with the time it took to compile and to run (and to run again, `--repeat`)."""

    sol: gm.Solution
    compile_s: float
    run_s: float
    repeat_s: list[float]


def _solve(system, y0, ts, solver, rtol, atol, max_steps, progress):
    return gm.simulate(
        system,
        y0,
        ts[0],
        ts[-1],
        solver=solver,
        saveat=diffrax.SaveAt(ts=ts),
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        throw=False,
        progress=progress,
        max_output_bytes=None,  # bounded by the command itself (--max-output-mb)
    )


def execute(compiled, *args):
    """Run a compiled simulation and wait for its result."""
    sol = compiled(*args)
    sol.ts.block_until_ready()
    return sol


def simulate_once(
    setup, y0, solver, t1, *, points, rtol, atol, max_steps, progress=False, repeat=0
):
    """Lower and compile the simulation ahead of time, then execute it once (and `repeat` more
    times). `gm.simulate` is traced exactly once."""
    # the saved times are a constant of the program: diffrax checks them while tracing, so the
    # program has no host callback and JAX's persistent compilation cache can keep it
    ts = np.linspace(setup.t0, t1, points, dtype=setup.dtype)

    @eqx.filter_jit
    def fn(system, y0, solver, rtol, atol, max_steps, progress):
        return _solve(system, y0, ts, solver, rtol, atol, max_steps, progress)

    args = (setup.system, y0, solver, rtol, atol, max_steps, progress)
    start = time.perf_counter()
    compiled = fn.lower(*args).compile()
    compile_s = time.perf_counter() - start
    start = time.perf_counter()
    sol = execute(compiled, *args)
    run_s = time.perf_counter() - start
    repeat_s = []
    for _ in range(repeat):
        start = time.perf_counter()
        execute(compiled, *args)
        repeat_s.append(time.perf_counter() - start)
    return Timed(sol, compile_s, run_s, repeat_s)


def result_names(sol) -> list[str]:
    """The name of each trajectory's `diffrax.RESULTS` code (public API: comparisons)."""
    names = np.full(np.shape(sol.result == diffrax.RESULTS.successful), "other", dtype=object)
    for name in RESULT_NAMES:
        names[np.asarray(sol.result == getattr(diffrax.RESULTS, name))] = name
    return list(np.atleast_1d(names))


def summarize(sol) -> dict:
    """The numbers `geomech run` prints, from a `gm.Solution` (batched or not).

    The energy change is $\\max_t |E_L(t) - E_L(t_0)|$, the residuals $\\max_t |\\phi|$,
    $\\max_t |h|$, all maximised over the batch and over the states reached; the final state is
    that of trajectory 0.
    """
    energy = np.atleast_2d(np.asarray(sol.energy))
    ts = np.atleast_2d(np.asarray(sol.ts))
    q, v = point_array(sol.states.q), np.asarray(sol.states.v)
    if q.ndim == 2:
        q, v = q[None], v[None]
    names = result_names(sol)
    # a failed trajectory is padded with inf after the failure: summarize what was computed
    reached = np.isfinite(q).all(-1) & np.isfinite(v).all(-1)
    worst = lambda x: float(np.max(np.where(reached, np.abs(x), 0.0), initial=0.0))
    last = int(np.flatnonzero(reached[0])[-1]) if reached[0].any() else 0
    failures: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        if name != "successful":
            failures.setdefault(name, []).append(i)
    summary = {
        "trajectories": int(energy.shape[0]),
        "successful": names.count("successful"),
        "failures": failures,
        "max_energy_change": worst(energy - energy[:, :1]),
        "constraint_residual": worst(np.atleast_2d(np.asarray(sol.constraint_residual))),
        "position_residual": worst(np.atleast_2d(np.asarray(sol.position_residual))),
        "final_t": float(ts[0, last]),
        "final_q": q[0, last].tolist(),
        "final_v": v[0, last].tolist(),
    }
    if failures:
        first = next(iter(failures.values()))[0]
        result = sol.result
        if np.ndim(np.asarray(sol.ts)) == 2:
            result = jax.tree.map(lambda x: x[first], result)
        summary["failure"] = f"trajectory {first}: {diffrax.RESULTS[result]}"
    return summary


def _fmt_vec(x) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in np.ravel(x)) + "]"


def table(rows) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


def precision_name(dtype) -> str:
    return "float64 (x64 enabled)" if dtype == np.float64 else "float32 (--float32)"


def warning_lines(caught, f64: bool) -> list[str]:
    """One line per distinct warning; a `gm.PrecisionWarning` with the command's remedy (in
    float64 only the tolerances can be raised)."""
    lines = []
    for w in caught:
        line = str(w.message)
        if issubclass(w.category, gm.PrecisionWarning):
            fix = "raise --rtol and --atol" if f64 else "drop --float32, or raise --rtol and --atol"
            line = f"{line} (here: {fix})"
        if line not in lines:
            lines.append(line)
    return lines


def cache_row(cache_dir, before: dict) -> tuple[str, dict]:
    """The compilation cache's share of the programs compiled since the counts `before`, and its
    problems (damaged entries replaced, programs it could not keep; each also one warning)."""
    now = _cache.cache_counts()
    delta = {k: now[k] - before[k] for k in now}
    record = {"dir": None if cache_dir is None else str(cache_dir), "programs": delta["requests"]}
    if cache_dir is None:
        return "off", record
    record.update(from_cache=delta["hits"], damaged=delta["damaged"], not_kept=delta["unwritable"])
    text = f"{delta['hits']} of {delta['requests']} compiled programs loaded from {cache_dir}"
    problems = [
        f"{delta['damaged']} damaged entries compiled again" if delta["damaged"] else "",
        f"{delta['unwritable']} programs not kept: cannot write" if delta["unwritable"] else "",
    ]
    problems = [p for p in problems if p]
    return text + (f" ({'; '.join(problems)})" if problems else ""), record


def cmd_run(args, argv) -> int:
    before = _cache.cache_counts()
    setup = _setup.build(args.model, args.params)
    solver = _setup.solver(setup, args.solver)
    t1 = setup.model.t1 if args.t1 is None else args.t1  # after t0: checked by `cli._check`
    f64 = setup.dtype == np.float64
    rtol = args.rtol or (1e-8 if f64 else 1e-5)
    atol = args.atol or (1e-8 if f64 else 1e-5)
    _output.check_size(setup, args.batch, args.points, args.out, args.max_output_mb)
    y0 = _setup.ensemble(setup, args.batch, args.seed)
    progress = args.progress or (sys.stderr.isatty() and args.batch * (t1 - setup.t0) >= 1000)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", gm.PrecisionWarning)
        run = simulate_once(
            setup,
            y0,
            solver,
            t1,
            points=args.points,
            rtol=rtol,
            atol=atol,
            max_steps=args.max_steps,
            progress=progress,
            repeat=args.repeat,
        )
    for line in warning_lines(caught, f64):
        print(f"geomech: warning: {line}", file=sys.stderr)
    sol, conserved = run.sol, _setup.conserves_energy(setup)
    cache_text, cache_record = cache_row(args.cache_dir, before)
    summary = summarize(sol)
    steady = min(run.repeat_s) if run.repeat_s else None
    summary.update(
        model=setup.name,
        parameters=setup.params,
        solver=args.solver,
        precision=precision_name(setup.dtype),
        rtol=rtol,
        atol=atol,
        max_steps=args.max_steps,
        t0=setup.t0,
        t1=t1,
        points=args.points,
        energy_conserved=conserved,
        compile_s=run.compile_s,
        run_s=run.run_s,
        repeat_run_s=run.repeat_s,
        trajectories_per_second=args.batch / (steady or run.run_s),
        compilation_cache=cache_record,
    )
    energy = "energy drift" if conserved else "energy change (moving constraints or forces)"
    batch = args.batch
    rows = [
        (
            "model",
            f"{setup.name} ({_setup.fmt_params(setup.params)}), n = {setup.n}, k = {setup.k}",
        ),
        (
            "solver",
            f"{args.solver}, rtol = {rtol:g}, atol = {atol:g}, max_steps = {args.max_steps}",
        ),
        ("precision", summary["precision"]),
        (
            "trajectories",
            f"{summary['successful']} / {batch} successful, t in [{setup.t0:g}, {t1:g}]",
        ),
        (f"{energy} max|E(t) - E(t0)|", f"{summary['max_energy_change']:.3e}"),
        ("constraint residual max|phi|", f"{summary['constraint_residual']:.3e}"),
        ("position residual max|h|", f"{summary['position_residual']:.3e}"),
        (
            f"final q at t = {summary['final_t']:g}" + (" (trajectory 0)" if batch > 1 else ""),
            _fmt_vec(summary["final_q"]),
        ),
        ("final v", _fmt_vec(summary["final_v"])),
        ("compile time (trace, lower, compile)", f"{run.compile_s:.3f} s"),
        ("compilation cache", cache_text),
        ("run time (one execution)", f"{run.run_s:.3f} s"),
    ]
    if run.repeat_s:
        rows.append(
            (
                f"run time, {len(run.repeat_s)} repeats",
                f"min {min(run.repeat_s):.3f} s, median {float(np.median(run.repeat_s)):.3f} s",
            )
        )
    rate = "steady state, min of repeats" if steady else "one execution"
    rows.append((f"trajectories / s ({rate})", f"{summary['trajectories_per_second']:.4g}"))
    if "failure" in summary:
        rows.append(("failure", summary["failure"]))
    print(table(rows))
    if args.out:
        for line in _output.write(
            args.out_dir,
            setup,
            sol,
            summary,
            argv,
            results=result_names(sol),
            energy_conserved=conserved,
            animate=args.animate,
        ):
            print(f"  {line}")
    return 0 if summary["successful"] == batch else EXIT_FAILED
