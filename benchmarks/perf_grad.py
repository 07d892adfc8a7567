"""Gradient / forward through an ensemble solve (issue 15, item 2).

    python benchmarks/perf_grad.py [--cases sleigh chain2 chain8] [--B 8] [--t1 10]

For each case: the time of `jax.grad` (with respect to the initial velocities) of a loss of the
final states, over the time of the forward ensemble solve, for

- `generic` and `hand`: the right-hand sides of `benchmarks/run.py` in the same diffrax driver
  (Tsit5, rtol = atol = 1e-8, diffrax's default `RecursiveCheckpointAdjoint`), so that the ratio
  generic-gradient / hand-gradient isolates the right-hand side;
- `simulate`: `gm.simulate` itself (its default adjoint), the path a user takes.

Timed interleaved in one process, best of `--repeat`. Also checks the generic gradient against
central finite differences in one direction.
"""

import argparse
import importlib.util
import os
import pathlib
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import geomech as gm  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent
spec = importlib.util.spec_from_file_location("geomech_bench_run", HERE / "run.py")
run = importlib.util.module_from_spec(spec)
spec.loader.exec_module(run)


def driver(acc, t1):
    def one(model, q0, v0):
        term = diffrax.ODETerm(lambda t, y, m: (y[1], acc(m, t, y[0], y[1])))
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Tsit5(),
            0.0,
            t1,
            None,
            (q0, v0),
            args=model,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8),
            max_steps=16_384,
        )
        return sol.ys[0][-1], sol.ys[1][-1]

    def loss(model, q0, v0):
        qf, vf = jax.vmap(one, in_axes=(None, 0, 0))(model, q0, v0)
        return jnp.mean(jnp.sum(qf**2, -1) + jnp.sum(vf**2, -1))

    fwd = eqx.filter_jit(loss)
    grad = eqx.filter_jit(jax.grad(loss, argnums=2))
    return fwd, grad


def simulate_driver(t1):
    def loss(model, q0, v0):
        sol = gm.simulate(model.system(), gm.State(q0, v0), 0.0, t1, throw=False)
        return jnp.mean(
            jnp.sum(sol.states.q[:, -1] ** 2, -1) + jnp.sum(sol.states.v[:, -1] ** 2, -1)
        )

    return eqx.filter_jit(loss), eqx.filter_jit(jax.grad(loss, argnums=2))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cases", nargs="+", default=["sleigh", "chain2", "chain8"])
    p.add_argument("--B", type=int, default=8)
    p.add_argument("--t1", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--no-simulate", action="store_true")
    a = p.parse_args()
    print(f"load {os.getloadavg()}", flush=True)
    makers = {"sleigh": (run.sleigh_states, run.sleigh_hand)}
    for c in a.cases:
        if c.startswith("chain"):
            makers[c] = (run.chain_states(int(c[5:])), run.chain_hand)
    for name in a.cases:
        make, hand = makers[name]
        model, s = make(jax.random.PRNGKey(0), a.B)
        impls = {"generic": driver(run.generic, a.t1), "hand": driver(hand, a.t1)}
        if not a.no_simulate:
            impls["simulate"] = simulate_driver(a.t1)
        compile_s = {}
        for k, (f, g) in impls.items():
            t = time.perf_counter()
            jax.block_until_ready(f(model, s.q, s.v))
            jax.block_until_ready(g(model, s.q, s.v))
            compile_s[k] = time.perf_counter() - t
        best = {(k, w): float("inf") for k in impls for w in "fg"}
        for _ in range(a.repeat):
            for k, (f, g) in impls.items():
                for w, fn in (("f", f), ("g", g)):
                    t = time.perf_counter()
                    jax.block_until_ready(fn(model, s.q, s.v))
                    best[k, w] = min(best[k, w], time.perf_counter() - t)
        # finite-difference check of the generic gradient in one direction
        f, g = impls["generic"]
        d = jnp.cos(jnp.arange(s.v.size, dtype=s.v.dtype)).reshape(s.v.shape)
        h = 1e-6
        fd = (f(model, s.q, s.v + h * d) - f(model, s.q, s.v - h * d)) / (2 * h)
        ad = jnp.sum(g(model, s.q, s.v) * d)
        line = f"{name:7s} B={a.B} t1={a.t1}:"
        for k in impls:
            line += (
                f" {k}: fwd {best[k, 'f']:.3f}s grad {best[k, 'g']:.3f}s grad/fwd "
                f"{best[k, 'g'] / best[k, 'f']:.2f} (compile {compile_s[k]:.1f}s);"
            )
        line += f" generic grad / hand grad {best['generic', 'g'] / best['hand', 'g']:.2f};"
        line += f" FD rel err {abs(float(ad - fd)) / abs(float(fd)):.1e}"
        print(line, flush=True)
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
