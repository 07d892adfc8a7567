r"""Nonholonomic optimal control: geomech's DMOC solver against CasADi + IPOPT, side by side.

    python benchmarks/optimal_control.py            # the full comparison (~10 min on 2 busy cores)
    python benchmarks/optimal_control.py --quick    # smaller problems, a smoke test

Problems:

1. **Parallel parking** from opty's example gallery ([MooreVanDenBogert2018];
   `examples-gallery/intermediate/plot_parallel_park.py` of the opty repository, the version
   with the stored 121-node solution, commit ee22b12). Taken from it: the bicycle model (a car
   body of mass m = 1200 kg and yaw inertia I = m (2² + 3²)/12 about its centre of mass, axles at
   a = b = 1.5 m ahead and behind it; a front wheel of mass m/6 and inertia I/32 steered by the
   angle δ), the nonholonomic constraints (no lateral slip of the rear axle along the car and of
   the front axle along the wheel), the inputs (propulsion force F at the rear axle along the car,
   steering torque T between car and wheel), the horizon 30 s on 121 nodes, the boundary
   conditions (at rest at the origin, at rest 2 m to the side, same heading, wheel straight), the
   bounds |δ| ≤ 45°, |F| ≤ 300 N, |T| ≤ 50 N m, the objective ∫ F² + T² dt, and the initial guess
   (x out to 3 m and back, y linear). The equations here are written anew as a Lagrangian
   L(q, q̇), q = (x, y, θ, δ), with the constraints A(q) q̇ = 0; opty derives the same system by
   Kane's method. Its stored solution has objective 318 509.47 in its own (backward-Euler)
   transcription.
2. **A Chaplygin sleigh on SE(2)** steered from rest at the identity to rest at a pose (x, y, θ)
   = (2, 1, π/2) in 4 s on 41 nodes, controls a thrust along the blade and a torque, cost ∫|u|².

Solvers:

- `geomech`: `gm.solve_optimal_control` (DMOC, [OberBloebaum2011]; interior point with
  block-tridiagonal KKT solves), compiled once (compile time reported apart), then timed.
- `casadi-dmoc`: the **same transcription** (the midpoint discrete Lagrangian, the forced discrete
  Lagrange–d'Alembert equations in position–momentum form, the discrete constraint
  A(q_{k+1/2}) Δq/h = 0, the same boundary conditions, bounds and cost; on SE(2) in exponential
  coordinates with the same left-trivialized discrete momenta) written in CasADi's SX and solved
  by IPOPT (MUMPS, exact Hessian, tol 1e-9, constr_viol_tol 1e-10); the time to build the solver
  is reported apart.
- `casadi-backward-euler` (parking only): opty's transcription — backward-Euler collocation of
  the first-order equations in the body-frame speeds (v_x, v_y, ω, β), the constraints imposed at
  the nodes — also in CasADi + IPOPT, checked against opty's stored objective.

For each plan, its controls (piecewise constant as each transcription assumes) are replayed by
`gm.simulate` (Tsit5, rtol = atol = 1e-10, a step at every control switch): the end point's miss
of the target and the largest distance between plan and replay measure how well the plan obeys
the continuous, constrained dynamics; the plan's own slip, max |A(q) q̇| along the straight line
between its nodes, measures the constraint violation a collocation plan carries.

Also: 64 parking problems with different targets in one vmapped, compiled call (problems/s), and
the derivative of the optimal parking cost with respect to the car's mass (implicit, through the
optimality conditions) against central finite differences of re-solved problems.
"""

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import finish, machine_info, preconfigure  # noqa: E402

preconfigure()
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=false")  # docs/performance.md

import casadi as ca  # noqa: E402
import diffrax  # noqa: E402
import equinox as eqx  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import jaxlie  # noqa: E402
import numpy as np  # noqa: E402

jax.config.update("jax_enable_x64", True)

import geomech as gm  # noqa: E402

IPOPT = {
    "ipopt.print_level": 0,
    "print_time": False,
    "ipopt.tol": 1e-9,
    "ipopt.constr_viol_tol": 1e-10,
    "ipopt.nlp_scaling_method": "gradient-based",
}
OPTY_STORED_OBJECTIVE = 318509.4737417618  # h Σ_{i≥1} (F_i² + T_i²) of opty's stored solution


# -- the car ([MooreVanDenBogert2018] gallery): one set of formulas for JAX and for CasADi -------


class Car(eqx.Module):
    """The bicycle model as a Lagrangian; `xp` is `jax.numpy` or `casadi`."""

    m: float = 1200.0
    a: float = 1.5
    b: float = 1.5

    @property
    def inertia(self):
        return self.m * (2.0**2 + 3.0**2) / 12

    def energy(self, q, v, xp):
        th = q[2]
        xd, yd, thd, ded = v[0], v[1], v[2], v[3]
        fx, fy = xd - self.a * thd * xp.sin(th), yd + self.a * thd * xp.cos(th)  # front axle
        I = self.inertia
        return (
            0.5 * self.m * (xd**2 + yd**2)
            + 0.5 * I * thd**2
            + 0.5 * self.m / 6 * (fx**2 + fy**2)
            + 0.5 * I / 32 * (thd + ded) ** 2
        )

    def __call__(self, q, v):
        return self.energy(q, v, jnp)

    def rows(self, q, xp):
        """No lateral slip of the rear axle (along the car) and of the front axle (along the wheel)."""
        th, de = q[2], q[3]
        return [
            [-xp.sin(th), xp.cos(th), -self.b + 0 * th, 0 * th],
            [-xp.sin(th + de), xp.cos(th + de), self.a * xp.cos(de), 0 * th],
        ]

    def force(self, q, u, xp):
        """Propulsion F = u[0] at the rear axle along the car, steering torque T = u[1]."""
        th = q[2]
        return [u[0] * xp.cos(th), u[0] * xp.sin(th), 0 * th, u[1]]


def car_system(car):
    return gm.LagrangianSystem(
        car, constraint=gm.LinearConstraint(lambda q: jnp.array(car.rows(q, jnp)))
    )


def park_problem(car, N, target=(0.0, 2.0)):
    car = Car(m=jnp.asarray(car.m, float), a=car.a, b=car.b)  # the mass as an array leaf
    z = jnp.zeros(4)
    return gm.OptimalControlProblem(
        car_system(car),
        lambda q, v, u: jnp.stack(car.force(q, u, jnp)),
        2,
        z,
        30.0,
        N,
        v0=z,
        qf=jnp.array([target[0], target[1], 0.0, 0.0]),
        vf=z,
        control_bounds=(jnp.array([-300.0, -50.0]), jnp.array([300.0, 50.0])),
        state_bounds=(
            jnp.array([-jnp.inf, -jnp.inf, -jnp.inf, -np.pi / 4]),
            jnp.array([jnp.inf, jnp.inf, jnp.inf, np.pi / 4]),
        ),
    )


def park_guess(N, dur=30.0):
    """opty's initial guess: x out to 3 m and back, y linear, θ = δ = 0."""
    t = np.linspace(0, dur, N)
    x = 3.0 / dur * 2.0 * t
    x[N // 2 :] = 6.0 - 3.0 / dur * 2.0 * t[N // 2 :]
    return np.stack([x, 2.0 / dur * t, 0 * t, 0 * t], 1)


# -- CasADi: the same DMOC transcription, and opty's backward Euler ------------------------------


def casadi_dmoc_car(car, N, dur=30.0, target=(0.0, 2.0)):
    """DMOC in position–momentum form, as `geomech/_control/_transcription.py`."""
    h = dur / (N - 1)
    q, v = ca.SX.sym("q", 4), ca.SX.sym("v", 4)
    momentum = ca.Function("p", [q, v], [ca.gradient(car.energy(q, v, ca), v)])
    A = ca.Function("A", [q], [ca.vertcat(*[ca.horzcat(*r) for r in car.rows(q, ca)])])
    qa, qb, u = ca.SX.sym("qa", 4), ca.SX.sym("qb", 4), ca.SX.sym("u", 2)
    mid, vbar = qa + (qb - qa) / 2, (qb - qa) / h
    Ld = h * car.energy(mid, vbar, ca)  # midpoint rule
    f = h / 2 * ca.vertcat(*car.force(mid, u, ca))  # f^± of the midpoint rule
    step = ca.Function(
        "step",
        [qa, qb, u],
        [ca.gradient(Ld, qa) + f, ca.gradient(Ld, qb) + f, ca.mtimes(A(mid), vbar)],
    )
    Q, P = ca.SX.sym("Q", 4, N), ca.SX.sym("P", 4, N)
    U, LAM = ca.SX.sym("U", 2, N - 1), ca.SX.sym("LAM", 2, N)
    z4, qf = np.zeros(4), np.array([target[0], target[1], 0.0, 0.0])
    g, J = [Q[:, 0] - z4, Q[:, N - 1] - qf], 0
    for k in range(N - 1):
        minus, plus, dc = step(Q[:, k], Q[:, k + 1], U[:, k])
        p_k = momentum(z4, z4) if k == 0 else P[:, k]
        g += [p_k + minus - ca.mtimes(A(Q[:, k]).T, LAM[:, k]), P[:, k + 1] - plus, dc]
        J += h * ca.sumsqr(U[:, k])
    g.append(P[:, N - 1] - momentum(qf, z4) - ca.mtimes(A(qf).T, LAM[:, N - 1]))
    x = ca.vertcat(ca.vec(Q), ca.vec(P[:, 1:]), ca.vec(U), ca.vec(LAM))
    lbx, ubx = np.full(x.shape[0], -np.inf), np.full(x.shape[0], np.inf)
    iq = np.arange(4 * N).reshape(N, 4)
    lbx[iq[:, 3]], ubx[iq[:, 3]] = -np.pi / 4, np.pi / 4
    iu = 8 * N - 4 + np.arange(2 * (N - 1)).reshape(N - 1, 2)
    lbx[iu[:, 0]], ubx[iu[:, 0]] = -300, 300
    lbx[iu[:, 1]], ubx[iu[:, 1]] = -50, 50
    x0 = np.zeros(x.shape[0])
    x0[: 4 * N] = park_guess(N, dur).ravel()

    def unpack(xs):
        return xs[: 4 * N].reshape(N, 4), xs[iu.ravel()].reshape(N - 1, 2)

    return {"x": x, "f": J, "g": ca.vertcat(*g)}, x0, lbx, ubx, unpack


def casadi_backward_euler_car(car, N, dur=30.0):
    """opty's transcription: states (q, s) with body speeds s = (v_x, v_y, ω, β), at node i
    (q_i - q_{i-1})/h = R(θ_i) s_i, A(q_i) R(θ_i) s_i = 0 and the Lagrange–d'Alembert equations
    with q̈ = R(θ_i)(s_i - s_{i-1})/h + ω_i R'(θ_i) s_i (the constraint forces A^T λ_i eliminated
    by Kane's method in opty, kept as unknowns here: the same solutions); inputs at the nodes,
    objective h Σ_{i≥1} (F_i² + T_i²)."""
    h = dur / (N - 1)
    q, qd = ca.SX.sym("q", 4), ca.SX.sym("qd", 4)
    Lq = car.energy(q, qd, ca)
    dLdv = ca.gradient(Lq, qd)
    M = ca.jacobian(dLdv, qd)
    rest = ca.mtimes(ca.jacobian(dLdv, q), qd) - ca.gradient(Lq, q)  # d/dt ∂L/∂q̇ = M q̈ + rest
    A = ca.vertcat(*[ca.horzcat(*r) for r in car.rows(q, ca)])
    s, ds, u, lam = ca.SX.sym("s", 4), ca.SX.sym("ds", 4), ca.SX.sym("u", 2), ca.SX.sym("lam", 2)
    th = q[2]
    R = ca.vertcat(
        ca.horzcat(ca.cos(th), -ca.sin(th), 0, 0),
        ca.horzcat(ca.sin(th), ca.cos(th), 0, 0),
        ca.horzcat(0, 0, 1, 0),
        ca.horzcat(0, 0, 0, 1),
    )
    qdot = ca.mtimes(R, s)
    qddot = ca.mtimes(R, ds) + s[2] * ca.mtimes(ca.jacobian(ca.mtimes(R, s), th), 1)
    Mf = ca.Function("M", [q, qd], [M, rest])
    M_i, rest_i = Mf(q, qdot)
    F = ca.vertcat(*car.force(q, u, ca))
    node = ca.Function(
        "node",
        [q, s, ds, u, lam],
        [qdot, ca.mtimes(A, qdot), ca.mtimes(M_i, qddot) + rest_i - F - ca.mtimes(A.T, lam)],
    )
    X, S = ca.SX.sym("X", 4, N), ca.SX.sym("S", 4, N)
    U, LAM = ca.SX.sym("U", 2, N), ca.SX.sym("LAM", 2, N)
    g = [X[:, 0], S[:, 0], X[:, N - 1] - np.array([0.0, 2.0, 0.0, 0.0]), S[:, N - 1]]
    J = 0
    for i in range(1, N):
        qdot_i, con, dyn = node(X[:, i], S[:, i], (S[:, i] - S[:, i - 1]) / h, U[:, i], LAM[:, i])
        g += [(X[:, i] - X[:, i - 1]) / h - qdot_i, con, dyn]
        J += h * ca.sumsqr(U[:, i])
    x = ca.vertcat(ca.vec(X), ca.vec(S), ca.vec(U), ca.vec(LAM))
    lbx, ubx = np.full(x.shape[0], -np.inf), np.full(x.shape[0], np.inf)
    ix = np.arange(4 * N).reshape(N, 4)
    lbx[ix[:, 3]], ubx[ix[:, 3]] = -np.pi / 4, np.pi / 4
    iu = 8 * N + np.arange(2 * N).reshape(N, 2)
    lbx[iu[:, 0]], ubx[iu[:, 0]] = -300, 300
    lbx[iu[:, 1]], ubx[iu[:, 1]] = -50, 50
    x0 = np.zeros(x.shape[0])
    x0[: 4 * N] = park_guess(N, dur).ravel()
    x0[4 * N : 8 * N] = 1.0  # opty's guess: ones for everything but x and y
    x0[8 * N :] = 1.0

    def unpack(xs):
        return xs[: 4 * N].reshape(N, 4), xs[iu.ravel()].reshape(N, 2)

    return {"x": x, "f": J, "g": ca.vertcat(*g)}, x0, lbx, ubx, unpack


def run_ipopt(nlp, x0, lbx, ubx, repeat):
    t0 = time.perf_counter()
    solver = ca.nlpsol("solver", "ipopt", nlp, IPOPT)
    build = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sol = solver(x0=x0, lbx=lbx, ubx=ubx, lbg=0, ubg=0)
        times.append(time.perf_counter() - t0)
    stats = solver.stats()
    return np.asarray(sol["x"]).ravel(), {
        "status": stats["return_status"],
        "iterations": int(stats["iter_count"]),
        "objective": float(sol["f"]),
        "build_s": build,
        "solve_s": min(times),
        "max_constraint_violation": float(np.max(np.abs(np.asarray(sol["g"])))),
    }


# -- replaying a plan through the continuous dynamics ---------------------------------------------


def replay(lagrangian, rows, control, q0, v0, switch_ts, u, t1, saveat_ts):
    """`gm.simulate` (Tsit5, rtol = atol = 1e-10) of the system `lagrangian`, `A(q) v = 0` with
    the controls `u[i]` on `[switch_ts[i], switch_ts[i+1])`, stepping exactly at every switch."""

    def force(t, q, v):
        i = jnp.clip(jnp.searchsorted(switch_ts, t, side="right") - 1, 0, len(u) - 1)
        return control(q, v, u[i])

    driven = gm.LagrangianSystem(
        lambda t, q, v: lagrangian(q, v),
        force=force,
        constraint=gm.LinearConstraint(lambda t, q: rows(q)),
        time_dependent=True,
    )
    ctrl = diffrax.PIDController(rtol=1e-10, atol=1e-10, jump_ts=switch_ts[1:-1])
    return gm.simulate(
        driven,
        gm.State(q0, v0),
        0.0,
        t1,
        stepsize_controller=ctrl,
        saveat=diffrax.SaveAt(ts=saveat_ts),
        max_steps=200_000,
    )


def plan_slip(car, nodes, samples=21):
    """max over intervals and s ∈ [0, 1] of |A(q_k + s Δq_k) Δq_k / h|·h / |Δq_k| ... in m/s:
    the lateral slip speed the straight line between two nodes needs."""
    N = nodes.shape[0]
    h = 30.0 / (N - 1)
    dq = np.diff(nodes, axis=0)
    worst = 0.0
    for s in np.linspace(0, 1, samples):
        q = nodes[:-1] + s * dq
        A = np.asarray(jax.vmap(lambda x: jnp.array(car.rows(x, jnp)))(jnp.asarray(q)))
        worst = max(worst, float(np.max(np.abs(np.einsum("kij,kj->ki", A, dq / h)))))
    return worst


def compare_replay(car, nodes, switch_ts, u, target):
    control = lambda q, v, u_: jnp.stack(car.force(q, u_, jnp))
    rows = lambda q: jnp.array(car.rows(q, jnp))
    ts = np.linspace(0, 30.0, nodes.shape[0])
    z = jnp.zeros(4)
    sol = replay(
        car, rows, control, z, z, jnp.asarray(switch_ts), jnp.asarray(u), 30.0, jnp.asarray(ts)
    )
    q = np.asarray(sol.states.q)
    return {
        "end_miss_m": float(np.linalg.norm(q[-1, :2] - np.asarray(target))),
        "end_heading_miss_rad": float(abs(q[-1, 2])),
        "max_plan_to_replay_m": float(np.max(np.linalg.norm(q[:, :2] - nodes[:, :2], axis=1))),
        "plan_slip_m_per_s": plan_slip(car, nodes),
        "replay_max_phi": float(np.max(np.asarray(sol.constraint_residual))),
    }


# -- the sleigh on SE(2) ----------------------------------------------------------------------------


class BodySleigh(eqx.Module):
    """The Chaplygin sleigh on SE(2): body velocity (v_x, v_y, ω) of the blade's contact point,
    centre of mass a = 0.5 ahead of it, m = 1, inertia 0.5 about the centre of mass."""

    a: float = 0.5
    inertia: float = 0.5

    def energy(self, v):
        return 0.5 * (v[0] ** 2 + (v[1] + self.a * v[2]) ** 2) + 0.5 * self.inertia * v[2] ** 2

    def __call__(self, g, v):
        return self.energy(v)


def sleigh_problem(sleigh, N, pose=(2.0, 1.0, np.pi / 2)):
    system = gm.LagrangianSystem(
        sleigh,
        constraint=gm.LinearConstraint(lambda g: jnp.array([[0.0, 1.0, 0.0]])),
        manifold=gm.SE2(),
    )
    z = jnp.zeros(3)
    return gm.OptimalControlProblem(
        system,
        lambda g, v, u: jnp.array([u[0], 0.0, u[1]]),
        2,
        jaxlie.SE2.identity(),
        4.0,
        N,
        v0=z,
        qf=jaxlie.SE2.from_xy_theta(*pose),
        vf=z,
    )


def _se2_right_jacobian(psi):
    """J_r of SE(2) in jaxlie's order (v_x, v_y, ω) ([Sola2018] (163)), series near θ = 0."""
    r1, r2, th = psi[0], psi[1], psi[2]
    small = ca.fabs(th) < 1e-4
    sa = ca.if_else(small, 1 - th**2 / 6, ca.sin(th) / th)
    ca_ = ca.if_else(small, th / 2 - th**3 / 24, (1 - ca.cos(th)) / th)
    c1 = ca.if_else(
        small, -r2 / 2 + th * r1 / 6, (th * r1 - r2 + r2 * ca.cos(th) - r1 * ca.sin(th)) / th**2
    )
    c2 = ca.if_else(
        small, r1 / 2 + th * r2 / 6, (r1 + th * r2 - r1 * ca.cos(th) - r2 * ca.sin(th)) / th**2
    )
    return ca.vertcat(ca.horzcat(sa, ca_, c1), ca.horzcat(-ca_, sa, c2), ca.horzcat(0, 0, 1))


def _se2_log(x0, x1):
    """log(g_0^{-1} g_1) for g_i = (x, y, θ) on the universal cover (θ not wrapped)."""
    th = x1[2] - x0[2]
    c, s = ca.cos(x0[2]), ca.sin(x0[2])
    dx, dy = x1[0] - x0[0], x1[1] - x0[1]
    tx, ty = c * dx + s * dy, -s * dx + c * dy
    small = ca.fabs(th) < 1e-4
    a = ca.if_else(small, 1 - th**2 / 6, ca.sin(th) / th)  # V = [[a, -b], [b, a]]
    b = ca.if_else(small, th / 2 - th**3 / 24, (1 - ca.cos(th)) / th)
    det = a**2 + b**2
    return ca.vertcat((a * tx + b * ty) / det, (-b * tx + a * ty) / det, th)


def casadi_dmoc_sleigh(sleigh, N, dur=4.0, pose=(2.0, 1.0, np.pi / 2)):
    """The same DMOC on SE(2) in CasADi: nodes in coordinates (x, y, θ) of the universal cover,
    increments ψ_k = log(g_k^{-1} g_{k+1}), the left-trivialized discrete momenta
    D_1L_d = -J_r(-ψ)^{-T} ∂_ψ L_d, D_2L_d = J_r(ψ)^{-T} ∂_ψ L_d ([BouRabeeMarsden2009]; L is
    left invariant) and the midpoint virtual work of `gm.VariationalIntegrator`, body momenta."""
    h = dur / (N - 1)
    psi, u = ca.SX.sym("psi", 3), ca.SX.sym("u", 2)
    eta0, eta1 = ca.SX.sym("e0", 3), ca.SX.sym("e1", 3)
    Jr = lambda x: _se2_right_jacobian(x)
    dexp_inv = lambda x, v: ca.solve(Jr(x), v)
    Ld = lambda x: h * sleigh.energy(x / h)  # midpoint rule, left-invariant L
    varied = psi + dexp_inv(psi, eta1) - dexp_inv(-psi, eta0)  # δψ of the variations η_0, η_1
    f = ca.vertcat(u[0], 0, u[1])
    work = h * ca.dot(f, ca.mtimes(Jr(psi / 2), dexp_inv(-psi / 2, eta0) + (varied - psi) / 2))
    action = Ld(varied) + work
    D = ca.Function(
        "D", [psi, u, eta0, eta1], [ca.gradient(action, eta0), ca.gradient(action, eta1)]
    )
    zero = np.zeros(3)
    X, P = ca.SX.sym("X", 3, N), ca.SX.sym("P", 3, N)
    U, LAM = ca.SX.sym("U", 2, N - 1), ca.SX.sym("LAM", 1, N)
    A = np.array([[0.0, 1.0, 0.0]])
    xf = np.array(pose)
    g, J = [X[:, 0] - zero, X[:, N - 1] - xf], 0
    for k in range(N - 1):
        ps = _se2_log(X[:, k], X[:, k + 1])
        minus, plus = D(ps, U[:, k], zero, zero)
        p_k = zero if k == 0 else P[:, k]
        g += [p_k + minus - ca.mtimes(A.T, LAM[:, k]), P[:, k + 1] - plus, ca.mtimes(A, ps / h)]
        J += h * ca.sumsqr(U[:, k])
    g.append(P[:, N - 1] - ca.mtimes(A.T, LAM[:, N - 1]))
    x = ca.vertcat(ca.vec(X), ca.vec(P[:, 1:]), ca.vec(U), ca.vec(LAM))
    x0 = np.zeros(x.shape[0])
    s = np.linspace(0, 1, N)
    x0[: 3 * N] = np.stack([s * xf[0], s * xf[1], s * xf[2]], 1).ravel()
    inf = np.full(x.shape[0], np.inf)
    return {"x": x, "f": J, "g": ca.vertcat(*g)}, x0, -inf, inf


# -- the benchmark ----------------------------------------------------------------------------------


def timed_solve(problem, repeat, guess_q=None):
    fn = eqx.filter_jit(lambda p, g: gm.solve_optimal_control(p, guess_q=g))
    t0 = time.perf_counter()
    compiled = fn.lower(problem, guess_q).compile()
    compile_s = time.perf_counter() - t0
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        sol = jax.block_until_ready(compiled(problem, guess_q))
        times.append(time.perf_counter() - t0)
    return sol, compile_s, min(times), compiled


def summary(sol, compile_s, solve_s):
    return {
        "status": "successful" if sol.result == gm.ControlResult.successful else str(sol.result),
        "iterations": int(sol.steps),
        "objective": float(sol.cost),
        "compile_s": compile_s,
        "solve_s": solve_s,
        "kkt_stationarity": float(sol.stationarity),
        "kkt_complementarity": float(sol.complementarity),
        "max_scaled_equation_residual": float(sol.feasibility),
        "max_discrete_constraint_residual": float(jnp.max(jnp.abs(sol.constraint_residuals))),
        "max_dynamics_residual": float(jnp.max(jnp.abs(sol.dynamics_residuals))),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--out", default=None, help="also write the JSON document to this path")
    args = parser.parse_args()
    N = 41 if args.quick else 121
    repeat = 2 if args.quick else 5
    car = Car()
    out = {"machine": machine_info(), "nodes": N, "park": {}, "sleigh": {}}

    # 1. parallel parking
    problem = park_problem(car, N)
    guess = jnp.asarray(park_guess(N))
    sol, compile_s, solve_s, park_compiled = timed_solve(problem, repeat, guess)
    out["park"]["geomech"] = summary(sol, compile_s, solve_s)
    nlp, x0, lbx, ubx, unpack = casadi_dmoc_car(car, N)
    xs, stats = run_ipopt(nlp, x0, lbx, ubx, repeat)
    out["park"]["casadi-dmoc"] = stats
    nodes_c, u_c = unpack(xs)
    out["park"]["casadi-dmoc"]["max_node_difference_to_geomech"] = float(
        np.max(np.abs(nodes_c - np.asarray(sol.q)))
    )
    nlp, x0, lbx, ubx, unpack_be = casadi_backward_euler_car(car, N)
    xs_be, stats_be = run_ipopt(nlp, x0, lbx, ubx, repeat)
    out["park"]["casadi-backward-euler"] = stats_be | {
        "opty_stored_objective_121_nodes": OPTY_STORED_OBJECTIVE
    }
    out["park"]["objective_ratio_geomech_over_casadi_dmoc"] = (
        out["park"]["geomech"]["objective"] / stats["objective"]
    )
    out["park"]["speedup_geomech_over_casadi_dmoc"] = stats["solve_s"] / solve_s
    ts = np.asarray(sol.ts)
    out["park"]["replay"] = {
        "geomech-dmoc": compare_replay(car, np.asarray(sol.q), ts, np.asarray(sol.u), (0.0, 2.0)),
    }
    nodes_be, u_be = unpack_be(xs_be)
    # backward Euler: u_i acts on (t_{i-1}, t_i]
    out["park"]["replay"]["casadi-backward-euler"] = compare_replay(
        car, nodes_be, ts, u_be[1:], (0.0, 2.0)
    )

    # 2. the sleigh on SE(2)
    Ns = 21 if args.quick else 41
    sleigh = BodySleigh()
    sol_s, compile_s, solve_s, _ = timed_solve(sleigh_problem(sleigh, Ns), repeat)
    out["sleigh"]["nodes"] = Ns
    out["sleigh"]["geomech"] = summary(sol_s, compile_s, solve_s)
    nlp, x0, lbx, ubx = casadi_dmoc_sleigh(sleigh, Ns)
    _, stats_s = run_ipopt(nlp, x0, lbx, ubx, repeat)
    out["sleigh"]["casadi-dmoc"] = stats_s
    out["sleigh"]["objective_ratio_geomech_over_casadi_dmoc"] = (
        out["sleigh"]["geomech"]["objective"] / stats_s["objective"]
    )
    out["sleigh"]["speedup_geomech_over_casadi_dmoc"] = stats_s["solve_s"] / solve_s

    # 3. a batch of 64 parking problems with different targets, one compiled call
    B = 8 if args.quick else 64
    key = jax.random.PRNGKey(0)
    targets = jnp.stack(
        [
            jax.random.uniform(key, (B,), minval=-0.5, maxval=0.5),
            jax.random.uniform(jax.random.split(key)[0], (B,), minval=1.5, maxval=2.5),
        ],
        1,
    )
    batch = eqx.filter_jit(
        jax.vmap(
            lambda t: gm.solve_optimal_control(park_problem(car, N, (t[0], t[1])), guess_q=guess)
        )
    )
    t0 = time.perf_counter()
    compiled = batch.lower(targets).compile()
    compile_b = time.perf_counter() - t0
    t0 = time.perf_counter()
    sols = jax.block_until_ready(compiled(targets))
    wall = time.perf_counter() - t0
    ok = np.asarray(sols.result._value == gm.ControlResult.successful._value)
    out["batch"] = {
        "problems": B,
        "compile_s": compile_b,
        "solve_s": wall,
        "problems_per_s": B / wall,
        "successful": int(ok.sum()),
        "max_iterations": int(jnp.max(sols.steps)),
        "max_discrete_constraint_residual": float(jnp.max(jnp.abs(sols.constraint_residuals))),
        "casadi_sequential_estimate_s": B * stats["solve_s"],
    }

    # 4. d(optimal cost)/d(mass): implicit vs central finite differences of re-solved problems
    # (the finite differences reuse the compiled solve: the problems differ in values only)
    def cost_of(m):
        return gm.solve_optimal_control(park_problem(Car(m=m), N), guess_q=guess).cost

    m0 = jnp.asarray(1200.0)
    t0 = time.perf_counter()
    g = float(eqx.filter_jit(jax.grad(cost_of))(m0))
    grad_s = time.perf_counter() - t0
    eps = 1e-3 * 1200.0
    plus = park_compiled(park_problem(Car(m=m0 + eps), N), guess)
    minus = park_compiled(park_problem(Car(m=m0 - eps), N), guess)
    fd = float((plus.cost - minus.cost) / (2 * eps))
    out["sensitivity"] = {
        "dcost_dmass_implicit": g,
        "dcost_dmass_central_fd": fd,
        "relative_difference": abs(g - fd) / abs(fd),
        "fd_step_kg": eps,
        "grad_first_call_s_incl_compile": grad_s,
    }
    finish(out)
    if args.out:
        import json

        with open(args.out, "w") as fh:
            json.dump(out, fh, indent=1)


if __name__ == "__main__":
    main()
