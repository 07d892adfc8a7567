"""Compile times of the analysis tools on the rolling disk, next to the baseline they
cannot beat: `jax.jacfwd` of `gm.acceleration` over the full state.

`python benchmarks/linearize_compile.py` prints one JSON document: for each case the seconds spent
tracing + lowering to StableHLO and compiling with XLA (`jax.jit(f).lower(x).compile()`), and the
1-minute load average before and after (the machine is shared; times scale with it). `--quick` runs
only the first two cases.
"""

import argparse
import json
import os
import time

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402

import geomech as gm  # noqa: E402
import geomech.models as gmm  # noqa: E402

MINIMAL = dict(coordinates=(3,), speeds=(2, 3), fixed_q=(0, 1, 2, 4), fixed_v=(4,))


def upright(spin, model):
    state = gm.State(jnp.zeros(5), jnp.stack([0.0 * spin, 0.0, 0.0, 0.0, spin]))
    return model.system(), state


def cases():
    model = gmm.RollingDisk(m=jnp.array(1.3), R=jnp.array(0.7), g=jnp.array(9.81))
    system = model.system()
    state = gm.State(jnp.array([0.1, -0.2, 0.4, 0.3, 0.5]), jnp.array([0.0, 0.0, 0.5, -0.2, 4.0]))
    z = jnp.concatenate([state.q, state.v])
    boundary = lambda m: gm.stability_boundary(
        upright, 2.0, m, zero_eigenvalues=1, bracket=(1.0, 10.0), **MINIMAL
    )
    params = jnp.array([1.3, 0.7, 9.81])
    of_params = lambda p: boundary(gmm.RollingDisk(m=p[0], R=p[1], g=p[2]))
    return [
        (
            "baseline: jax.jacfwd(gm.acceleration) over (q, v), 10 directions",
            jax.jacfwd(lambda z: gm.acceleration(system, gm.State(z[:5], z[5:]))),
            z,
        ),
        (
            "gm.linearize, minimal 3x3 (theta; phi_dot, theta_dot)",
            lambda s: gm.linearize(system, s, **MINIMAL).A,
            state,
        ),
        (
            "gm.linearize, full 8x8 (as KanesMethod.linearize)",
            lambda s: gm.linearize(system, s, coordinates=(0, 1, 2, 3, 4), speeds=(2, 3, 4)).A,
            state,
        ),
        (
            "gm.consistent_state (x_dot, y_dot from the rolling constraints)",
            lambda s: gm.consistent_state(system, s, fixed_q=(0, 1, 2, 3, 4), fixed_v=(2, 3, 4)).v,
            state,
        ),
        ("gm.stability_boundary, bisection (critical spin)", of_params, params),
        ("gm.stability_boundary + jax.jacfwd over (m, R, g)", jax.jacfwd(of_params), params),
    ]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="only the first two cases")
    args = parser.parse_args()
    out = {
        "jax": jax.__version__,
        "cpu_count": os.cpu_count(),
        "load_before": os.getloadavg()[0],
        "cases": [],
    }
    for name, f, x in cases()[: 2 if args.quick else None]:
        t0 = time.perf_counter()
        lowered = jax.jit(f).lower(x)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        jax.block_until_ready(compiled(x))
        out["cases"].append(
            {"case": name, "trace_lower_s": round(t1 - t0, 2), "compile_s": round(t2 - t1, 2)}
        )
        print(json.dumps(out["cases"][-1]), flush=True)
    out["load_after"] = os.getloadavg()[0]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
