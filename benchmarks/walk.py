"""The walk of one `simulate` on SO(3) (docs/architecture.md): the geomech frames on the stack
when the solver is first asked for $a_R$ inside the integration (calls, modules, `eqx.filter_jit`
boundaries), and the number of geomech function calls the first `simulate` makes, tracing
included.

    python benchmarks/walk.py
"""

import collections
import os
import sys

import jax

jax.config.update("jax_enable_x64", True)
import jax.numpy as jnp  # noqa: E402
import jaxlie  # noqa: E402

import geomech as gm  # noqa: E402

ROOT = os.path.dirname(gm.__file__)


def main():
    inertia = jnp.diag(jnp.array([1.0, 2.0, 3.0]))
    system = gm.LagrangianSystem(
        lambda R, w: 0.5 * w @ inertia @ w,
        constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 0.0, 1.0]])),
        manifold=gm.SO3(),
    )
    y0 = gm.State(jaxlie.SO3.identity(), jnp.array([1.0, 0.3, 0.0]))
    found, calls = [], collections.Counter()

    def profile(frame, event, arg):
        if event != "call" or not frame.f_code.co_filename.startswith(ROOT):
            return
        calls[os.path.relpath(frame.f_code.co_filename, ROOT)] += 1
        if not found and frame.f_code.co_name == "acceleration" and "_solver" in frame.f_code.co_filename:
            stack = []
            while frame is not None:
                stack.append((frame.f_code.co_filename, frame.f_code.co_name))
                frame = frame.f_back
            found.append(stack[::-1])

    sys.setprofile(profile)
    gm.simulate(system, y0, 0.0, 1.0)
    sys.setprofile(None)
    stack = found[0]
    ours = [(os.path.relpath(f, ROOT), name) for f, name in stack if f.startswith(ROOT)]
    jits = sum(1 for f, name in stack if f.endswith("equinox/_jit.py") and name == "__call__")
    print("geomech frames from simulate to the solver:", len(ours))
    print("modules on that path:", len({f for f, _ in ours}))
    print("eqx.filter_jit boundaries on that path:", jits)
    print("geomech calls in the first simulate:", sum(calls.values()), "in", len(calls), "modules")
    for f, name in ours:
        print("   ", f, name)


if __name__ == "__main__":
    main()
