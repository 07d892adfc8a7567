"""geomech's quaternion product against jaxlie's, side by side in one process: the same vmapped
`gm.simulate` of a rigid-body model traced once with jaxlie's gathered product table
(`jaxlie.SO3.multiply`, whose reverse-mode derivative is a scatter-add that XLA's CPU backend
runs as a loop of kernels) and once with `geomech._geometry.quaternion_product` (the product
written out elementwise); the while loops of each compiled program, the agreement of the
trajectories and the run time per trajectory-step (docs/performance.md, "Rigid bodies").
It runs with XLA's older CPU code generator (`--xla_cpu_use_fusion_emitters=false`, the test
suite's setting and docs/performance.md's advice for compile time), which expands a scatter into
a loop; with XLA's default emitters both programs are the same (`XLA_FLAGS=` to see it).

    python benchmarks/quaternion_product.py [--model Rattleback] [--batch 256] [--t1 1]
"""

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_device_argument, check_device, finish, machine_info, preconfigure  # noqa: E402


def main(argv=None):
    device = preconfigure(argv)
    os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--model", default="Rattleback")
    parser.add_argument("--batch", type=int, default=256)
    parser.add_argument("--t1", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--geomech-first", action="store_true", help="compile geomech's first")
    args = parser.parse_args(argv)
    check_device(device)

    import jax
    import jax.numpy as jnp
    import jaxlie
    import numpy as np

    import geomech as gm
    from geomech._geometry import _lie

    jax.config.update("jax_enable_x64", True)
    products = {
        "jaxlie": lambda a, b: (jaxlie.SO3(a) @ jaxlie.SO3(b)).wxyz,
        "geomech": _lie.quaternion_product,
    }
    if args.geomech_first:  # the order of compilation, to see that it does not decide the times
        products = dict(reversed(products.items()))
    model = getattr(gm.models, args.model)()
    system, y0 = model.system(), model.initial_state()
    ys = jax.tree_util.tree_map(lambda x: jnp.stack([x] * args.batch), y0)
    out = {"machine": machine_info(), "model": args.model, "batch": args.batch, "t1": args.t1}
    compiled = {}
    for name, product in products.items():
        _lie.quaternion_product = product  # read when the vector field is traced
        jax.clear_caches()  # no inner jit reuses a trace made with the other product
        f = jax.jit(jax.vmap(lambda y: gm.simulate(system, y, 0.0, args.t1)))
        t = time.perf_counter()
        compiled[name] = f.lower(ys).compile()
        out[name] = {
            "compile_s": time.perf_counter() - t,
            "while_loops": compiled[name].as_text().count(" while("),
        }
    _lie.quaternion_product = products["geomech"]  # as it was
    sols = {name: jax.block_until_ready(f(ys)) for name, f in compiled.items()}
    steps = {name: int(np.asarray(s.stats["num_steps"]).ravel()[0]) for name, s in sols.items()}
    pairs = zip(*(jax.tree_util.tree_leaves(s.states) for s in sols.values()), strict=True)
    out["max_state_difference"] = max(float(jnp.max(jnp.abs(a - b))) for a, b in pairs)
    times = {name: [] for name in compiled}
    for _ in range(args.repeat):  # interleaved
        for name, f in compiled.items():
            t = time.perf_counter()
            jax.block_until_ready(f(ys))
            times[name].append(time.perf_counter() - t)
    for name in compiled:
        out[name] |= {
            "steps": steps[name],
            "run_s_min": min(times[name]),
            "us_per_trajectory_step": 1e6 * min(times[name]) / args.batch / steps[name],
        }
    out["speedup"] = out["jaxlie"]["run_s_min"] / out["geomech"]["run_s_min"]
    return finish(out)


if __name__ == "__main__":
    main()
