"""The `geomech` command: list the models, run and compare simulations, and a short demo.

    geomech list
    geomech run MODEL [--solver NAME] [--batch N] [--t1 T] [--param k=v ...] [--out DIR] [--float32]
    geomech compare MODEL [--states N] [--param k=v ...]
    geomech demo

float64 is enabled unless `--float32`. User errors (unknown model, solver or parameter, a parameter
making $M$ singular or violating (3.19)) exit with status 2 and a one-line message.
"""

import argparse
import inspect
import json
import os
import sys
import time
from collections.abc import Callable, Sequence

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomech as gm

EXIT_USER_ERROR = 2


class UsageError(Exception):
    """A mistake in the command line; reported as one line, without a traceback."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


# -- models, parameters, solvers --------------------------------------------------------------


def _models() -> dict:
    import geomech.models as gmm

    return gmm.MODELS


def _model_class(name: str):
    models = _models()
    if name not in models:
        raise UsageError(
            f"unknown model {name!r}; choose one of: {', '.join(models)} (`geomech list`)."
        )
    return models[name]


def _parameters(cls) -> dict[str, object]:
    """The model's parameters and defaults: the keyword arguments of its constructor with a number,
    string or `None` default (functions such as thesis Example 2's `A(q)` are not settable here)."""
    out = {}
    for name, p in inspect.signature(cls).parameters.items():
        if p.default is None or isinstance(p.default, (bool, int, float, str)):
            out[name] = p.default
    return out


def _parse_value(key, default, raw):
    try:
        if isinstance(default, str):
            return raw
        if isinstance(default, bool):
            return {"true": True, "false": False}[raw.lower()]
        if isinstance(default, int):
            return int(raw)
        if default is None and "," in raw:  # an array parameter, e.g. masses=1,2,3
            return tuple(float(x) for x in raw.split(","))
        return float(raw)
    except (KeyError, ValueError):
        kind = type(default).__name__ if default is not None else "number"
        raise UsageError(f"parameter {key} needs a {kind} value, got {raw!r}.") from None


def _parse_params(cls, items: Sequence[str]) -> dict:
    defaults = _parameters(cls)
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param takes key=value, got {item!r}.")
        if key not in defaults:
            valid = ", ".join(defaults) or "(none)"
            raise UsageError(
                f"model {cls.__name__} has no parameter {key!r}; its parameters are: {valid}."
            )
        out[key] = _parse_value(key, defaults[key], raw)
    return out


def _solver_factories(model) -> dict[str, Callable]:
    """The solvers this installation provides, by command-line name."""
    factories = {"projection": lambda: gm.Projection()}
    optional = {
        "gauss": lambda: gm.Gauss(),
        "gibbs-appell": lambda: gm.GibbsAppell(metric="W"),
        "gibbs-appell-d": lambda: gm.GibbsAppell(metric="D"),
        "kane": lambda: gm.Kane(),
        "multipliers": lambda: gm.Multipliers(),
    }
    needs = {
        "gauss": "Gauss",
        "gibbs-appell": "GibbsAppell",
        "gibbs-appell-d": "GibbsAppell",
        "kane": "Kane",
        "multipliers": "Multipliers",
    }
    factories.update({k: f for k, f in optional.items() if hasattr(gm, needs[k])})
    if hasattr(gm, "NonholonomicMomentum") and callable(getattr(model, "action", None)):
        factories["momentum"] = lambda: gm.NonholonomicMomentum(model.action())
    return factories


def _applicable(system, solver) -> bool:
    return system.known_work is None or type(solver).supports_known_work


@eqx.filter_jit
def _check_matrices(system, state, t):
    """$M$, $A = \\partial\\phi/\\partial v$ and $A M^{-1} C^\\top$ of (3.19), unchecked."""
    st = gm.assemble(system, state, t, checks=False)
    return st.M, st.A, st.A @ st.solve_M(st.C.T)


class _Setup:
    """A model built from the command line, checked at its initial state."""

    def __init__(self, name: str, params: Sequence[str], *, check: bool = True):
        self.name = name
        cls = _model_class(name)
        self.params = _parse_params(cls, params)
        try:
            self.model = cls(**self.params)
            self.system = self.model.system()
            self.y0 = self.model.initial_state()
        except (TypeError, ValueError) as e:
            raise UsageError(
                f"cannot build {name} with {_fmt_params(self.params)}: {_first_line(e)}"
            ) from None
        self.t0 = float(getattr(self.model, "t0", 0.0))
        self.t1 = float(getattr(self.model, "t1", 10.0))
        n = self.y0.q.shape[-1]
        self.labels = list(
            getattr(self.model, "coordinates", None) or [f"q{i + 1}" for i in range(n)]
        )
        self.k = self.system.check_shapes(self.y0, self.t0)
        if check:
            self._check_values()

    def _check_values(self):
        """Regular $L$ (2.6), admissibility (3.7) and (3.19) at the initial state: user errors."""
        what = f"with {_fmt_params(self.params)}" if self.params else "at its defaults"
        y0 = self.y0
        if not (np.all(np.isfinite(y0.q)) and np.all(np.isfinite(y0.v))):
            raise UsageError(
                f"{self.name} {what} has a non-finite initial state: check the parameters."
            )
        M, A, S = (np.asarray(x) for x in _check_matrices(self.system, y0, self.t0))
        eig = np.linalg.eigvalsh(M)
        scale = max(float(np.max(np.abs(eig))), 1.0) if np.all(np.isfinite(eig)) else 1.0
        if not np.all(np.isfinite(eig)) or eig.min() <= 1e-10 * scale:
            raise UsageError(
                f"{self.name} {what}: the mass matrix M = ∂²L/∂v∂v is singular or indefinite "
                f"(smallest eigenvalue {eig.min():.3g}); masses and inertias must be positive."
            )
        if self.k == 0:
            return
        s = np.linalg.svd(A, compute_uv=False)
        if s.min() <= 1e-10 * max(s.max(), 1.0):
            raise UsageError(
                f"{self.name} {what}: the constraints are not admissible, rank ∂φ/∂v < k (3.7)."
            )
        s = np.linalg.svd(S, compute_uv=False)
        if not np.all(np.isfinite(s)) or s.min() <= 1e-10 * max(s.max(), 1.0):
            raise UsageError(
                f"{self.name} {what}: condition (3.19) T_qQ = D ⊕ W^⊥ fails "
                "(A M⁻¹ Cᵀ is singular); "
                "choose other parameters."
            )

    def solver(self, name: str):
        factories = _solver_factories(self.model)
        if name not in factories:
            raise UsageError(f"unknown solver {name!r}; available: {', '.join(factories)}.")
        solver = factories[name]()
        if not _applicable(self.system, solver):
            raise UsageError(
                f"solver {name} does not handle non-ideal constraints with known work (§5.2)."
            )
        return solver

    def ensemble(self, batch: int, seed: int, scale: float = 0.02):
        """`batch` states near the model's, projected onto $\\mathcal{C}$ (first exact)."""
        if batch == 1:
            return self.y0
        kq, kv = jax.random.split(jax.random.PRNGKey(seed))
        n = self.y0.q.shape[-1]
        noise = lambda key: (
            scale * jax.random.normal(key, (batch, n), self.y0.q.dtype).at[0].set(0.0)
        )
        y = gm.State(self.y0.q + noise(kq), self.y0.v + noise(kv))
        return gm.project_to_constraints(self.system, y, self.t0) if self.k else y

    @property
    def dtype(self):
        return self.y0.q.dtype


def _first_line(e: BaseException) -> str:
    text = str(e).strip()
    for line in text.splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line
    return type(e).__name__


def _fmt_params(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the default parameters"


def _fmt_vec(x) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in np.ravel(x)) + "]"


def _table(rows: Sequence[tuple[str, str]]) -> str:
    width = max(len(k) for k, _ in rows)
    return "\n".join(f"  {k.ljust(width)}  {v}" for k, v in rows)


# -- simulation and its summary ---------------------------------------------------------------


def _simulate(setup: _Setup, y0, solver, t1: float, points: int, progress: bool, rtol, atol):
    ts = jnp.linspace(setup.t0, t1, points, dtype=setup.dtype)
    return gm.simulate(
        setup.system,
        y0,
        setup.t0,
        t1,
        solver=solver,
        saveat=diffrax.SaveAt(ts=ts),
        rtol=jnp.asarray(rtol, setup.dtype),
        atol=jnp.asarray(atol, setup.dtype),  # traced: no recompilation
        max_steps=100_000,
        throw=False,
        progress=progress,
    )


def summarize(sol) -> dict:
    """The numbers `geomech run` prints, from a `gm.Solution` (batched or not).

    Energy drift is $\\max_t |E_L(t) - E_L(t_0)|$, the residuals $\\max_t |\\phi|$, $\\max_t |h|$,
    all maximised over the batch; the final state is that of the first trajectory.
    """
    energy = np.atleast_2d(np.asarray(sol.energy))
    ok = np.atleast_1d(np.asarray(sol.result == diffrax.RESULTS.successful))
    ts = np.atleast_2d(np.asarray(sol.ts))
    q, v = np.asarray(sol.states.q), np.asarray(sol.states.v)
    if q.ndim == 2:
        q, v = q[None], v[None]
    # a failed trajectory is padded with inf after the failure: summarize what was computed
    reached = np.isfinite(q).all(-1) & np.isfinite(v).all(-1)
    worst = lambda x: float(np.max(np.where(reached, np.abs(x), 0.0), initial=0.0))
    last = int(np.flatnonzero(reached[0])[-1]) if reached[0].any() else 0
    summary = {
        "trajectories": int(energy.shape[0]),
        "successful": int(ok.sum()),
        "energy_drift": worst(energy - energy[:, :1]),
        "constraint_residual": worst(np.atleast_2d(np.asarray(sol.constraint_residual))),
        "position_residual": worst(np.atleast_2d(np.asarray(sol.position_residual))),
        "final_t": float(ts[0, last]),
        "final_q": q[0, last].tolist(),
        "final_v": v[0, last].tolist(),
    }
    if not ok.all():
        first = int(np.flatnonzero(~ok)[0])
        code = int(np.atleast_1d(np.asarray(sol.result._value))[first])
        summary["failure"] = f"trajectory {first}: {diffrax.RESULTS._index_to_message[code]}"
    return summary


def _write_outputs(out: str, setup: _Setup, sol, summary: dict) -> list[str]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from . import plot

    os.makedirs(out, exist_ok=True)
    written = []
    arrays = {
        "ts": sol.ts,
        "q": sol.states.q,
        "v": sol.states.v,
        "energy": sol.energy,
        "constraint_residual": sol.constraint_residual,
        "position_residual": sol.position_residual,
        "result": np.asarray(sol.result._value),  # diffrax.RESULTS codes, 0 = successful
    }
    path = os.path.join(out, f"{setup.name}.npz")
    np.savez(path, **{k: np.asarray(v) for k, v in arrays.items()}, labels=np.asarray(setup.labels))
    written.append(path)
    if np.ndim(sol.states.q) == 2:
        path = os.path.join(out, f"{setup.name}.csv")
        header = [
            "t",
            *setup.labels,
            *(f"d{c}" for c in setup.labels),
            "energy",
            "constraint_residual",
        ]
        cols = [
            np.asarray(sol.ts)[:, None],
            np.asarray(sol.states.q),
            np.asarray(sol.states.v),
            np.asarray(sol.energy)[:, None],
            np.asarray(sol.constraint_residual)[:, None],
        ]
        np.savetxt(path, np.hstack(cols), delimiter=",", header=",".join(header), comments="")
        written.append(path)
    for kind, draw in (
        ("trajectory", lambda ax: plot.trajectory(sol, labels=setup.labels, ax=ax)),
        ("drift", lambda ax: plot.drift(sol, ax=ax)),
    ):
        fig, ax = plt.subplots(figsize=(6.4, 4.0), constrained_layout=True)
        draw(ax)
        ax.set_title(f"{setup.name}: {kind}")
        path = os.path.join(out, f"{kind}.png")
        fig.savefig(path, dpi=90)
        plt.close(fig)
        written.append(path)
    path = os.path.join(out, "summary.json")
    with open(path, "w") as f:
        json.dump(summary, f, indent=2)
    written.append(path)
    return written


def cmd_run(args) -> int:
    setup = _Setup(args.model, args.param)
    solver = setup.solver(args.solver)
    if args.batch < 1:
        raise UsageError("--batch must be at least 1.")
    t1 = setup.t1 if args.t1 is None else args.t1
    if not t1 > setup.t0:
        raise UsageError(f"--t1 must be after the start time t0 = {setup.t0:g}.")
    f64 = setup.dtype == np.float64
    rtol = args.rtol or (1e-8 if f64 else 1e-5)
    atol = args.atol or (1e-8 if f64 else 1e-5)
    y0 = setup.ensemble(args.batch, args.seed)
    progress = args.progress or (sys.stderr.isatty() and args.batch * (t1 - setup.t0) >= 1000)
    start = time.perf_counter()
    sol = _simulate(setup, y0, solver, t1, args.points, progress, rtol, atol)
    sol.ts.block_until_ready()
    first = time.perf_counter() - start
    start = time.perf_counter()
    sol = _simulate(setup, y0, solver, t1, args.points, progress, rtol, atol)  # compiled
    sol.ts.block_until_ready()
    second = time.perf_counter() - start
    summary = summarize(sol)
    summary.update(
        model=setup.name,
        solver=args.solver,
        parameters=setup.params,
        t0=setup.t0,
        t1=t1,
        dtype=str(setup.dtype),
        wall_time_first=first,
        wall_time=second,
        trajectories_per_second=args.batch / second,
    )
    energy_name = "energy change" if setup.system.time_dependent else "energy drift"
    rows = [
        (
            "model",
            f"{setup.name} ({_fmt_params(setup.params)}), n = {len(setup.labels)}, k = {setup.k}",
        ),
        ("solver", f"{args.solver}, {summary['dtype']}, rtol = {rtol:g}, atol = {atol:g}"),
        (
            "trajectories",
            f"{summary['successful']} / {args.batch} successful, t in [{setup.t0:g}, {t1:g}]",
        ),
        (f"{energy_name} max|E(t) - E(t0)|", f"{summary['energy_drift']:.3e}"),
        ("constraint residual max|phi|", f"{summary['constraint_residual']:.3e}"),
        ("position residual max|h|", f"{summary['position_residual']:.3e}"),
        (
            f"final q at t = {summary['final_t']:g}"
            + (" (trajectory 0)" if args.batch > 1 else ""),
            _fmt_vec(summary["final_q"]),
        ),
        ("final v", _fmt_vec(summary["final_v"])),
        ("wall time (first call, with compilation)", f"{first:.3f} s"),
        ("wall time (compiled)", f"{second:.3f} s"),
        ("trajectories / s (compiled)", f"{summary['trajectories_per_second']:.4g}"),
    ]
    if "failure" in summary:
        rows.append(("failure", summary["failure"]))
    print(_table(rows))
    if args.out:
        for path in _write_outputs(args.out, setup, sol, summary):
            print(f"  wrote {path}")
    return 0 if summary["successful"] == args.batch else 1


# -- compare ----------------------------------------------------------------------------------


@eqx.filter_jit
def _accelerations(system, solver, states, ts):
    return jax.vmap(lambda s, t: gm.acceleration(system, s, solver, t))(states, ts)


def solver_agreement(setup: _Setup, count: int = 32, seed: int = 0, points: int = 50):
    """Every applicable solver at `count` random states on $\\mathcal{C}$ and `points` states along
    one trajectory from the model's initial state.

    **Returns:** `(random, along, t_end)`: per solver, the largest relative disagreement
    $\\max|a - a_{ref}| / (1 + \\max|a_{ref}|)$ with the first solver (Projection) at the random
    and along the trajectory, and the time the trajectory reached.
    """
    solvers = {}
    for name, make in _solver_factories(setup.model).items():
        solver = make()
        if _applicable(setup.system, solver):
            solvers[name] = solver
    random_states = setup.ensemble(count, seed, scale=0.1)
    sol = _simulate(setup, setup.y0, gm.Projection(), setup.t1, points, False, 1e-8, 1e-8)
    # a failed trajectory is padded with inf: keep the shape (one compilation), reached states only
    reached = np.isfinite(np.asarray(sol.ts)) & np.all(np.isfinite(np.asarray(sol.states.q)), -1)
    idx = np.where(reached, np.arange(points), 0)
    states = jax.tree.map(lambda a, b: jnp.concatenate([a, b[idx]]), random_states, sol.states)
    ts = jnp.concatenate([jnp.full((count,), setup.t0, setup.dtype), sol.ts[idx]])
    acc = {
        name: np.asarray(_accelerations(setup.system, solver, states, ts))
        for name, solver in solvers.items()
    }
    ref = acc[next(iter(solvers))]
    disagreement = lambda a, r: float(np.max(np.abs(a - r)) / (1.0 + np.max(np.abs(r))))
    random = {k: disagreement(a[:count], ref[:count]) for k, a in acc.items()}
    along = {k: disagreement(a[count:], ref[count:]) for k, a in acc.items()}
    return random, along, float(np.asarray(sol.ts)[reached][-1])


def cmd_compare(args) -> int:
    setup = _Setup(args.model, args.param)
    if setup.k == 0:
        print(f"{setup.name} has no constraints: every solver is the unconstrained dynamics.")
    random, along, t_end = solver_agreement(setup, args.states, args.seed)
    ref = next(iter(random))
    print(
        f"{setup.name}: max |a - a_{ref}| / (1 + max |a_{ref}|) "
        f"at {args.states} random states on C "
        f"and along one trajectory (t in [{setup.t0:g}, {t_end:g}])"
    )
    width = max(len(s) for s in random)
    print(f"  {'solver'.ljust(width)}  {'random states':>14}  {'trajectory':>12}")
    for name in random:
        print(f"  {name.ljust(width)}  {random[name]:14.3e}  {along[name]:12.3e}")
    worst = max(random, key=lambda s: max(random[s], along[s]))
    largest = max(random[worst], along[worst])
    print(f"  largest disagreement: {largest:.3e} ({worst})")
    return 0 if largest <= args.tol else 1


# -- list -------------------------------------------------------------------------------------


def cmd_list(args) -> int:
    for name, cls in _models().items():
        setup = _Setup(name, [], check=False)
        params = ", ".join(f"{k}={v}" for k, v in _parameters(cls).items())
        kind = "time-dependent, " if setup.system.time_dependent else ""
        ws = ", W ≠ D" if setup.system.work_space is not None else ""
        print(f"{name}: {getattr(cls, 'description', cls.__name__)}")
        print(f"    q = ({', '.join(setup.labels)}); {kind}k = {setup.k} constraints{ws}")
        print(f"    parameters: {params or '(none)'}")
    return 0


# -- demo -------------------------------------------------------------------------------------


def cmd_demo(args) -> int:
    start = time.perf_counter()
    line = lambda text="": print(text, flush=True)

    line(
        "geomech demo: constrained Lagrangian mechanics in JAX "
        "(thesis: Balseiro, generalized nonholonomic systems)"
    )
    line()
    line("1. Holonomic: a pendulum in Cartesian (x, y), x down, h = x² + y² − l² = 0.")
    pend = _Setup("pendulum", [])
    sol = _simulate(pend, pend.y0, gm.Projection(), 10.0, 201, False, 1e-10, 1e-10)
    s = summarize(sol)
    end = gm.State(sol.states.q[-1], sol.states.v[-1])
    pull = -gm.constraint_force(pend.system, end) @ end.q / pend.model.l
    line(
        f"   10 s: energy drift {s['energy_drift']:.2e}, |h| ≤ {s['position_residual']:.2e}, "
        f"|φ| ≤ {s['constraint_residual']:.2e}"
    )
    line(
        f"   rod tension at t = 10: F^c = {float(pull):.10f}, closed form m(|v|² + g x)/l = "
        f"{float(pend.model.tension(end)):.10f}"
    )
    line()
    line("2. Nonholonomic: the Chaplygin sleigh (knife edge), against its closed form.")
    sleigh = _Setup("sleigh", [])
    y0 = sleigh.model.initial_state(u0=0.5, omega0=1.0)
    sol = _simulate(sleigh, y0, gm.Projection(), 5.0, 201, False, 1e-10, 1e-10)
    u, w = jax.vmap(sleigh.model.body_velocities)(sol.states)
    u_ex, w_ex, _, _ = sleigh.model.closed_form(sol.ts, 0.5, 1.0)
    err = max(float(jnp.max(jnp.abs(u - u_ex))), float(jnp.max(jnp.abs(w - w_ex))))
    line(
        f"   5 s: max |(u, ω) − closed form| = {err:.2e}; "
        f"energy drift {summarize(sol)['energy_drift']:.2e}"
    )
    line()
    line("3. Generalized nonholonomic (W ≠ D): thesis Example 2, two charges with A(q) q̇¹ = q̇².")
    ex2 = _Setup("thesis_example2", [])
    random, along, t_end = solver_agreement(ex2)
    line(
        f"   {len(random)} solvers ({', '.join(random)}) "
        "at 32 random states on C and along a trajectory:"
    )
    line(f"   largest disagreement with Projection: {max(*random.values(), *along.values()):.2e}")
    Fc = gm.constraint_force(ex2.system, ex2.y0)
    line(
        f"   constraint force F^c = {_fmt_vec(Fc)}: zero work on W = span(1, −1): "
        f"{float(Fc @ jnp.array([1.0, -1.0])):.1e}; on D it works, so E_L is not conserved."
    )
    line()
    batch = 1000
    line(f"4. An ensemble: {batch} sleighs from nearby initial states, one vmapped, compiled call.")
    ys = sleigh.ensemble(batch, 1, scale=0.05)
    sol = _simulate(sleigh, ys, gm.Projection(), 5.0, 51, False, 1e-8, 1e-8)
    sol.ts.block_until_ready()
    t = time.perf_counter()
    sol = _simulate(sleigh, ys, gm.Projection(), 5.0, 51, False, 1e-8, 1e-8)
    sol.ts.block_until_ready()
    t = time.perf_counter() - t
    s = summarize(sol)
    line(
        f"   {s['successful']}/{batch} successful; "
        f"{batch / t:,.0f} trajectories/s after compilation; "
        f"max energy drift {s['energy_drift']:.1e}"
    )
    line()
    line(
        f"done in {time.perf_counter() - start:.1f} s. Next: `geomech list`, "
        "`geomech run rolling_disk --out out/`, "
        "`geomech compare thesis_example2`."
    )
    return 0


# -- entry point ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="geomech", description="Constrained Lagrangian mechanics in JAX.")
    p.add_argument("--float32", action="store_true", help="use float32 (default float64)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="the models, their coordinates, constraints and parameters")

    params = dict(
        action="append", default=[], metavar="k=v", help="set a model parameter (repeatable)"
    )
    r = sub.add_parser("run", help="simulate a model, print a summary, write plots and data")
    r.add_argument("model")
    r.add_argument("--solver", default="projection")
    r.add_argument("--batch", type=int, default=1, help="number of trajectories (ensemble)")
    r.add_argument("--t1", type=float, default=None, help="end time (default: the model's)")
    r.add_argument("--param", **params)
    r.add_argument("--out", default=None, help="directory for plots (PNG) and data (.npz, .csv)")
    r.add_argument("--points", type=int, default=201, help="saved time points")
    r.add_argument("--rtol", type=float, default=None)
    r.add_argument("--atol", type=float, default=None)
    r.add_argument("--seed", type=int, default=0)
    r.add_argument("--progress", action="store_true", help="show a progress bar")
    r.add_argument("--float32", action="store_true", dest="float32_sub", help=argparse.SUPPRESS)

    c = sub.add_parser("compare", help="every solver side by side, with the largest disagreement")
    c.add_argument("model")
    c.add_argument("--param", **params)
    c.add_argument("--states", type=int, default=32, help="number of random states on C")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument(
        "--tol", type=float, default=1e-8, help="exit 1 if the disagreement exceeds this"
    )
    c.add_argument("--float32", action="store_true", dest="float32_sub", help=argparse.SUPPRESS)

    sub.add_parser("demo", help="a one-minute tour")
    return p


COMMANDS = {"list": cmd_list, "run": cmd_run, "compare": cmd_compare, "demo": cmd_demo}


def main(argv: Sequence[str] | None = None) -> int:
    """Run the `geomech` command with `argv` (default `sys.argv[1:]`); returns the exit status."""
    try:
        args = _parser().parse_args(argv)
        float32 = args.float32 or getattr(args, "float32_sub", False)
        jax.config.update("jax_enable_x64", not float32)
        return COMMANDS[args.command](args)
    except UsageError as e:
        print(f"geomech: error: {e}", file=sys.stderr)
        return EXIT_USER_ERROR
    except (ValueError, TypeError) as e:  # configuration errors raised by geomech before tracing
        print(f"geomech: error: {_first_line(e)}", file=sys.stderr)
        return EXIT_USER_ERROR
    except BrokenPipeError:  # e.g. `geomech list | head`
        return 0
    except KeyboardInterrupt:
        print("geomech: interrupted", file=sys.stderr)
        return 130
