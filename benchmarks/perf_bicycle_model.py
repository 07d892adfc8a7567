"""A bicycle-sized stand-in for compile-time measurements (issue 15, item 3), built with
`gm.from_sympy`.

Whipple-like geometry without simplification: 8 coordinates (rear contact x, y; yaw, roll, pitch of
the rear frame; steer; the two wheel angles), four bodies (rear frame, rear wheel, front frame,
front wheel) with full rotation-matrix kinematics, one holonomic constraint (the front wheel
touches the ground) and four rolling constraints (both contact points have zero horizontal
velocity). The Lagrangian has several thousand operations once lambdified. Not a validated
bicycle model: its only purpose is to be as large as one.
"""

import functools

import jax.numpy as jnp
import sympy as sp
from sympy.physics.mechanics import dynamicsymbols

import geomech as gm


def _rot(axis, a):
    c, s = sp.cos(a), sp.sin(a)
    if axis == "x":
        return sp.Matrix([[1, 0, 0], [0, c, -s], [0, s, c]])
    if axis == "y":
        return sp.Matrix([[c, 0, s], [0, 1, 0], [-s, 0, c]])
    return sp.Matrix([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _rodrigues(u, a):
    K = sp.Matrix([[0, -u[2], u[1]], [u[2], 0, -u[0]], [-u[1], u[0], 0]])
    return sp.eye(3) + sp.sin(a) * K + (1 - sp.cos(a)) * K * K


def _omega(R, t):
    """Angular velocity in the world frame: skew(ω) = Ṙ Rᵀ."""
    W = R.diff(t) * R.T
    return sp.Matrix([W[2, 1], W[0, 2], W[1, 0]])


@functools.cache
def bicycle_like():
    """`(system, state)`: the stand-in system and a consistent initial state (upright, rolling)."""
    t = dynamicsymbols._t
    x, y, psi, phi, theta, delta, br, bf = q = dynamicsymbols(
        "x y psi phi theta delta beta_r beta_f"
    )
    names = "m_r m_rw m_f m_fw I_r1 I_r2 I_r3 I_f1 I_f2 I_f3 I_w1 I_w2"
    names += " r_r r_f a_r c_r w_1 w_2 f_1 f_2 lam g"
    P = sp.symbols(names)
    (
        m_r,
        m_rw,
        m_f,
        m_fw,
        Ir1,
        Ir2,
        Ir3,
        If1,
        If2,
        If3,
        Iw1,
        Iw2,
        r_r,
        r_f,
        a_r,
        c_r,
        w1,
        w2,
        f1,
        f2,
        lam,
        g,
    ) = P
    values = dict(
        zip(
            P,
            [
                12.0,
                2.0,
                3.0,
                3.0,
                1.0,
                1.5,
                0.6,
                0.3,
                0.25,
                0.1,
                0.06,
                0.12,
                0.3,
                0.35,
                0.3,
                -0.9,
                1.0,
                -0.5,
                0.05,
                0.1,
                0.3,
                9.81,
            ],
            strict=True,
        )
    )
    z = sp.Matrix([0, 0, 1])
    Ryaw_roll = _rot("z", psi) * _rot("x", phi)
    RB = Ryaw_roll * _rot("y", theta)
    rear_contact = sp.Matrix([x, y, 0])
    rear_center = rear_contact + Ryaw_roll * sp.Matrix([0, 0, r_r])
    rear_cm = rear_center + RB * sp.Matrix([a_r, 0, c_r])
    u = sp.Matrix([sp.sin(lam), 0, sp.cos(lam)])
    RF = RB * _rodrigues(u, delta)
    front_center = rear_center + RB * sp.Matrix([w1, 0, w2])
    front_cm = front_center + RF * sp.Matrix([f1, 0, f2])
    n_f = RF * sp.Matrix([0, 1, 0])  # front axle
    down = z - z.dot(n_f) * n_f
    front_contact = front_center - r_f * down / sp.sqrt(down.dot(down))
    w_B, w_F = _omega(RB, t), _omega(RF, t)
    w_rw = w_B + br.diff(t) * (RB * sp.Matrix([0, 1, 0]))
    w_fw = w_F + bf.diff(t) * n_f
    body = lambda R, w, I: (R.T * w).T * sp.diag(*I) * (R.T * w)
    T = 0
    for m, p in ((m_r, rear_cm), (m_rw, rear_center), (m_f, front_cm), (m_fw, front_center)):
        vp = p.diff(t)
        T += m * vp.dot(vp) / 2
    T += body(RB, w_B, (Ir1, Ir2, Ir3))[0] / 2 + body(RF, w_F, (If1, If2, If3))[0] / 2
    T += body(RB, w_rw, (Iw1, Iw2, Iw1))[0] / 2 + body(RF, w_fw, (Iw1, Iw2, Iw1))[0] / 2
    V = g * (m_r * rear_cm[2] + m_rw * rear_center[2] + m_f * front_cm[2] + m_fw * front_center[2])
    rolling = []
    for center, contact, w in (
        (rear_center, rear_contact, w_rw),
        (front_center, front_contact, w_fw),
    ):
        vc = center.diff(t) + w.cross(contact - center)
        rolling += [vc[0], vc[1]]
    system = gm.from_sympy(
        T - V, q, constraints=rolling, holonomic=[front_contact[2]], parameters=values
    )
    return system


def initial_state(system, speed=3.0):
    """An upright state, projected onto the constraints (pitch and rolling velocities)."""
    n = 8
    q = jnp.zeros(n).at[3].set(0.05).at[5].set(0.1)
    v = jnp.zeros(n).at[3].set(0.1).at[6].set(speed / 0.3)
    return gm.project_to_constraints(system, gm.State(q, v))


if __name__ == "__main__":
    import time

    import jax

    jax.config.update("jax_enable_x64", True)
    t = time.perf_counter()
    s = bicycle_like()
    print(f"sympy build {time.perf_counter() - t:.1f}s")
    st = initial_state(s)
    print(st)
    jp = jax.make_jaxpr(lambda q, v: s.L(0.0, q, v))(st.q, st.v)
    print("L ops", len(jp.jaxpr.eqns))
    print(gm.acceleration(s, st))
