"""Compile time of first calls (issue 15, item 3): the rolling disk and a bicycle-sized stand-in.

    python benchmarks/perf_compile.py [--cases disk bicycle] [--no-jacfwd]

Prints, per model, the wall time of the first `gm.acceleration`, the first `gm.simulate`
(t in [0, 1], compile included) and the first `jax.jacfwd` of `gm.acceleration` with respect to
the state, each in a fresh process state for that function (JAX's in-memory caches are cleared
between them; the persistent compilation cache is not used).
"""

import argparse
import os
import time

import jax

jax.config.update("jax_enable_x64", True)
import geomech as gm  # noqa: E402
import geomech.models as gmm  # noqa: E402


def timed(label, fn):
    jax.clear_caches()
    t = time.perf_counter()
    out = jax.block_until_ready(fn())
    dt = time.perf_counter() - t
    print(f"  {label:28s} {dt:7.2f} s", flush=True)
    return dt, out


def measure(name, system, state, jacfwd=True):
    print(f"{name}: (load {os.getloadavg()[0]:.1f})", flush=True)
    timed("first gm.acceleration", lambda: gm.acceleration(system, state))
    timed("first simulate t1=1", lambda: gm.simulate(system, state, 0.0, 1.0).states.q)
    if jacfwd:
        timed(
            "first jacfwd(acceleration)",
            lambda: jax.jacfwd(
                lambda q, v: gm.acceleration(system, gm.State(q, v)), argnums=(0, 1)
            )(state.q, state.v),
        )


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="+", default=["disk", "bicycle"])
    p.add_argument("--no-jacfwd", action="store_true")
    a = p.parse_args()
    if "disk" in a.cases:
        m = gmm.RollingDisk()
        measure("rolling disk", m.system(), m.initial_state(), not a.no_jacfwd)
    if "bicycle" in a.cases:
        from perf_bicycle_model import bicycle_like, initial_state

        t = time.perf_counter()
        system = bicycle_like()
        state = initial_state(system)
        ops = len(jax.make_jaxpr(lambda q, v: system.L(0.0, q, v))(state.q, state.v).jaxpr.eqns)
        print(
            f"(bicycle stand-in built by sympy in {time.perf_counter() - t:.0f} s; "
            f"L has {ops} jaxpr ops)"
        )
        measure("bicycle stand-in", system, state, not a.no_jacfwd)


if __name__ == "__main__":
    main()
