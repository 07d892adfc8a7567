"""Long-time behaviour of the variational integrator on SO(3): 1e5 steps of the Lie-group
variational integrator (and the discrete Lagrange–d'Alembert scheme for the Suslov problem).

    python benchmarks/variational_lie.py           # 1e5 steps per system (dt = 0.01, T = 1000)
    python benchmarks/variational_lie.py --quick   # 2000 steps (smoke test)

Systems (the ones of `tests/test_variational_lie.py`, off-diagonal inertia):

- `free_body`: L = ½ωᵀIω: the spatial angular momentum R I ω (all three components) is a
    discrete Noether invariant;
- `heavy_top`: L = ½ωᵀIω − mgℓ (R e₃)·e₃: the vertical component e₃·R I ω is;
- `suslov`: the free body with ⟨ω, e₃⟩ = 0 (nonholonomic, no symmetry invariant reported).

Methods: `gm.VariationalIntegrator()` (midpoint) and `diffrax.Tsit5()` (Runge–Kutta–Munthe-Kaas)
at the same fixed step. For every run it prints (JSON) the wall time of the second (compiled)
call, the number of steps, the largest relative energy error over every step, its mean over the
first and the last tenth of [0, T] (ratio ~1 for a bounded error, ~19 for a linear drift), the
largest change of the conserved momentum, the largest ‖RᵀR − I‖ of the stored quaternion (not
renormalized) and the largest |φ|.
"""

import argparse
import json
import os
import platform
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")  # see benchmarks/run.py

import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # a checkout

import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlie  # noqa: E402
import numpy as np  # noqa: E402

import geomech as gm  # noqa: E402

E3 = jnp.array([0.0, 0.0, 1.0])
AXES = np.asarray(jaxlie.SO3.exp(jnp.array([0.4, -0.3, 0.7])).as_matrix())
INERTIA = jnp.asarray(AXES @ np.diag([1.0, 2.0, 3.5]) @ AXES.T)
R0 = jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.9]))


class RigidBody(eqx.Module):
    I: jax.Array
    mgl: jax.Array

    def __call__(self, R, w):
        return 0.5 * w @ self.I @ w - self.mgl * R.apply(E3) @ E3


def systems():
    """name -> (system, y0, which components of R I ω are conserved)."""
    body = lambda mgl, **kw: gm.LagrangianSystem(
        RigidBody(INERTIA, jnp.asarray(mgl)), manifold=gm.SO3(), **kw
    )
    w0 = jnp.asarray(AXES @ np.array([0.8, 0.0, 1.1]))
    suslov = gm.LinearConstraint(lambda R: jnp.array([[0.0, 0.0, 1.0]]))
    return {
        "free_body": (body(0.0), gm.State(R0, w0), [0, 1, 2]),
        "heavy_top": (body(2.0), gm.State(R0, w0), [2]),
        "suslov": (body(0.0, constraint=suslov), gm.State(R0, jnp.array([0.9, -0.6, 0.0])), []),
    }


def solve(method, system, y0, T, dt):
    kw = dict(saveat=diffrax.SaveAt(t0=True, steps=True), max_steps=round(T / dt) + 2, dt0=dt)
    if method == "variational":
        kw |= dict(integrator=gm.VariationalIntegrator())
    else:
        kw |= dict(integrator=diffrax.Tsit5(), stepsize_controller=diffrax.ConstantStepSize())
    return gm.simulate(system, y0, 0.0, T, **kw)


def unnormalized_rotation(wxyz):
    w, u = wxyz[..., :1, None], wxyz[..., 1:]
    uu = jnp.einsum("...i,...j->...ij", u, u)
    K = jnp.zeros(u.shape[:-1] + (3, 3)).at[..., 0, 1].set(-u[..., 2]).at[..., 0, 2].set(u[..., 1])
    K = K.at[..., 1, 2].set(-u[..., 0])
    K = K - jnp.swapaxes(K, -1, -2)
    return (w**2 - jnp.sum(u * u, -1)[..., None, None]) * jnp.eye(3) + 2 * uu + 2 * w * K


def measure(method, system, y0, conserved, T, dt):
    solve(method, system, y0, T, dt).energy.block_until_ready()  # compile, first run
    start = time.perf_counter()
    sol = solve(method, system, y0, T, dt)
    sol.energy.block_until_ready()
    wall = time.perf_counter() - start
    assert sol.result == diffrax.RESULTS.successful, (method, sol.result)
    ok = np.isfinite(np.asarray(sol.ts))
    t = np.asarray(sol.ts)[ok]
    E = np.asarray(sol.energy)[ok]
    dE = np.abs(E - E[0]) / np.abs(E[0])
    R = np.asarray(unnormalized_rotation(sol.states.q.wxyz))[ok]
    defect = np.linalg.norm(np.einsum("tji,tjk->tik", R, R) - np.eye(3), axis=(1, 2))
    m = np.einsum("tij,tj->ti", R, np.asarray(sol.states.v)[ok] @ np.asarray(INERTIA))[:, conserved]
    return {
        "method": method,
        "dt": dt,
        "wall_s": wall,
        "steps": int(sol.stats["num_steps"]),
        "max_rel_energy_error": float(dE.max()),
        "rel_energy_error_first_tenth": float(dE[(t > 0) & (t <= T / 10)].mean()),
        "rel_energy_error_last_tenth": float(dE[t >= 0.9 * T].mean()),
        "max_momentum_change": float(np.abs(m - m[0]).max()) if conserved else None,
        "max_group_defect": float(defect.max()),
        "max_constraint_residual": float(np.max(np.asarray(sol.constraint_residual)[ok])),
    }


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="2000 steps per system")
    args = p.parse_args(argv)
    T, dt = (20.0, 0.01) if args.quick else (1000.0, 0.01)
    out = {
        "machine": {
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "load_average_start": os.getloadavg(),
        },
        "T": T,
        "systems": {},
    }
    for name, (system, y0, conserved) in systems().items():
        runs = []
        for method in ("variational", "tsit5-fixed"):
            r = measure(method, system, y0, conserved, T, dt)
            runs.append(r)
            growth = r["rel_energy_error_last_tenth"] / r["rel_energy_error_first_tenth"]
            print(
                f"{name:10s} {method:12s} {r['wall_s']:7.2f} s {r['steps']:7d} steps  "
                f"max|dE|/E {r['max_rel_energy_error']:.2e}  last/first tenth {growth:.2f}  "
                f"momentum {r['max_momentum_change']}  group {r['max_group_defect']:.1e}",
                file=sys.stderr,
            )
        out["systems"][name] = runs
    out["machine"]["load_average_end"] = os.getloadavg()
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
