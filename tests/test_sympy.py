"""The SymPy bridge: systems derived symbolically agree with the model library's."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
import sympy as sp
import sympy.physics.mechanics as me

import geomech as gm
import geomech.models

# -- the rolling disk, derived from first principles ---------------------------------------------
# Coordinates (x, y, φ, θ, ψ): contact point, yaw (heading), lean from the vertical, spin.
# Orientation Rz(φ) Rx(θ) Ry(ψ): body y is the disk's axis, body x the heading at zero lean.


def _rot(mod, axis, a):
    c, s = mod.cos(a), mod.sin(a)
    rows = {
        "z": [[c, -s, 0], [s, c, 0], [0, 0, 1]],
        "x": [[1, 0, 0], [0, c, -s], [0, s, c]],
        "y": [[c, 0, s], [0, 1, 0], [-s, 0, c]],
    }[axis]
    return rows


def sympy_disk(mass, radius, g_value):
    t = me.dynamicsymbols._t
    q = me.dynamicsymbols("x y phi theta psi")
    x, y, phi, th, psi = q
    m, r, g = sp.symbols("m r g", positive=True)
    M = lambda axis, a: sp.Matrix(_rot(sp, axis, a))
    rot = M("z", phi) * M("x", th) * M("y", psi)
    wb = rot.T * rot.diff(t)  # body angular velocity, skew form (lambdify's cse simplifies enough)
    omega_b = sp.Matrix([wb[2, 1], wb[0, 2], wb[1, 0]])
    u = M("z", phi) * M("x", th) * sp.Matrix([0, 0, 1])  # contact point -> centre, unit
    centre = sp.Matrix([x, y, 0]) + r * u
    inertia = sp.diag(m * r**2 / 4, m * r**2 / 2, m * r**2 / 4)
    vc = centre.diff(t)
    T = (m * vc.dot(vc) + (omega_b.T * inertia * omega_b)[0]) / 2
    L = T - m * g * centre[2]
    # the material point at the contact has zero velocity (horizontal components)
    slip = vc + (rot * omega_b).cross(-r * u)
    params = {m: mass, r: radius, g: g_value}
    return gm.from_sympy(L, q, constraints=[slip[0], slip[1]], parameters=params)


def disk_states(system, count, seed=0):
    """Random states on C: angles and rates free, (ẋ, ẏ) solved from the rolling constraints."""
    keys = jax.random.split(jax.random.PRNGKey(seed), 2)
    q = jax.random.uniform(keys[0], (count, 5), minval=-1.0, maxval=1.0)
    v = jax.random.normal(keys[1], (count, 5))

    def on_C(q, v):
        v = v.at[:2].set(0.0)
        return gm.State(q, v.at[:2].set(-system.constraint_residual(gm.State(q, v))))

    return jax.vmap(on_C)(q, v)


def test_rolling_disk_accelerations_match_library():
    mass, radius, g = 1.3, 0.7, 9.81
    sym = sympy_disk(mass, radius, g)
    # the library model uses the same coordinates and orientation (see its docstring)
    ref = gm.models.RollingDisk(m=mass, R=radius, g=g)()
    states = disk_states(ref, 8)
    acc = eqx.filter_jit(lambda system, st: jax.vmap(lambda x: gm.acceleration(system, x))(st))
    np.testing.assert_allclose(jax.vmap(sym.constraint_residual)(states), 0.0, atol=1e-12)
    np.testing.assert_allclose(acc(sym, states), acc(ref, states), rtol=1e-10, atol=1e-10)
    energy = eqx.filter_jit(lambda system, st: jax.vmap(system.energy)(st))
    np.testing.assert_allclose(energy(sym, states), energy(ref, states), rtol=1e-12)


# -- plain symbols, parameters, time, W ≠ D ------------------------------------------------------


def test_plain_symbols_pendulum_matches_model():
    x, y, vx, vy, m, l, g = sp.symbols("x y v_x v_y m l g")
    L = m * (vx**2 + vy**2) / 2 + m * g * x
    params = {m: 1.5, l: 2.0, g: 9.81}
    sym = gm.from_sympy(L, [x, y], [vx, vy], holonomic=[x**2 + y**2 - l**2], parameters=params)
    lib = gm.models.CartesianPendulum(m=1.5, l=2.0)()
    th, w = 0.4, 1.1
    s = gm.State(
        2.0 * jnp.array([jnp.cos(th), jnp.sin(th)]),
        2.0 * w * jnp.array([-jnp.sin(th), jnp.cos(th)]),
    )
    np.testing.assert_allclose(gm.acceleration(sym, s), gm.acceleration(lib, s), rtol=1e-12)
    np.testing.assert_allclose(sym.position_residual(s), 0.0, atol=1e-12)


def test_parameters_are_differentiable():
    x, v, k = sp.symbols("x v k")
    sym = gm.from_sympy(v**2 / 2 - k * x**2 / 2, [x], [v], parameters={k: 4.0})
    s = gm.State(jnp.array([0.5]), jnp.array([0.0]))
    accel = lambda system: gm.unconstrained_acceleration(system, s)[0]
    grad = eqx.filter_grad(accel)(sym)
    # a = -k x, so da/dk = -x
    np.testing.assert_allclose(grad.lagrangian.params, [-0.5], rtol=1e-12)


def test_time_dependent_lagrangian():
    t = me.dynamicsymbols._t
    x = me.dynamicsymbols("x")
    sym = gm.from_sympy(x.diff(t) ** 2 / 2 + sp.sin(t) * x, [x])
    assert sym.time_dependent
    s = gm.State(jnp.array([0.0]), jnp.array([0.0]))
    np.testing.assert_allclose(
        gm.unconstrained_acceleration(sym, s, t=0.7), [np.sin(0.7)], rtol=1e-12
    )


def test_generalized_constraint_matches_thesis_example2():
    q1, q2, v1, v2 = sp.symbols("q1 q2 v1 v2")
    model = gm.models.ThesisExample2()
    r = q2 - q1
    U = model.kappa * (r - model.a) ** 2 / 2 + model.coulomb / r
    L = (model.m1 * v1**2 + model.m2 * v2**2) / 2 - U
    A = sp.Rational(3, 10) + sp.sin(q1) / 5 + sp.cos(q2) / 10
    sym = gm.from_sympy(
        L, [q1, q2], [v1, v2], constraints=[A * v1 - v2], work_annihilator=sp.Matrix([[1, 1]])
    )
    lib = model()
    q = jnp.array([0.1, 1.3])
    Aq = 0.3 + 0.2 * jnp.sin(q[0]) + 0.1 * jnp.cos(q[1])
    s = gm.State(q, jnp.array([0.8, 0.8 * Aq]))
    np.testing.assert_allclose(gm.acceleration(sym, s), gm.acceleration(lib, s), rtol=1e-12)
    np.testing.assert_allclose(
        gm.constraint_force(sym, s), gm.constraint_force(lib, s), rtol=1e-10, atol=1e-12
    )


def test_errors_name_the_problem():
    x, v, k = sp.symbols("x v k")
    with pytest.raises(ValueError, match="k"):
        gm.from_sympy(v**2 / 2 - k * x**2, [x], [v])
    with pytest.raises(ValueError, match="velocity symbols"):
        gm.from_sympy(v**2 / 2, [x])
    with pytest.raises(ValueError, match="velocities"):
        gm.from_sympy(v**2 / 2, [x], [v], holonomic=[x * v])


def test_force_and_known_work_match_hand_written():
    x, y, vx, vy, c, k = sp.symbols("x y v_x v_y c k")
    L = (vx**2 + 2 * vy**2) / 2 - k * x**2 / 2
    params = {c: 0.3, k: 2.0}
    sym = gm.from_sympy(
        L,
        [x, y],
        [vx, vy],
        constraints=[vx - y * vy],
        force=[-c * vx, sp.sin(x)],
        known_work=[0, -c * vy**2],
        parameters=params,
    )
    hand = gm.LagrangianSystem(
        lambda q, v: (v[0] ** 2 + 2 * v[1] ** 2) / 2 - q[0] ** 2,
        force=lambda q, v: jnp.array([-0.3 * v[0], jnp.sin(q[0])]),
        constraint=gm.Constraint(lambda q, v: jnp.array([v[0] - q[1] * v[1]])),
        known_work=lambda q, v: jnp.array([0.0, -0.3 * v[1] ** 2]),
    )
    s = gm.State(jnp.array([0.4, -0.7]), jnp.array([-0.7 * 1.1, 1.1]))
    np.testing.assert_allclose(gm.acceleration(sym, s), gm.acceleration(hand, s), rtol=1e-12)
    np.testing.assert_allclose(
        gm.constraint_force(sym, s), gm.constraint_force(hand, s), rtol=1e-12
    )


# -- bad input is rejected when the system is built, naming the problem ---------------------------

X, Y, VX, VY, K = sp.symbols("x y v_x v_y k")
FREE = (VX**2 + VY**2) / 2


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(lagrangian=FREE - sp.besselj(0, X)), "besselj, which SymPy's JAX printer"),
        (dict(constraints=[VX - sp.LambertW(Y) * VY]), "LambertW"),
        (dict(lagrangian=FREE - sp.Function("U")(X)), "undefined function(s) U"),
        (dict(lagrangian=FREE + sp.I * X), "imaginary unit"),
        (dict(force=[sp.I * VX, 0]), "imaginary unit"),
        (dict(lagrangian=FREE + X / sp.Integer(0)), "infinite or undefined"),
        (dict(coordinates=[X, X], velocities=[VX, VY]), "coordinates contain x more than once"),
        (dict(velocities=[VX, VX]), "velocities contain v_x more than once"),
        (dict(velocities=[X, VY]), "velocities x are also coordinates"),
        (
            dict(lagrangian=FREE - K * X**2, parameters={X: 1.0, K: 2.0}),
            "parameter x is a coordinate",
        ),
        (
            dict(lagrangian=FREE - K * X**2, parameters={VY: 1.0, K: 2.0}),
            "parameter v_y is a velocity",
        ),
        (dict(lagrangian=FREE - K * X**2, parameters={K: float("nan")}), "finite number"),
        (dict(lagrangian=FREE - K * X**2, parameters={K: Y}), "finite number"),
    ],
)
def test_bad_expressions_are_rejected(kwargs, fragment):
    args = dict(lagrangian=FREE, coordinates=[X, Y], velocities=[VX, VY]) | kwargs
    with pytest.raises(ValueError, match=re.escape(fragment)):
        gm.from_sympy(
            args.pop("lagrangian"), args.pop("coordinates"), args.pop("velocities"), **args
        )


def test_time_as_a_parameter_is_rejected():
    t = me.dynamicsymbols._t
    x = me.dynamicsymbols("x")
    with pytest.raises(ValueError, match="is the time"):
        gm.from_sympy(x.diff(t) ** 2 / 2 - t * x, [x], parameters={t: 1.0})


@pytest.mark.parametrize(
    "U",
    [sp.erf(X), sp.gamma(1 + X**2), sp.atan2(Y, 1 + X**2), sp.Abs(X) * Y, sp.Max(X, Y), sp.cosh(X)],
    ids=str,
)
def test_supported_functions_compile_and_match_sympy(U):
    """Functions the JAX printer knows build and evaluate to SymPy's own numbers."""
    system = gm.from_sympy(FREE - U, [X, Y], [VX, VY])
    q, v = jnp.array([0.3, -0.7]), jnp.array([0.2, 0.5])
    expected = float((FREE - U).subs({X: 0.3, Y: -0.7, VX: 0.2, VY: 0.5}).evalf())
    np.testing.assert_allclose(system.lagrangian(q, v), expected, rtol=1e-12)
