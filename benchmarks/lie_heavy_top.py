"""A heavy-top ensemble on SO(3) (Runge–Kutta–Munthe-Kaas, docs/lie_groups.md) against the same
top in ZXZ Euler angles (coordinates, away from the singular θ = 0, π): first-call time (compile
and run), the best of `--repeat` later calls, steps taken, time per step, and the agreement of the
two final rotations.

    python benchmarks/lie_heavy_top.py [--batch 64] [--t1 5] [--repeat 5] [--device cpu|gpu]

Both runs are `gm.simulate` with adaptive Tsit5 at rtol = atol = `--tol` from the same initial
states (ω given in the body; the Euler-angle rates solved from it): a fast top (spin 8–12 rad/s
about the body axis 3) started at θ ∈ [0.8, 1.4], whose nutation keeps θ away from 0 and π
(`min_sin_theta` reports how far).
"""

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import (  # noqa: E402
    add_device_argument,
    best_time,
    check_device,
    finish,
    machine_info,
    preconfigure,
    timed,
)


def main(argv=None):
    device = preconfigure(argv)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_device_argument(parser)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--t1", type=float, default=5.0)
    parser.add_argument("--tol", type=float, default=1e-8)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    check_device(device)

    import diffrax
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    import jaxlie

    import geomech as gm

    E3 = jnp.array([0.0, 0.0, 1.0])

    class GroupTop(eqx.Module):
        """$L = \\tfrac12\\omega^\\top I\\omega - mg\\ell\\,(Re_3)\\cdot e_3$ on SO(3)."""

        I: jax.Array
        mgl: jax.Array

        def __call__(self, R, w):
            return 0.5 * w @ self.I @ w - self.mgl * R.apply(E3) @ E3

    def body_velocity(q, q_dot):
        """ω of ZXZ angles q = (φ, θ, ψ): (φ̇ sθ sψ + θ̇ cψ, φ̇ sθ cψ − θ̇ sψ, φ̇ cθ + ψ̇), the
        axial vector of RᵀṘ for R = R_z(φ) R_x(θ) R_z(ψ) (checked below against RᵀṘ itself)."""
        (_, th, ps), (dph, dth, dps) = q, q_dot
        return jnp.stack([
            dph * jnp.sin(th) * jnp.sin(ps) + dth * jnp.cos(ps),
            dph * jnp.sin(th) * jnp.cos(ps) - dth * jnp.sin(ps),
            dph * jnp.cos(th) + dps,
        ])

    class AngleTop(eqx.Module):
        """The same top in ZXZ angles: $(Re_3)\\cdot e_3 = \\cos\\theta$."""

        I: jax.Array
        mgl: jax.Array

        def __call__(self, q, q_dot):
            w = body_velocity(q, q_dot)
            return 0.5 * w @ self.I @ w - self.mgl * jnp.cos(q[1])

    def rotation(q):
        return jaxlie.SO3.from_z_radians(q[0]) @ jaxlie.SO3.from_x_radians(q[1]) @ jaxlie.SO3.from_z_radians(q[2])

    I, mgl = jnp.diag(jnp.array([1.0, 1.1, 0.5])), jnp.asarray(2.0)
    on_group = gm.LagrangianSystem(GroupTop(I, mgl), manifold=gm.SO3())
    in_angles = gm.LagrangianSystem(AngleTop(I, mgl))
    B = args.batch
    k1, k2, k3 = jax.random.split(jax.random.PRNGKey(0), 3)
    angles = jnp.stack([
        jax.random.uniform(k1, (B,), minval=-3.0, maxval=3.0),
        jax.random.uniform(k2, (B,), minval=0.8, maxval=1.4),
        jax.random.uniform(k3, (B,), minval=-3.0, maxval=3.0),
    ], 1)
    w0 = jnp.stack([0.3 * jnp.ones(B), -0.2 * jnp.ones(B), jnp.linspace(8.0, 12.0, B)], 1)
    rates = jax.vmap(
        lambda q, w: jnp.linalg.solve(jax.jacfwd(lambda u: body_velocity(q, u))(jnp.zeros(3)), w)
    )(angles, w0)
    def from_matrix(q, q_dot):  # the axial vector of RᵀṘ, differentiated through jaxlie
        R, R_dot = jax.jvp(lambda q: rotation(q).as_matrix(), (q,), (q_dot,))
        W = R.T @ R_dot
        return jnp.stack([W[2, 1], W[0, 2], W[1, 0]])

    check = jax.vmap(from_matrix)(angles, rates + 0.3)
    assert jnp.allclose(check, jax.vmap(body_velocity)(angles, rates + 0.3), rtol=1e-12, atol=1e-12)
    y_group = gm.State(jax.vmap(rotation)(angles), w0)
    y_angles = gm.State(angles, rates)
    ts = jnp.linspace(0.0, args.t1, 201)

    def runner(system, y0):
        return lambda: gm.simulate(system, y0, 0.0, args.t1, rtol=args.tol, atol=args.tol,
                                   saveat=diffrax.SaveAt(ts=ts))

    out = {"machine": machine_info(), "batch": B, "t1": args.t1, "tol": args.tol}
    sols = {}
    for name, system, y0 in (("so3", on_group, y_group), ("zxz_angles", in_angles, y_angles)):
        run = runner(system, y0)
        first, _ = timed(run)
        best, sol = best_time(run, repeat=args.repeat)
        steps = sol.stats["num_steps"]
        out[name] = {
            "first_call_s": first,
            "best_run_s": best,
            "steps_mean": float(jnp.mean(steps)),
            "steps_max": int(jnp.max(steps)),
            # the vmapped ensemble advances in lockstep until its slowest member is done
            "s_per_ensemble_step": best / int(jnp.max(steps)),
            "us_per_trajectory_step": 1e6 * best / float(jnp.sum(steps)),
        }
        sols[name] = sol
    R_angles = jax.vmap(jax.vmap(lambda q: rotation(q).as_matrix()))(sols["zxz_angles"].states.q)
    out["max_rotation_difference"] = float(jnp.max(jnp.abs(R_angles - sols["so3"].states.q.as_matrix())))
    out["min_sin_theta"] = float(jnp.min(jnp.abs(jnp.sin(sols["zxz_angles"].states.q[..., 1]))))
    out["ratio_so3_over_angles"] = {
        key: out["so3"][key] / out["zxz_angles"][key]
        for key in ("first_call_s", "best_run_s", "steps_mean", "us_per_trajectory_step")
    }
    return finish(out)


if __name__ == "__main__":
    main()
