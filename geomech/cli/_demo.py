"""`geomech demo`: a short tour (holonomic, nonholonomic, W ≠ D, solvers, an ensemble)."""

import time

import jax
import jax.numpy as jnp

import geomech as gm

from . import _run, _setup
from ._compare import solver_agreement


def _fmt_vec(x) -> str:
    return "[" + ", ".join(f"{float(v):.6g}" for v in jnp.ravel(x)) + "]"


def cmd_demo(args, argv) -> int:
    start = time.perf_counter()
    line = lambda text="": print(text, flush=True)
    simulate = lambda setup, y0, t1, points, tol: _run.simulate_once(
        setup, y0, gm.Projection(), t1, points=points, rtol=tol, atol=tol, max_steps=100_000
    )

    line(
        "geomech demo: constrained Lagrangian mechanics in JAX "
        "(thesis: Balseiro, generalized nonholonomic systems)"
    )
    line()
    line("1. Holonomic: a pendulum in Cartesian (x, y), x down, h = x² + y² − l² = 0.")
    pend = _setup.build("pendulum", {})
    sol = simulate(pend, pend.y0, 10.0, 201, 1e-10).sol
    s = _run.summarize(sol)
    end = gm.State(sol.states.q[-1], sol.states.v[-1])
    pull = -gm.constraint_force(pend.system, end) @ end.q / pend.model.l
    line(
        f"   10 s: energy drift {s['max_energy_change']:.2e}, |h| ≤ {s['position_residual']:.2e}, "
        f"|φ| ≤ {s['constraint_residual']:.2e}"
    )
    line(
        f"   rod tension at t = 10: F^c = {float(pull):.10f}, closed form m(|v|² + g x)/l = "
        f"{float(pend.model.tension(end)):.10f}"
    )
    line()
    line("2. Nonholonomic: the Chaplygin sleigh (knife edge), against its closed form.")
    sleigh = _setup.build("sleigh", {})
    y0 = sleigh.model.initial_state(u0=0.5, omega0=1.0)
    sol = simulate(sleigh, y0, 5.0, 201, 1e-10).sol
    u, w = jax.vmap(sleigh.model.body_velocities)(sol.states)
    u_ex, w_ex, _, _ = sleigh.model.closed_form(sol.ts, 0.5, 1.0)
    err = max(float(jnp.max(jnp.abs(u - u_ex))), float(jnp.max(jnp.abs(w - w_ex))))
    line(
        f"   5 s: max |(u, ω) − closed form| = {err:.2e}; "
        f"energy drift {_run.summarize(sol)['max_energy_change']:.2e}"
    )
    line()
    line("3. Generalized nonholonomic (W ≠ D): thesis Example 2, two charges with A(q) q̇¹ = q̇².")
    ex2 = _setup.build("thesis_example2", {})
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
    run = simulate(sleigh, _setup.ensemble(sleigh, batch, 1, scale=0.05), 5.0, 51, 1e-8)
    s = _run.summarize(run.sol)
    line(
        f"   {s['successful']}/{batch} successful; compiled in {run.compile_s:.1f} s, ran in "
        f"{run.run_s:.2f} s ({batch / run.run_s:,.0f} trajectories/s); "
        f"max energy drift {s['max_energy_change']:.1e}"
    )
    line()
    line(
        f"done in {time.perf_counter() - start:.1f} s. Next: `geomech list`, "
        "`geomech run rolling_disk --batch 200 --out out/`, "
        "`geomech compare thesis_example2`."
    )
    return 0
