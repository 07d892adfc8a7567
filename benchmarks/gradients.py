"""Gradients through `gm.simulate` against gradients through a hand-written solve.

    python benchmarks/gradients.py            # sleigh, chains N = 2 and 8; B = 8, t in [0, 10]
    python benchmarks/gradients.py --quick    # smoke test (B = 2, t1 = 0.5, sleigh and N = 2)

For each case the scalar loss $\\ell(v_0) = \\operatorname{mean}_b |q_b(t_1)|^2 + |v_b(t_1)|^2$ of
the final states of an ensemble of B trajectories is differentiated by `jax.grad` with respect to
the initial velocities $v_0$ (shape (B, n)):

- **generic**: the final states come from `gm.simulate(system, gm.State(q0, v0), 0, t1)` (the
  public API with its defaults: `Projection`, Tsit5, `PIDController(rtol, atol)`, `max_steps=4096`,
  diffrax's `RecursiveCheckpointAdjoint()`);
- **hand**: the same diffrax solve (`diffeqsolve` with the same solver, controller, `max_steps` and
  adjoint) of the hand-written closed-form acceleration of `_cases.py`.

Reported per case and implementation: compile times of the forward loss and of its gradient
(`jax.jit(f).lower(v0)` then `.compile()`), the best-of-3 run times, `grad_over_forward`, and
`generic_over_hand` for the gradient and the forward times. The gradients are checked in the script:
against central finite differences of the loss along random directions tangent to the constraints
($d_b \\in \\ker A(q_{0,b})$, so $v_0 + \\varepsilon d$ stays on $\\mathcal C$), and generic
against hand.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import _common  # noqa: E402

if __name__ == "__main__":
    _common.preconfigure()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from _cases import (  # noqa: E402
    chain_hand,
    chain_states,
    final_state_loss,
    sleigh_hand,
    sleigh_states,
    solve_one,
)

import geomech as gm  # noqa: E402

jax.config.update("jax_enable_x64", True)

MAX_STEPS = 4096  # gm.simulate's default, used by both sides


def losses(model, hand, q0, t1, rtol):
    """`(generic loss, hand loss)`, each a function of the initial velocities `v0` (B, n)."""
    system = model.system()

    def generic_loss(v0):
        sol = gm.simulate(system, gm.State(q0, v0), 0.0, t1, rtol=rtol, atol=rtol)
        return final_state_loss(sol.states.q[:, -1], sol.states.v[:, -1])

    def hand_loss(v0):
        one = lambda q, v: solve_one(hand, model, q, v, t1, rtol, rtol, max_steps=MAX_STEPS)[:2]
        return final_state_loss(*jax.vmap(one)(q0, v0))

    return generic_loss, hand_loss


def tangent_directions(system, q0, v0, key, count):
    """`count` random unit directions (each (B, n)) with every row in ker A(q0_b)."""
    basis = jax.vmap(lambda q, v: gm.assemble(system, gm.State(q, v)).D_basis)(q0, v0)
    c = jax.random.normal(key, (count,) + basis.shape[:1] + basis.shape[2:])
    d = jnp.einsum("bnm,cbm->cbn", basis, c)
    return d / jnp.linalg.norm(d.reshape(count, -1), axis=1)[:, None, None]


def measure(loss, v0, repeat):
    """Timings of the forward loss and its gradient; returns them and the compiled forward."""
    res, compiled = {}, {}
    for name, f in (("forward", jax.jit(loss)), ("grad", jax.jit(jax.grad(loss)))):
        t = time.perf_counter()
        lowered = f.lower(v0)
        res[f"{name}_trace_s"] = time.perf_counter() - t
        t = time.perf_counter()
        compiled[name] = lowered.compile()
        res[f"{name}_compile_s"] = time.perf_counter() - t
        _common.block(compiled[name](v0))
        res[f"{name}_s"], res[name] = _common.best_time(compiled[name], v0, repeat=repeat)
    res["grad_over_forward"] = res["grad_s"] / res["forward_s"]
    return res, compiled["forward"]


def fd_check(fwd, g, v0, directions, eps):
    """Central differences of the loss along each direction against the gradient's projection."""
    fd = np.array([(fwd(v0 + eps * d) - fwd(v0 - eps * d)) / (2 * eps) for d in directions])
    ad = np.array([jnp.vdot(g, d) for d in directions])
    scale = max(np.max(np.abs(ad)), np.finfo(float).tiny)
    return {
        "eps": eps,
        "directional_ad": ad.tolist(),
        "directional_fd": fd.tolist(),
        "max_rel_err": float(np.max(np.abs(fd - ad)) / scale),
    }


def bench_case(name, make_states, hand, B, t1, rtol, key, repeat, eps, fd_tol):
    model, s = make_states(key, B)
    generic_loss, hand_loss = losses(model, hand, s.q, t1, rtol)
    out = {}
    fwds = {}
    for impl, loss in (("generic", generic_loss), ("hand", hand_loss)):
        res, fwds[impl] = measure(loss, s.v, repeat)
        out[impl] = res
        print(f"[bench] {name} {impl} done", file=sys.stderr, flush=True)
    directions = tangent_directions(model.system(), s.q, s.v, jax.random.fold_in(key, 1), 3)
    for impl in ("generic", "hand"):
        check = fd_check(fwds[impl], out[impl]["grad"], s.v, directions, eps)
        check["ok"] = bool(check["max_rel_err"] <= fd_tol)
        out[impl]["fd_check"] = check
    g_gen, g_hand = out["generic"].pop("grad"), out["hand"].pop("grad")
    l_gen, l_hand = out["generic"].pop("forward"), out["hand"].pop("forward")
    out["loss"] = float(l_gen)
    out["loss_rel_diff_generic_hand"] = float(abs(l_gen - l_hand) / abs(l_hand))
    out["grad_rel_diff_generic_hand"] = float(
        jnp.max(jnp.abs(g_gen - g_hand)) / jnp.max(jnp.abs(g_hand))
    )
    out["generic_over_hand"] = {
        k: out["generic"][k] / out["hand"][k] for k in ("grad_s", "forward_s", "grad_compile_s")
    }
    out["B"], out["n"] = B, int(s.q.shape[-1])
    ok = out["generic"]["fd_check"]["ok"] and out["hand"]["fd_check"]["ok"]
    ok = ok and out["grad_rel_diff_generic_hand"] <= fd_tol
    out["gradients_ok"] = bool(ok)
    return out


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument("--quick", action="store_true", help="B = 2, t1 = 0.5, sleigh and N = 2")
    p.add_argument("--batch", type=int, default=None, help="ensemble size B (default 8)")
    p.add_argument("--chains", type=int, nargs="*", default=None, help="numbers of links N")
    p.add_argument("--no-sleigh", action="store_true")
    p.add_argument("--t1", type=float, default=None)
    p.add_argument("--rtol", type=float, default=1e-8)
    p.add_argument("--eps", type=float, default=1e-5, help="finite-difference step")
    p.add_argument("--fd-tol", type=float, default=1e-4, help="relative tolerance of the checks")
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args(argv)
    _common.check_device(args.device)
    B = args.batch or (2 if args.quick else 8)
    t1 = args.t1 or (0.5 if args.quick else 10.0)
    chains = args.chains if args.chains is not None else ([2] if args.quick else [2, 8])
    cases = [] if args.no_sleigh else [("sleigh", sleigh_states, sleigh_hand)]
    cases += [(f"chain_N{N}", chain_states(N), chain_hand) for N in chains]
    out = {
        "machine": _common.machine_info(),
        "settings": {
            "B": B,
            "t1": t1,
            "rtol": args.rtol,
            "atol": args.rtol,
            "integrator": "Tsit5",
            "adjoint": "RecursiveCheckpointAdjoint()",
            "max_steps": MAX_STEPS,
            "loss": "mean_b |q_b(t1)|^2 + |v_b(t1)|^2, gradient w.r.t. v0",
            "fd_eps": args.eps,
            "fd_tol": args.fd_tol,
            "quick": args.quick,
            "device": args.device,
        },
        "cases": {},
    }
    key = jax.random.PRNGKey(0)
    for name, make_states, hand in cases:
        out["cases"][name] = bench_case(
            name, make_states, hand, B, t1, args.rtol, key, args.repeat, args.eps, args.fd_tol
        )
    return _common.finish(out)


if __name__ == "__main__":
    main()
