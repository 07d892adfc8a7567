"""Parameters however a user writes them (closures over traced values, `eqx.Module` fields,
`functools.partial`, a parameter pytree) under every JAX transformation, with the same numbers as
eager calls; and the warning against silent recompilation."""

import functools
import warnings

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm
from geomech import _frontend

SLEIGH = gm.models.ChaplyginSleigh()
Y0 = SLEIGH.initial_state()
C0 = 0.8  # the damping coefficient of the tests
T1 = 0.5
ROW = gm.LinearConstraint(SLEIGH.row)


def _damping(c, q, v):
    return -c * v


class Damping(eqx.Module):
    c: jax.Array

    def __call__(self, q, v):
        return -self.c * v


# each form builds the damped sleigh F = -c v from the parameter c
FORMS = {
    "closure": lambda c: gm.LagrangianSystem(SLEIGH.lagrangian, force=lambda q, v: -c * v, constraint=ROW),
    "module": lambda c: gm.LagrangianSystem(SLEIGH.lagrangian, force=Damping(c), constraint=ROW),
    "partial": lambda c: gm.LagrangianSystem(SLEIGH.lagrangian, force=functools.partial(_damping, c), constraint=ROW),
    # a parameter pytree: the mass in the model's field, the damping in a closure
    "pytree": lambda c: _from_params({"m": jnp.asarray(SLEIGH.m, float), "c": c}),
}


def _from_params(params):
    model = gm.models.ChaplyginSleigh(m=params["m"])
    return gm.LagrangianSystem(
        model.lagrangian, force=lambda q, v: -params["c"] * v, constraint=gm.LinearConstraint(model.row)
    )


def _final_x(form, c):
    """The loss of the tests: x at T1."""
    return gm.simulate(FORMS[form](c), Y0, 0.0, T1).states.q[-1, 0]


@pytest.fixture(scope="module")
def reference():
    """Eager value and derivative (the module form, compiled once), and x at two more c."""
    f = lambda c: _final_x("module", c)
    cs = jnp.array([0.3, C0, 1.5])
    return {
        "value": f(jnp.asarray(C0)),
        "grad": jax.grad(f)(jnp.asarray(C0)),
        "sweep": jnp.stack([f(c) for c in cs]),
        "cs": cs,
    }


TRANSFORMS = {
    "jit": lambda f, ref: (jax.jit(f)(C0), ref["value"]),
    "filter_jit": lambda f, ref: (eqx.filter_jit(f)(jnp.asarray(C0)), ref["value"]),
    "vmap": lambda f, ref: (jax.vmap(f)(ref["cs"]), ref["sweep"]),
    "grad": lambda f, ref: (jax.grad(f)(C0), ref["grad"]),
    "jacfwd": lambda f, ref: (jax.jacfwd(f)(C0), ref["grad"]),
    "jit_value_and_grad": lambda f, ref: (
        jnp.stack(jax.jit(jax.value_and_grad(f))(C0)), jnp.stack([ref["value"], ref["grad"]])
    ),
}


@pytest.mark.parametrize("transform", sorted(TRANSFORMS))
@pytest.mark.parametrize("form", sorted(FORMS))
def test_simulate_parameter_forms_under_transformations(form, transform, reference):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", gm.RecompilationWarning)
        got, want = TRANSFORMS[transform](functools.partial(_final_x, form), reference)
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)


def test_reference_derivative_matches_finite_differences(reference):
    h = 1e-5
    fd = (_final_x("module", C0 + h) - _final_x("module", C0 - h)) / (2 * h)
    np.testing.assert_allclose(reference["grad"], fd, rtol=1e-6)
    assert abs(float(reference["grad"])) > 1e-3  # the damping matters: the test can fail


def test_traced_closure_failure_raises_inside_jit():
    """Under jit a failed precondition is an in-program error (the host path cannot read the
    outputs), also when the only tracer sits in a closure."""
    off = gm.State(Y0.q, Y0.v + jnp.array([0.0, 1.0, 0.0]))  # off the knife-edge constraint

    def f(c):
        system = gm.LagrangianSystem(SLEIGH.lagrangian, force=lambda q, v: -c * v, constraint=ROW)
        return gm.simulate(system, off, 0.0, T1).states.q[-1, 0]

    with pytest.raises(Exception, match="off_constraint|fails a precondition"):
        jax.jit(f)(C0)

    def g(c):
        system = gm.LagrangianSystem(SLEIGH.lagrangian, force=lambda q, v: -c * v, constraint=ROW)
        return gm.simulate(system, off, 0.0, T1, throw=False).failure == gm.Failure.off_constraint

    assert bool(jax.jit(g)(C0))


def test_simulate_vakonomic_closure_under_jit_vmap_grad():
    def f(c):
        system = gm.LagrangianSystem(SLEIGH.lagrangian, force=lambda q, v: -c * v, constraint=ROW)
        return gm.simulate_vakonomic(system, Y0, None, 0.0, T1).states.q[-1, 0]

    module = lambda c: gm.simulate_vakonomic(FORMS["module"](c), Y0, None, 0.0, T1).states.q[-1, 0]
    cs = jnp.array([0.3, C0])
    want = jnp.stack([module(c) for c in cs])
    np.testing.assert_allclose(jax.jit(f)(C0), want[1], rtol=1e-9)
    np.testing.assert_allclose(jax.vmap(f)(cs), want, rtol=1e-9)
    np.testing.assert_allclose(jax.grad(f)(C0), jax.grad(module)(C0), rtol=1e-8)
    np.testing.assert_allclose(jax.jacfwd(f)(C0), jax.grad(module)(C0), rtol=1e-8)


def test_acceleration_linearize_consistent_state_with_a_traced_closure():
    def acc(c):
        system = gm.LagrangianSystem(SLEIGH.lagrangian, force=lambda q, v: -c * v, constraint=ROW)
        return gm.acceleration(system, Y0)

    want = lambda c: gm.acceleration(FORMS["module"](c), Y0)
    cs = jnp.array([0.3, C0])
    np.testing.assert_allclose(jax.jit(acc)(C0), want(C0), rtol=1e-12)
    np.testing.assert_allclose(jax.vmap(acc)(cs), jnp.stack([want(c) for c in cs]), rtol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(acc)(C0), jax.jacrev(want)(jnp.asarray(C0)), rtol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(acc)(C0), -Y0.v * 0 + jax.jacfwd(want)(C0), rtol=1e-12)

    kw = dict(coordinates=(2,), speeds=(0, 2), fixed_q=(0, 1))

    def lin(c):
        system = gm.LagrangianSystem(SLEIGH.lagrangian, force=lambda q, v: -c * v, constraint=ROW)
        return gm.linearize(system, Y0, **kw).A

    lin_want = lambda c: gm.linearize(FORMS["module"](c), Y0, **kw).A
    np.testing.assert_allclose(jax.jit(lin)(C0), lin_want(jnp.asarray(C0)), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(
        jax.vmap(lin)(cs), jnp.stack([lin_want(c) for c in cs]), rtol=1e-10, atol=1e-12
    )
    dA = jax.jacfwd(lin)(C0)
    np.testing.assert_allclose(dA, jax.jacfwd(lin_want)(jnp.asarray(C0)), rtol=1e-10, atol=1e-12)
    assert np.abs(dA).max() > 0.1  # the damping enters A

    guess = gm.State(Y0.q, Y0.v.at[1].add(0.1))  # v[1] solved from the constraint

    def consistent(c):  # a constraint that depends on the parameter through a closure
        row = lambda q: SLEIGH.row(q) * jnp.array([[1.0, c, 1.0]])
        system = gm.LagrangianSystem(SLEIGH.lagrangian, constraint=gm.LinearConstraint(row))
        return gm.consistent_state(system, guess, fixed_q=(0, 1, 2), fixed_v=(0, 2)).v[1]

    exact = lambda c: (Y0.v[0] * jnp.sin(Y0.q[2]) + 0.5 * Y0.v[2]) / (c * jnp.cos(Y0.q[2]))
    np.testing.assert_allclose(jax.jit(consistent)(C0), exact(C0), rtol=1e-10)
    np.testing.assert_allclose(jax.vmap(consistent)(cs), jax.vmap(exact)(cs), rtol=1e-10)
    np.testing.assert_allclose(jax.grad(consistent)(C0), jax.grad(exact)(C0), rtol=1e-8)
    np.testing.assert_allclose(jax.jacfwd(consistent)(C0), jax.grad(exact)(C0), rtol=1e-8)


def test_jitted_loss_with_a_closure_is_not_cached_stale():
    """A jitted loss that rebuilds its closure per trace: new parameter values give new results
    (nothing captured from an earlier trace is reused)."""
    f = jax.jit(functools.partial(_final_x, "closure"))
    a, b = f(0.3), f(1.5)
    np.testing.assert_allclose(a, _final_x("module", jnp.asarray(0.3)), rtol=1e-10)
    np.testing.assert_allclose(b, _final_x("module", jnp.asarray(1.5)), rtol=1e-10)


def test_recompilation_for_the_same_shapes_warns_once(monkeypatch):
    """A closure rebuilt on every eager call compiles `simulate` again each time: counted (a
    counter, not a timer), warned once with the cause and the fix; a Module parameter is not."""
    monkeypatch.setattr(_frontend, "_traces", {})
    monkeypatch.setattr(_frontend, "_warned", set())
    system = lambda c: gm.LagrangianSystem(SLEIGH.lagrangian, force=Damping(c), constraint=ROW)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for c in (0.1, 0.2, 0.3, 0.4):
            gm.simulate(system(jnp.asarray(c)), Y0, 0.0, 0.1)
    assert not [w for w in caught if issubclass(w.category, gm.RecompilationWarning)]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for c in (0.1, 0.2, 0.3, 0.4):
            gm.simulate(FORMS["closure"](c), Y0, 0.0, 0.1)
    found = [w for w in caught if issubclass(w.category, gm.RecompilationWarning)]
    assert len(found) == 1
    message = str(found[0].message)
    assert "compiled 3 times" in message and "eqx.Module" in message and "jit the" in message
    counts = [n for (name, *_), n in _frontend._traces.items() if name == "simulate"]
    assert max(counts) == 4  # every eager call with a new closure was traced again


def test_forward_mode_adjoint_matches_finite_differences():
    """`adjoint=diffrax.ForwardMode()` with `jax.jacfwd`: the derivative of the final state with
    respect to two parameters (damping and mass) against central differences."""

    def final(p):
        model = gm.models.ChaplyginSleigh(m=p[1])
        system = gm.LagrangianSystem(
            model.lagrangian, force=Damping(p[0]), constraint=gm.LinearConstraint(model.row)
        )
        sol = gm.simulate(system, Y0, 0.0, T1, adjoint=diffrax.ForwardMode())
        return jnp.concatenate([sol.states.q[-1], sol.states.v[-1]])

    p0 = jnp.array([C0, 1.3])
    J = jax.jit(jax.jacfwd(final))(p0)
    f = jax.jit(final)
    h = 1e-5
    fd = jnp.stack([(f(p0.at[i].add(h)) - f(p0.at[i].add(-h))) / (2 * h) for i in range(2)], 1)
    # relative to the Jacobian's scale: central differences of an adaptive solve (tolerances 1e-8)
    # are exact to about 1e-6 of it
    scale = float(np.abs(fd).max())
    np.testing.assert_allclose(J, fd, rtol=1e-6, atol=1e-6 * scale)
    assert scale > 1e-2


# -- the adjoint for the enclosing differentiation (geomech/_adjoint.py) ---------------------------


def test_enclosing_differentiation_is_read_from_the_trace_state():
    """Forward mode under jax.jvp/jacfwd, reverse under jax.grad/vjp, both (unknown) inside a
    staged program with no differentiation in it or under jax.linearize."""
    from geomech import _adjoint

    seen = []
    record = lambda x: seen.append(_adjoint.enclosing_differentiation()) or x
    x = jnp.ones(2)
    record(x)
    jax.vmap(record)(x)
    jax.jvp(record, (x,), (x,))
    jax.jacfwd(record)(x)
    jax.grad(lambda x: record(x).sum())(x)
    jax.jit(jax.grad(lambda x: record(x).sum()))(x)
    jax.jit(record)(x + 1.0)  # a new signature: traced again
    jax.grad(jax.jit(lambda x: record(x).sum()))(x)
    jax.linearize(record, x)
    fwd, rev, both, clean = (True, False), (False, True), (True, True), (False, False)
    assert seen == [clean, clean, fwd, fwd, rev, rev, both, both, both]


def test_the_forward_mode_solve_is_traced_when_a_forward_derivative_is_taken(monkeypatch):
    """Inside `jax.jit` `simulate` serves both modes of derivative (`_adjoint.ForwardOrReverse`);
    a solve that closes over no tracer traces its `diffrax.ForwardMode` loop only when a
    forward-mode derivative is taken, and then gives the Jacobian of an unjitted `jax.jacfwd`;
    a solve closing over a tracer of the enclosing trace traces both together."""
    traced = []
    loop = diffrax.ForwardMode.loop
    monkeypatch.setattr(
        diffrax.ForwardMode, "loop", lambda self, **kw: traced.append(1) or loop(self, **kw)
    )
    system = SLEIGH.system()
    ts = jnp.linspace(0.0, 1.0, 4)

    def positions(w):  # the initial velocity scaled (the constraint is linear in v)
        y0 = gm.State(Y0.q, w * Y0.v)
        return gm.simulate(system, y0, 0.0, 1.0, saveat=diffrax.SaveAt(ts=ts)).states.q.ravel()

    f = jax.jit(positions)
    w = jnp.asarray(1.3)
    f(w)
    assert not traced
    J = jax.jacfwd(f)(w)
    assert traced
    J_direct = jax.jacfwd(positions)(w)  # ForwardMode itself
    np.testing.assert_allclose(J, J_direct, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(jax.jacrev(f)(w), J, rtol=1e-8, atol=1e-10)
    # a solve closing over a tracer of the enclosing trace (here a diffrax ODE whose vector field
    # closes over `p`; geomech's own systems hand their parameters over as inputs)
    from geomech import _adjoint

    def decay(p, adjoint):
        term = diffrax.ODETerm(lambda t, y, args: -p * y)
        return diffrax.diffeqsolve(term, diffrax.Tsit5(), 0.0, 1.0, 0.1, 1.0, adjoint=adjoint).ys[0]

    traced.clear()
    g = jax.jit(lambda p: decay(p, _adjoint.ForwardOrReverse()))
    g.lower(0.7)
    assert traced  # both solves take `p` as an input
    expected = -jnp.exp(-0.7)  # d/dp exp(-p t) at t = 1, to the integrator's error
    np.testing.assert_allclose(jax.jacfwd(g)(0.7), jax.jacfwd(decay)(0.7, diffrax.ForwardMode()))
    np.testing.assert_allclose(jax.jacrev(g)(0.7), jax.jacfwd(g)(0.7), rtol=1e-12)
    np.testing.assert_allclose(jax.jacfwd(g)(0.7), expected, rtol=1e-4)


def _sleigh_positions(p, ts):
    """The sleigh's positions at `ts` under the damping `p[0]` and a torque `p[1]` about the
    vertical, both in a closure. (Not the mass with the damping: the motion depends on their
    ratio only.)"""
    force = lambda q, v: -p[0] * v + p[1] * jnp.array([0.0, 0.0, 1.0])
    system = gm.LagrangianSystem(SLEIGH.lagrangian, force=force, constraint=ROW)
    sol = gm.simulate(system, Y0, 0.0, 2.0, saveat=diffrax.SaveAt(ts=ts), rtol=1e-10, atol=1e-10)
    return sol.states.q.ravel()


@pytest.mark.parametrize("jac", [None, "bwd"])
def test_optimistix_least_squares_through_simulate_with_its_default_options(jac):
    """`optx.least_squares(fn, optx.LevenbergMarquardt(...), y0)` with its default options (the
    Jacobian by `jax.linearize`, forward mode; optimistix traces `fn` once, before it knows how it
    will differentiate it) and with `jac="bwd"` recovers the damping and torque from noiseless
    positions, starting 20 % off."""
    import optimistix as optx

    ts = jnp.linspace(0.0, 2.0, 9)
    truth = jnp.array([C0, 0.3])
    data = _sleigh_positions(truth, ts)
    fit = optx.least_squares(
        lambda p, _: _sleigh_positions(p, ts) - data,
        optx.LevenbergMarquardt(rtol=1e-10, atol=1e-10),
        1.2 * truth,
        options=None if jac is None else {"jac": jac},
        max_steps=50,
    )
    np.testing.assert_allclose(fit.value, truth, rtol=1e-6)


def test_linearize_under_jit_gives_both_modes_of_derivative():
    """Inside `jax.jit` with no differentiation in sight `simulate` does not know how its values
    will be differentiated: `jax.linearize` of the jitted function, evaluated (forward mode) and
    transposed (reverse mode), gives the Jacobian of `jax.jacfwd` (ForwardMode) to round-off; and
    after `jax.jacfwd` of a jitted function, `jax.jacrev` of it (JAX reuses the traced program)
    works too."""
    ts = jnp.linspace(0.0, 2.0, 5)
    p = jnp.array([C0, 0.3])
    f = jax.jit(lambda p: _sleigh_positions(p, ts))
    J = jax.jacfwd(lambda p: _sleigh_positions(p, ts))(p)  # forward mode, visible: ForwardMode
    y, lin = jax.linearize(f, p)
    np.testing.assert_allclose(jax.vmap(lin, out_axes=1)(jnp.eye(2)), J, rtol=1e-10, atol=1e-12)
    (JT,) = jax.vmap(jax.linear_transpose(lin, p))(jnp.eye(y.size))
    np.testing.assert_allclose(JT, J, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(jax.jacfwd(f)(p), J, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jax.jacrev(f)(p), J, rtol=1e-8, atol=1e-10)
