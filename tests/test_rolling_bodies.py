"""Rolling without slipping on a plane (`gm.RollingBody`, `gm.rolling_constraint`, the surfaces)
and the rolling balls of the model library, each against an independent reference: the contact
geometry computed directly, the constraint written by hand, Newton–Euler equations of a rolling
body written from the physics in NumPy, closed forms and the classic integrals."""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from helpers import GeneralBodies, solvers
from helpers import accelerations as every_acceleration

import geomech as gm
import geomech.models as gmm

E3 = np.array([0.0, 0.0, 1.0])
P = np.eye(3)[:2]


def hat(w):
    return np.array([[0.0, -w[2], w[1]], [w[2], 0.0, -w[0]], [-w[1], w[0], 0.0]])


def random_rotation(rng):
    return jaxlie.SO3.exp(jnp.asarray(rng.normal(size=3)))


def vertical(R):
    """γ = Rᵀe₃ for one rotation or a batch."""
    return np.asarray(jax.vmap(lambda R: R.inverse().apply(jnp.asarray(E3)))(R))


# -- the contact geometry and the constraint -------------------------------------------------


def test_sphere_constraint_is_the_classic_one():
    """For a ball of radius a (centre at the body origin): A(q) v = 0 is ẋ = a [(Rω) × e₃]_xy,
    written by hand as A = [a P ê₃ R, I₂]; the height is a."""
    rng = np.random.default_rng(0)
    a = 0.7
    constraint = gm.rolling_constraint(gm.Sphere(a))
    body = gm.RollingBody(gm.RigidBody(1.0, np.array([0.3, 0.4, 0.5])), gm.Sphere(a))
    for _ in range(3):
        R, x = random_rotation(rng), jnp.asarray(rng.normal(size=2))
        w = rng.normal(size=3)
        Rm = np.asarray(R.as_matrix())
        A = np.concatenate([a * P @ hat(E3) @ Rm, np.eye(2)], axis=1)
        np.testing.assert_allclose(constraint.A_of_q((R, x)), A, rtol=1e-14, atol=1e-14)
        v = np.concatenate([w, a * P @ np.cross(Rm @ w, E3)])
        np.testing.assert_allclose(body.rolling_velocity((R, x), jnp.asarray(w)), v, atol=1e-14)
        np.testing.assert_allclose(body.position((R, x)), [*x, a], rtol=1e-14)
        np.testing.assert_allclose(body.contact((R, x)), [*x, 0.0], atol=1e-14)


def test_ellipsoid_contact_point_and_height():
    """The closed form s = -D²γ/|Dγ| and z = |Dγ| against a direct computation: s lies on the
    ellipsoid, its outward normal there (∝ D⁻² s) is -γ, no sampled surface point lies lower, and
    the support function h(u) = |Du| by automatic differentiation (`gm.SupportFunction`) agrees."""
    rng = np.random.default_rng(1)
    d = np.array([0.2, 0.03, 0.02])
    ellipsoid = gm.Ellipsoid(d)
    general = gm.SupportFunction(lambda u: jnp.sqrt(u @ (d**2 * u)))
    theta, phi = np.meshgrid(np.linspace(0, np.pi, 400), np.linspace(0, 2 * np.pi, 800))
    unit = np.stack([np.sin(theta) * np.cos(phi), np.sin(theta) * np.sin(phi), np.cos(theta)], -1)
    surface = (d * unit).reshape(-1, 3)
    for _ in range(4):
        gamma = rng.normal(size=3)
        gamma /= np.linalg.norm(gamma)
        s = np.asarray(ellipsoid.contact_point(jnp.asarray(gamma)))
        z = float(ellipsoid.height(jnp.asarray(gamma)))
        np.testing.assert_allclose(np.sum(s**2 / d**2), 1.0, rtol=1e-13)
        normal = s / d**2
        np.testing.assert_allclose(normal / np.linalg.norm(normal), -gamma, atol=1e-13)
        np.testing.assert_allclose(z, -s @ gamma, rtol=1e-13)
        np.testing.assert_allclose(z, np.sqrt(gamma @ (d**2 * gamma)), rtol=1e-13)
        assert np.min(surface @ gamma) >= -z - 1e-12 and np.min(surface @ gamma) < -z + 1e-4 * d[0]
        np.testing.assert_allclose(general.contact_point(jnp.asarray(gamma)), s, atol=1e-15)
        np.testing.assert_allclose(general.height(jnp.asarray(gamma)), z, rtol=1e-14)


def test_thin_disk_contact_point():
    """The rim point of a disk (radius r, normal n) lowest along γ: in the disk's plane, on the
    rim, and below every sampled rim point."""
    rng = np.random.default_rng(2)
    r, n = 0.5, np.array([1.0, 2.0, -0.5]) / np.linalg.norm([1.0, 2.0, -0.5])
    disk = gm.ThinDisk(r, axis=n)
    e1 = np.cross(n, [0.0, 0.0, 1.0])
    e1 /= np.linalg.norm(e1)
    e2 = np.cross(n, e1)
    angles = np.linspace(0, 2 * np.pi, 100_000)
    rim = r * (np.cos(angles)[:, None] * e1 + np.sin(angles)[:, None] * e2)
    for _ in range(3):
        gamma = rng.normal(size=3)
        gamma /= np.linalg.norm(gamma)
        s = np.asarray(disk.contact_point(jnp.asarray(gamma)))
        assert abs(s @ n) < 1e-15 and abs(np.linalg.norm(s) - r) < 1e-15
        assert np.min(rim @ gamma) >= s @ gamma - 1e-15
        assert np.min(rim @ gamma) < s @ gamma + 1e-8
    np.testing.assert_allclose(gm.ThinDisk(r, axis=1).axis, [0.0, 1.0, 0.0])


def test_turntable_constraint_is_the_material_point_velocity():
    """On a table turning at Ω, the residual A v + c is the horizontal difference between the
    velocity of the body's material contact point, Ẋ + R(ω × s), and the table's there, Ω e₃ × x_c,
    both computed by hand in space (an ellipsoid off its centre: s from the closed form)."""
    rng = np.random.default_rng(3)
    d, Omega = np.array([0.3, 0.2, 0.1]), 1.7
    body = gm.RollingBody(
        gm.RigidBody(1.0, np.array([0.3, 0.4, 0.5])), gm.Ellipsoid(d), table_rate=Omega
    )
    constraint = body.constraint()
    for _ in range(3):
        R, x = random_rotation(rng), jnp.asarray(rng.normal(size=2))
        w, xdot = rng.normal(size=3), rng.normal(size=2)
        Rm, gamma = np.asarray(R.as_matrix()), np.asarray(R.inverse().apply(jnp.asarray(E3)))
        s = -(d**2) * gamma / np.sqrt(gamma @ (d**2 * gamma))
        xc = np.concatenate([np.asarray(x), [0.0]]) + P.T @ P @ Rm @ s
        material = np.concatenate([xdot, [0.0]]) + Rm @ np.cross(w, s)
        expected = P @ (material - Omega * np.cross(E3, xc))
        v = jnp.concatenate([jnp.asarray(w), jnp.asarray(xdot)])
        got = constraint.A_of_q((R, x)) @ v + constraint.c_of_q((R, x))
        np.testing.assert_allclose(got, expected, rtol=1e-13, atol=1e-14)
        # the vertical row holds by the height's derivative: ż + [R(ω × s)]_z = 0
        height = lambda p, R=R, x=x: body.position((R @ jaxlie.SO3.exp(p), x))[2]
        zdot = jax.jvp(height, (jnp.zeros(3),), (jnp.asarray(w),))[1]
        np.testing.assert_allclose(zdot + (Rm @ np.cross(w, s))[2], 0.0, atol=1e-14)
        on_c = body.rolling_velocity((R, x), jnp.asarray(w))
        residual = constraint.A_of_q((R, x)) @ on_c + constraint.c_of_q((R, x))
        np.testing.assert_allclose(residual, 0.0, atol=1e-14)


# -- accelerations against Newton–Euler, every solver -----------------------------------------


def newton_euler(body, s_of_gamma, R, x, w):
    """ω̇ and ẍ of a body rolling on the fixed plane, from Newton's and Euler's laws in the body
    frame (NumPy): r = s − c the contact point seen from the centre of mass, the contact force
    F = m(a_G + gγ) with a_G = r × ω̇ − ω × ṙ − ω × (ω × r) (the centre of mass moves with
    −ω × r), and I ω̇ + ω × Iω = r × F; ṙ = ṡ = Ds γ̇, γ̇ = γ × ω."""
    m, I, c = (
        np.asarray(body.body.mass),
        np.asarray(body.body.inertia),
        np.asarray(body.body.centre_of_mass),
    )
    g = float(body.g)
    gamma = np.asarray(R.inverse().apply(jnp.asarray(E3)))
    s = np.asarray(s_of_gamma(gamma))
    eps = 1e-6  # ṡ by central differences along γ̇
    gdot = np.cross(gamma, w)
    sdot = (
        np.asarray(s_of_gamma(gamma + eps * gdot)) - np.asarray(s_of_gamma(gamma - eps * gdot))
    ) / (2 * eps)
    r = s - c
    lhs = I - m * hat(r) @ hat(r)
    rhs = -np.cross(w, I @ w) + m * np.cross(
        r, -np.cross(w, sdot) - np.cross(w, np.cross(w, r)) + g * gamma
    )
    wdot = np.linalg.solve(lhs, rhs)
    Rm = np.asarray(R.as_matrix())
    # the origin's velocity is R(-ω × s): its horizontal acceleration
    xddot = P @ Rm @ (np.cross(w, -np.cross(w, s)) - np.cross(wdot, s) - np.cross(w, sdot))
    return np.concatenate([wdot, xddot])


def _states_on_c(body, rng, count):
    out = []
    for _ in range(count):
        q = (random_rotation(rng), jnp.asarray(rng.normal(size=2)))
        out.append(gm.State(q, body.rolling_velocity(q, jnp.asarray(rng.normal(size=3) * 2))))
    return out


def accelerations(system, states):
    """The accelerations at `states` of every solver."""
    return every_acceleration(system, states, solvers())


@pytest.mark.parametrize("cls", [gmm.ChaplyginSphere, gmm.RouthSphere])
def test_ball_accelerations_against_newton_euler(cls):
    """Every solver gives the Newton–Euler accelerations at random states on C."""
    rng = np.random.default_rng(4)
    model = cls()
    body = model.rolling_body()
    a = float(model.a)
    system = model.system()
    states = _states_on_c(body, rng, 3)
    accs = accelerations(system, states)
    for i, state in enumerate(states):
        R, x = state.q
        expected = newton_euler(
            body, lambda gam: -a * gam / np.linalg.norm(gam), R, x, np.asarray(state.v[:3])
        )
        for solver_name, a_solver in accs.items():
            np.testing.assert_allclose(
                a_solver[i],
                expected,
                rtol=1e-7,
                atol=1e-7 * np.abs(expected).max(),
                err_msg=solver_name,
            )


def test_ellipsoid_accelerations_against_newton_euler():
    """A generic convex body: an ellipsoid with its centre of mass off the centre and a full
    inertia tensor (the rattleback's structure), against Newton–Euler, every solver."""
    rng = np.random.default_rng(5)
    d = np.array([0.3, 0.2, 0.1])
    B = rng.normal(size=(3, 3)) * 0.1
    inertia = B @ B.T + 0.05 * np.eye(3)
    body = gm.RollingBody(
        gm.RigidBody(1.3, inertia, np.array([0.01, -0.02, -0.03])), gm.Ellipsoid(d)
    )
    system = body.system()
    s_of_gamma = lambda gam: -(d**2) * gam / np.sqrt(gam @ (d**2 * gam))
    states = _states_on_c(body, rng, 3)
    accs = accelerations(system, states)
    for i, state in enumerate(states):
        R, x = state.q
        expected = newton_euler(body, s_of_gamma, R, x, np.asarray(state.v[:3]))
        for solver_name, a_solver in accs.items():
            np.testing.assert_allclose(
                a_solver[i],
                expected,
                rtol=1e-7,
                atol=1e-7 * np.abs(expected).max(),
                err_msg=solver_name,
            )


def test_turntable_ball_every_solver_agrees():
    """The affine constraint (turntable): every solver gives the same accelerations, and the
    centre's acceleration is (2Ω/7) e₃ × u (the closed form, [Routh1905])."""
    rng = np.random.default_rng(6)
    model = gmm.TurntableBall()
    body, system, Omega = model.rolling_body(), model.system(), float(model.Omega)
    states = _states_on_c(body, rng, 3)
    accs = accelerations(system, states)
    u = np.stack([np.asarray(s.v[3:]) for s in states])
    expected = 2 * Omega / 7 * np.stack([-u[:, 1], u[:, 0]], -1)
    np.testing.assert_allclose(accs["projection"][:, 3:], expected, rtol=1e-12, atol=1e-13)
    for solver_name, a in accs.items():
        np.testing.assert_allclose(
            a, accs["projection"], rtol=1e-10, atol=1e-12, err_msg=solver_name
        )


@pytest.mark.parametrize("cls", [gmm.Rattleback, gmm.RollingDiskSO3, gmm.TurntableBall])
def test_closed_forms_equal_the_general_paths(cls):
    """A rolling body's Lagrangian gives Kane's equations from its closed-form partial velocities
    and their rates (`ExplicitBodiesForm`), its rolling constraint $\\phi$, $A$, $b$ in closed form
    (`AbstractRatedField`); the same Lagrangian read through its velocities only takes
    `BodiesForm`, as an arbitrary function autodiff, and the same constraint as plain functions
    is differentiated. All stages agree to round-off at random states, on C or not, also on a
    turntable (the constraint's free term), and so do the accelerations (one solver: the stages
    are what every solver shares; tests/test_rigid_body.py compares the forms with every
    solver)."""
    rng = np.random.default_rng(8)
    body = cls().rolling_body()
    fast = body.system()
    rows, free = fast.constraint.A_of_q, fast.constraint.c_of_q
    plain = gm.LinearConstraint(
        lambda q: rows(q), None if free is None else (lambda q: free(q))
    )
    general = lambda L: eqx.tree_at(
        lambda s: (s.lagrangian, s.form, s.constraint), fast,
        (L, gm.LagrangianSystem(L).form, plain),
    )
    systems = (fast, general(GeneralBodies(fast.lagrangian)), general(lambda q, v: body.lagrangian(q, v)))
    assert [type(s.form).__name__ for s in systems] == [
        "ExplicitBodiesForm", "BodiesForm", "AutodiffForm"
    ]
    assert [s.constraint.closed_form() is not None for s in systems] == [True, False, False]
    assert (free is None) == (cls is not gmm.TurntableBall)
    on_c = _states_on_c(body, rng, 2)
    off_c = [gm.State(s.q, s.v + jnp.asarray(rng.normal(size=5))) for s in on_c]
    for state in on_c + off_c:
        stages = [eqx.filter_jit(gm.assemble)(s, state) for s in systems]
        for name in ("M", "Q", "phi", "A", "b"):
            ref = np.asarray(getattr(stages[2], name))
            for other in stages[:2]:
                np.testing.assert_allclose(
                    getattr(other, name), ref, rtol=0, atol=1e-13 * max(np.abs(ref).max(), 1.0),
                    err_msg=name,
                )
    named = {"projection": gm.Projection()}
    a = [every_acceleration(s, on_c, named)["projection"] for s in systems]
    for other in a[:2]:
        np.testing.assert_allclose(other, a[2], rtol=0, atol=1e-12 * np.abs(a[2]).max())


# -- the models over time: integrals and closed forms -----------------------------------------


def _simulate(model, state, t1, points=21):
    ts = jnp.linspace(0.0, t1, points)
    sol = gm.simulate(
        model.system(), state, 0.0, t1, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10
    )
    R, x = sol.states.q
    return np.asarray(ts), R, np.asarray(x), np.asarray(sol.states.v)


def test_model_interface():
    """Each ball is a model of the library: its system, a state on C at t0 (`gm.validate` at
    that state: tests/test_rigid_models.py, for every model on a group)."""
    for cls in (
        gmm.ChaplyginSphere,
        gmm.RouthSphere,
        gmm.TurntableBall,
        gmm.Rattleback,
        gmm.RollingDiskSO3,
    ):
        model = cls()
        assert isinstance(model, gmm.AbstractModel) and model.t1 > model.t0
        system, s0 = model.system(), model.initial_state()
        assert isinstance(system, gm.LagrangianSystem)
        assert len(model.coordinates) == len(model.units) == s0.v.shape[0] == 5
        gm.check_on_constraint(system, s0, model.t0, tol=1e-12)


def test_chaplygin_sphere_integrals():
    """Along `gm.simulate`: the energy ½ωᵀIω + ½m|ẋ|², (M, γ), (M, M) with
    M = Iω + m a² γ × (ω × γ) [BorisovMamaev2002], and |γ| = 1 from the stored rotation."""
    model = gmm.ChaplyginSphere()
    ts, R, x, v = _simulate(model, model.initial_state(omega=np.array([1.0, -2.0, 3.0])), 5.0)
    m, a, I = float(model.m), float(model.a), np.asarray(model.inertia)
    w, xdot, gamma = v[:, :3], v[:, 3:], vertical(R)
    M = I * w + m * a**2 * np.cross(gamma, np.cross(w, gamma))
    E = 0.5 * np.sum(I * w * w, -1) + 0.5 * m * np.sum(xdot**2, -1)
    assert np.ptp(w[:, 0]) > 0.1  # it moves
    for integral in (E, np.sum(M * gamma, -1), np.sum(M * M, -1)):
        assert np.ptp(integral) <= 1e-8 * np.max(np.abs(integral)), integral
    np.testing.assert_allclose(np.linalg.norm(gamma, axis=-1), 1.0, atol=1e-13)


def test_rubber_ball_keeps_the_horizontal_contact_momentum():
    """Chaplygin's ball made of rubber: the rolling constraint of `gm.RollingBody` and one more
    row, ω·γ = 0 (no spin about the vertical) [BorisovMamaev2008], stacked with `&`. The ideal
    reaction of that row is a couple about the vertical, and gravity and the contact force act
    through the contact point, whose velocity is the centre's: the angular momentum about the
    contact point in space, R(Iω + m a² γ × (ω × γ)), keeps its horizontal components while its
    vertical one changes (it is conserved whole for the smooth-contact Chaplygin ball); the
    energy is conserved, ω·γ stays 0, and the ball moves."""
    m, a, inertia = 1.0, 1.0, jnp.array([0.3, 0.4, 0.5])
    ball = gm.RollingBody(gm.RigidBody(m, inertia), gm.Sphere(a))
    e3 = jnp.asarray(E3)

    def no_spin(q):
        R, _ = q
        return jnp.concatenate([R.inverse().apply(e3), jnp.zeros(2)])[None]

    rubber = gm.LagrangianSystem(
        ball.lagrangian, constraint=ball.constraint() & gm.LinearConstraint(no_spin),
        manifold=ball.manifold,
    )  # fmt: skip
    R0 = jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.1]))
    gamma0, w = R0.inverse().apply(e3), jnp.array([1.0, -2.0, 3.0])
    q0 = (R0, jnp.zeros(2))
    y0 = gm.State(q0, ball.rolling_velocity(q0, w - (w @ gamma0) * gamma0))
    gm.check_on_constraint(rubber, y0, 0.0, tol=1e-14)
    ts = jnp.linspace(0.0, 10.0, 41)
    sol = gm.simulate(rubber, y0, 0.0, 10.0, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    R, x = sol.states.q
    v = np.asarray(sol.states.v)
    w, xdot, gamma = v[:, :3], v[:, 3:], vertical(R)
    M = np.asarray(inertia) * w + m * a**2 * np.cross(gamma, np.cross(w, gamma))
    M_space = np.einsum("tij,tj->ti", np.asarray(R.as_matrix()), M)
    E = 0.5 * np.sum(np.asarray(inertia) * w * w, -1) + 0.5 * m * np.sum(xdot**2, -1)
    scale = np.max(np.linalg.norm(M_space, axis=-1))
    assert np.max(np.ptp(M_space[:, :2], axis=0)) <= 1e-9 * scale
    assert np.ptp(M_space[:, 2]) > 1e-2 * scale  # the vertical component is not conserved
    assert np.ptp(E) <= 1e-9 * E[0]
    np.testing.assert_allclose(np.sum(w * gamma, -1), 0.0, atol=1e-8)  # drift at rtol 1e-10
    assert np.ptp(w[:, 0]) > 0.1 and np.ptp(np.asarray(x)[:, 0]) > 0.1  # it moves


def test_routh_sphere_integrals():
    """Along `gm.simulate`: the energy, Jellett's J = Iω·r and Routh's
    ω₃ √(I₁I₃ + m I₁ r·r + m(I₃ − I₁) r₃²), with r = −aγ − εe₃ the contact point from the centre of
    mass [Routh1905; BorisovMamaev2002]."""
    model = gmm.RouthSphere()
    ts, R, x, v = _simulate(model, model.initial_state(), 5.0)
    m, a, eps, g = (float(model.m), float(model.a), float(model.offset), float(model.g))
    I1, I3 = float(model.I1), float(model.I3)
    I = np.array([I1, I1, I3])
    w, xdot, gamma = v[:, :3], v[:, 3:], vertical(R)
    c = np.array([0.0, 0.0, eps])
    r = -a * gamma - c
    Rm = np.asarray(R.as_matrix())
    vG = np.concatenate([xdot, np.zeros((len(ts), 1))], -1) + np.einsum(
        "tij,tj->ti", Rm, np.cross(w, c)
    )
    zG = a + gamma @ c  # (R c)·e₃ = c·γ
    E = 0.5 * np.sum(I * w * w, -1) + 0.5 * m * np.sum(vG**2, -1) + m * g * zG
    J = np.sum(I * w * r, -1)
    F = w[:, 2] * np.sqrt(I1 * I3 + m * I1 * np.sum(r * r, -1) + m * (I3 - I1) * r[:, 2] ** 2)
    assert np.ptp(gamma[:, 2]) > 0.05  # it rocks
    for integral in (E, J, F):
        assert np.ptp(integral) <= 1e-8 * np.max(np.abs(integral)), integral


def test_turntable_ball_orbits_at_two_sevenths():
    """The centre runs round a circle at 2Ω/7: x(t) = x_c + Rot(2Ωt/7)(x₀ − x_c), the circle's
    centre x_c fixed by u₀ = (2Ω/7) e₃ × (x₀ − x_c) (closed form, [Routh1905])."""
    model = gmm.TurntableBall()
    s0 = model.initial_state()
    ts, R, x, v = _simulate(model, s0, 10.0)
    k = 2 * float(model.Omega) / 7
    u0, x0 = np.asarray(s0.v[3:]), np.asarray(s0.q[1])
    d = np.array([u0[1], -u0[0]]) / k  # x₀ − x_c = −e₃ × u₀ / k
    rot = np.stack(
        [
            np.stack([np.cos(k * ts), -np.sin(k * ts)], -1),
            np.stack([np.sin(k * ts), np.cos(k * ts)], -1),
        ],
        -2,
    )
    expected = x0 - d + rot @ d
    assert k * ts[-1] > np.pi  # more than half a turn
    np.testing.assert_allclose(x, expected, atol=1e-8 * np.linalg.norm(d))


def test_rattleback_energy_and_spin_reversal():
    """Kane & Levinson's rattleback: the energy ½ωᵀIω + ½m|v_G|² + m g z_G (v_G = R(ω × (c − s)),
    the centre of mass turning about the contact point at rest; z_G = (c − s)·γ) is conserved
    along `gm.simulate`, the spin +5 rad/s about e₃ (theirs −5 about their downward axis)
    reverses within 5 s, and the opposite spin does not: the reversal is asymmetric."""
    model = gmm.Rattleback()
    d, c = np.asarray(model.semi_axes), np.array([0.0, 0.0, -float(model.h)])
    m, g = float(model.m), float(model.g)
    I = np.asarray(model.rolling_body().body.inertia)
    assert I[0, 1] == -float(model.D) == 2e-5
    spins = {}
    for w3 in (5.0, -5.0):
        s0 = model.initial_state(omega=np.array([0.0, 0.0, w3]))
        ts, R, x, v = _simulate(model, s0, 5.0, points=101)
        w, gamma, Rm = v[:, :3], vertical(R), np.asarray(R.as_matrix())
        s = -(d**2) * gamma / np.sqrt(np.sum(d**2 * gamma**2, -1))[:, None]
        vG = np.einsum("tij,tj->ti", Rm, np.cross(w, c - s))
        E = 0.5 * np.einsum("ti,ij,tj->t", w, I, w) + 0.5 * m * np.sum(vG**2, -1)
        E = E + m * g * np.sum((c - s) * gamma, -1)
        assert np.ptp(E) <= 1e-8 * np.max(np.abs(E)), E
        spins[w3] = np.sum(w * gamma, -1)  # the spin about the vertical
    assert np.min(spins[5.0]) < -2.0  # reversed, and spinning the other way
    assert np.all(spins[-5.0] < 0)  # not reversed in the same time


def test_a_float32_rattleback_runs_in_float32_with_its_contact_watched():
    """A float32 state of the rattleback (float64 parameters, x64 on) simulates in float32, the
    plane contact's lift-off event included (diffrax's root finder had refused a float32
    event value beside its float64 literal), and ends where the float64 run ends, to float32's
    tolerance: both at rtol = atol = 1e-5, what float32 can deliver (they agree to 9e-6 of the
    velocity's scale; each is 1.7e-4 from a 1e-10 reference, the tolerance's global error)."""
    model = gmm.Rattleback()
    y0 = model.initial_state(omega=np.array([0.1, 0.2, 5.0]))
    y32 = jax.tree_util.tree_map(lambda x: x.astype(jnp.float32), y0)
    runs = {
        y.v.dtype: gm.simulate(model.system(), y, 0.0, 0.5, rtol=1e-5, atol=1e-5) for y in (y0, y32)
    }
    sol32, sol64 = runs[jnp.dtype(jnp.float32)], runs[jnp.dtype(jnp.float64)]
    assert sol32.result == diffrax.RESULTS.successful
    assert {x.dtype for x in jax.tree_util.tree_leaves(sol32.states)} == {jnp.dtype(jnp.float32)}
    v32, v64 = np.asarray(sol32.states.v[-1], np.float64), np.asarray(sol64.states.v[-1])
    np.testing.assert_allclose(v32, v64, atol=1e-4 * np.max(np.abs(v64)))


def test_disk_on_so3_follows_the_euler_angle_disk():
    """The thin disk on SO(3) × ℝ² and `gm.models.RollingDisk` in Euler angles, started in the
    same state (leaning and turning, away from the angles' singularity): the Euler-angle
    trajectory mapped to (R, centre) and (ω, ẋ) is the group trajectory, to the tolerance."""
    model = gmm.RollingDiskSO3()
    euler = model.euler_model()
    s0e = euler.initial_state(lean=0.3, yaw_rate=1.0, spin_rate=4.0)
    ts = jnp.linspace(0.0, 2.0, 11)
    kw = dict(saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    sol = gm.simulate(model.system(), model.from_euler(s0e), 0.0, 2.0, **kw)
    ref = gm.simulate(euler.system(), s0e, 0.0, 2.0, **kw)
    lean = np.asarray(ref.states.q[:, 3])
    assert np.ptp(lean) > 0.05 and np.max(np.abs(lean)) < 1.2  # it wobbles, away from π/2
    mapped = jax.vmap(lambda q, v: model.from_euler(gm.State(q, v)))(ref.states.q, ref.states.v)
    (R, x), (R_ref, x_ref) = sol.states.q, mapped.q
    angle = np.linalg.norm(
        np.asarray(jax.vmap(lambda a, b: (a.inverse() @ b).log())(R, R_ref)), axis=-1
    )
    assert np.max(angle) < 1e-7, angle
    np.testing.assert_allclose(x, x_ref, atol=1e-7 * float(model.R))
    np.testing.assert_allclose(sol.states.v, mapped.v, atol=1e-7 * float(np.abs(mapped.v).max()))


DISK_SO3_SETS = dict(  # lean δ₁; body rates ω₁ (lean), ω₃ (yaw); spin ω₂ held
    coordinates=(0,), speeds=(0, 2), fixed_q=(1, 2, 3, 4), fixed_v=(1,), body_symmetries=(1,)
)


def test_disk_on_so3_upright_stability():
    """Upright straight rolling at spin n about the axis e₂ is a relative equilibrium that turns
    the body about e₂. Linearized in the frame that turns with it (`body_symmetries`), in
    z = (δ₁; ω₁, ω₃) (lean, lean rate, yaw rate), the thin disk on SO(3) × ℝ² has the closed form
    ([Routh1905] Art. 244, as for the Euler-angle disk in tests/test_analysis.py, A and B its
    moments about a diameter and the axis, J = A + mR²):
    θ̈ = (m g R θ + (B + mR²) n φ̇)/J, A φ̈ = −B n θ̇; for a uniform disk it is stable iff
    n² > g/(3R)."""
    model = gmm.RollingDiskSO3(m=1.3, R=0.5, g=9.81)
    m, R, g = float(model.m), float(model.R), float(model.g)
    A, B, J = m * R**2 / 4, m * R**2 / 2, m * R**2 * 5 / 4  # uniform
    n_c = np.sqrt(g / (3 * R))
    spins = jnp.array([0.9 * n_c, 1.1 * n_c, n_c])

    def upright(spin):
        return model.from_euler(gm.State(jnp.zeros(5), jnp.array([0.0, 0.0, 0.0, 0.0, spin])))

    lin = eqx.filter_jit(
        jax.vmap(lambda n: gm.linearize(model.system(), upright(n), **DISK_SO3_SETS))
    )(spins)
    for i, n in enumerate(np.asarray(spins)):
        closed = [[0, 1, 0], [m * g * R / J, 0, (B + m * R**2) * n / J], [0, -B * n / A, 0]]
        np.testing.assert_allclose(lin.A[i], closed, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(lin.rate[i], 0.0, atol=1e-12)
    growth = np.max(np.asarray(lin.eigenvalues.real), axis=-1)
    assert growth[0] > 0.5 and abs(growth[1]) < 1e-10, growth  # unstable below n_c, stable above
    # at n_c itself: det(λI − A) = λ(λ² − d) with d = 0, the boundary n² = g/(3R)
    M = np.asarray(lin.A[2])
    c1 = sum(np.linalg.det(M[np.ix_(p, p)]) for p in [(0, 1), (0, 2), (1, 2)])  # −d
    assert abs(c1) < 1e-12 * g / R, c1


# -- bad input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda: gm.Sphere(-1.0), "radius.*positive"),
        (lambda: gm.Sphere(0.0), "radius.*positive"),
        (lambda: gm.Sphere([1.0, 2.0]), "radius.*shape"),
        (lambda: gm.Ellipsoid([1.0, 2.0]), "semi_axes.*shape"),
        (lambda: gm.Ellipsoid([1.0, 0.0, 2.0]), "semi_axes.*positive"),
        (lambda: gm.Ellipsoid([1.0, np.nan, 2.0]), "semi_axes.*positive"),
        (lambda: gm.ThinDisk(0.0), "radius.*positive"),
        (lambda: gm.ThinDisk(1.0, axis=3), "axis"),
        (lambda: gm.ThinDisk(1.0, axis=(0.0, 0.0, 0.0)), "axis.*non-zero"),
        (lambda: gm.ThinDisk(1.0, axis=(0.0, 1.0)), "axis.*shape"),
        (lambda: gm.SupportFunction(3.0), "`h` must be a function"),
        (lambda: gm.rolling_constraint(1.0), "surface"),
        (
            lambda: gm.rolling_constraint(gm.Sphere(1.0), table_rate=(1.0, 2.0)),
            "table_rate.*scalar",
        ),
        (lambda: gm.rolling_constraint(gm.Sphere(1.0), table_rate=np.inf), "table_rate.*finite"),
        (lambda: gm.RollingBody("ball", gm.Sphere(1.0)), "body"),
        (lambda: gm.RollingBody(gm.RigidBody(1.0, np.ones(3)), "ball"), "surface"),
        (lambda: gm.RollingBody(gm.RigidBody(1.0, np.ones(3)), gm.Sphere(1.0), g=-1.0), "`g`"),
    ],
)
@pytest.mark.usefixtures("no_typecheck")  # geomech's own messages, as users see them
def test_builders_refuse_bad_input(build, match):
    """Shapes and values are checked when the building block is built, before any tracing."""
    with pytest.raises((ValueError, TypeError), match=match):
        build()


@pytest.mark.parametrize(
    "build, match",
    [
        (lambda x: gm.Sphere(-0.5 * x), r"Sphere: `radius` must be finite and positive"),
        (lambda x: gm.Ellipsoid(jnp.array([1.0, jnp.nan, 1.0]) * x), r"Ellipsoid: `semi_axes`"),
        (lambda x: gm.RigidBody(-x, jnp.ones(3)), r"RigidBody: `mass` must be finite and positive"),
        (lambda x: gm.RigidBody(x, jnp.array([1.0, 1.0, 3.0]) * x), r"principal moments no body has"),
    ],
)
def test_traced_bad_values_are_refused_inside_the_program(build, match):
    """The same values, traced (a body swept under jit/vmap, the documented way), are refused
    inside the program: under `vmap` the batch with one bad member raises, the good batch runs,
    and a rolling body built from a traced radius does not roll "successfully"."""
    leaves = lambda x: jax.tree_util.tree_leaves(build(x))
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        eqx.filter_jit(leaves)(jnp.asarray(1.0))
    with pytest.raises(eqx.EquinoxRuntimeError, match=match):
        eqx.filter_jit(jax.vmap(leaves))(jnp.array([1.0, 1.0]))


def test_a_traced_bad_radius_stops_the_rolling_ball():
    model = gmm.ChaplyginSphere()
    y0 = model.initial_state()
    ball = lambda a: eqx.tree_at(lambda m: m.a, model, a)
    accelerate = eqx.filter_jit(lambda a: gm.acceleration(ball(a).system(), y0))
    assert jnp.all(jnp.isfinite(accelerate(model.a)))
    with pytest.raises(eqx.EquinoxRuntimeError, match=r"Sphere: `radius` must be finite and positive"):
        accelerate(-model.a)
