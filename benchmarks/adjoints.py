"""Gradient/forward ratio against the adjoint: can checkpointing or a continuous adjoint bring
`jax.grad` through `gm.simulate` to within 3x of the forward solve?

    python benchmarks/adjoints.py                 # chains N = 2, 8; B = 8, t in [0, 10]
    python benchmarks/adjoints.py --chains 8 --hand

The loss is that of `gradients.py` (the batch mean of $|q(t_1)|^2 + |v(t_1)|^2$, differentiated
with respect to the initial velocities). For each chain the forward loss is timed once, then the
gradient with:

- `default`: `diffrax.RecursiveCheckpointAdjoint()` with `max_steps = 4096` (diffrax chooses
  about $\\sqrt{2 \\cdot 4096} \\approx 90$ checkpoints: recomputation on the backward pass);
- `all_steps`: `RecursiveCheckpointAdjoint(checkpoints=S)` and `max_steps=S`, with $S$ the step
  count of the forward solve (plus 8): every step stored, no recomputation;
- `backsolve`: `diffrax.BacksolveAdjoint` with the forward tolerances (the continuous adjoint,
  solved backwards), with its gradient's relative difference from `default`'s;

and with `--hand` the same for the hand-written right-hand side of `_cases.py` under the default
adjoint. Times are best of 3 after a first (compiling) call, which is reported too
(`*_first_s`).
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

if __name__ == "__main__":
    _common.preconfigure()

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from _cases import chain_hand, chain_states, final_state_loss, solve_one  # noqa: E402

import geomech as gm  # noqa: E402

jax.config.update("jax_enable_x64", True)


def generic_loss(system, q0, t1, rtol, adjoint, max_steps):
    def loss(v0):
        sol = gm.simulate(
            system, gm.State(q0, v0), 0.0, t1, rtol=rtol, atol=rtol, adjoint=adjoint,
            max_steps=max_steps,
        )
        return final_state_loss(sol.states.q[:, -1], sol.states.v[:, -1])

    return loss


def run_time(fn, x, repeat):
    """`(first call's seconds (compile included), best of `repeat` later calls, result)`."""
    first, _ = _common.timed(fn, x)
    best, out = _common.best_time(fn, x, repeat=repeat)
    return first, best, out


def bench_chain(N, B, t1, rtol, hand, repeat):
    model, s = chain_states(N)(jax.random.PRNGKey(0), B)
    system = model.system()
    sol = gm.simulate(system, s, 0.0, t1, rtol=rtol, atol=rtol)
    steps = int(jnp.max(sol.stats["num_steps"]))
    default = diffrax.RecursiveCheckpointAdjoint()
    forward = jax.jit(generic_loss(system, s.q, t1, rtol, default, 4096))
    out = {"N": N, "n": 2 * N, "B": B, "steps": steps}
    out["forward_first_s"], out["forward_s"], _ = run_time(forward, s.v, repeat)
    controller = diffrax.PIDController(rtol=rtol, atol=rtol)
    variants = {
        "default": (default, 4096),
        "all_steps": (diffrax.RecursiveCheckpointAdjoint(checkpoints=steps + 8), steps + 8),
        "backsolve": (diffrax.BacksolveAdjoint(stepsize_controller=controller), 4096),
    }
    grads = {}
    for name, (adjoint, max_steps) in variants.items():
        g = jax.jit(jax.grad(generic_loss(system, s.q, t1, rtol, adjoint, max_steps)))
        out[f"{name}_grad_first_s"], out[f"{name}_grad_s"], grads[name] = run_time(g, s.v, repeat)
        out[f"{name}_grad_over_forward"] = out[f"{name}_grad_s"] / out["forward_s"]
        print(f"[adjoints] N = {N} {name} done", file=sys.stderr, flush=True)
    scale = jnp.max(jnp.abs(grads["default"]))
    for name in ("all_steps", "backsolve"):
        out[f"{name}_grad_rel_diff"] = float(jnp.max(jnp.abs(grads[name] - grads["default"])) / scale)
    if hand:
        one = lambda q, v: solve_one(chain_hand, model, q, v, t1, rtol, rtol, max_steps=4096)[:2]
        hand_loss = lambda v0: final_state_loss(*jax.vmap(one)(s.q, v0))
        _, out["hand_forward_s"], _ = run_time(jax.jit(hand_loss), s.v, repeat)
        _, out["hand_grad_s"], _ = run_time(jax.jit(jax.grad(hand_loss)), s.v, repeat)
        out["hand_grad_over_forward"] = out["hand_grad_s"] / out["hand_forward_s"]
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    _common.add_device_argument(p)
    p.add_argument("--chains", type=int, nargs="*", default=[2, 8])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--t1", type=float, default=10.0)
    p.add_argument("--rtol", type=float, default=1e-8)
    p.add_argument("--hand", action="store_true", help="also the hand-written right-hand side")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    _common.check_device(args.device)
    out = {
        "machine": _common.machine_info(),
        "settings": {"B": args.batch, "t1": args.t1, "rtol": args.rtol, "loss": "gradients.py"},
        "chains": [
            bench_chain(N, args.batch, args.t1, args.rtol, args.hand, args.repeat)
            for N in args.chains
        ],
    }
    return _common.finish(out)


if __name__ == "__main__":
    main()
