"""Forward against reverse mode: the cost of d(loss)/d(theta) through `gm.simulate` against the
number of parameters p.

    python benchmarks/forward_reverse.py            # sleigh, chain N = 8, rolling disk; p = 1..32
    python benchmarks/forward_reverse.py --quick    # smoke test (sleigh, p = 1, 2, t1 = 0.2)

Each case is a model with a parametrized damping force
$F_\\theta(q, v) = -\\big(\\sum_{k<p} \\theta_k \\cos(k q_0)\\big) v$ (an `eqx.Module` holding
$\\theta \\in \\mathbb{R}^p$), integrated from one initial state over $[0, t_1]$ with the defaults
of `gm.simulate` (Tsit5, `PIDController(1e-8, 1e-8)`). The scalar loss is
$|q(t_1)|^2 + |v(t_1)|^2$. Reported for each p, each `jax.jit`-compiled and timed best of
`--repeat`:

- `forward_s`: the loss (default adjoint);
- `forward_mode_s`: its gradient by `jax.jacfwd` with `adjoint=diffrax.ForwardMode()` (p
  tangents carried along one solve);
- `reverse_mode_s`: by `jax.grad` with the default `diffrax.RecursiveCheckpointAdjoint()`;
- `*_over_forward`: those over `forward_s` (the figure of merit: what a derivative costs in
  forward solves), the compile times, and the relative difference of the two gradients.

The machine's load average is recorded at the start and the end (shared CPUs inflate times).
"""

import argparse
import json
import os
import sys
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
import geomech.models as gmm  # noqa: E402

jax.config.update("jax_enable_x64", True)


class FeatureDamping(eqx.Module):
    """$F_\\theta(q, v) = -(\\sum_k \\theta_k \\cos(k q_0)) v$."""

    theta: jax.Array

    def __call__(self, q, v):
        k = jnp.arange(self.theta.shape[0], dtype=q.dtype)
        return -jnp.dot(self.theta, jnp.cos(k * q[0])) * v


# the damping at theta: light enough that the rolling disk stays upright over t1 = 5 (at a total
# of 0.1 it falls flat, where its Euler angles are singular, and the solve runs to max_steps)
THETA_TOTAL = 0.02


def _cases(quick: bool):
    sleigh = gmm.ChaplyginSleigh(m=jnp.asarray(1.0), l=jnp.asarray(1.0))
    cases = {"sleigh": (sleigh, sleigh.initial_state())}
    if not quick:
        chain = gmm.PlanarChain(8)
        disk = gmm.RollingDisk(m=jnp.asarray(1.0), R=jnp.asarray(1.0))
        cases["chain_N8"] = (chain, chain.initial_state())
        cases["rolling_disk"] = (disk, disk.initial_state())
    return cases


def loss_of(model, y0, t1, adjoint):
    base = model.system()

    def loss(theta):
        system = eqx.tree_at(
            lambda s: s.force, base, FeatureDamping(theta), is_leaf=lambda x: x is None
        )
        sol = gm.simulate(system, y0, 0.0, t1, adjoint=adjoint)
        return jnp.sum(sol.states.q[-1] ** 2) + jnp.sum(sol.states.v[-1] ** 2)

    return loss


def compiled(f, x):
    t = time.perf_counter()
    c = jax.jit(f).lower(x).compile()
    return c, time.perf_counter() - t


def bench_p(model, y0, p, t1, repeat):
    theta = jnp.full((p,), THETA_TOTAL / p)
    forward = loss_of(model, y0, t1, diffrax.RecursiveCheckpointAdjoint())
    forward_fm = loss_of(model, y0, t1, diffrax.ForwardMode())
    out = {"p": p}
    grads = {}
    for name, f in (
        ("forward", forward),
        ("forward_mode", jax.jacfwd(forward_fm)),
        ("reverse_mode", jax.grad(forward)),
    ):
        c, out[f"{name}_compile_s"] = compiled(f, theta)
        _common.block(c(theta))
        out[f"{name}_s"], grads[name] = _common.best_time(c, theta, repeat=repeat)
    for name in ("forward_mode", "reverse_mode"):
        out[f"{name}_over_forward"] = out[f"{name}_s"] / out["forward_s"]
    g_f, g_r = grads["forward_mode"], grads["reverse_mode"]
    out["grad_rel_diff"] = float(jnp.max(jnp.abs(g_f - g_r)) / jnp.max(jnp.abs(g_r)))
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument("--quick", action="store_true", help="sleigh only, p = 1, 2, t1 = 0.2")
    p.add_argument("--params", type=int, nargs="*", default=None, help="the values of p")
    p.add_argument("--t1", type=float, default=None)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--out", default=None, help="also write the JSON here after every row")
    args = p.parse_args(argv)
    _common.check_device(args.device)
    ps = args.params or ([1, 2] if args.quick else [1, 2, 4, 8, 16, 32])
    t1 = args.t1 or (0.2 if args.quick else 5.0)
    out = {
        "machine": _common.machine_info(),
        "settings": {
            "t1": t1,
            "params": ps,
            "rtol": 1e-8,
            "atol": 1e-8,
            "integrator": "Tsit5",
            "loss": "|q(t1)|^2 + |v(t1)|^2, gradient w.r.t. theta (p,)",
            "force": "-(sum_k theta_k cos(k q_0)) v",
            "theta": f"theta_k = {THETA_TOTAL} / p",
            "forward_mode": "jax.jacfwd, adjoint=diffrax.ForwardMode()",
            "reverse_mode": "jax.grad, adjoint=diffrax.RecursiveCheckpointAdjoint()",
            "repeat": args.repeat,
            "quick": args.quick,
            "device": args.device,
        },
        "cases": {},
    }
    for name, (model, y0) in _cases(args.quick).items():
        rows = []
        for n in ps:
            rows.append(bench_p(model, y0, n, t1, args.repeat))
            print(f"[bench] {name} p = {n} done", file=sys.stderr, flush=True)
            out["cases"][name] = rows
            if args.out:  # partial results survive an interrupted run
                with open(args.out, "w") as f:
                    json.dump(out, f, indent=1)
    return _common.finish(out)


if __name__ == "__main__":
    main()
