"""The free rigid body on SO(3) over 10⁵ fixed Tsit5 steps (Runge–Kutta–Munthe-Kaas,
docs/lie_groups.md) without stabilization or renormalization: ‖RᵀR − I‖ of the stored quaternion
(unnormalized matrix), energy and spatial angular momentum drift, compile and run time.

    python benchmarks/lie_so3.py [--steps 100000] [--device cpu|gpu]
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import add_device_argument, check_device, finish, machine_info, preconfigure, timed  # noqa: E402


def main(argv=None):
    device = preconfigure(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--t1", type=float, default=100.0)
    args = parser.parse_args(argv)
    check_device(device)

    import diffrax
    import jax.numpy as jnp
    import jaxlie

    import geomech as gm

    I = jnp.diag(jnp.array([1.0, 2.0, 3.5]))
    system = gm.LagrangianSystem(lambda R, w: 0.5 * w @ I @ w, manifold=gm.SO3())
    y0 = gm.State(jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9])), jnp.array([0.4, -1.1, 0.7]))
    run = lambda t1: gm.simulate(
        system, y0, 0.0, t1, dt0=args.t1 / args.steps, max_steps=args.steps,
        stepsize_controller=diffrax.ConstantStepSize(), saveat=diffrax.SaveAt(t0=True, t1=True),
    )
    first, _ = timed(run, args.t1)
    second, sol = timed(run, args.t1)
    w, u = sol.states.q.wxyz[-1, 0], sol.states.q.wxyz[-1, 1:]
    hat = jnp.array([[0.0, -u[2], u[1]], [u[2], 0.0, -u[0]], [-u[1], u[0], 0.0]])
    R = (w**2 - u @ u) * jnp.eye(3) + 2 * jnp.outer(u, u) + 2 * w * hat  # as stored, unnormalized
    m = [jaxlie.SO3(q).apply(I @ v) for q, v in zip(sol.states.q.wxyz, sol.states.v, strict=True)]
    out = {
        "machine": machine_info(),
        "steps": int(sol.stats["num_steps"]),
        "orthogonality_defect": float(jnp.linalg.norm(R.T @ R - jnp.eye(3))),
        "quaternion_norm_defect": float(abs(jnp.linalg.norm(sol.states.q.wxyz[-1]) - 1)),
        "energy_relative_drift": float(abs(sol.energy[-1] / sol.energy[0] - 1)),
        "spatial_momentum_drift": float(jnp.linalg.norm(m[1] - m[0])),
        "first_call_s": first,
        "second_call_s": second,
    }
    return finish(out)


if __name__ == "__main__":
    main()
