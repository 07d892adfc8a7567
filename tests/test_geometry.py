"""The contract of every manifold (docs/lie_groups.md), one suite parametrized over ℝⁿ, S¹, SO(3),
SE(3), SE(2) and products, in jaxlie's style: ⊕/⊖ round trips, `dexp` and the bracket against
finite differences of ⊕ and ⊖, the velocity of the stored point, the error measure, batch shapes,
points off the manifold, the chart a system is written in, and the integrator that steps on it."""

import diffrax
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from manifold_systems import COORDINATES, MANIFOLDS, random_point

import geomech as gm
from geomech._geometry import DIFFRAX_SOLVER_STATE, MuntheKaas, point_difference


def tangent(manifold, rng, scale=1.0):
    return jnp.asarray(scale * rng.normal(size=manifold.dim))


@pytest.fixture(params=list(MANIFOLDS))
def manifold(request):
    return MANIFOLDS[request.param]


def close(a, b, **kwargs):
    jax.tree_util.tree_map(lambda x, y: np.testing.assert_allclose(x, y, **kwargs), a, b)


def test_oplus_ominus_round_trip(manifold):
    rng = np.random.default_rng(0)
    for _ in range(3):
        q, psi = random_point(manifold, rng), tangent(manifold, rng, 0.7)
        close(manifold.ominus(manifold.oplus(q, psi), q), psi, rtol=1e-10, atol=1e-12)
        # the same difference read from the points alone (what a group action's generators use)
        close(point_difference(q, manifold.oplus(q, psi)), psi, rtol=1e-10, atol=1e-12)
        close(manifold.oplus(q, jnp.zeros(manifold.dim)), q, atol=1e-15)


def test_retract_is_oplus_to_second_order(manifold):
    """`retract` (what a bodies Lagrangian in the centred chart is read through) has the value,
    the first and the second derivatives of `oplus` at $\\psi = 0$, in the stored parameters;
    a step away from the centre it differs from `oplus` at third order only."""
    rng = np.random.default_rng(11)
    q = random_point(manifold, rng)
    params = lambda f: lambda psi: manifold.parameters(f(q, psi))
    exact, second = params(manifold.oplus), params(manifold.retract)
    zero = jnp.zeros(manifold.dim)
    close(second(zero), exact(zero), rtol=0, atol=1e-15)
    close(jax.jacfwd(second)(zero), jax.jacfwd(exact)(zero), rtol=1e-14, atol=1e-15)
    hessian = lambda f: jax.jacfwd(jax.jacfwd(f))(zero)
    close(hessian(second), hessian(exact), rtol=1e-13, atol=1e-14)
    step = tangent(manifold, rng)
    gaps = [np.max(np.abs(exact(h * step) - second(h * step))) for h in (1e-2, 2e-2)]
    assert gaps[0] == gaps[1] == 0 or 7 <= gaps[1] / gaps[0] <= 8.5  # O(h³); equal on coordinates
    chart = manifold.chart(q)
    close(chart.point_to_second_order(chart.origin), q, atol=1e-15)


def test_dexp_against_finite_differences(manifold):
    """$v = \\mathrm{dexp}(\\psi, \\dot\\psi)$ is the velocity of $q \\oplus \\psi(t)$ in the
    manifold's convention: $[(q \\oplus (\\psi + \\varepsilon\\dot\\psi)) \\ominus (q \\oplus
    (\\psi - \\varepsilon\\dot\\psi))] / 2\\varepsilon$ (central differences, Richardson)."""
    rng = np.random.default_rng(1)
    q, psi, psi_dot = random_point(manifold, rng), tangent(manifold, rng, 0.8), tangent(manifold, rng)
    p = manifold.oplus(q, psi)

    def central(eps):
        plus, minus = manifold.oplus(q, psi + eps * psi_dot), manifold.oplus(q, psi - eps * psi_dot)
        # the midpoint-based difference: (plus ⊖ p - minus ⊖ p) / 2ε
        return (manifold.ominus(plus, p) - manifold.ominus(minus, p)) / (2 * eps)

    estimate = (4 * central(1e-4) - central(2e-4)) / 3
    close(manifold.dexp(psi, psi_dot), estimate, rtol=1e-8, atol=1e-9)
    close(manifold.dexp_inverse(psi, manifold.dexp(psi, psi_dot)), psi_dot, rtol=1e-11, atol=1e-12)


def test_bracket_is_the_commutator_of_steps(manifold):
    """$(q \\oplus \\varepsilon v \\oplus \\varepsilon w) \\ominus (q \\oplus \\varepsilon w \\oplus
    \\varepsilon v) = \\varepsilon^2 [v, w] + O(\\varepsilon^3)$ (Baker–Campbell–Hausdorff); zero
    on coordinates. Also antisymmetric and bilinear, with the Jacobi identity."""
    rng = np.random.default_rng(2)
    q, v, w, u = random_point(manifold, rng), *(tangent(manifold, rng) for _ in range(3))
    step = lambda a, b, eps: manifold.oplus(manifold.oplus(q, eps * a), eps * b)
    commutator = lambda eps: manifold.ominus(step(v, w, eps), step(w, v, eps)) / eps**2
    estimate = 2 * commutator(1e-3) - commutator(2e-3)  # the O(ε) terms cancel
    close(manifold.bracket(v, w), estimate, rtol=1e-5, atol=1e-6)
    close(manifold.bracket(v, w), -manifold.bracket(w, v), atol=1e-14)
    b = manifold.bracket
    close(b(u, b(v, w)) + b(v, b(w, u)) + b(w, b(u, v)), jnp.zeros(manifold.dim), atol=1e-13)
    if manifold in [MANIFOLDS[k] for k in COORDINATES]:
        close(manifold.bracket(v, w), jnp.zeros(manifold.dim), atol=0)


def test_velocity_of_point_and_point_error(manifold):
    rng = np.random.default_rng(3)
    q, v = random_point(manifold, rng), tangent(manifold, rng)
    params = lambda eps: manifold.parameters(manifold.oplus(q, eps * v))
    fd = (params(1e-6) - params(-1e-6)) / 2e-6
    close(manifold.parameters(manifold.velocity_of_point(q, v)), fd, rtol=1e-7, atol=1e-8)
    psi, e = tangent(manifold, rng, 0.5), tangent(manifold, rng, 1e-3)
    diff = jax.tree_util.tree_map(
        jnp.subtract, manifold.oplus(q, psi), manifold.oplus(q, psi - e)
    )
    close(manifold.point_error(q, psi, e), diff, atol=1e-15)


def test_batch_shapes_and_vmap(manifold):
    rng = np.random.default_rng(4)
    points = [random_point(manifold, rng) for _ in range(4)]
    batch = jax.tree_util.tree_map(lambda *x: jnp.stack(x), *points)
    assert manifold.batch_shape(batch) == (4,)
    psi = jnp.asarray(0.3 * rng.normal(size=(4, manifold.dim)))
    moved = jax.vmap(manifold.oplus)(batch, psi)
    close(jax.vmap(manifold.ominus)(moved, batch), psi, rtol=1e-10, atol=1e-12)
    params = manifold.parameters(batch)
    assert params.shape[0] == 4 and params.ndim == 2
    point = points[0]
    manifold.check(point)  # one point passes
    with pytest.raises(ValueError):
        manifold.check(batch)  # a batch is not one point: vmap


def test_points_off_the_manifold_are_measured(manifold):
    """`point_defect` is 0 on the manifold (to round-off), the distance of a stored unit
    quaternion or unit complex number from the unit sphere off it, unit-free; `normalize` brings
    the parameters back."""
    rng = np.random.default_rng(5)
    q = random_point(manifold, rng)
    assert float(manifold.point_defect(q)) <= 1e-15
    scaled = jax.tree_util.tree_map(lambda x: 2.0 * x, q)
    defect = float(manifold.point_defect(scaled))
    if manifold in [MANIFOLDS[k] for k in COORDINATES]:
        assert defect == 0.0
        return
    assert defect == pytest.approx(1.0, rel=1e-12)  # |2 u| - 1
    assert float(manifold.point_defect(manifold.normalize(scaled))) <= 1e-15


def test_chart_at_a_point(manifold):
    """The chart centred at q: its origin names q, `coordinates` inverts `point` near it; a
    system written in it has the same energy and the same velocities' mass matrix at the origin,
    and a coordinate manifold's system is its own localization (no cost)."""
    rng = np.random.default_rng(6)
    q, x = random_point(manifold, rng), tangent(manifold, rng, 0.3)
    chart = manifold.chart(q)
    close(chart.point(chart.origin), q, atol=1e-15)
    close(chart.coordinates(chart.point(chart.origin + x)), chart.origin + x, rtol=1e-10, atol=1e-12)
    params = lambda p: manifold.parameters(p)
    L = lambda p, v: 0.5 * v @ v * (1.0 + 0.1 * jnp.sum(params(p) ** 2))
    system = gm.LagrangianSystem(L, manifold=manifold)
    local = chart.system(system)
    if manifold in [MANIFOLDS[k] for k in COORDINATES]:
        assert local is system
    v = tangent(manifold, rng)
    state, at = gm.State(q, v), gm.State(chart.origin, v)
    close(local.energy(at), system.energy(state), rtol=1e-14)


def test_integrator_on_the_manifold(manifold):
    """A diffrax Runge–Kutta solver is itself on coordinates and Runge–Kutta–Munthe-Kaas on a
    group; an implicit solver is refused on a group before tracing."""
    from geomech._integrate import StateParts

    made = manifold.integrator(diffrax.Tsit5(), adjoint=diffrax.RecursiveCheckpointAdjoint(),
                               parts=StateParts(), name="simulate")
    if manifold in [MANIFOLDS[k] for k in COORDINATES]:
        assert isinstance(made, diffrax.Tsit5) and not isinstance(made, MuntheKaas)
        return
    assert isinstance(made, MuntheKaas)
    with pytest.raises(ValueError, match="explicit diffrax Runge–Kutta"):
        manifold.integrator(diffrax.Kvaerno5(), adjoint=diffrax.RecursiveCheckpointAdjoint(),
                            parts=StateParts(), name="simulate")


def test_end_rate_is_the_right_hand_side_at_the_step_end(manifold):
    """`end_rate` (what the guarded solver hands to a contact's `holds`) is the right-hand side at
    the end point of a step, in the state's layout, for Tsit5 on every manifold (its FSAL stage,
    re-centred by `MuntheKaas` on a group); `None` for a tableau that does not keep it."""
    from geomech._geometry import end_rate
    from geomech._integrate import StateParts

    rng = np.random.default_rng(12)
    y0 = gm.State(random_point(manifold, rng), tangent(manifold, rng))

    def field(t, y, args):
        size = 1.0 + 0.1 * jnp.sum(manifold.parameters(y.q) ** 2)
        return gm.State(manifold.velocity_of_point(y.q, y.v), -jnp.sin(t) * size * y.v)

    term = diffrax.ODETerm(field)
    for tableau in (diffrax.Tsit5(), diffrax.Ralston()):
        solver = manifold.integrator(tableau, adjoint=diffrax.RecursiveCheckpointAdjoint(),
                                     parts=StateParts(), name="simulate")
        state = solver.init(term, 0.3, 0.4, y0, None)
        y1, _, _, state, _ = solver.step(term, 0.3, 0.4, y0, None, state, False)
        rate = end_rate(solver, state)
        if isinstance(tableau, diffrax.Ralston):
            assert rate is None
            continue
        close(rate.v, field(0.4, y1, None).v, rtol=1e-14, atol=1e-15)
        close(rate.q, y1.v, rtol=0, atol=0)  # the velocity (on a group: not of the stored point)


def test_munthe_kaas_knows_diffrax_solver_state():
    """`MuntheKaas` re-centres the last stage of an FSAL tableau in diffrax's Runge–Kutta solver
    state `(first_step, f)` (`_integrator._recentre`): pinned to the diffrax releases checked
    here, so that a change of that private layout fails this test, not a simulation."""
    assert ".".join(diffrax.__version__.split(".")[:2]) in DIFFRAX_SOLVER_STATE
    term = diffrax.ODETerm(lambda t, y, args: (y[0], -y[1], y[2]))
    y0 = (jnp.ones(2), jnp.ones(2), None)
    state = diffrax.Tsit5().init(term, 0.0, 0.1, y0, None)
    first_step, f = state
    assert jnp.shape(first_step) == () and jax.tree_util.tree_structure(f) == jax.tree_util.tree_structure(y0)
    assert diffrax.Heun().init(term, 0.0, 0.1, y0, None) is None  # not FSAL: nothing carried


def test_public_group_names_are_classes():
    assert isinstance(gm.SO3(), gm.AbstractLieGroup) and isinstance(gm.SO3(), gm.LieGroup)
    assert gm.SO3() == gm.SO3() and gm.SO3().group is jaxlie.SO3
    assert gm.Euclidean().dim is None and gm.Euclidean(2).dim == 2
    with pytest.raises(ValueError, match="known dimension"):
        gm.Product(gm.Euclidean(), gm.SO3())


@pytest.mark.parametrize("group", [gm.SO3(), gm.SE3(), gm.SE2()], ids=["so3", "se3", "se2"])
def test_compose_is_jaxlies_product(group):
    """Every group's `compose` (the product ⊕ and ⊖ are built on) is jaxlie's `a @ b`; on SO(3)
    and SE(3) computed without jaxlie's index gather (the same element to round-off)."""
    rng = np.random.default_rng(3)
    for _ in range(3):
        a = group.oplus(random_point(group, rng), tangent(group, rng))
        b = group.oplus(random_point(group, rng), tangent(group, rng))
        close(group.compose(a, b).parameters(), (a @ b).parameters(), rtol=1e-15, atol=1e-15)


def test_rotation_differentiates_without_a_scatter():
    """`rotate` is `R.apply`, and its reverse-mode derivative has no scatter: jaxlie's gathered
    product table transposes into a scatter-add, which XLA's CPU backend runs as a loop of
    kernels in every stage of a rigid body's vector field (docs/performance.md)."""
    from geomech._geometry import rotate

    rng = np.random.default_rng(4)
    R = gm.SO3().exp(jnp.asarray(rng.normal(size=3)))
    x = jnp.asarray(rng.normal(size=3))
    close(rotate(R, x), R.apply(x), rtol=1e-15, atol=1e-15)
    energy = lambda w, x: rotate(jaxlie.SO3(w), x) @ jnp.arange(1.0, 4.0)
    program = jax.jit(jax.grad(energy, argnums=(0, 1))).lower(R.wxyz, x).as_text()
    assert "scatter" not in program and "gather" not in program
    jaxlies = jax.jit(jax.grad(lambda w, x: jaxlie.SO3(w).apply(x) @ jnp.arange(1.0, 4.0)))
    assert "scatter" in jaxlies.lower(R.wxyz, x).as_text()  # what this avoids
