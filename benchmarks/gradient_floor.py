r"""Gradient/forward of plain diffrax on the cheapest right-hand side there is: what the adjoint costs.

    python benchmarks/gradient_floor.py            # n = 4 and 16 linear oscillators, B = 8
    python benchmarks/gradient_floor.py --quick    # n = 4, B = 2, t1 = 1
    python benchmarks/gradient_floor.py --forward-mode   # the forward-mode floor, p = 1..6

`gradients.py` measures gradient/forward of `jax.grad` through `gm.simulate` (a loss of the final
states with respect to the initial velocities, B = 8, t ∈ [0, 10], Tsit5, rtol = atol = 1e-8,
diffrax's default `RecursiveCheckpointAdjoint`). This script measures the same ratio with the same
driver for plain diffrax on $\ddot q = -K q$ ($K$ symmetric positive definite, $n$ coordinates):
a right-hand side that is one matrix–vector product, so the ratio is that of diffrax's
checkpointed reverse pass over an adaptive Tsit5 solve itself, a floor for any right-hand side.

`--forward-mode` measures the same for forward mode, as `forward_reverse.py` does through
`gm.simulate`: the Jacobian by `jax.jacfwd` with `adjoint=diffrax.ForwardMode()` of a loss of the
final state of three damped oscillators, $\ddot x_i = -x_i - c(\theta, x) \dot x_i$ with
$c = \sum_{k<p}\theta_k\cos(k x_0)$, with respect to $\theta \in \mathbb{R}^p$, over one
forward solve ($t_1 = 5$, Tsit5, rtol = atol = 1e-8).
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

if __name__ == "__main__":
    _common.preconfigure()

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

jax.config.update("jax_enable_x64", True)


def problem(n: int, batch: int, t1: float):
    """`(forward, gradient, v0)`: jitted loss of the final positions and its gradient with
    respect to the initial velocities `v0` of `batch` oscillator chains of `n` coordinates."""
    K = jax.random.normal(jax.random.PRNGKey(0), (n, n))
    K = K @ K.T / n + jnp.eye(n)
    f = lambda t, y, args: (y[1], -K @ y[0])

    def final(v):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, t1, None, (jnp.ones(n), v),
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8), max_steps=100_000,
        )  # fmt: skip
        return sol.ys[0][-1], sol.stats["num_steps"]

    loss = lambda v0: jnp.sum(jax.vmap(final)(v0)[0] ** 2)
    v0 = 0.3 * jnp.ones((batch, n))
    return jax.jit(loss), jax.jit(jax.grad(loss)), v0, jax.jit(jax.vmap(final))


def damped(p: int, adjoint):
    """The loss of `--forward-mode`: squared final state of three oscillators damped by
    $c(\theta, x)$."""

    def f(t, y, theta):
        c = jnp.dot(theta, jnp.cos(jnp.arange(p, dtype=y.dtype) * y[0]))
        return jnp.concatenate([y[3:], -y[:3] - c * y[3:]])

    def loss(theta):
        sol = diffrax.diffeqsolve(
            diffrax.ODETerm(f), diffrax.Tsit5(), 0.0, 5.0, None, jnp.full(6, 0.5), args=theta,
            stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-8), adjoint=adjoint,
        )  # fmt: skip
        return jnp.sum(sol.ys[-1] ** 2)

    return loss


def forward_mode_rows(ps, repeat: int) -> list[dict]:
    rows = []
    for p in ps:
        theta = jnp.full((p,), 0.02 / p)
        forward = jax.jit(damped(p, diffrax.RecursiveCheckpointAdjoint()))
        jacobian = jax.jit(jax.jacfwd(damped(p, diffrax.ForwardMode())))
        tf, tj = best_of(forward, theta, repeat), best_of(jacobian, theta, repeat)
        rows.append({"p": p, "forward_s": tf, "forward_mode_s": tj, "forward_mode_over_forward": tj / tf})
        print(f"[bench] p = {p}: forward mode / forward {tj / tf:.2f}", file=sys.stderr, flush=True)
    return rows


def best_of(f, x, repeat: int) -> float:
    jax.block_until_ready(f(x))
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        jax.block_until_ready(f(x))
        times.append(time.perf_counter() - t)
    return min(times)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument("--quick", action="store_true", help="n = 4, B = 2, t1 = 1, one repetition")
    p.add_argument("--sizes", type=int, nargs="+", default=[4, 16])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--t1", type=float, default=10.0)
    p.add_argument("--repeat", type=int, default=20)
    p.add_argument("--forward-mode", type=int, nargs="*", default=None, metavar="P",
                   help="the forward-mode floor instead, for these p (default 1..6)")
    args = p.parse_args(argv)
    _common.check_device(args.device)
    if args.forward_mode is not None:
        ps = args.forward_mode or [1, 2, 3, 4, 5, 6]
        out = {"machine": _common.machine_info(), "settings": {"repeat": args.repeat, "problem": damped.__doc__}}
        out["forward_mode"] = forward_mode_rows([1] if args.quick else ps, 1 if args.quick else args.repeat)
        return _common.finish(out)
    if args.quick:
        args.sizes, args.batch, args.t1, args.repeat = [4], 2, 1.0, 1
    out = {
        "machine": _common.machine_info(),
        "settings": {
            "batch": args.batch, "t1": args.t1, "repeat": args.repeat,
            "problem": "q'' = -K q, K SPD; loss = sum of squared final positions; grad wrt v0",
            "solver": "Tsit5, PIDController(1e-8, 1e-8), RecursiveCheckpointAdjoint()",
        },
        "sizes": [],
    }  # fmt: skip
    for n in args.sizes:
        forward, gradient, v0, steps = problem(n, args.batch, args.t1)
        tf, tg = best_of(forward, v0, args.repeat), best_of(gradient, v0, args.repeat)
        row = {"n": n, "steps_mean": float(jnp.mean(steps(v0)[1])), "forward_s": tf, "gradient_s": tg}
        row["gradient_over_forward"] = tg / tf
        out["sizes"].append(row)
        print(f"[bench] n = {n}: gradient/forward {tg / tf:.2f}", file=sys.stderr, flush=True)
    return _common.finish(out)


if __name__ == "__main__":
    main()
