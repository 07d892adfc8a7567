"""Long-time energy behaviour: the variational integrator against Tsit5, work against precision.

    python benchmarks/variational.py --plot     # >= 1e5 variational steps per model
    python benchmarks/variational.py --quick    # smoke test (~1 min)

For the Cartesian double pendulum (holonomic, RATTLE-type) and the rolling disk (nonholonomic,
discrete Lagrange–d'Alembert) it integrates over t in [0, T] with

- `variational`: `gm.VariationalIntegrator()` (midpoint) at fixed steps `dt`,
- `tsit5-fixed`: `diffrax.Tsit5()` at the same fixed steps, no stabilization,
- `tsit5`: adaptive `diffrax.Tsit5()` at rtol = atol = tol, no stabilization,
- `tsit5-projection`: the same with `stabilization="projection"` (energy is not projected: the
    projection returns the state to C, it does not restore E),

and prints one JSON document with, for every run, the wall time of the (compiled, second) call,
the number of steps, the maximum energy error max|E(t) - E(0)| (over every step of the fixed-step
runs, over 2001 saved times of the adaptive ones), the energy error averaged over the first and
the last tenth of [0, T] (their ratio measures drift: ~1 for a bounded error, ~19 for a linear
drift) and the largest |h| and |phi|. `--plot` writes the figure
`benchmarks/figures/variational.png` (work–precision; energy error against time).
"""

import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see benchmarks/run.py

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout

import diffrax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import geomech as gm  # noqa: E402
import geomech.models as gmm  # noqa: E402

MODELS = {"double_pendulum": gmm.DoublePendulum(), "rolling_disk": gmm.RollingDisk()}
SAVED = 2001


def settings(quick: bool):
    """(T, fixed steps, adaptive tolerances) per model: the smallest dt gives >= 1e5 steps."""
    if quick:
        return {name: (20.0, [0.04, 0.02], [1e-6]) for name in MODELS}
    return {
        "double_pendulum": (1000.0, [0.04, 0.02, 0.01], [1e-6, 1e-8, 1e-10]),
        "rolling_disk": (2000.0, [0.08, 0.04, 0.02], [1e-6, 1e-8, 1e-10]),
    }


def solve(method, system, y0, T, knob, max_steps):
    """Fixed steps save every step (a saved time inside a variational step would cost one more
    step); adaptive runs save `SAVED` times (Tsit5's interpolation is nearly free)."""
    if method in ("variational", "tsit5-fixed"):
        kw = dict(
            saveat=diffrax.SaveAt(t0=True, steps=True),
            max_steps=max_steps,  # one value per model: one compilation for all steps
            dt0=jnp.asarray(knob),
        )
        if method == "variational":
            kw |= dict(integrator=gm.VariationalIntegrator())
        else:
            kw |= dict(stepsize_controller=diffrax.ConstantStepSize())
    else:  # adaptive; tolerances as arrays so that every tolerance reuses one compilation
        tol = jnp.asarray(knob)
        kw = dict(
            saveat=diffrax.SaveAt(ts=jnp.linspace(0.0, T, SAVED)),
            max_steps=2_000_000,
            stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
        )
        if method == "tsit5-projection":
            kw |= dict(stabilization="projection")
    return gm.simulate(system, y0, 0.0, T, **kw)


def measure(method, system, y0, T, knob, max_steps):
    solve(method, system, y0, T, knob, max_steps).energy.block_until_ready()  # compile, first run
    start = time.perf_counter()
    sol = solve(method, system, y0, T, knob, max_steps)
    sol.energy.block_until_ready()
    wall = time.perf_counter() - start
    assert sol.result == diffrax.RESULTS.successful, (method, knob, sol.result)
    ok = np.isfinite(np.asarray(sol.ts))  # SaveAt(steps=True) pads with inf
    t = np.asarray(sol.ts)[ok]
    dE = np.abs(np.asarray(sol.energy - sol.energy[0]))[ok]
    grid = np.linspace(0.0, T, SAVED)  # for the plot: the largest error in each interval
    curve = np.maximum.reduceat(dE, np.searchsorted(t, grid[:-1]))
    return {
        "method": method,
        "knob": knob,
        "wall_s": wall,
        "steps": int(sol.stats["num_steps"]),
        "max_energy_error": float(dE.max()),
        "energy_error_first_tenth": float(dE[(t > 0) & (t <= T / 10)].mean()),
        "energy_error_last_tenth": float(dE[t >= 0.9 * T].mean()),
        "max_position_residual": float(np.max(np.asarray(sol.position_residual)[ok])),
        "max_constraint_residual": float(np.max(np.asarray(sol.constraint_residual)[ok])),
        "energy_error": curve.tolist(),
    }


def plot(out, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    style = {
        "variational": ("C0", "o-"),
        "tsit5-fixed": ("C1", "s--"),
        "tsit5": ("C2", "^-"),
        "tsit5-projection": ("C3", "v-"),
    }
    names = list(out["models"])
    fig, axes = plt.subplots(2, len(names), figsize=(6 * len(names), 8.5), squeeze=False)
    for j, name in enumerate(names):
        model = out["models"][name]
        runs, T = model["runs"], model["T"]
        ax = axes[0, j]
        for method, (color, marker) in style.items():
            rs = [r for r in runs if r["method"] == method]
            ax.loglog(
                [r["wall_s"] for r in rs], [r["max_energy_error"] for r in rs], marker,
                color=color, label=method,
            )  # fmt: skip
        ax.set(xlabel="wall time [s]", ylabel="max |E(t) − E(0)|", title=f"{name}, t ∈ [0, {T:g}]")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
        ax = axes[1, j]
        t = np.linspace(0.0, T, SAVED)[1:]
        for method, (color, _) in style.items():
            rs = [r for r in runs if r["method"] == method]
            best = rs[-1]  # finest step / tightest tolerance
            ax.semilogy(t, np.maximum(best["energy_error"], 1e-17), color=color, lw=0.6,
                        label=f"{method} ({best['knob']:g}, {best['steps']} steps)")  # fmt: skip
        ax.set(xlabel="t", ylabel="|E(t) − E(0)|")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="short horizon, one setting per method")
    p.add_argument("--plot", action="store_true", help="write benchmarks/figures/variational.png")
    args = p.parse_args(argv)
    out = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "load_average_start": os.getloadavg(),
        },
        "models": {},
    }
    for name, (T, dts, tols) in settings(args.quick).items():
        model = MODELS[name]
        system, y0 = model.system(), model.initial_state()
        runs = []
        for method, knobs in (
            ("variational", dts),
            ("tsit5-fixed", dts),
            ("tsit5", tols),
            ("tsit5-projection", tols),
        ):
            for knob in knobs:
                runs.append(measure(method, system, y0, T, knob, round(T / min(dts)) + 2))
                r = runs[-1]
                growth = r["energy_error_last_tenth"] / r["energy_error_first_tenth"]
                print(
                    f"{name:16s} {method:17s} {knob:8.0e} {r['wall_s']:8.2f} s {r['steps']:8d} "
                    f"steps  max|dE| {r['max_energy_error']:.2e}  last/first tenth {growth:.2f}",
                    file=sys.stderr,
                )
        out["models"][name] = {"T": T, "runs": runs}
    out["machine"]["load_average_end"] = os.getloadavg()
    if args.plot:
        plot(out, os.path.join(os.path.dirname(os.path.abspath(__file__)), "figures/variational.png"))
    for model in out["models"].values():  # the curves are in the plot, not in the JSON
        for r in model["runs"]:
            del r["energy_error"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
