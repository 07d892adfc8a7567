"""`gm.RigidBody`: its Lagrangians on SO(3), SO(3) × ℝ³ and SE(3) against the Newton–Euler
equations written by hand (no geomech in the references)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from helpers import GeneralBodies, accelerations, solvers

import geomech as gm

G = jnp.array([0.0, 0.0, -9.81])


def random_body(rng):
    """A body of six point masses: its inertia about the centre of mass is a physical one
    (off-diagonal terms, the triangle inequality) by construction."""
    m, r = rng.uniform(0.5, 1.5, size=6), rng.normal(size=(6, 3))
    r = r - m @ r / m.sum()
    inertia = sum(
        mi * (ri @ ri * np.eye(3) - np.outer(ri, ri)) for mi, ri in zip(m, r, strict=True)
    )
    return gm.RigidBody(m.sum(), inertia, rng.normal(size=3))


def random_pose(rng):
    return jaxlie.SO3.exp(jnp.asarray(rng.normal(size=3) * 2.0)), jnp.asarray(rng.normal(size=3))


def test_pivoted_body_gives_euler_poisson_equations():
    """On SO(3) with the origin a fixed pivot: $I_O\\dot\\omega = I_O\\omega\\times\\omega +
    m\\,c\\times R^\\top g$, with $I_O$ the inertia about the pivot (the parallel-axis theorem
    written out here)."""
    rng = np.random.default_rng(0)
    for _ in range(3):
        body = random_body(rng)
        R, w = random_pose(rng)
        m, c = body.mass, body.centre_of_mass
        I_O = body.inertia + m * (c @ c * jnp.eye(3) - jnp.outer(c, c))
        expected = jnp.linalg.solve(
            I_O, jnp.cross(I_O @ w, w) + m * jnp.cross(c, R.inverse().apply(G))
        )
        system = gm.LagrangianSystem(body.lagrangian(gm.SO3()), manifold=gm.SO3())
        for name, got in accelerations(system, [gm.State(R, w)], solvers()).items():
            np.testing.assert_allclose(got[0], expected, rtol=1e-11, atol=1e-11, err_msg=name)


def test_free_body_on_so3_times_r3_and_se3_is_newton_euler():
    """A free body in gravity: its centre of mass falls with $g$ and $I_c\\dot\\omega =
    I_c\\omega\\times\\omega$. On SO(3) × ℝ³ the origin $x = x_c - Rc$ accelerates with
    $\\ddot x = g - R(\\dot\\omega\\times c + \\omega\\times(\\omega\\times c))$; on SE(3) the
    body-frame velocity $V = R^\\top\\dot x$ has $\\dot V = R^\\top\\ddot x - \\omega\\times V$."""
    rng = np.random.default_rng(1)
    for _ in range(3):
        body = random_body(rng)
        R, w = random_pose(rng)
        x, xdot = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3))
        c, I = body.centre_of_mass, body.inertia
        wdot = jnp.linalg.solve(I, jnp.cross(I @ w, w))
        xddot = G - R.apply(jnp.cross(wdot, c) + jnp.cross(w, jnp.cross(w, c)))
        V = R.inverse().apply(xdot)
        Vdot = R.inverse().apply(xddot) - jnp.cross(w, V)

        product = gm.Product(gm.SO3(), gm.Euclidean(3))
        system = gm.LagrangianSystem(body.lagrangian(product), manifold=product)
        got = gm.acceleration(system, gm.State((R, x), jnp.concatenate([w, xdot])))
        np.testing.assert_allclose(got, jnp.concatenate([wdot, xddot]), rtol=1e-11, atol=1e-11)

        se3 = gm.LagrangianSystem(body.lagrangian(gm.SE3()), manifold=gm.SE3())
        T = jaxlie.SE3.from_rotation_and_translation(R, x)
        got = gm.acceleration(se3, gm.State(T, jnp.concatenate([V, w])))
        np.testing.assert_allclose(got, jnp.concatenate([Vdot, wdot]), rtol=1e-10, atol=1e-10)


def test_energies_agree_across_configuration_spaces():
    rng = np.random.default_rng(2)
    body = random_body(rng)
    R, w = random_pose(rng)
    x, xdot = jnp.asarray(rng.normal(size=3)), jnp.asarray(rng.normal(size=3))
    L_product = body.lagrangian(gm.Product(gm.SO3(), gm.Euclidean(3)))(
        (R, x), jnp.concatenate([w, xdot])
    )
    T = jaxlie.SE3.from_rotation_and_translation(R, x)
    L_se3 = body.lagrangian(gm.SE3())(T, jnp.concatenate([R.inverse().apply(xdot), w]))
    # the centre of mass's velocity and height, written out
    u = xdot + R.apply(jnp.cross(w, body.centre_of_mass))
    height = (x + R.apply(body.centre_of_mass))[2]
    expected = 0.5 * body.mass * u @ u + 0.5 * w @ body.inertia @ w - body.mass * 9.81 * height
    np.testing.assert_allclose(L_product, expected, rtol=1e-13)
    np.testing.assert_allclose(L_se3, expected, rtol=1e-13)


def test_bodies_are_parameters():
    """A `jax.vmap` over masses and a `jax.grad` by the inertia go through the Lagrangian."""
    R, w = random_pose(np.random.default_rng(3))

    def energy(mass, inertia):
        body = gm.RigidBody(mass, inertia, jnp.array([0.0, 0.0, 0.3]))
        return body.lagrangian(gm.SO3())(R, w)

    masses = jnp.array([1.0, 2.0, 3.0])
    batched = jax.vmap(energy, in_axes=(0, None))(masses, jnp.ones(3))
    np.testing.assert_allclose(batched, [energy(m, jnp.ones(3)) for m in masses], rtol=1e-14)
    dI = jax.grad(energy, argnums=1)(1.0, jnp.array([1.0, 2.0, 2.5]))
    np.testing.assert_allclose(dI, 0.5 * w * w, rtol=1e-14)  # T = ½ Σ I_i ω_i² (+ terms in c)
    jitted = eqx.filter_jit(lambda body: body.lagrangian(gm.SO3())(R, w))
    np.testing.assert_allclose(jitted(gm.RigidBody(2.0, jnp.ones(3))), 0.5 * w @ w, rtol=1e-14)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(mass=-1.0, inertia=jnp.ones(3)), "`mass` must be finite and positive"),
        (dict(mass=jnp.nan, inertia=jnp.ones(3)), "`mass` must be finite and positive"),
        (dict(mass=jnp.ones(2), inertia=jnp.ones(3)), "`mass` must be a scalar"),
        (dict(mass=1.0, inertia=jnp.ones(4)), "`inertia` must have shape"),
        (dict(mass=1.0, inertia=jnp.array([1.0, 1.0, 3.0])), "triangle|I₁ \\+ I₂ ≥ I₃"),
        (dict(mass=1.0, inertia=jnp.array([1.0, -1.0, 1.0])), "principal moments"),
        (dict(mass=1.0, inertia=jnp.array([[1.0, 0.5, 0], [0, 1, 0], [0, 0, 1]])), "symmetric"),
        (
            dict(mass=1.0, inertia=jnp.ones(3), centre_of_mass=jnp.ones(2)),
            "`centre_of_mass` must have shape",
        ),
    ],
)
def test_bad_bodies_are_refused(kwargs, match):
    with pytest.raises(ValueError, match=match):
        gm.RigidBody(**kwargs)


def test_lagrangian_needs_a_body_manifold():
    with pytest.raises(ValueError, match="`manifold` must be gm.SO3"):
        gm.RigidBody(1.0, jnp.ones(3)).lagrangian(gm.SE2())


def _random_point(manifold, rng):
    if isinstance(manifold, gm.Product):
        return tuple(_random_point(f, rng) for f in manifold.factors)
    if isinstance(manifold, gm.SE3):
        return jaxlie.SE3.exp(jnp.asarray(rng.normal(size=6)))
    if isinstance(manifold, gm.SO3):
        return jaxlie.SO3.exp(jnp.asarray(rng.normal(size=3) * 2.0))
    return jnp.asarray(rng.normal(size=3))


@pytest.mark.parametrize(
    "manifold, form",
    [
        (gm.SO3(), "BodyFrameForm"),
        (gm.SE3(), "BodyFrameForm"),
        (gm.Product(gm.SO3(), gm.Euclidean(3)), "BodiesForm"),
    ],
    ids=["SO3", "SE3", "SO3xR3"],
)
def test_kane_form_of_a_body_equals_the_general_path(manifold, form):
    """A `RigidBody`'s Lagrangian takes Kane's equations: in the body's axes on SO(3) and SE(3),
    where its kinetic energy is left-invariant (`BodyFrameForm`: $M$, $Q$ with no derivative
    of the attitude), from first derivatives of its spatial velocities otherwise (`BodiesForm`);
    the same $L$ read through its spatial velocities takes `BodiesForm`, and as an arbitrary
    function the general path (second derivatives by autodiff). Every solver's acceleration
    agrees to round-off, with a random nonholonomic constraint and an external force."""
    rng = np.random.default_rng(7)
    body = random_body(rng)
    L = body.lagrangian(manifold, G)
    n = 3 if isinstance(manifold, gm.SO3) else 6
    rows = jnp.asarray(rng.normal(size=(2, n)))
    force = lambda q, v: -0.3 * v
    fast, spatial, general = (
        gm.LagrangianSystem(
            lag, force=force, constraint=gm.LinearConstraint(lambda q: rows), manifold=manifold
        )
        for lag in (L, GeneralBodies(L), lambda q, v: L(q, v))
    )
    assert type(fast.form).__name__ == form
    assert type(spatial.form).__name__ == "BodiesForm"
    assert type(general.form).__name__ == "AutodiffForm"
    on_D = lambda v: v - rows.T @ jnp.linalg.solve(rows @ rows.T, rows @ v)  # A v = 0
    states = [
        gm.State(_random_point(manifold, rng), on_D(jnp.asarray(rng.normal(size=n))))
        for _ in range(3)
    ]
    named = solvers()
    a_general = accelerations(general, states, named)
    for system in (fast, spatial):
        a = accelerations(system, states, named)
        for name in named:
            scale = np.abs(a_general[name]).max()
            np.testing.assert_allclose(
                a[name], a_general[name], rtol=0, atol=1e-12 * scale, err_msg=name
            )
