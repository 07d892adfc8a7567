"""A bicycle-sized benchmark system derived with SymPy: a Whipple-type bicycle.

Four rigid bodies — rear wheel R, rear frame with rider B, front frame (fork and handlebar) H, front
wheel F — with the benchmark parameters of [MeijaardEtAl2007], Table 1. The equations are written
here from first principles in this file's own conventions ($z$ **up**, so the paper's $z$
coordinates and products of inertia change sign); the model is a consistent mechanical system
(energy is conserved, the rolling constraints hold) but has **not** been validated against the
paper's eigenvalues: it is a benchmark of size, not a reference bicycle.

Coordinates $q = (x, y, \\psi, \\varphi, \\theta, \\theta_R, \\delta, \\theta_F)$: rear contact
point $(x, y)$ on the ground $z = 0$, yaw $\\psi$, roll (lean) $\\varphi$, pitch $\\theta$ of the
rear frame, rear-wheel angle $\\theta_R$ (relative to the yawed and rolled frame), steer $\\delta$
about the steer axis, front-wheel angle $\\theta_F$ (relative to the front frame). Orientations:
$R_{\\text{roll}} = R_z(\\psi)R_x(\\varphi)$, rear wheel $R_{\\text{roll}}R_y(\\theta_R)$, rear
frame $R_B = R_{\\text{roll}}R_y(\\theta)$, front frame $R_H = R_B\\,\\mathrm{Rot}_u(\\delta)$ about
the steer axis $u = (-\\sin\\lambda, 0, \\cos\\lambda)$ through the point at trail $c$ ahead of the
front contact, front wheel $R_H R_y(\\theta_F)$. In the upright reference configuration ($q = 0$)
the rear contact is at the origin, the front wheel centre at $(w, 0, r_F)$, so $\\theta = 0$ there.

Constraints, $k = 5$ on $n = 8$ coordinates (3 degrees of freedom: roll, steer, forward speed):

- **1 holonomic**: the front wheel touches the ground, $h(q) = c_{F,z} - r_F\\sqrt{1 - a_z^2} = 0$
  with $c_F$ the front wheel centre and $a = R_H e_y$ its axle (the lowest point of a circle of
  radius $r_F$, centre $c_F$, axis $a$ is $c_F + r_F(-e_z + a_z a)/\\sqrt{1 - a_z^2}$);
- **4 nonholonomic** (rolling without slipping): the horizontal velocity of the material point
  of each wheel at its contact is zero, $(\\dot c + \\omega \\times (p - c))_{x, y} = 0$ (the
  vertical component is $\\dot h$, implied by the holonomic constraint).

$L = \\sum_{b} \\tfrac12 m_b|\\dot c_b|^2 + \\tfrac12 \\Omega_b^T I_b \\Omega_b - m_b g\\, c_{b,z}$
over the four bodies, with body angular velocities $\\Omega_b = (R_b^T\\dot R_b)^\\vee$ and time
derivatives $\\dot f = \\partial_q f\\, v$. No simplification is applied: the Lagrangian has several
thousand operations, as a user's symbolic derivation would give (`lagrangian_size` counts them).

    from benchmarks.bicycle import bicycle, upright_state   # or load this file by path
    system = bicycle()                                      # a gm.LagrangianSystem (n = 8, k = 5)
    s0 = upright_state(system, speed=4.0, roll=0.05)        # a State on the constraint manifold
"""

import functools

import jax
import jax.numpy as jnp

import geomech as gm

COORDINATES = ("x", "y", "psi", "phi", "theta", "theta_R", "delta", "theta_F")

# [MeijaardEtAl2007] Table 1 (SI units). z values are heights above the ground here (the paper's
# z axis points down), and the paper's products of inertia I_xz change sign with z.
BENCHMARK_PARAMETERS = {
    "w": 1.02,  # wheelbase
    "c": 0.08,  # trail
    "lam": 3.141592653589793 / 10,  # steer axis tilt from the vertical
    "g": 9.81,
    "rR": 0.3,
    "mR": 2.0,
    "IRxx": 0.0603,
    "IRyy": 0.12,
    "xB": 0.3,
    "zB": 0.9,
    "mB": 85.0,
    "IBxx": 9.2,
    "IByy": 11.0,
    "IBzz": 2.8,
    "IBxz": -2.4,
    "xH": 0.9,
    "zH": 0.7,
    "mH": 4.0,
    "IHxx": 0.05892,
    "IHyy": 0.06,
    "IHzz": 0.00708,
    "IHxz": 0.00756,
    "rF": 0.35,
    "mF": 3.0,
    "IFxx": 0.1405,
    "IFyy": 0.28,
}


def _sympy():
    import sympy

    return sympy


def _rot(sp, axis, a):
    c, s = sp.cos(a), sp.sin(a)
    rows = {
        "x": [[1, 0, 0], [0, c, -s], [0, s, c]],
        "y": [[c, 0, s], [0, 1, 0], [-s, 0, c]],
        "z": [[c, -s, 0], [s, c, 0], [0, 0, 1]],
    }[axis]
    return sp.Matrix(rows)


def _rodrigues(sp, u, a):
    """Rotation by `a` about the unit axis `u` (Rodrigues):
    $I\\cos a + \\sin a\\,[u]_\\times + (1 - \\cos a)uu^T$."""
    ux = sp.Matrix([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return sp.eye(3) * sp.cos(a) + ux * sp.sin(a) + (u * u.T) * (1 - sp.cos(a))


def _vee(S):
    return S.__class__([S[2, 1], S[0, 2], S[1, 0]])


@functools.cache
def bicycle_expressions():
    """The symbolic model: `(L, h, phi, q, v, params)` with `L` the Lagrangian, `h` the holonomic
    constraint (a list of one expression), `phi` the four rolling constraints, `q`, `v` the
    coordinate and velocity symbols and `params` the dict symbol -> value of Table 1."""
    sp = _sympy()
    q = sp.symbols("x y psi phi theta theta_R delta theta_F")
    v = sp.symbols("v_x v_y v_psi v_phi v_theta v_theta_R v_delta v_theta_F")
    P = {name: sp.Symbol(name) for name in BENCHMARK_PARAMETERS}
    x, y, psi, phi, theta, thR, delta, thF = q

    def ddt(expr):  # time derivative along v: df/dt = (∂f/∂q) v
        return expr.applyfunc(lambda e: sum(e.diff(qi) * vi for qi, vi in zip(q, v, strict=True)))

    def omega_world(R):  # ω^ = Ṙ Rᵀ
        return _vee(ddt(R) * R.T)

    def omega_body(R):  # Ω^ = Rᵀ Ṙ
        return _vee(R.T * ddt(R))

    ez, ey = sp.Matrix([0, 0, 1]), sp.Matrix([0, 1, 0])
    R_roll = _rot(sp, "z", psi) * _rot(sp, "x", phi)
    R_RW = R_roll * _rot(sp, "y", thR)
    R_B = R_roll * _rot(sp, "y", theta)
    u = sp.Matrix([-sp.sin(P["lam"]), 0, sp.cos(P["lam"])])  # steer axis, tilted backwards
    R_H = R_B * _rodrigues(sp, u, delta)
    R_FW = R_H * _rot(sp, "y", thF)

    cR = sp.Matrix([x, y, 0]) + P["rR"] * R_roll * ez  # rear wheel centre
    # points of the rear frame relative to cR in the reference configuration
    s = sp.Matrix([P["w"] + P["c"], 0, -P["rR"]])  # steer axis meets the ground (trail c)
    pB = sp.Matrix([P["xB"], 0, P["zB"] - P["rR"]])
    pH = sp.Matrix([P["xH"], 0, P["zH"] - P["rR"]])
    f0 = sp.Matrix([P["w"], 0, P["rF"] - P["rR"]])
    steer = _rodrigues(sp, u, delta)
    cB = cR + R_B * pB
    cH = cR + R_B * (s + steer * (pH - s))
    cF = cR + R_B * (s + steer * (f0 - s))

    a = R_H * ey  # front axle
    sin_tilt = sp.sqrt(1 - a[2] ** 2)
    down = (-ez + a[2] * a) / sin_tilt  # unit vector from cF to the front contact
    h = cF[2] - P["rF"] * sin_tilt  # front contact height (the lowest point of the wheel)

    slip_R = ddt(cR) + omega_world(R_RW).cross(-P["rR"] * R_roll * ez)
    slip_F = ddt(cF) + omega_world(R_FW).cross(P["rF"] * down)
    rolling = [slip_R[0], slip_R[1], slip_F[0], slip_F[1]]

    def inertia(xx, yy, zz, xz):
        return sp.Matrix([[xx, 0, xz], [0, yy, 0], [xz, 0, zz]])

    bodies = [
        (P["mR"], cR, R_RW, inertia(P["IRxx"], P["IRyy"], P["IRxx"], 0)),
        (P["mB"], cB, R_B, inertia(P["IBxx"], P["IByy"], P["IBzz"], P["IBxz"])),
        (P["mH"], cH, R_H, inertia(P["IHxx"], P["IHyy"], P["IHzz"], P["IHxz"])),
        (P["mF"], cF, R_FW, inertia(P["IFxx"], P["IFyy"], P["IFxx"], 0)),
    ]
    L = 0
    for m, c_b, R_b, I_b in bodies:
        vc, Om = ddt(c_b), omega_body(R_b)
        L += m * vc.dot(vc) / 2 + (Om.T * I_b * Om)[0] / 2 - m * P["g"] * c_b[2]
    params = {P[k]: val for k, val in BENCHMARK_PARAMETERS.items()}
    return L, [h], rolling, q, v, params


def lagrangian_size() -> dict:
    """Operation counts of the symbolic Lagrangian: as built, and after common-subexpression
    elimination (what `lambdify(..., cse=True)` evaluates)."""
    sp = _sympy()
    L, _, _, _, _, _ = bicycle_expressions()
    subs, (reduced,) = sp.cse(L)
    return {
        "ops": int(sp.count_ops(L)),
        "ops_after_cse": int(sum(sp.count_ops(e) for _, e in subs) + sp.count_ops(reduced)),
    }


def bicycle() -> gm.LagrangianSystem:
    """The bicycle as a `gm.LagrangianSystem` built by `gm.from_sympy` (n = 8; one holonomic and
    four rolling constraints)."""
    L, h, rolling, q, v, params = bicycle_expressions()
    return gm.from_sympy(L, q, v, holonomic=h, constraints=rolling, parameters=params)


def upright_state(
    system: gm.LagrangianSystem, speed=4.0, roll=0.0, steer=0.0, roll_rate=0.0, steer_rate=0.0
) -> gm.State:
    """A state on the constraint manifold: the given roll and steer (the pitch $\\theta$ solved from
    $h = 0$ by Newton's method), forward speed `speed` $= r_R\\dot\\theta_R$, roll and steer rates;
    the other five velocities solved from the five constraint rows $A v = 0$.

    Traceable (jit, vmap over the arguments)."""
    p = BENCHMARK_PARAMETERS
    dtype = jnp.result_type(float)
    z = jnp.zeros((), dtype)
    q = jnp.stack([z, z, z, z + roll, z, z, z + steer, z])
    h = lambda th: system.position_residual(gm.State(q.at[4].set(th), jnp.zeros_like(q)))[0]
    theta = z
    for _ in range(8):  # Newton on the pitch; h is smooth and θ ≈ 0 near upright
        theta = theta - h(theta) / jax.grad(h)(theta)
    q = q.at[4].set(theta)
    free, dep = jnp.array([3, 5, 6]), jnp.array([0, 1, 2, 4, 7])
    v_free = jnp.stack([z + roll_rate, z + speed / p["rR"], z + steer_rate])
    A = jax.jacfwd(lambda v: system.constraint_residual(gm.State(q, v)))(jnp.zeros(8, dtype))
    v_dep = jnp.linalg.solve(A[:, dep], -A[:, free] @ v_free)  # the constraints are linear in v
    v = jnp.zeros(8, dtype).at[free].set(v_free).at[dep].set(v_dep)
    return gm.State(q, v)
