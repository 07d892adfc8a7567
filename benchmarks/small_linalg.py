"""geomech's small dense kernels (`_linalg.cholesky`, `solve_lower`, `solve_upper_transposed` for
n <= 8) written entry by entry against the row-by-row version they replaced (a dot and an in-place
update of a slice per row), side by side in one process: the same `gm.simulate` traced once with
each (`jax.clear_caches()` between), the kernels of each compiled program (fusions, dots,
in-place updates), compile time, the agreement of the trajectories and the run time per
trajectory-step, runs interleaved (docs/performance.md, "Rigid bodies").
It runs with XLA's older CPU code generator (`--xla_cpu_use_fusion_emitters=false`, the test
suite's setting and docs/performance.md's advice for compile time) unless XLA_FLAGS is set.

    python benchmarks/small_linalg.py [--model Rattleback] [--batch 1] [--t1 1]
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_device_argument,
    check_device,
    finish,
    machine_info,
    preconfigure,
    side_by_side,
)


def row_by_row():
    """The kernels as they were: one dot and one in-place update per row or column."""
    import jax.numpy as jnp

    def cholesky(M):
        n = M.shape[0]
        M = 0.5 * (M + M.T)
        i = jnp.arange(n)
        L = jnp.zeros_like(M)
        for j in range(n):
            c = M[:, j] - L @ L[j, :]
            d = jnp.sqrt(c[j])
            L = L.at[:, j].set(jnp.where(i > j, c / d, jnp.where(i == j, d, 0.0)))
        return L

    def solve_lower(L, B):
        X = jnp.zeros_like(B)
        for i in range(L.shape[0]):
            X = X.at[i].set((B[i] - L[i, :] @ X) / L[i, i])
        return X

    def solve_upper_transposed(L, B):
        X = jnp.zeros_like(B)
        for i in reversed(range(L.shape[0])):
            X = X.at[i].set((B[i] - L[:, i] @ X) / L[i, i])
        return X

    return {"cholesky": cholesky, "solve_lower": solve_lower,
            "solve_upper_transposed": solve_upper_transposed}  # fmt: skip


def main(argv=None):
    device = preconfigure(argv)
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--model", default="Rattleback")
    parser.add_argument("--batch", type=int, default=1, help="1: a single trajectory, no vmap")
    parser.add_argument("--t1", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    check_device(device)

    import jax
    import jax.numpy as jnp

    import geomech as gm
    from geomech import _linalg

    jax.config.update("jax_enable_x64", True)
    kernels = {
        "row_by_row": row_by_row(),
        "elementwise": {k: getattr(_linalg, k) for k in row_by_row()},
    }
    model = getattr(gm.models, args.model)()
    system, y0 = model.system(), model.initial_state()
    if args.batch > 1:
        ys = jax.tree_util.tree_map(lambda x: jnp.stack([x] * args.batch), y0)
        run = jax.vmap(lambda y: gm.simulate(system, y, 0.0, args.t1))
    else:
        ys, run = y0, lambda y: gm.simulate(system, y, 0.0, args.t1)
    out = {"machine": machine_info(), "model": args.model, "batch": args.batch, "t1": args.t1}
    compiled = {}
    for name, functions in kernels.items():
        for attribute, f in functions.items():  # read when the vector field is traced
            setattr(_linalg, attribute, f)
        jax.clear_caches()  # no inner jit reuses a trace made with the other kernels
        t = time.perf_counter()
        compiled[name] = jax.jit(run).lower(ys).compile()
        text = compiled[name].as_text()
        out[name] = {
            "compile_s": time.perf_counter() - t,
            "fusions": text.count(" fusion("),
            "dots": text.count(" dot("),
            "in_place_updates": text.count(" dynamic-update-slice("),
        }
    for attribute, f in kernels["elementwise"].items():  # as they were
        setattr(_linalg, attribute, f)
    side_by_side(out, compiled, ys, args.batch, args.repeat)
    out["speedup"] = out["row_by_row"]["run_s_min"] / out["elementwise"]["run_s_min"]
    return finish(out)


if __name__ == "__main__":
    main()
