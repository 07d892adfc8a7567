"""Compile time: first calls of `gm.acceleration`, `gm.simulate` and `jax.jacfwd`, fresh processes.

    python benchmarks/compile_time.py                 # rolling disk and the bicycle (bicycle.py)
    python benchmarks/compile_time.py --quick         # rolling disk, first simulate only
    python benchmarks/compile_time.py --no-cache-effect
    python benchmarks/compile_time.py --xla-flags=--xla_cpu_use_fusion_emitters=false
    python benchmarks/compile_time.py --floor jacfwd     # also plain JAX's jacfwd (5 min, bicycle)

Every model is measured in a fresh Python process (this script started again with `--worker`), so
that "first call" means what it means in a new notebook. In that process, in order:

- `build_s`: building the `LagrangianSystem` (for the bicycle: the SymPy derivation and
  `gm.from_sympy`, whose lambdify dominates);
- `state_s`: a jitted construction of a state on the constraint manifold (not a library cost);
- `first_acceleration_s`: the first `gm.acceleration(system, s0)` (trace + compile + run);
- `first_simulate_s`: the first `gm.simulate(system, s0, 0, t1)` (the issue's "first simulate
  call, compile included"), then `simulate_run_s`, a second identical call;
- after `jax.clear_caches()`: `simulate_trace_s` and `simulate_compile_s`, the two halves of
  `eqx.filter_jit(simulate).lower(system, s0)` and `.compile()` (under a `jit`, so with every
  precondition check in the program: larger than the program of a plain first call, which
  checks a finite $a_R$ only if the integrator stopped a trajectory at its start);
- after `jax.clear_caches()`: `first_jacfwd_s`, the first `jax.jacfwd` of
  $x = (q, v) \\mapsto$ `gm.acceleration(system, State(q, v))` (the linearization a user
  writes), and after another clear `jacfwd_trace_s`/`jacfwd_compile_s` of
  `jax.jit(jax.jacfwd(...))`.

With `--floor simulate` (default) or `--floor jacfwd`, another fresh process times the same first
calls for plain JAX + diffrax on the model's Lagrangian alone (`floor`: no constraints, no
checks, no geomech), the floor of any JAX program that integrates it.

With `--cache-effect` (default on) the first `simulate` call is also timed in two more fresh
processes sharing a new persistent compilation cache directory (`jax_compilation_cache_dir`,
`jax_persistent_cache_min_compile_time_secs = 0`): `cold` fills the cache, `warm` reads it.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

if __name__ == "__main__":
    _common.preconfigure()

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import geomech as gm  # noqa: E402
import geomech.models  # noqa: E402, F401

jax.config.update("jax_enable_x64", True)

MODELS = ("rolling_disk", "bicycle")


def build(model):
    """`(system, jitted state maker, description)` for a model name."""
    if model == "rolling_disk":
        disk = gm.models.RollingDisk()
        info = {"n": 5, "holonomic": 0, "nonholonomic": 2, "description": disk.description}
        return disk.system(), eqx.filter_jit(lambda system: disk.initial_state()), info
    if model == "bicycle":
        import bicycle

        t = time.perf_counter()
        bicycle.bicycle_expressions()
        derive_s = time.perf_counter() - t
        system = bicycle.bicycle()
        info = {"n": 8, "holonomic": 1, "nonholonomic": 4, "sympy_derivation_s": derive_s}
        info.update(bicycle.lagrangian_size())
        info["description"] = "Whipple-type bicycle, benchmark parameters (benchmarks/bicycle.py)"
        state = lambda system: bicycle.upright_state(system, speed=5.0, roll=0.05, steer_rate=0.2)
        return system, eqx.filter_jit(state), info
    raise ValueError(f"unknown model {model!r}; choose from {MODELS}")


def floor_acceleration(system, q, v):
    """Plain JAX, no geomech stages: $M^{-1}(\\partial L/\\partial q - (\\partial^2 L/\\partial v
    \\partial q) v)$ (2.10) of the user's Lagrangian `system.lagrangian(q, v)` (unconstrained)."""
    L = lambda q_, v_: system.lagrangian(q_, v_)
    Lv = jax.grad(L, 1)
    M = jax.jacfwd(Lv, 1)(q, v)
    mixed = jax.jvp(lambda q_: Lv(q_, v), (q,), (v,))[1]
    return jnp.linalg.solve(M, jax.grad(L, 0)(q, v) - mixed)


def floor(system, s0, t1, jacfwd):
    """The same first calls for plain JAX + diffrax on the model's Lagrangian alone: the
    unconstrained Euler–Lagrange right-hand side `floor_acceleration`, no constraints, no checks,
    no geomech. Any JAX program that integrates this Lagrangian contains at least this, so its
    compile time is a floor for geomech's (which adds constraints, projections, per-trajectory
    checks and diagnostics)."""
    acc = floor_acceleration

    def sim(system, q, v):
        f = lambda t, y, args: (y[1], acc(system, *y))
        return diffrax.diffeqsolve(
            diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, t1, None, (q, v), max_steps=100_000,
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
        ).ys

    def jac(system, q, v):
        n = q.shape[0]
        return jax.jacfwd(lambda x: acc(system, x[:n], x[n:]))(jnp.concatenate([q, v]))

    res = {}
    res["floor_first_acceleration_s"], _ = _common.timed(eqx.filter_jit(acc), system, s0.q, s0.v)
    programs = [("simulate", sim)] + ([("jacfwd", jac)] if jacfwd else [])
    for name, fn in programs:
        t = time.perf_counter()
        lowered = eqx.filter_jit(fn).lower(system, s0.q, s0.v)
        res[f"floor_{name}_trace_s"] = time.perf_counter() - t
        t = time.perf_counter()
        lowered.compile()
        res[f"floor_{name}_compile_s"] = time.perf_counter() - t
    return res


def linearization(system, s0):
    """`(acc, x0)`: $x = (q, v) \\mapsto$ `gm.acceleration(system, State(q, v))` and $x_0$ of `s0`."""
    n = s0.q.shape[0]
    return lambda x: gm.acceleration(system, gm.State(x[:n], x[n:])), jnp.concatenate([s0.q, s0.v])


def first_jacfwd(system, s0) -> dict:
    """The first `jax.jacfwd` of the linearization a user writes (`linearization`), then a second
    identical call (so compile ≈ first − second)."""
    acc, x0 = linearization(system, s0)
    res = {}
    res["first_jacfwd_s"], J = _common.timed(jax.jacfwd(acc), x0)
    res["second_jacfwd_s"], _ = _common.timed(jax.jacfwd(acc), x0)
    res["jacfwd_finite"] = bool(jnp.all(jnp.isfinite(J)))
    return res


def worker(model, t1, only, cache_dir):
    if cache_dir:
        jax.config.update("jax_compilation_cache_dir", cache_dir)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    res = {}
    t = time.perf_counter()
    system, make_state, info = build(model)
    res["build_s"] = time.perf_counter() - t
    res.update(info)
    res["state_s"], s0 = _common.timed(make_state, system)
    if only == "jacfwd":  # the first jax.jacfwd alone (benchmarks/rigid_bodies_compile.py)
        res.update(first_jacfwd(system, s0))
        return res
    if only in ("floor", "floor_jacfwd"):
        res.update(floor(system, s0, t1, jacfwd=only == "floor_jacfwd"))
        return res
    saveat = diffrax.SaveAt(t0=True, t1=True)
    simulate = lambda system, s: gm.simulate(system, s, 0.0, t1, saveat=saveat)
    if only == "simulate":
        res["first_simulate_s"], _ = _common.timed(simulate, system, s0)
        return res
    if only != "basic":
        res["first_acceleration_s"], a = _common.timed(gm.acceleration, system, s0)
        stages = gm.assemble(system, s0)
        res["A_a_minus_b"] = float(jnp.max(jnp.abs(stages.A @ a - stages.b)))
    res["first_simulate_s"], sol = _common.timed(simulate, system, s0)
    res["simulate_run_s"], sol = _common.timed(simulate, system, s0)
    res["simulate_successful"] = bool(diffrax.is_successful(sol.result))
    res["relative_energy_drift"] = float(jnp.abs(sol.energy[-1] / sol.energy[0] - 1))
    res["q0"], res["q_final"] = s0.q.tolist(), sol.states.q[-1].tolist()
    if only == "basic":
        return res
    jax.clear_caches()
    f = eqx.filter_jit(simulate)
    t = time.perf_counter()
    lowered = f.lower(system, s0)
    res["simulate_trace_s"] = time.perf_counter() - t
    t = time.perf_counter()
    lowered.compile()
    res["simulate_compile_s"] = time.perf_counter() - t

    jax.clear_caches()
    res.update(first_jacfwd(system, s0))
    acc, x0 = linearization(system, s0)
    jax.clear_caches()
    t = time.perf_counter()
    lowered = jax.jit(jax.jacfwd(acc)).lower(x0)
    res["jacfwd_trace_s"] = time.perf_counter() - t
    t = time.perf_counter()
    lowered.compile()
    res["jacfwd_compile_s"] = time.perf_counter() - t
    return res


def run_worker(model, args, only=None, cache_dir=None):
    """Start this script as a fresh worker process and return its JSON."""
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", model, "--device", args.device]
    cmd += ["--t1", str(args.t1 or (1.0 if args.quick else 10.0))]
    if only:
        cmd += ["--only", only]
    if cache_dir:
        cmd += ["--cache-dir", cache_dir]
    env = dict(os.environ)
    if args.xla_flags:  # e.g. --xla_cpu_use_fusion_emitters=false (docs/performance.md)
        env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + args.xla_flags).strip()
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
    if proc.returncode != 0:
        return {"error": proc.stderr[-3000:]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument(
        "--quick",
        action="store_true",
        help="rolling disk only, t1 = 1, first simulate call only, no cache run",
    )
    p.add_argument("--models", nargs="+", default=None, choices=MODELS)
    p.add_argument("--t1", type=float, default=None, help="end time of the simulations (10)")
    p.add_argument("--cache-effect", action=argparse.BooleanOptionalAction, default=None)
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds per worker process")
    p.add_argument(
        "--xla-flags",
        default="",
        help="XLA_FLAGS for the worker processes, e.g. --xla-flags=--xla_cpu_use_fusion_emitters=false",
    )
    p.add_argument(
        "--floor",
        choices=("none", "simulate", "jacfwd"),
        default="simulate",
        help="also time plain JAX + diffrax on each Lagrangian alone, in another fresh process "
        "(the floor of any JAX program integrating it): its simulate, or also its jacfwd (slow)",
    )
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    p.add_argument("--only", default=None, help=argparse.SUPPRESS)
    p.add_argument("--cache-dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        res = worker(args.worker, args.t1, args.only, args.cache_dir)
        print(json.dumps(res))
        return res
    _common.check_device(args.device)
    models = args.models or (["rolling_disk"] if args.quick else list(MODELS))
    cache_effect = (not args.quick) if args.cache_effect is None else args.cache_effect
    out = {
        "machine": _common.machine_info(),
        "settings": {
            "t1": args.t1 or (1.0 if args.quick else 10.0),
            "simulate": "gm.simulate defaults (Projection, Tsit5, rtol = atol = 1e-8), one state, "
            "saveat t0 and t1",
            "device": args.device,
            "quick": args.quick,
            "xla_flags": args.xla_flags,
            "floor": "plain JAX + diffrax, unconstrained Euler-Lagrange RHS of the same L (2.10), "
            "jnp.linalg.solve, Tsit5, PIDController(1e-8, 1e-8)",
        },
        "models": {},
    }
    for model in models:
        res = run_worker(model, args, "basic" if args.quick else None)
        if cache_effect and "error" not in res:
            with tempfile.TemporaryDirectory(prefix="geomech-jax-cache-") as d:
                cold = run_worker(model, args, "simulate", d)
                warm = run_worker(model, args, "simulate", d)
            res["persistent_cache"] = {
                "cold_first_simulate_s": cold.get("first_simulate_s"),
                "warm_first_simulate_s": warm.get("first_simulate_s"),
            }
        if args.floor != "none" and not args.quick and "error" not in res:
            only = "floor_jacfwd" if args.floor == "jacfwd" else "floor"
            floor_res = run_worker(model, args, only)
            res["floor"] = {k: v for k, v in floor_res.items() if k.startswith("floor_") or k == "error"}
        out["models"][model] = res
        print(f"[bench] {model} done", file=sys.stderr, flush=True)
    return _common.finish(out)


if __name__ == "__main__":
    main()
