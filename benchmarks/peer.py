"""A real peer: MuJoCo against geomech on the N-link planar pendulum chain (work–precision).

    python benchmarks/peer.py --plot benchmarks/figures/peer-cpu2.png     # N = 2 and 8, B = 1024, t1 = 10
    python benchmarks/peer.py --quick                             # N = 2, B = 16, t1 = 1

The system is `gm.models.PlanarChain` (point masses $m_i$ on massless links of length $l_i$, gravity
$g$ along the downward $x$ axis, angles $\\varphi_i$ of the links from the downward vertical), with
unequal masses and lengths so that a mix-up of links cannot pass the match. Contenders, all in
float64 on the same B initial states (angles and rates uniform in ±0.3):

- **mujoco**: the chain as N hinge joints (MJCF built by `chain_mjcf`; a point mass per body at the
  end of its link, with a rotational inertia of 1e-14 because MuJoCo rejects zero inertia; contacts,
  constraints, damping, springs, friction loss, limits and armature off), integrated by MuJoCo's
  fixed-step RK4 at several step sizes, the batch run by `mujoco.rollout` on a thread pool with one
  thread per CPU core;
- **geomech_cartesian**: `gm.simulate` of `PlanarChain` (2N coordinates, N holonomic constraints,
  the generic `Projection` solver, Tsit5, no stabilization) at several tolerances rtol = atol;
- **geomech_joint**: `gm.simulate` of a `LagrangianSystem` in the N absolute link angles with no
  constraints, written as a user would (`joint_lagrangian`), at the same tolerances;
- **sympy_scipy**: the joint-angle equations derived with `sympy.physics.mechanics.LagrangesMethod`,
  lambdified to NumPy, integrated trajectory by trajectory with `scipy.integrate.solve_ivp`
  (DOP853); timed on `--scipy-batch` trajectories and scaled to B (stated in the output).

Error: the largest absolute error over the batch and over all components of the final Cartesian
state (bob positions and velocities) at t1 against a reference: the closed-form joint-space
equations (`reference_acceleration`, independent of geomech and MuJoCo) integrated by diffrax's
Dopri8 at rtol = atol = 1e-13; its own error is estimated against Dopri8 at 1e-12.
Wall time: the whole batch, compile excluded (reported separately).

Before timing, the match of the dynamics is verified (`match`): MuJoCo's `qacc` against geomech's
accelerations (both systems) at random states, and a short MuJoCo trajectory with a small step
against the reference, at tight tolerances.
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
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

import geomech as gm  # noqa: E402
import geomech.models as gmm  # noqa: E402

jax.config.update("jax_enable_x64", True)

MUJOCO_INERTIA = 1e-14  # MuJoCo needs inertia > mjMINVAL = 1e-15; the chain's bobs are points


def chain_parameters(N):
    """Unequal masses and lengths (so a mix-up of links shows), g = 9.81."""
    return np.linspace(1.0, 2.0, N), np.linspace(1.0, 0.6, N), 9.81


# -- MuJoCo ------------------------------------------------------------------------------------


def chain_mjcf(masses, lengths, g, timestep) -> str:
    """MJCF of the chain: body i hangs from the end of link i − 1 by a hinge about −y; its point
    mass sits at the end of its link. MuJoCo's z is up, so geomech's x (down) is −z and geomech's y
    is MuJoCo's x; a hinge about −y turns the downward link towards +x by the joint angle, so the
    joint angles are the relative angles φ_i − φ_{i−1} of geomech's chain."""
    num = lambda x: repr(float(x))  # shortest exact decimal of the float64
    body = ""
    for i, (m, l) in enumerate(zip(masses, lengths, strict=True)):
        pos = "0 0 0" if i == 0 else f"0 0 {num(-lengths[i - 1])}"
        body += (
            f'<body pos="{pos}"><joint type="hinge" axis="0 -1 0" damping="0" armature="0" '
            f'stiffness="0" frictionloss="0" limited="false"/>'
            f'<inertial pos="0 0 {num(-l)}" mass="{num(m)}" diaginertia="{MUJOCO_INERTIA} '
            f'{MUJOCO_INERTIA} {MUJOCO_INERTIA}"/>'
        )
    body += "</body>" * len(masses)
    flags = " ".join(
        f'{f}="disable"'
        for f in (
            "contact",
            "constraint",
            "equality",
            "frictionloss",
            "limit",
            "spring",
            "damper",
            "actuation",
        )
    )
    return (
        f'<mujoco model="planar_chain"><compiler inertiafromgeom="false"/>'
        f'<option timestep="{num(timestep)}" integrator="RK4" gravity="0 0 {num(-g)}">'
        f"<flag {flags}/></option><worldbody>{body}</worldbody></mujoco>"
    )


def mujoco_model(masses, lengths, g, timestep):
    import mujoco

    return mujoco.MjModel.from_xml_string(chain_mjcf(masses, lengths, g, timestep))


def relative(phi):
    """Joint (relative) angles from absolute link angles, along the last axis."""
    return np.diff(phi, axis=-1, prepend=0.0)


def mujoco_states(model, phi, phidot):
    """Full-physics MuJoCo state vectors (B, nstate) for absolute angles and rates (B, N)."""
    import mujoco

    data = mujoco.MjData(model)
    spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
    out = np.zeros((phi.shape[0], mujoco.mj_stateSize(model, spec)))
    for b in range(phi.shape[0]):
        mujoco.mj_resetData(model, data)
        data.qpos[:], data.qvel[:] = relative(phi[b]), relative(phidot[b])
        mujoco.mj_getState(model, data, out[b], spec)
    return out


def mujoco_final(model, x0, t1, nthread=None, chunk=500):
    """Roll out the batch of states `x0` to t1 (fixed RK4 steps of `model.opt.timestep`, on a
    thread pool); returns absolute angles and rates at t1, (B, N) each."""
    import mujoco
    from mujoco import rollout

    h, nv = model.opt.timestep, model.nv
    nstep = int(round(t1 / h))
    if abs(nstep * h - t1) > 1e-9 * t1:
        raise ValueError(f"the step {h} does not divide t1 = {t1}")
    nthread = nthread or os.cpu_count()
    datas = [mujoco.MjData(model) for _ in range(nthread)]
    x = np.array(x0)
    with rollout.Rollout(nthread=nthread) as pool:
        done = 0
        while done < nstep:  # chunks keep the (B, nstep, nstate) output small
            k = min(chunk, nstep - done)
            states, _ = pool.rollout(model, datas, x, nstep=k)
            x = np.ascontiguousarray(states[:, -1])
            done += k
    qpos, qvel = x[:, 1 : 1 + model.nq], x[:, 1 + model.nq : 1 + model.nq + nv]
    return np.cumsum(qpos, -1), np.cumsum(qvel, -1)


def mujoco_qacc(model, phi, phidot):
    """MuJoCo's joint accelerations (`mj_forward`), as absolute angle accelerations."""
    import mujoco

    data = mujoco.MjData(model)
    out = np.zeros_like(phi)
    for b in range(phi.shape[0]):
        data.qpos[:], data.qvel[:] = relative(phi[b]), relative(phidot[b])
        mujoco.mj_forward(model, data)
        out[b] = np.cumsum(data.qacc)
    return out


# -- geomech, the reference, sympy + scipy ---------------------------------------------------------


class JointChain(eqx.Module):
    """The chain in its N absolute link angles, written as a user would: bob positions by a
    cumulative sum, $L = \\sum_i \\tfrac12 m_i|\\dot r_i|^2 + m_i g x_i$ ([Zanella] (85) in angles);
    no constraints."""

    masses: jnp.ndarray
    lengths: jnp.ndarray
    g: float

    def lagrangian(self, q, v):
        e_r = jnp.stack([jnp.cos(q), jnp.sin(q)], -1)
        e_t = jnp.stack([-jnp.sin(q), jnp.cos(q)], -1)
        r = jnp.cumsum(self.lengths[:, None] * e_r, 0)
        rd = jnp.cumsum((self.lengths * v)[:, None] * e_t, 0)
        return 0.5 * jnp.sum(self.masses * jnp.sum(rd**2, -1)) + self.g * jnp.sum(
            self.masses * r[:, 0]
        )

    def system(self) -> gm.LagrangianSystem:
        return gm.LagrangianSystem(self.lagrangian)


def reference_acceleration(params, phi, phidot):
    """Closed-form joint-space chain (Lagrange's equations of [Zanella] (85) in the link angles):
    with $\\mu_k = \\sum_{p \\ge k} m_p$ and $c_{ij} = l_i l_j \\mu_{\\max(i,j)}$,
    $\\sum_j c_{ij}\\cos(\\varphi_i - \\varphi_j)\\ddot\\varphi_j
    = -\\sum_j c_{ij}\\sin(\\varphi_i - \\varphi_j)\\dot\\varphi_j^2
    - g l_i \\mu_i \\sin\\varphi_i$."""
    masses, lengths, g = params
    mu = jnp.cumsum(masses[::-1])[::-1]
    idx = jnp.arange(masses.shape[0])
    c = lengths[:, None] * lengths[None, :] * mu[jnp.maximum(idx[:, None], idx[None, :])]
    dphi = phi[:, None] - phi[None, :]
    rhs = -(c * jnp.sin(dphi)) @ phidot**2 - g * lengths * mu * jnp.sin(phi)
    return jnp.linalg.solve(c * jnp.cos(dphi), rhs)


def cartesian(lengths, phi, phidot):
    """Bob positions and velocities `(q, v)`, (B, 2N) each, in `PlanarChain`'s coordinates."""
    lengths = jnp.asarray(lengths)
    pos = lambda a: jnp.cumsum(lengths[:, None] * jnp.stack([jnp.cos(a), jnp.sin(a)], -1), 0)

    def one(a, w):
        r, rd = jax.jvp(pos, (a,), (w,))
        return r.reshape(-1), rd.reshape(-1)

    return jax.vmap(one)(jnp.asarray(phi), jnp.asarray(phidot))


def cartesian_acceleration(lengths, phi, phidot, phiddot):
    """Bob accelerations $\\ddot r$ (B, 2N) from angles, rates and angle accelerations."""
    lengths = jnp.asarray(lengths)
    pos = lambda a: jnp.cumsum(lengths[:, None] * jnp.stack([jnp.cos(a), jnp.sin(a)], -1), 0)
    vel = lambda a, w: jax.jvp(pos, (a,), (w,))[1]

    def one(a, w, dw):
        return jax.jvp(vel, (a, w), (w, dw))[1].reshape(-1)

    return jax.vmap(one)(jnp.asarray(phi), jnp.asarray(phidot), jnp.asarray(phiddot))


@eqx.filter_jit
def reference_final(params, phi, phidot, t1, tol):
    """The reference: `reference_acceleration` by diffrax's Dopri8 at rtol = atol = `tol`."""

    def one(a, w):
        term = diffrax.ODETerm(lambda t, y, p: (y[1], reference_acceleration(p, y[0], y[1])))
        sol = diffrax.diffeqsolve(
            term,
            diffrax.Dopri8(),
            0.0,
            t1,
            None,
            (a, w),
            args=params,
            stepsize_controller=diffrax.PIDController(rtol=tol, atol=tol),
            max_steps=100_000,
        )
        return sol.ys[0][-1], sol.ys[1][-1]

    return jax.vmap(one)(phi, phidot)


def sympy_chain(masses, lengths, g):
    """`f(phi, phidot) -> (M, F)` (NumPy) from `sympy.physics.mechanics.LagrangesMethod`."""
    import sympy as sp
    from sympy.physics.mechanics import LagrangesMethod, dynamicsymbols

    N, t = len(masses), dynamicsymbols._t
    phi = dynamicsymbols(f"phi1:{N + 1}")
    x = y = T = V = 0
    for i in range(N):
        x += float(lengths[i]) * sp.cos(phi[i])
        y += float(lengths[i]) * sp.sin(phi[i])
        T += float(masses[i]) * (x.diff(t) ** 2 + y.diff(t) ** 2) / 2
        V -= float(masses[i]) * g * x
    lm = LagrangesMethod(T - V, phi)
    lm.form_lagranges_equations()
    qs, us = sp.symbols(f"q0:{N}"), sp.symbols(f"u0:{N}")
    subs = {**{p.diff(t): u for p, u in zip(phi, us, strict=True)}}
    subs.update(dict(zip(phi, qs, strict=True)))
    M, F = lm.mass_matrix.xreplace(subs), lm.forcing.xreplace(subs)
    return sp.lambdify((qs, us), (M, F), "numpy", cse=True)


def scipy_final(f, phi, phidot, t1, tol):
    """`solve_ivp` (DOP853) of each trajectory in turn; returns final angles and rates."""
    from scipy.integrate import solve_ivp

    N = phi.shape[1]

    def rhs(t, y):
        M, F = f(y[:N], y[N:])
        return np.concatenate([y[N:], np.linalg.solve(np.asarray(M), np.asarray(F).ravel())])

    out = np.zeros((phi.shape[0], 2 * N))
    for b in range(phi.shape[0]):
        y0 = np.concatenate([phi[b], phidot[b]])
        sol = solve_ivp(rhs, (0.0, t1), y0, method="DOP853", rtol=tol, atol=tol)
        if not sol.success:
            raise RuntimeError(f"solve_ivp failed: {sol.message}")
        out[b] = sol.y[:, -1]
    return out[:, :N], out[:, N:]


def initial_angles(N, B, seed=0):
    rng = np.random.default_rng(seed)
    return rng.uniform(-0.3, 0.3, (B, N)), rng.uniform(-0.3, 0.3, (B, N))


def max_error(lengths, phi, phidot, ref):
    """Largest absolute error of the final Cartesian state (positions and velocities)."""
    q, v = cartesian(lengths, phi, phidot)
    return max_cartesian_error(q, v, ref)


def max_cartesian_error(q, v, ref):
    return float(max(jnp.max(jnp.abs(q - ref[0])), jnp.max(jnp.abs(v - ref[1]))))


# -- the match of the dynamics -------------------------------------------------------------------


def match(N, B=16, t1=1.0, h=1e-4, seed=1):
    """MuJoCo against geomech (accelerations) and against the reference (a short trajectory)."""
    masses, lengths, g = chain_parameters(N)
    phi, phidot = initial_angles(N, B, seed)
    model = mujoco_model(masses, lengths, g, h)
    params = (jnp.asarray(masses), jnp.asarray(lengths), g)
    # accelerations at the same states
    qacc = mujoco_qacc(model, phi, phidot)
    joint = JointChain(jnp.asarray(masses), jnp.asarray(lengths), g).system()
    acc_joint = jax.vmap(lambda a, w: gm.acceleration(joint, gm.State(a, w)))(phi, phidot)
    acc_ref = jax.vmap(lambda a, w: reference_acceleration(params, a, w))(phi, phidot)
    chain = gmm.PlanarChain(N, masses, lengths, g).system()
    q, v = cartesian(lengths, phi, phidot)
    acc_cart = jax.vmap(lambda q_, v_: gm.acceleration(chain, gm.State(q_, v_)))(q, v)
    acc_cart_mj = cartesian_acceleration(lengths, phi, phidot, qacc)
    scale = float(np.max(np.abs(acc_ref)))
    res = {
        "N": N,
        "B": B,
        "mujoco_vs_reference_acc": float(np.max(np.abs(qacc - acc_ref))) / scale,
        "geomech_joint_vs_reference_acc": float(jnp.max(jnp.abs(acc_joint - acc_ref))) / scale,
        "geomech_cartesian_vs_mujoco_acc": float(jnp.max(jnp.abs(acc_cart - acc_cart_mj)))
        / float(jnp.max(jnp.abs(acc_cart_mj))),
    }
    # a short trajectory: MuJoCo RK4 with a small step against the reference
    ref = reference_final(params, jnp.asarray(phi), jnp.asarray(phidot), t1, 1e-13)
    ref_cart = cartesian(lengths, *ref)
    mj = mujoco_final(model, mujoco_states(model, phi, phidot), t1)
    res.update(
        {
            "trajectory_t1": t1,
            "trajectory_h": h,
            "mujoco_vs_reference_final_state": max_error(lengths, *mj, ref_cart),
        }
    )
    res["ok"] = bool(
        max(
            res["mujoco_vs_reference_acc"],
            res["geomech_joint_vs_reference_acc"],
            res["geomech_cartesian_vs_mujoco_acc"],
        )
        <= 1e-10
        and res["mujoco_vs_reference_final_state"] <= 1e-9
    )
    return res


# -- the work–precision study -------------------------------------------------------------------


def geomech_rows(system, y0, to_cartesian, tols, t1, ref, budget, skipped, repeat=2):
    """`gm.simulate` of the batch at each tolerance (given as arrays: one compilation for all),
    coarse to fine; a row is skipped once the previous one predicts more than `budget` seconds."""
    rows = []
    for tol in tols:
        if rows and 3 * rows[-1]["wall_s"] > budget:  # a tighter tol costs ~1.5-3x more
            skipped.append(f"tol={tol:g}: estimated > {budget:.0f} s")
            continue
        tol_ = jnp.asarray(tol)
        run = lambda: gm.simulate(system, y0, 0.0, t1, rtol=tol_, atol=tol_, max_steps=65_536)  # noqa: B023
        first_s, sol = _common.timed(run)
        dt, sol = _common.best_time(run, repeat=repeat)
        if not bool(jnp.all(sol.result == diffrax.RESULTS.successful)):
            raise RuntimeError(f"geomech simulate failed at tol {tol}")
        q, v = to_cartesian(sol.states.q[:, -1], sol.states.v[:, -1])
        rows.append(
            {
                "tol": tol,
                "wall_s": dt,
                "first_call_s": first_s,
                "error": max_cartesian_error(q, v, ref),
                "steps_mean": float(jnp.mean(sol.stats["num_accepted_steps"])),
            }
        )
        print(f"[peer]   tol {tol:g}: {dt:.3g} s, error {rows[-1]['error']:.2e}", file=sys.stderr)
    return rows


def study(N, B, t1, steps, tols, scipy_tols, scipy_batch, budget, nthread):
    masses, lengths, g = chain_parameters(N)
    phi, phidot = initial_angles(N, B)
    params = (jnp.asarray(masses), jnp.asarray(lengths), g)
    res = {"N": N, "B": B, "t1": t1, "masses": masses.tolist(), "lengths": lengths.tolist()}
    t = time.perf_counter()
    ref = reference_final(params, jnp.asarray(phi), jnp.asarray(phidot), t1, 1e-13)
    res["reference_s"] = time.perf_counter() - t
    ref_cart = cartesian(lengths, *ref)
    nchk = min(B, 64)
    ref12 = reference_final(params, jnp.asarray(phi[:nchk]), jnp.asarray(phidot[:nchk]), t1, 1e-12)
    res["reference_error_estimate"] = max_error(lengths, *ref12, tuple(x[:nchk] for x in ref_cart))
    print(f"[peer] N={N}: reference done ({res['reference_s']:.1f} s)", file=sys.stderr)

    rows = []
    for h in steps:  # MuJoCo, coarse to fine; skip what the previous step predicts is too slow
        if rows and rows[-1]["wall_s"] * rows[-1]["h"] / h > budget:
            res.setdefault("skipped", []).append(
                f"mujoco h={h}: estimated {rows[-1]['wall_s'] * rows[-1]['h'] / h:.0f} s > budget"
            )
            continue
        model = mujoco_model(masses, lengths, g, h)
        x0 = mujoco_states(model, phi, phidot)
        dt, fin = _common.timed(lambda m=model, x=x0: mujoco_final(m, x, t1, nthread))
        error = max_error(lengths, *fin, ref_cart)
        rows.append({"h": h, "wall_s": dt, "error": error, "steps_mean": round(t1 / h)})
        print(
            f"[peer]   mujoco h={h:g}: {dt:.3g} s, error {rows[-1]['error']:.2e}", file=sys.stderr
        )
    res["mujoco"] = {"nthread": nthread or os.cpu_count(), "integrator": "RK4", "rows": rows}

    chain = gmm.PlanarChain(N, masses, lengths, g)
    y0 = gm.State(*cartesian(lengths, phi, phidot))
    skipped = res.setdefault("skipped", [])
    res["geomech_cartesian"] = {
        "integrator": "Tsit5",
        "rows": geomech_rows(
            chain.system(), y0, lambda q, v: (q, v), tols, t1, ref_cart, budget, skipped
        ),
    }
    joint = JointChain(jnp.asarray(masses), jnp.asarray(lengths), g).system()
    res["geomech_joint"] = {
        "integrator": "Tsit5",
        "rows": geomech_rows(
            joint,
            gm.State(jnp.asarray(phi), jnp.asarray(phidot)),
            lambda a, w: cartesian(lengths, a, w),
            tols,
            t1,
            ref_cart,
            budget,
            skipped,
        ),
    }
    if scipy_tols:
        t = time.perf_counter()
        f = sympy_chain(masses, lengths, g)
        setup = time.perf_counter() - t
        srows = []
        nb = min(scipy_batch, B)
        sub_ref = tuple(x[:nb] for x in ref_cart)
        for tol in scipy_tols:
            dt, fin = _common.timed(lambda tol=tol: scipy_final(f, phi[:nb], phidot[:nb], t1, tol))
            srows.append(
                {
                    "tol": tol,
                    "wall_s": dt * B / nb,
                    "measured_s": dt,
                    "error": max_error(lengths, *fin, sub_ref),
                }
            )
            print(f"[peer]   scipy tol {tol:g}: {dt:.3g} s on {nb}", file=sys.stderr)
        res["sympy_scipy"] = {
            "integrator": "DOP853",
            "derive_and_lambdify_s": setup,
            "timed_batch": nb,
            "note": f"wall_s = time on {nb} trajectories x {B}/{nb}; error over those {nb}",
            "rows": srows,
        }
    return res


LABELS = {
    "mujoco": "MuJoCo RK4 (step h)",
    "geomech_cartesian": "geomech Cartesian + constraints (Tsit5, tol)",
    "geomech_joint": "geomech joint angles (Tsit5, tol)",
    "sympy_scipy": "SymPy + SciPy DOP853 (tol; scaled from a subset)",
}


def plot(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    studies = list(results.values())
    fig, axes = plt.subplots(1, len(studies), figsize=(6 * len(studies), 4.8), squeeze=False)
    for ax, r in zip(axes[0], studies, strict=True):
        for key, marker in (
            ("mujoco", "o"),
            ("geomech_cartesian", "s"),
            ("geomech_joint", "^"),
            ("sympy_scipy", "x"),
        ):
            if key not in r:
                continue
            rows = r[key]["rows"]
            ax.loglog(
                [x["wall_s"] for x in rows],
                [max(x["error"], 1e-16) for x in rows],
                marker=marker,
                label=LABELS[key],
            )
            for x in rows:
                tag = f"h={x['h']:g}" if "h" in x else f"{x['tol']:g}"
                ax.annotate(tag, (x["wall_s"], max(x["error"], 1e-16)), fontsize=7)
        ax.set_xlabel(f"wall time for B = {r['B']} trajectories to t = {r['t1']:g} [s]")
        ax.set_ylabel("max error of the final state")
        ax.set_title(f"planar chain, N = {r['N']} links")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    _common.add_device_argument(p)
    p.add_argument("--quick", action="store_true", help="N = 2, B = 16, t1 = 1, few rows")
    p.add_argument("--chains", type=int, nargs="+", default=None, help="numbers of links N")
    p.add_argument("--batch", type=int, default=None, help="B (1024)")
    p.add_argument("--t1", type=float, default=None, help="final time (10)")
    p.add_argument("--steps", type=float, nargs="+", default=None, help="MuJoCo RK4 steps h")
    p.add_argument("--tols", type=float, nargs="+", default=None, help="geomech rtol = atol")
    p.add_argument("--scipy-tols", type=float, nargs="*", default=None)
    p.add_argument("--scipy-batch", type=int, default=16)
    p.add_argument("--nthread", type=int, default=None, help="MuJoCo threads (CPU count)")
    p.add_argument("--budget", type=float, default=300.0, help="seconds per row (estimated)")
    p.add_argument("--plot", default=None, help="write the work-precision plot to this PNG")
    args = p.parse_args(argv)
    _common.check_device(args.device)
    chains = args.chains or ([2] if args.quick else [2, 8])
    B = args.batch or (16 if args.quick else 1024)
    t1 = args.t1 or (1.0 if args.quick else 10.0)
    steps = args.steps or ([0.01, 0.005] if args.quick else [0.02, 0.01, 0.005, 0.0025, 0.001])
    tols = args.tols or ([1e-6, 1e-8] if args.quick else [1e-4, 1e-6, 1e-8, 1e-10, 1e-12])
    scipy_tols = args.scipy_tols
    if scipy_tols is None:
        scipy_tols = [1e-6] if args.quick else [1e-6, 1e-8, 1e-10]
    import mujoco

    out = {
        "machine": _common.machine_info(),
        "settings": {
            "B": B,
            "t1": t1,
            "mujoco": mujoco.__version__,
            "mujoco_steps": steps,
            "geomech_tols": tols,
            "scipy_tols": scipy_tols,
            "device": args.device,
            "quick": args.quick,
            "initial_states": "link angles and rates uniform in [-0.3, 0.3] (seed 0)",
            "error": "max over batch and components of |final (q, v) - reference|, Cartesian",
            "reference": "closed-form joint-space equations, diffrax Dopri8, rtol = atol = 1e-13",
        },
        "match": {},
        "studies": {},
    }
    for N in chains:
        out["match"][f"N{N}"] = m = match(N)
        print(f"[peer] N={N}: match {m}", file=sys.stderr, flush=True)
        if not m["ok"]:
            raise SystemExit(f"MuJoCo and geomech disagree for N = {N}: {m}")
    for N in chains:
        out["studies"][f"N{N}"] = study(
            N, B, t1, steps, tols, scipy_tols, args.scipy_batch, args.budget, args.nthread
        )
    if args.plot:
        m = out["machine"]
        plot(
            out["studies"],
            args.plot,
            f"{m['cpu_count']} CPU cores ({m['backend']}), float64, "
            f"MuJoCo {mujoco.__version__} on {out['studies'][f'N{chains[0]}']['mujoco']['nthread']}"
            " threads; load at start " + ", ".join(f"{x:.1f}" for x in m["loadavg_at_start"]),
        )
        out["plot"] = args.plot
    return _common.finish(out)


if __name__ == "__main__":
    main()
