"""Bad input, as one table: every case is `(id, call, outcome)`, where `call` makes
the call and `outcome` is what must happen:

- `raises(Exc, match)`: an exception of that type whose message matches `match` (which names the
    argument or the condition, and the fix where there is one);
- `reports(codes, match)`: `gm.validate` returns a report with exactly these problem codes;
- `exits(2, match)`: the `geomech` command returns exit status 2 with one line on stderr and no
    traceback;
- `flagged(failure)` / `flagged(result=...)`: `call` returns `(system, y0, kwargs)` with a batch of
    three initial states whose last is bad; `gm.simulate(..., throw=False)` flags that one (its
    `gm.Failure`, or its result code) and returns the two others bit for bit as in the run
    without it;
- `stops(result, t_final, ts)`: `call` returns a `gm.Solution` that stopped early with that
    result code, at `t_final`, the time of the state kept, and with exactly the saved times `ts`
    before the unused (`inf`) slots.

Most cases raise before tracing; the batched runs (`flagged`) reuse two tiny systems (n = 2, 3) with
batches of one shape, so each compiles once.

This is the one file for messages: bad input gets a clear error, report or exit that names the
problem (docs/errors.md). Besides the table it holds the checks that take several steps (a state
on and off C; a failure of the run raised on every transformation) and a property test over random
systems and random corruptions. The per-trajectory failure codes of an ensemble beyond the
`flagged` rows here are in tests/test_failures.py.
"""

import contextlib
import dataclasses
import functools
import io
import re
import warnings
from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from random_systems import random_system

import geomech as gm
from geomech import cli
from geomech.models import ThesisExample2

# geomech's own messages for arguments of the wrong type, as users see them (without the
# annotation checker of the test suite): every test here but the property test, which runs with
# the checker
as_users_see_it = pytest.mark.usefixtures("no_typecheck")

RUNTIME = eqx.EquinoxRuntimeError

# -- outcomes -------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Raises:
    exception: type
    match: str


@dataclasses.dataclass(frozen=True)
class Reports:
    codes: tuple[str, ...]
    match: str


@dataclasses.dataclass(frozen=True)
class Exits:
    code: int
    match: str


@dataclasses.dataclass(frozen=True)
class Flagged:
    failure: str  # a gm.Failure name ("none": integrated, but with `result`)
    result: str  # a diffrax.RESULTS name


@dataclasses.dataclass(frozen=True)
class Stops:
    result: str  # a diffrax.RESULTS name
    t_final: float
    ts: tuple[float, ...]


def stops(result, t_final, ts):
    return Stops(result, t_final, tuple(ts))


def raises(exception, match):
    return Raises(exception, match)


def reports(codes, match):
    return Reports(tuple(codes), match)


def exits(code, match):
    return Exits(code, match)


def flagged(failure="none", result="singular"):
    return Flagged(failure, result)


# -- tiny systems ---------------------------------------------------------------------------------

FREE = gm.LagrangianSystem(lambda q, v: 0.5 * v @ v - q[0])
# a pendulum of unit length: q on the unit circle, h = |q|² - 1
CIRCLE = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v - q[1], constraint=gm.HolonomicConstraint(lambda q: q @ q - 1.0)
)
ON_CIRCLE = gm.State(jnp.array([1.0, 0.0]), jnp.array([0.0, 1.0]))
S2 = gm.State(jnp.array([0.3, 0.4]), jnp.array([1.0, -1.0]))


def _defects_system():
    """n = 3, one constraint φ = x v_x, W = ker (y - 2, 1, 0); each precondition fails in its own
    region of Q, so one compiled batch serves every failure code:

    - M = diag(y², 1, 1) is singular at y = 0 (regularity (2.6));
    - ∂φ/∂v = (x, 0, 0) has rank 0 at x = 0 (admissibility (3.7));
    - A M⁻¹ Cᵀ = x (y - 2) / y² vanishes at y = 2 (condition (3.19));
    - F^e = (0, 0, √(1 + x)) is NaN for x < -1 (a non-finite a_R);
    - L ∋ log(z + 2) is NaN for z < -2 while its derivatives are finite (non-finite energy).
    """
    L = lambda q, v: 0.5 * (q[1] ** 2 * v[0] ** 2 + v[1] ** 2 + v[2] ** 2) - q[2] + jnp.log(q[2] + 2)
    return gm.LagrangianSystem(
        L,
        force=lambda q, v: jnp.stack([0.0 * q[0], 0.0 * q[0], jnp.sqrt(1.0 + q[0])]),
        constraint=gm.LinearConstraint(lambda q: jnp.stack([q[0], 0.0 * q[0], 0.0 * q[0]])[None]),
        work_space=gm.Subspace(annihilator=lambda q, v: jnp.stack([q[1] - 2.0, 1.0, 0.0])[None]),
    )


DEFECTS = _defects_system()
GOOD = {
    id(DEFECTS): gm.State(
        jnp.array([[1.0, 1.0, 0.0], [1.0, 1.2, 0.1]]), jnp.array([[0.0, 0.3, -0.2], [0.0, -0.1, 0.4]])
    ),
    id(CIRCLE): gm.State(
        jnp.array([[1.0, 0.0], [0.6, -0.8]]), jnp.array([[0.0, 1.0], [0.8 * 0.5, 0.6 * 0.5]])
    ),
}
T1 = 0.3
SAVE = diffrax.SaveAt(ts=jnp.linspace(0.0, T1, 3))


def _with(system, q=None, v=None, **kw):
    """`(system, y0, kw)`: the two good states of `system` and a third, the first good one with
    entries of `q`, `v` replaced (`{index: value}`)."""
    good = GOOD[id(system)]
    bad_q, bad_v = good.q[0], good.v[0]
    for i, x in (q or {}).items():
        bad_q = bad_q.at[i].set(x)
    for i, x in (v or {}).items():
        bad_v = bad_v.at[i].set(x)
    y0 = gm.State(jnp.concatenate([good.q, bad_q[None]]), jnp.concatenate([good.v, bad_v[None]]))
    return lambda: (system, y0, kw)


SINGULAR_PAST = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v, force=lambda q, v: jnp.where(q[0] > 0.35, jnp.nan, 0.0) * v
)
PARTICLE = gm.State(jnp.array([0.0]), jnp.array([1.0]))
# the Suslov problem on SO(3): ω₂ = 0
SUSLOV = gm.LagrangianSystem(
    lambda R, w: 0.5 * w @ w, constraint=gm.LinearConstraint(lambda R: jnp.array([[0.0, 1.0, 0.0]])),
    manifold=gm.SO3(),
)
ON_SUSLOV = gm.State(jaxlie.SO3.identity(), jnp.array([1.0, 0.0, 0.5]))


def _sim(system=CIRCLE, y0=ON_CIRCLE, t0=0.0, t1=T1, **kw):
    return lambda: gm.simulate(system, y0, t0, t1, **kw)


def _acc(system, state=S2, **kw):
    return lambda: gm.acceleration(system, state, **kw)


def _vak(system=CIRCLE, y0=ON_CIRCLE, mu0=None, t1=T1, **kw):
    return lambda: gm.simulate_vakonomic(system, y0, mu0, 0.0, t1, **kw)


@dataclasses.dataclass
class _UnhashableLagrangian:  # eq=True without frozen=True: no __hash__
    def __call__(self, q, v):
        return 0.5 * v @ v


def _system(**kw):
    return lambda: gm.LagrangianSystem(**({"lagrangian": FREE.lagrangian} | kw))


def _cli(*argv):
    return lambda: cli.main(list(argv))


X, Y, VX, VY, K = sp.symbols("x y v_x v_y k")
SYM_FREE = (VX**2 + VY**2) / 2


def _sym(lagrangian=SYM_FREE, coordinates=(X, Y), velocities=(VX, VY), **kw):
    return lambda: gm.from_sympy(lagrangian, list(coordinates), list(velocities), **kw)


def _rank_deficient_W():
    # W spanned by two proportional columns at every state: dim W = 1 < n - k = 2
    return gm.LagrangianSystem(
        lambda q, v: 0.5 * v @ v,
        constraint=gm.LinearConstraint(lambda q: jnp.array([[1.0, 1.0, 0.0]])),
        work_space=gm.Subspace(basis=lambda q, v: jnp.outer(jnp.array([1.0, 0.0, 1.0]), jnp.array([1.0, 2.0]))),
    )


ON_RANK_DEFICIENT_W = gm.State(jnp.zeros(3), jnp.array([1.0, -1.0, 0.0]))
NAN = float("nan")
INF = float("inf")
BATCH = gm.State(jnp.ones((2, 2)), jnp.ones((2, 2)))
LINEAR = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v, constraint=gm.LinearConstraint(lambda q: jnp.array([[1.0, -1.0, 0.0]]))
)
ON_LINEAR = gm.State(jnp.zeros(3), jnp.array([1.0, 1.0, 0.0]))
NONLINEAR = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v, constraint=gm.Constraint(lambda q, v: v[0] ** 2 + v[1])
)
ON_NONLINEAR = gm.State(jnp.zeros(2), jnp.array([1.0, -1.0]))

# units: a pendulum of length 1e-6 and one of 10 m written in millimetres, a
# sleigh moving at 5e-10, two coordinates in very different units
def _pendulum_of(l):
    return gm.LagrangianSystem(
        lambda q, v: 0.5 * v @ v - q[1], constraint=gm.HolonomicConstraint(lambda q: q @ q - l**2)
    )


SLEIGH = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v,
    constraint=gm.LinearConstraint(
        lambda q: jnp.stack([-jnp.sin(q[2]), jnp.cos(q[2]), -0.5 + 0 * q[2]])[None]
    ),
)
MM_STATE = gm.State(1e4 * jnp.array([jnp.sin(0.7), -jnp.cos(0.7)]), 2e3 * jnp.array([jnp.cos(0.7), jnp.sin(0.7)]))
# g = v₁ + v₀²/2 with M = I: ker G = span e₀ at v = 0, where M_μ = 1 + μ vanishes for μ = -1
IMPASSE = gm.LagrangianSystem(
    lambda q, v: 0.5 * v @ v, constraint=gm.Constraint(lambda q, v: v[1] + 0.5 * v[0] ** 2)
)

# an inverted oscillator, L = ½|v|² − |q|², and the states it is evaluated at
UNSTABLE = lambda q, v: 0.5 * v @ v - q @ q
INDEFINITE = gm.LagrangianSystem(lambda q, v: 0.5 * (v[0] ** 2 - v[1] ** 2))
S3 = gm.State(jnp.array([0.3, 0.4, 0.1]), jnp.array([1.0, 1.0, -2.0]))
# Example 2 of the thesis with W's A(q) = 1/2: condition (3.19) fails at q = (0, 2)
EXAMPLE2_CONSTANT_A = eqx.tree_at(lambda m: m.A, ThesisExample2(m1=1.0, m2=2.0), lambda q: 0.5 + 0.0 * q[0])
EXAMPLE2_AT_3_19 = gm.State(jnp.array([0.0, 2.0]), jnp.array([1.0, 0.5]))

# -- the table ------------------------------------------------------------------------------------

CASES: list[tuple[str, Callable, object]] = [
    # t0, t1
    ("t1-nan", _sim(t1=NAN), raises(ValueError, r"t1 must be a finite real number")),
    ("t1-inf", _sim(t1=INF), raises(ValueError, r"t1 must be a finite real number")),
    ("t0-nan", _sim(t0=jnp.nan), raises(ValueError, r"t0 must be a finite real number")),
    ("t1-array", _sim(t1=jnp.array([1.0, 2.0])), raises(ValueError, r"t1 must be a scalar time, got shape \(2,\)")),
    ("t1-str", _sim(t1="1"), raises(TypeError, r"t1 must be a real number, got '1'")),
    ("t1-complex", _sim(t1=1j), raises(TypeError, r"t1 must be a real number")),
    ("t-span-below-resolution", _sim(t0=1e16, t1=1e16 + 20), raises(ValueError, r"t1 - t0 = 20 is below the resolution of t at t0 = 1e\+16 in float64 \(16 eps \|t\| = 35.5\).*Shift the time origin")),
    # rtol, atol
    ("rtol-negative", _sim(rtol=-1e-6), raises(ValueError, r"rtol must be a finite number >= 0")),
    ("rtol-nan", _sim(rtol=NAN), raises(ValueError, r"rtol must be a finite number >= 0, got nan")),
    ("atol-inf", _sim(atol=INF), raises(ValueError, r"atol must be a finite number >= 0")),
    ("tolerances-both-zero", _sim(rtol=0.0, atol=0.0), raises(ValueError, r"rtol and atol are both 0.*Give a positive tolerance")),
    ("atol-array", _sim(atol=jnp.ones(2)), raises(ValueError, r"atol must be a finite number >= 0")),
    ("rtol-str", _sim(rtol="1e-8"), raises(ValueError, r"rtol must be a finite number >= 0, got '1e-8'")),
    ("rtol-with-controller", _sim(rtol=1e-6, stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6)), raises(ValueError, r"either rtol/atol .* or a stepsize_controller, not both")),
    ("rtol-with-fixed-steps", _sim(integrator=diffrax.Euler(), dt0=0.1, rtol=1e-6), raises(ValueError, r"Euler has no error estimate.*drop rtol/atol")),
    # max_steps
    ("max_steps-zero", _sim(max_steps=0), raises(ValueError, r"max_steps must be a positive integer, got 0")),
    ("max_steps-negative", _sim(max_steps=-1), raises(ValueError, r"max_steps must be a positive integer, got -1")),
    ("max_steps-float", _sim(max_steps=100.0), raises(ValueError, r"max_steps must be a positive integer, got 100.0")),
    ("max_steps-bool", _sim(max_steps=True), raises(ValueError, r"max_steps must be a positive integer, got True")),
    # dt0
    ("dt0-zero", _sim(dt0=0.0), raises(ValueError, r"dt0 must be a finite, nonzero step")),
    ("dt0-nan", _sim(dt0=NAN), raises(ValueError, r"dt0 must be a finite, nonzero step, got nan")),
    ("dt0-wrong-sign", _sim(dt0=-0.1), raises(ValueError, r"dt0 = -0.1 points away from t1.*sign of t1 - t0")),
    ("dt0-missing-fixed-step", _sim(integrator=diffrax.Euler()), raises(ValueError, r"Euler has no error estimate: give a fixed step dt0")),
    # saveat
    ("saveat-list", _sim(saveat=[0.1, 0.2]), raises(TypeError, r"saveat must be a diffrax.SaveAt, got list")),
    ("saveat-dense", _sim(saveat=diffrax.SaveAt(dense=True)), raises(ValueError, r"saveat must save states.*without fn=, subs= or dense=True")),
    ("saveat-fn", _sim(saveat=diffrax.SaveAt(t1=True, fn=lambda t, y, a: y.q)), raises(ValueError, r"saveat must save states")),
    ("saveat-ts-outside", _sim(saveat=diffrax.SaveAt(ts=jnp.array([0.1, 2.0]))), raises(ValueError, r"saveat.ts must lie in \[t0, t1\] = \[0, 0.3\]")),
    ("saveat-ts-unsorted", _sim(saveat=diffrax.SaveAt(ts=jnp.array([0.2, 0.1]))), raises(ValueError, r"saveat.ts must be sorted in the direction of integration")),
    ("saveat-ts-nan", _sim(saveat=diffrax.SaveAt(ts=jnp.array([0.1, jnp.nan]))), raises(ValueError, r"saveat.ts has NaN or inf entries")),
    ("saveat-ts-float32-t0", _sim(t0=jnp.float32(0.1), saveat=diffrax.SaveAt(ts=jnp.linspace(0.1, 0.3, 3))), raises(ValueError, r"\[t0, t1\] = \[0.10000000149011612, 0.3\], got times from 0.1 to 0.3\. t0/t1 are float32 and saveat.ts float64: give the times in one dtype")),
    ("saveat-ts-2d", _sim(saveat=diffrax.SaveAt(ts=jnp.full((2, 2), 0.1))), raises(ValueError, r"saveat.ts must be a 1-D array of times, got shape \(2, 2\)")),
    # output size
    ("output-above-limit", _sim(saveat=diffrax.SaveAt(ts=jnp.linspace(0, T1, 1000)), max_output_bytes=10_000), raises(ValueError, r"the saved output would take 0.00 GiB \(1 trajectories x 1001 saved times x 8 values\), above max_output_bytes.*max_output_bytes=\.\.\. \(None: no limit\)")),
    ("output-steps-huge", _sim(saveat=diffrax.SaveAt(steps=True), max_steps=10**9), raises(ValueError, r"\(1 trajectories x 1000000001 saved times x 8 values\) \(SaveAt\(steps=True\) keeps max_steps = 1000000000 slots.*lower max_steps")),
    ("max_output_bytes-zero", _sim(max_output_bytes=0), raises(ValueError, r"max_output_bytes must be a positive integer or None, got 0")),
    ("max_output_bytes-float", _sim(max_output_bytes=1e9), raises(ValueError, r"max_output_bytes must be a positive integer or None")),
    # the other arguments of simulate
    ("system-not-a-system", _sim(system=FREE.lagrangian), raises(TypeError, r"system must be a gm.LagrangianSystem")),
    ("y0-tuple", _sim(y0=(ON_CIRCLE.q, ON_CIRCLE.v)), raises(TypeError, r"expected a gm.State\(q, v\), got tuple")),
    ("y0-3d", _sim(y0=gm.State(jnp.ones((2, 2, 2)), jnp.ones((2, 2, 2)))), raises(ValueError, r"q of shape \(2, 2, 2\).*a batch with a single leading axis, \(B, n\)")),
    ("y0-empty-batch", _sim(y0=gm.State(jnp.ones((0, 2)), jnp.ones((0, 2)))), raises(ValueError, r"empty batch \(B = 0\)")),
    ("y0-wrong-n", _sim(system=gm.LagrangianSystem(FREE.lagrangian, force=lambda q, v: jnp.zeros(2)), y0=gm.State(jnp.ones(3), jnp.ones(3))), raises(ValueError, r"force must return a covector of shape \(3,\), got \(2,\)")),
    ("y0-off-C", _sim(y0=gm.State(1.1 * ON_CIRCLE.q, ON_CIRCLE.v)), raises(ValueError, r"the trajectory: the state is off the constraint manifold C.*gm.consistent_state")),
    ("y0-nan", _sim(y0=gm.State(ON_CIRCLE.q.at[0].set(jnp.nan), ON_CIRCLE.v)), raises(ValueError, r"NaN or inf entries in q or v.*throw=False")),
    ("solver-str", _sim(solver="gauss"), raises(TypeError, r"solver must be a geomech solver such as gm.Projection\(\)")),
    ("integrator-str", _sim(integrator="tsit5"), raises(TypeError, r"integrator must be a diffrax solver such as diffrax.Tsit5\(\)")),
    ("integrator-split-terms", _sim(integrator=diffrax.SemiImplicitEuler(), dt0=0.1), raises(TypeError, r"integrator SemiImplicitEuler is not supported: it steps a split system of 2 terms.*Supported: .*Tsit5.*Kvaerno3/4/5.*gm.VariationalIntegrator\(\)")),
    ("integrator-sde", _sim(integrator=diffrax.EulerHeun(), dt0=0.1), raises(TypeError, r"integrator EulerHeun is not supported: it steps several terms")),
    ("vakonomic-system-integrator", _vak(integrator=gm.VariationalIntegrator(), dt0=0.1), raises(TypeError, r"VariationalIntegrator integrates the mechanical state gm.State\(q, v\) only; simulate_vakonomic integrates the multipliers too")),
    ("stabilization-str", _sim(stabilization="magic"), raises(ValueError, r"stabilization must be None, 'baumgarte', 'projection'.*got 'magic'")),
    ("controller-str", _sim(stepsize_controller="pid"), raises(TypeError, r"stepsize_controller must be a diffrax step-size controller")),
    ("adjoint-str", _sim(adjoint="backsolve"), raises(TypeError, r"adjoint must be a diffrax adjoint")),
    ("projection-with-backsolve", _sim(stabilization="projection", adjoint=diffrax.BacksolveAdjoint()), raises(ValueError, r"'projection' cannot be used with diffrax.BacksolveAdjoint")),
    ("throw-str", _sim(throw="no"), raises(TypeError, r"throw must be True or False, got 'no'")),
    ("throw-int", _sim(throw=1), raises(TypeError, r"throw must be True or False, got 1")),
    ("throw-array", _sim(throw=jnp.array(False)), raises(TypeError, r"throw must be True or False")),
    ("sharding-unbatched", _sim(sharding=jax.sharding.Mesh(jax.devices()[:1], ("b",))), raises(ValueError, r"sharding splits the batch axis: give y0 with a leading batch axis")),
    ("known-work-with-gauss", _sim(system=gm.LagrangianSystem(CIRCLE.lagrangian, constraint=CIRCLE.constraint, known_work=lambda q, v: 0 * q), solver=gm.Gauss()), raises(ValueError, r"Gauss does not generalize to non-ideal constraints.*Use Projection\(\)")),
    # gm.State
    ("State-shapes-differ", lambda: gm.State(jnp.ones(2), jnp.ones(3)), raises(ValueError, r"q and v of the same shape.*got q \(2,\) and v \(3,\)")),
    ("State-scalar", lambda: gm.State(1.0, 1.0), raises(ValueError, r"q and v of the same shape \(\.\.\., n\)")),
    ("State-complex", lambda: gm.State(jnp.ones(2) * 1j, jnp.ones(2)), raises(TypeError, r"State\(q, v\) takes real arrays.*complex128")),
    ("State-str", lambda: gm.State("a", "b"), raises(TypeError, r"State\(q, v\) takes real arrays.*got str")),
    ("State-None", lambda: gm.State(None, None), raises(TypeError, r"State\(q, v\) takes real arrays.*NoneType")),
    ("State-mixed-precision", lambda: gm.State(jnp.ones(2, jnp.float32), jnp.ones(2)), raises(TypeError, r"State\(q, v\) needs q and v of one dtype, got q float32 and v float64")),
    # user functions checked for what they return
    ("L-constant", _acc(gm.LagrangianSystem(lambda q, v: 0.0)), raises(ValueError, r"the Lagrangian returns a constant that does not depend on t, q or v")),
    ("L-integer", _acc(gm.LagrangianSystem(lambda q, v: jnp.sum(v.astype(int)))), raises(TypeError, r"the Lagrangian returns values of dtype int64: it must return real floating-point")),
    ("force-complex", _acc(gm.LagrangianSystem(FREE.lagrangian, force=lambda q, v: 1j * v)), raises(TypeError, r"force returns values of dtype complex128")),
    ("constraint-complex", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.Constraint(lambda q, v: (1j * v[0] + v[1])[None]))), raises(TypeError, r"the constraint returns values of dtype complex128")),
    ("constraint-bool", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.Constraint(lambda q, v: (v[0] > 0)[None]))), raises(TypeError, r"the constraint returns values of dtype bool")),
    ("constraint-constant", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.HolonomicConstraint(lambda q: jnp.array([1.0])))), raises(ValueError, r"the constraint returns a constant that does not depend on t, q or v")),
    ("work-space-complex", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * v @ v, constraint=gm.LinearConstraint(lambda q: jnp.array([[1.0, -1.0, 0.0]])), work_space=gm.Subspace(annihilator=lambda q, v: jnp.array([[1.0, 1j, 0.0]]))), ON_LINEAR), raises(ValueError, r"work_space failed on a state with n = 3 coordinates: work_space returns values of dtype complex128")),
    ("L-signature-needs-time-dependent", _acc(gm.LagrangianSystem(lambda t, q, v: 0.5 * v @ v)), raises(ValueError, r"missing 1 required positional argument.*pass time_dependent=True to gm.LagrangianSystem")),
    ("L-signature-time-dependent-given", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * v @ v, time_dependent=True)), raises(ValueError, r"this system has time_dependent=True: every user function takes \(t, q, v\)")),
    # gm.LagrangianSystem
    ("system-lagrangian-not-callable", lambda: gm.LagrangianSystem(3.0), raises(TypeError, r"lagrangian must be a callable L\(q, v\)")),
    ("system-constraint-function", _system(constraint=lambda q, v: v[0]), raises(TypeError, r"constraint must be a gm.Constraint, gm.HolonomicConstraint")),
    ("system-unhashable-lagrangian", _system(lagrangian=_UnhashableLagrangian()), raises(TypeError, r"lagrangian must be hashable apart from its arrays.*frozen=True")),
    ("system-work-space-without-constraint", _system(work_space=gm.Subspace(annihilator=jnp.ones((1, 2)))), raises(ValueError, r"work_space is given but there is no constraint")),
    ("system-known-work-without-constraint", _system(known_work=lambda q, v: q), raises(ValueError, r"known_work is given but there is no constraint")),
    ("system-time-dependent-str", _system(time_dependent="yes"), raises(TypeError, r"time_dependent must be True or False, got 'yes'")),
    ("system-manifold-int", _system(manifold=3), raises(TypeError, r"manifold must be a gm.Euclidean\(n\)")),
    ("system-force-array", _system(force=jnp.ones(2)), raises(TypeError, r"force must be a callable returning an \(n,\) covector")),
    ("Euclidean-zero", lambda: gm.Euclidean(0), raises(ValueError, r"Euclidean\(n\) needs a positive integer n, got 0")),
    # constraints
    ("Constraint-not-callable", lambda: gm.Constraint(3.0), raises(TypeError, r"Constraint: phi must be a function phi\(q, v\)")),
    ("LinearConstraint-array", lambda: gm.LinearConstraint(jnp.ones((1, 2))), raises(TypeError, r"LinearConstraint: A_of_q must be a function A_of_q\(q\).*lambda q: value")),
    ("LinearConstraint-c-array", lambda: gm.LinearConstraint(lambda q: jnp.ones((1, 2)), jnp.ones(1)), raises(TypeError, r"LinearConstraint: c_of_q must be a function")),
    ("HolonomicConstraint-str", lambda: gm.HolonomicConstraint("h"), raises(TypeError, r"HolonomicConstraint: h must be a function h\(q\)")),
    ("Constraint-stack-empty", lambda: gm.Constraint.stack([]), raises(TypeError, r"Constraint.stack takes a non-empty sequence")),
    ("Constraint-2d-values", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.Constraint(lambda q, v: jnp.outer(v, v)))), raises(ValueError, r"phi must return a scalar or a 1-D array of constraints")),
    ("Constraint-k-equals-n", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.Constraint(lambda q, v: v))), raises(ValueError, r"2 constraints on 2 coordinates: need 1 <= k <= n - 1")),
    ("LinearConstraint-wrong-n", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.LinearConstraint(lambda q: jnp.ones((1, 3))))), raises(ValueError, r"the constraint failed on a state with n = 2 coordinates")),
    # gm.Subspace
    ("Subspace-neither", lambda: gm.Subspace(), raises(ValueError, r"exactly one of basis=\.\.\. or annihilator=")),
    ("Subspace-both", lambda: gm.Subspace(basis=jnp.eye(2), annihilator=jnp.eye(2)), raises(ValueError, r"exactly one of basis=\.\.\. or annihilator=")),
    ("Subspace-basis-rank-deficient", lambda: gm.Subspace(basis=jnp.array([[1.0, 2.0], [0.0, 0.0], [1.0, 2.0]])), raises(ValueError, r"Subspace basis is rank deficient: its 2 columns span only 1.*linearly independent columns")),
    ("Subspace-annihilator-rank-deficient", lambda: gm.Subspace(annihilator=jnp.array([[1.0, 2.0, 0.0], [2.0, 4.0, 0.0]])), raises(ValueError, r"Subspace annihilator is rank deficient: its 2 rows span only 1")),
    ("Subspace-zero-row", lambda: gm.Subspace(annihilator=jnp.zeros(3)), raises(ValueError, r"Subspace annihilator is rank deficient: its 1 rows span only 0")),
    ("Subspace-nan", lambda: gm.Subspace(annihilator=jnp.array([[1.0, jnp.nan, 0.0]])), raises(ValueError, r"Subspace annihilator has NaN or inf entries")),
    ("Subspace-str", lambda: gm.Subspace(basis="x"), raises(TypeError, r"Subspace basis must be a function \(q, v\) -> matrix or a constant real array")),
    ("Subspace-wrong-dimension", _acc(gm.LagrangianSystem(LINEAR.lagrangian, constraint=LINEAR.constraint, work_space=gm.Subspace(basis=jnp.eye(3)[:, :1])), ON_LINEAR), raises(ValueError, r"work_space basis has shape \(3, 1\).*must be \(3, 2\)")),
    ("Subspace-rank-deficient-at-state", _acc(_rank_deficient_W(), ON_RANK_DEFICIENT_W), raises(RUNTIME, r"the work space W is rank deficient at this state.*independent vectors")),
    # stabilizations
    ("Baumgarte-alpha-negative", lambda: gm.Baumgarte(-1.0, 1.0), raises(ValueError, r"Baumgarte gain alpha must be a finite number > 0, got -1.0")),
    ("Baumgarte-beta-nan", lambda: gm.Baumgarte(1.0, NAN), raises(ValueError, r"Baumgarte gain beta must be a finite number > 0, got nan")),
    ("Baumgarte-alpha-zero", lambda: gm.Baumgarte(0.0, 1.0), raises(ValueError, r"Baumgarte gain alpha must be a finite number > 0")),
    ("Baumgarte-array", lambda: gm.Baumgarte(jnp.ones(2), 1.0), raises(ValueError, r"Baumgarte gain alpha must be a finite number > 0")),
    ("ManifoldProjection-zero", lambda: gm.ManifoldProjection(0), raises(ValueError, r"iterations must be a positive integer, got 0")),
    ("ManifoldProjection-float", lambda: gm.ManifoldProjection(2.0), raises(ValueError, r"iterations must be a positive integer, got 2.0")),
    ("ManifoldProjection-bool", lambda: gm.ManifoldProjection(True), raises(ValueError, r"iterations must be a positive integer, got True")),
    ("project_to_constraints-iterations", lambda: gm.project_to_constraints(CIRCLE, ON_CIRCLE, iterations=0), raises(ValueError, r"iterations must be a positive integer, got 0")),
    # acceleration / assemble: shapes before tracing, values at run time naming the culprit
    ("acceleration-system-not-a-system", _acc(FREE.lagrangian), raises(TypeError, r"system must be a gm.LagrangianSystem")),
    ("acceleration-batched-state", _acc(FREE, BATCH), raises(ValueError, r"q of shape \(n,\): batch with jax.vmap")),
    ("acceleration-t-array", _acc(FREE, t=jnp.zeros(2)), raises(ValueError, r"t must be a scalar time, got shape \(2,\)")),
    ("assemble-t-str", lambda: gm.assemble(FREE, S2, "0"), raises(TypeError, r"t must be a real number, got '0'")),
    ("acceleration-L-not-scalar", _acc(gm.LagrangianSystem(lambda q, v: v * v)), raises(ValueError, r"the Lagrangian must return a scalar, got shape \(2,\)")),
    ("acceleration-L-wrong-n", _acc(gm.LagrangianSystem(lambda q, v: v @ jnp.eye(3) @ v)), raises(ValueError, r"the Lagrangian failed on a state with n = 2 coordinates")),
    ("acceleration-force-shape", _acc(gm.LagrangianSystem(FREE.lagrangian, force=lambda q, v: jnp.ones(3))), raises(ValueError, r"force must return a covector of shape \(2,\), got \(3,\)")),
    ("acceleration-solver-str", _acc(FREE, solver="gauss"), raises(TypeError, r"solver must be a geomech solver")),
    ("acceleration-nan-state", _acc(FREE, gm.State(jnp.array([jnp.nan, 0.0]), S2.v)), raises(RUNTIME, r"the state has NaN or inf entries in q or v: give finite q and v")),
    ("acceleration-nan-t", _acc(CIRCLE, ON_CIRCLE, t=jnp.nan), raises(RUNTIME, r"the time t is NaN or inf: give a finite t")),
    ("acceleration-L-nonfinite", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * v @ v + jnp.log(q[0])), gm.State(jnp.array([-1.0, 0.0]), S2.v)), raises(RUNTIME, r"the Lagrangian L is not finite at this state: check it for divisions by zero")),
    ("acceleration-force-nonfinite", _acc(gm.LagrangianSystem(FREE.lagrangian, force=lambda q, v: jnp.sqrt(q)), gm.State(jnp.array([-1.0, 0.0]), S2.v)), raises(RUNTIME, r"the force F\^e is not finite at this state: check the force function")),
    ("acceleration-known-work-nonfinite", _acc(gm.LagrangianSystem(CIRCLE.lagrangian, constraint=CIRCLE.constraint, known_work=lambda q, v: q / 0.0), ON_CIRCLE), raises(RUNTIME, r"known_work F\^0 is not finite at this state")),
    ("acceleration-constraint-nonfinite", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.Constraint(lambda q, v: jnp.sqrt(q[0]) * v[0] + v[1])), gm.State(jnp.array([-1.0, 0.0]), S2.v)), raises(RUNTIME, r"the constraint φ is not finite at this state: check the constraint function")),
    ("acceleration-constraint-jacobian-nonfinite", _acc(gm.LagrangianSystem(FREE.lagrangian, constraint=gm.Constraint(lambda q, v: jnp.sqrt(v[0] ** 2) + v[1])), gm.State(jnp.zeros(2), jnp.zeros(2))), raises(RUNTIME, r"∂φ/∂v of the constraint is not finite at this state: the constraint is not differentiable in v")),
    ("acceleration-M-nonfinite", _acc(gm.LagrangianSystem(lambda q, v: v @ v + jnp.sqrt(v[0] ** 2)), gm.State(jnp.zeros(2), jnp.array([0.0, 1.0]))), raises(RUNTIME, r"the mass matrix M = ∂²L/∂v∂v .* is not finite.*not twice differentiable in v")),
    ("acceleration-M-singular", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * v[0] ** 2 - q[1] ** 2)), raises(RUNTIME, r"mass matrix M = ∂²L/∂v∂v is not positive definite.*L must be regular \(2.6\)")),
    ("acceleration-M-indefinite", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * (v[0] ** 2 - v[1] ** 2))), raises(RUNTIME, r"not positive definite at this state \(singular or indefinite\)")),
    ("acceleration-inadmissible", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * v @ v, constraint=gm.Constraint(lambda q, v: jnp.array([v[0] + v[1], 2 * v[0] + 2 * v[1]]))), gm.State(jnp.zeros(3), jnp.array([1.0, -1.0, 0.5]))), raises(RUNTIME, r"not admissible \(3.7\).*remove redundant constraint rows")),
    ("constraint_force-3.19", lambda: gm.constraint_force(DEFECTS, gm.State(jnp.array([1.0, 2.0, 0.0]), jnp.zeros(3))), raises(RUNTIME, r"condition \(3.19\) T_qQ = D ⊕ W\^⊥ fails.*choose another W")),
    ("acceleration-3.19-under-vmap", lambda: jax.vmap(lambda s: gm.acceleration(DEFECTS, s))(gm.State(jnp.array([[1.0, 1.0, 0.0], [1.0, 2.0, 0.0]]), jnp.zeros((2, 3)))), raises(RUNTIME, r"condition \(3.19\)")),
    # acceleration of the inverted oscillator and its variants: the mass matrix, (3.7), (3.19), shapes
    ("mass-matrix-indefinite", _acc(INDEFINITE), raises(RUNTIME, r"mass matrix .* not positive definite")),
    ("mass-matrix-singular", _acc(gm.LagrangianSystem(lambda q, v: 0.5 * v[0] ** 2 - q[1] ** 2)), raises(RUNTIME, r"mass matrix .* not positive definite")),
    ("mass-matrix-under-filter_jit-and-vmap", lambda: eqx.filter_jit(jax.vmap(lambda s: gm.acceleration(INDEFINITE, s)))(jax.tree.map(lambda x: jnp.stack([x, x]), S2)), raises(RUNTIME, r"not positive definite")),
    # rank ∂φ/∂v < k (3.7): two proportional rows
    ("inadmissible-proportional-rows", _acc(gm.LagrangianSystem(UNSTABLE, constraint=gm.Constraint(lambda q, v: jnp.array([v[0] + v[1], 2 * v[0] + 2 * v[1]]))), gm.State(S3.q, jnp.array([1.0, -1.0, 0.5]))), raises(RUNTIME, r"not admissible \(3.7\)")),
    ("example2-W-3.19-acceleration", lambda: gm.acceleration(EXAMPLE2_CONSTANT_A(), EXAMPLE2_AT_3_19), raises(RUNTIME, r"condition \(3.19\)")),
    ("example2-W-3.19-constraint_force", lambda: gm.constraint_force(EXAMPLE2_CONSTANT_A(), EXAMPLE2_AT_3_19), raises(RUNTIME, r"\(3.19\)")),
    # dim W = 1 ≠ dim D = 2
    ("W-wrong-dimension", _acc(gm.LagrangianSystem(UNSTABLE, constraint=gm.LinearConstraint(lambda q: jnp.array([[1.0, 1.0, 0.0]])), work_space=gm.Subspace(basis=lambda q, v: jnp.eye(3)[:, :1])), gm.State(S3.q, jnp.array([1.0, -1.0, 0.0]))), raises(ValueError, r"work_space basis has shape \(3, 1\).*must be \(3, 2\)")),
    ("shape-L-not-scalar", _acc(gm.LagrangianSystem(lambda q, v: v * v)), raises(ValueError, r"must return a scalar")),
    ("shape-force", _acc(gm.LagrangianSystem(UNSTABLE, force=lambda q, v: jnp.ones(3))), raises(ValueError, r"force must return a covector of shape \(2,\)")),
    ("shape-phi-2d", _acc(gm.LagrangianSystem(UNSTABLE, constraint=gm.Constraint(lambda q, v: jnp.ones((1, 2)) @ jnp.outer(v, v)))), raises(ValueError, r"1-D array")),
    ("shape-k-equals-n", _acc(gm.LagrangianSystem(UNSTABLE, constraint=gm.Constraint(lambda q, v: v))), raises(ValueError, r"need 1 <= k <= n - 1")),
    ("shape-manifold-dim", _acc(gm.LagrangianSystem(UNSTABLE, manifold=gm.Euclidean(3))), raises(ValueError, r"dimension 3")),
    ("shape-L-matmul", _acc(gm.LagrangianSystem(lambda q, v: v @ jnp.eye(3) @ v)), raises(ValueError, r"the Lagrangian failed on a state with n = 2")),
    ("shape-A", _acc(gm.LagrangianSystem(UNSTABLE, constraint=gm.LinearConstraint(lambda q: jnp.ones((1, 3))))), raises(ValueError, r"the constraint failed")),
    ("batched-state-to-pointwise-function", _acc(gm.LagrangianSystem(UNSTABLE), gm.State(jnp.ones((4, 2)), jnp.ones((4, 2)))), raises(ValueError, r"jax.vmap")),
    # configuration
    ("configuration-constraint-function", lambda: gm.LagrangianSystem(UNSTABLE, constraint=lambda q, v: v[0]), raises(TypeError, r"constraint must be")),
    ("configuration-work-space-without-constraint", lambda: gm.LagrangianSystem(UNSTABLE, work_space=gm.Subspace(annihilator=jnp.ones((1, 2)))), raises(ValueError, r"no constraint")),
    ("configuration-known-work-without-constraint", lambda: gm.LagrangianSystem(UNSTABLE, known_work=lambda q, v: q), raises(ValueError, r"no constraint")),
    ("configuration-Subspace-empty", lambda: gm.Subspace(), raises(ValueError, r"exactly one")),
    ("configuration-solver-str", lambda: gm.acceleration(gm.LagrangianSystem(UNSTABLE, constraint=gm.HolonomicConstraint(lambda q: q @ q - 1)), S2, solver="gauss"), raises(TypeError, r"solver must be")),
    ("configuration-lagrangian-not-callable", lambda: gm.LagrangianSystem(3.0), raises(TypeError, r"callable")),
    # gm.validate: every problem, the culprit named
    ("validate-valid", lambda: gm.validate(CIRCLE, ON_CIRCLE), reports((), r"^valid")),
    ("validate-L-nonfinite", lambda: gm.validate(DEFECTS, gm.State(jnp.array([1.0, 1.0, -3.0]), jnp.zeros(3))), reports(["nonfinite"], r"the Lagrangian L is not finite")),
    ("validate-force-and-off-C", lambda: gm.validate(DEFECTS, gm.State(jnp.array([-2.0, 1.0, 0.0]), jnp.array([1.0, 0.0, 0.0]))), reports(["nonfinite", "off_constraint"], r"force F\^e is not finite.*off the constraint manifold")),
    ("validate-singular-M-and-3.19", lambda: gm.validate(DEFECTS, gm.State(jnp.array([1.0, 0.0, 0.0]), jnp.zeros(3))), reports(["mass_matrix"], r"L must be regular \(2.6\)")),
    ("validate-3.19", lambda: gm.validate(DEFECTS, gm.State(jnp.array([1.0, 2.0, 0.0]), jnp.zeros(3))), reports(["condition_3_19"], r"\(3.19\)")),
    ("validate-W-rank-deficient", lambda: gm.validate(_rank_deficient_W(), ON_RANK_DEFICIENT_W), reports(["work_space"], r"work space W is rank deficient")),
    ("validate-batched", lambda: gm.validate(CIRCLE, BATCH), reports(["shape"], r"batch with jax.vmap")),
    ("validate-t-vector", lambda: gm.validate(CIRCLE, ON_CIRCLE, jnp.zeros(2)), reports(["shape"], r"t must be a scalar")),
    ("validate-not-a-system", lambda: gm.validate(FREE.lagrangian, S2), reports(["type"], r"expected a gm.LagrangianSystem")),
    ("validate-micrometre-pendulum-off-C", lambda: gm.validate(_pendulum_of(1e-6), gm.State(jnp.array([2e-6, 0.0]), jnp.zeros(2))), reports(["off_constraint"], r"off the constraint manifold C.*\|h_i\|")),
    ("validate-slow-sleigh-off-C", lambda: gm.validate(SLEIGH, gm.State(jnp.zeros(3), jnp.array([0.0, 5e-10, 0.0]))), reports(["off_constraint"], r"off the constraint manifold C.*\|φ_i\| .* = 0.894, needs <= 1e-08")),
    ("validate-millimetre-pendulum-exact", lambda: gm.validate(_pendulum_of(1e4), MM_STATE), reports((), r"^valid")),
    ("validate-M-in-different-units", lambda: gm.validate(gm.LagrangianSystem(lambda q, v: 0.5 * (1e-7 * v[0] ** 2 + 1e7 * v[1] ** 2)), S2), reports((), r"^valid")),
    # consistent_state / linearize
    ("consistent_state-singular-solution", lambda: gm.consistent_state(CIRCLE, gm.State(jnp.array([1.0, 0.1]), jnp.array([0.0, 1.0])), fixed_q=(0,), fixed_v=(1,)), raises(RUNTIME, r"converged, but to a point where the constraints' Jacobian with respect to them is singular")),
    ("consistent_state-index-out-of-range", lambda: gm.consistent_state(CIRCLE, ON_CIRCLE, fixed_q=(5,)), raises(ValueError, r"fixed_q index 5 is out of range: indices must lie in 0..1")),
    ("consistent_state-index-str", lambda: gm.consistent_state(CIRCLE, ON_CIRCLE, fixed_q="0"), raises(TypeError, r"fixed_q must be a sequence of integer indices")),
    ("consistent_state-index-bool", lambda: gm.consistent_state(CIRCLE, ON_CIRCLE, fixed_q=(True,)), raises(TypeError, r"fixed_q must contain integer indices, got the bool")),
    ("consistent_state-repeated", lambda: gm.consistent_state(LINEAR, ON_LINEAR, fixed_v=(0, 0)), raises(ValueError, r"fixed_v repeats the index")),
    ("consistent_state-over-determined", lambda: gm.consistent_state(CIRCLE, ON_CIRCLE, fixed_q=(0, 1)), raises(ValueError, r"positions are over-determined.*Hold exactly n - m = 1 coordinates")),
    ("linearize-nothing", lambda: gm.linearize(CIRCLE, ON_CIRCLE, coordinates=(), speeds=()), raises(ValueError, r"coordinates and speeds are both empty")),
    ("linearize-overlap", lambda: gm.linearize(CIRCLE, ON_CIRCLE, coordinates=(0,), speeds=(0,), fixed_q=(0,)), raises(ValueError, r"coordinates and fixed_q")),
    ("linearize-body-symmetry-out-of-range", lambda: gm.linearize(SUSLOV, ON_SUSLOV, coordinates=(0, 1), speeds=(0,), fixed_q=(2,), fixed_v=(2,), body_symmetries=(7,)), raises(ValueError, r"body_symmetries index 7 is out of range: indices must lie in 0..2")),
    ("acceleration-quaternion-norm-2", _acc(SUSLOV, gm.State(jaxlie.SO3(2.0 * ON_SUSLOV.q.wxyz), ON_SUSLOV.v)), raises(RUNTIME, r"not a point of the manifold.*normalize")),
    ("acceleration-nan-quaternion", _acc(SUSLOV, gm.State(jaxlie.SO3(jnp.nan * ON_SUSLOV.q.wxyz), ON_SUSLOV.v)), raises(RUNTIME, r"the state has NaN or inf entries in q or v: give finite q and v")),
    ("state-wxyz-array-as-q", lambda: gm.State(ON_SUSLOV.q.wxyz, ON_SUSLOV.v), raises(ValueError, r"got q \(4,\) and v \(3,\).*q is the group element, not its parameters: e.g. jaxlie.SO3\(wxyz\)")),
    ("validate-zero-quaternion", lambda: gm.validate(SUSLOV, gm.State(jaxlie.SO3(0.0 * ON_SUSLOV.q.wxyz), ON_SUSLOV.v)), reports(["off_manifold"], r"\|\|q\| − 1\| of the unit quaternion or complex number = 1")),
    ("linearize-body-symmetry-not-held", lambda: gm.linearize(SUSLOV, ON_SUSLOV, coordinates=(0, 1, 2), speeds=(0,), fixed_v=(2,), body_symmetries=(2,)), raises(ValueError, r"body_symmetries \(2,\) must be held directions, in fixed_q \(\)")),
    # gm.VariationalIntegrator
    ("variational-no-dt0", _sim(integrator=gm.VariationalIntegrator()), raises(ValueError, r"gm.VariationalIntegrator needs a fixed step: pass dt0")),
    ("variational-adaptive", _sim(integrator=gm.VariationalIntegrator(), dt0=0.1, stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6)), raises(ValueError, r"takes fixed steps.*no adaptive stepsize_controller")),
    ("variational-nonlinear-constraint", _sim(NONLINEAR, ON_NONLINEAR, integrator=gm.VariationalIntegrator(), dt0=0.1), raises(TypeError, r"no discretization for constraints nonlinear in v.*gm.LinearConstraint")),
    ("variational-stabilization", _sim(integrator=gm.VariationalIntegrator(), dt0=0.1, stabilization="projection"), raises(ValueError, r"stabilization is not used by gm.VariationalIntegrator")),
    ("variational-work-space", _sim(DEFECTS, gm.State(jnp.array([1.0, 1.0, 0.0]), jnp.zeros(3)), integrator=gm.VariationalIntegrator(), dt0=0.1), raises(ValueError, r"this system has a work_space W != D.*use a diffrax integrator")),
    ("variational-quadrature", lambda: gm.VariationalIntegrator(quadrature="simpson"), raises(ValueError, r"quadrature must be 'midpoint' or 'trapezoid', got 'simpson'")),
    ("variational-max_steps", lambda: gm.VariationalIntegrator(max_steps=0), raises(ValueError, r"max_steps must be a positive int")),
    ("variational-rtol", _sim(integrator=gm.VariationalIntegrator(), dt0=0.1, rtol=1e-6), raises(ValueError, r"no error estimate and takes fixed steps dt0: drop rtol/atol")),
    # gm.simulate_vakonomic
    ("vakonomic-no-constraint", _vak(FREE, S2), raises(ValueError, r"vakonomic dynamics needs constraints g\(q, v\) = 0")),
    ("vakonomic-mu0-shape", _vak(mu0=jnp.ones(3)), raises(ValueError, r"mu0 must have shape \(1,\) or \(B, 1\), got \(3,\)")),
    ("vakonomic-mu0-complex", _vak(mu0=jnp.array([1.0 + 1.0j])), raises(TypeError, r"mu0 must hold real numbers \(the initial multipliers\), got dtype complex128")),
    ("vakonomic-mu0-bool", _vak(mu0=np.array([True])), raises(TypeError, r"mu0 must hold real numbers .* got dtype bool")),
    ("vakonomic-mu0-empty-batch", _vak(mu0=jnp.zeros((0, 1))), raises(ValueError, r"mu0 is an empty batch \(B = 0\): give initial multipliers of shape \(1,\) or \(B, 1\) with B >= 1")),
    ("vakonomic-mu0-empty-batch-with-batch", _vak(y0=gm.State(jnp.stack([ON_CIRCLE.q] * 2), jnp.stack([ON_CIRCLE.v] * 2)), mu0=jnp.zeros((0, 1))), raises(ValueError, r"mu0 is an empty batch \(B = 0\)")),
    ("vakonomic-y0-empty-batch", _vak(y0=gm.State(jnp.zeros((0, 2)), jnp.zeros((0, 2))), mu0=jnp.zeros((0, 1))), raises(ValueError, r"the state is an empty batch \(B = 0\)")),
    ("vakonomic-mu0-batch-mismatch", _vak(y0=gm.State(jnp.stack([ON_CIRCLE.q] * 2), jnp.stack([ON_CIRCLE.v] * 2)), mu0=jnp.zeros((3, 1))), raises(ValueError, r"y0 has a batch of 2 states but mu0 a batch of 3")),
    ("vakonomic-throw-str", _vak(throw="yes"), raises(TypeError, r"throw must be True or False, got 'yes'")),
    ("vakonomic-mu0-nan", _vak(mu0=jnp.array([jnp.nan])), raises(ValueError, r"trajectory: the initial multipliers mu0 of gm.simulate_vakonomic have NaN or inf entries: give finite mu0")),
    ("vakonomic-modified-without-omega", _vak(modified=True), raises(ValueError, r"modified=True is the variant \(60\) of model B2: it needs omega")),
    ("backsolve-on-group", _sim(SUSLOV, ON_SUSLOV, adjoint=diffrax.BacksolveAdjoint()), raises(ValueError, r"diffrax.BacksolveAdjoint is not available on Lie groups \(simulate\)")),
    ("vakonomic-omega-on-group", _vak(SUSLOV, ON_SUSLOV, omega=lambda R, w: jnp.eye(3)), raises(ValueError, r"omega \(model B2, .*\) is a matrix in coordinates q: it is not available on Lie groups")),
    ("vakonomic-implicit-on-group", _vak(SUSLOV, ON_SUSLOV, integrator=diffrax.Kvaerno5()), raises(ValueError, r"on a Lie group simulate_vakonomic integrates with an explicit diffrax Runge")),
    ("vakonomic-off-C-on-group", _vak(SUSLOV, gm.State(ON_SUSLOV.q, jnp.array([1.0, 1e-3, 0.5]))), raises(ValueError, r"simulate_vakonomic: .*the trajectory: the state is off the constraint manifold C")),
    ("vakonomic-nan-point-on-group", _vak(SUSLOV, gm.State(jaxlie.SO3(jnp.array([NAN, 0.0, 0.0, 1.0])), ON_SUSLOV.v)), raises(ValueError, r"simulate_vakonomic: .*the trajectory: the state has NaN or inf entries in q or v")),
    ("vakonomic-impasse_tol-negative", _vak(impasse_tol=-1.0), raises(ValueError, r"impasse_tol must be a finite number >= 0")),
    ("vakonomic-impasse_tol-nan", _vak(impasse_tol=NAN), raises(ValueError, r"impasse_tol must be a finite number >= 0")),
    ("vakonomic-t1-nan", _vak(t1=NAN), raises(ValueError, r"t1 must be a finite real number")),
    ("vakonomic-starts-at-impasse", _vak(IMPASSE, gm.State(jnp.zeros(2), jnp.zeros(2)), mu0=jnp.array([-1.0])), raises(RUNTIME, r"vakonomic impasse point: M_mu .* is degenerate on ker\(dg/dv\)")),
    ("vakonomic-off-C", _vak(y0=gm.State(1.1 * ON_CIRCLE.q, ON_CIRCLE.v)), raises(ValueError, r"simulate_vakonomic: .*the trajectory: the state is off the constraint manifold C.*project_to_constraints")),
    ("vakonomic-rtol-with-controller", _vak(rtol=1e-6, stepsize_controller=diffrax.PIDController(rtol=1e-6, atol=1e-6)), raises(ValueError, r"not both")),
    # a run that stops early: the times reported are those of the state kept (x = t, NaN force past x = 0.35)
    ("times-euler-t1", _sim(SINGULAR_PAST, PARTICLE, t1=1.0, integrator=diffrax.Euler(), dt0=0.1, saveat=diffrax.SaveAt(t1=True), throw=False), stops("nonfinite", 0.4, [0.4])),
    ("times-euler-steps", _sim(SINGULAR_PAST, PARTICLE, t1=1.0, integrator=diffrax.Euler(), dt0=0.1, saveat=diffrax.SaveAt(steps=True), throw=False, max_steps=12), stops("nonfinite", 0.4, [0.1, 0.2, 0.3, 0.4])),
    ("times-euler-ts-in-failed-step", _sim(SINGULAR_PAST, PARTICLE, t1=1.0, integrator=diffrax.Euler(), dt0=0.1, saveat=diffrax.SaveAt(ts=jnp.array([0.3, 0.45])), throw=False), stops("nonfinite", 0.4, [0.3])),
    ("times-euler-ts-t1-own-slot", _sim(SINGULAR_PAST, PARTICLE, t1=1.0, integrator=diffrax.Euler(), dt0=0.1, saveat=diffrax.SaveAt(ts=jnp.array([0.1, 0.45, 0.5]), t1=True), throw=False), stops("nonfinite", 0.4, [0.1, INF, INF, 0.4])),
    ("times-variational-first-step", _sim(SINGULAR_PAST, gm.State(jnp.array([0.4]), jnp.array([1.0])), t1=1.0, integrator=gm.VariationalIntegrator(), dt0=0.1, saveat=diffrax.SaveAt(t1=True), throw=False), stops("nonlinear_divergence", 0.0, [0.0])),
    # the command line: exit status 2, one line, no traceback
    ("cli-unknown-model", _cli("run", "no_such_model"), exits(2, r"unknown model")),
    ("cli-points", _cli("run", "pendulum", "--points", "1"), exits(2, r"--points: must be >= 2")),
    ("cli-rtol-zero", _cli("run", "pendulum", "--rtol", "0"), exits(2, r"--rtol: must be > 0")),
    ("cli-atol-nan", _cli("run", "pendulum", "--atol", "nan"), exits(2, r"--atol: needs a finite number")),
    ("cli-max-steps", _cli("run", "pendulum", "--max-steps", "0"), exits(2, r"--max-steps: must be >= 1")),
    ("cli-batch-float", _cli("run", "pendulum", "--batch", "2.5"), exits(2, r"--batch: needs an integer")),
    ("cli-t1-inf", _cli("run", "pendulum", "--t1", "inf"), exits(2, r"finite")),
    ("cli-param-unknown", _cli("run", "pendulum", "--param", "mass=2"), exits(2, r"no parameter 'mass'")),
    ("cli-param-list-length", _cli("run", "chaplygin_sphere", "--param", "inertia=0.3,0.4"), exits(2, r"parameter inertia needs a comma list of 3 numbers \(e\.g\. 0\.3,0\.4,0\.5\), got '0\.3,0\.4'")),
    ("cli-param-list-nan", _cli("run", "chaplygin_sphere", "--param", "inertia=0.3,nan,0.5"), exits(2, r"parameter inertia needs finite values")),
    ("cli-param-not-a-number", _cli("run", "thesis_example2", "--param", "A=1"), exits(2, r"parameter 'A' of model thesis_example2 is not a number and cannot be set from the command line")),
    ("cli-rtol-below-float64", _cli("run", "pendulum", "--rtol", "1e-17", "--atol", "1e-17", "--t1", "0.01", "--points", "3", "--max-steps", "50", "--no-cache"), exits(0, r"below what float64 can deliver.*\(here: raise --rtol and --atol\)$")),
    ("cli-states", _cli("compare", "sleigh", "--states", "0"), exits(2, r"--states: must be >= 1")),
    ("cli-unknown-command", _cli("frobnicate"), exits(2, r"invalid choice")),
    ("cli-model-typo", _cli("run", "pendulm"), exits(2, r"did you mean pendulum\?")),
    ("cli-max-steps-huge", _cli("run", "pendulum", "--max-steps", "1e20"), exits(2, r"--max-steps: must be <= 2147483647")),
    ("cli-seed-huge", _cli("run", "pendulum", "--seed", "1e30"), exits(2, r"--seed: must be <= 4294967295")),
    ("cli-t1-before-t0", _cli("run", "pendulum", "--t1", "-5"), exits(2, r"--t1 must be after the start time t0 = 0")),
    # gm.from_sympy
    ("sympy-unsupported-function", _sym(SYM_FREE - sp.besselj(0, X)), raises(ValueError, r"besselj, which SymPy's JAX printer")),
    ("sympy-complex", _sym(SYM_FREE + sp.I * X), raises(ValueError, r"imaginary unit")),
    ("sympy-duplicate-coordinates", _sym(coordinates=(X, X)), raises(ValueError, r"coordinates contain x more than once")),
    ("sympy-velocity-is-coordinate", _sym(velocities=(X, VY)), raises(ValueError, r"velocities x are also coordinates")),
    ("sympy-parameter-is-coordinate", _sym(SYM_FREE - K * X**2, parameters={X: 1.0, K: 2.0}), raises(ValueError, r"parameter x is a coordinate")),
    ("sympy-missing-parameter", _sym(SYM_FREE - K * X**2), raises(ValueError, r"k")),
    ("sympy-division-by-zero", _sym(SYM_FREE + X / sp.Integer(0)), raises(ValueError, r"infinite or undefined")),
    # per-trajectory failures: flagged, the others untouched
    ("batch-nan-position", _with(DEFECTS, q={2: NAN}), flagged("nonfinite_state")),
    ("batch-inf-velocity", _with(DEFECTS, v={1: INF}), flagged("nonfinite_state")),
    ("batch-off-C", _with(DEFECTS, v={0: 0.5}), flagged("off_constraint")),
    ("batch-singular-M", _with(DEFECTS, q={1: 0.0}), flagged("mass_matrix")),
    ("batch-inadmissible", _with(DEFECTS, q={0: 0.0}), flagged("admissibility")),
    ("batch-3.19", _with(DEFECTS, q={1: 2.0}), flagged("condition_3_19")),
    ("batch-force-nonfinite", _with(DEFECTS, q={0: -2.0}), flagged("nonfinite_acceleration")),
    ("batch-L-nonfinite", _with(DEFECTS, q={2: -3.0}), flagged("none", "nonfinite")),
    ("batch-circle-off-C-position", _with(CIRCLE, q={0: 1.1}), flagged("off_constraint")),
    ("batch-circle-off-C-velocity", _with(CIRCLE, v={0: 0.5}), flagged("off_constraint")),
    ("batch-circle-nan-velocity", _with(CIRCLE, v={1: NAN}), flagged("nonfinite_state")),
    (
        "batch-throw-names-indices",
        lambda: gm.simulate(*_with(DEFECTS, q={1: 0.0})()[:2], 0.0, T1, saveat=SAVE),
        raises(ValueError, r"trajectories \[2\] \(1 of 3\): the mass matrix.*Pass throw=False"),
    ),
]


@functools.cache
def _reference(system_id):
    """The run of the two good states alone."""
    system = {id(DEFECTS): DEFECTS, id(CIRCLE): CIRCLE}[system_id]
    sol = gm.simulate(system, GOOD[system_id], 0.0, T1, saveat=SAVE)
    assert np.all(sol.result == diffrax.RESULTS.successful)
    return sol


def _check_flagged(call, outcome: Flagged):
    system, y0, kw = call()
    sol = gm.simulate(system, y0, 0.0, T1, saveat=SAVE, throw=False, **kw)
    expected_failure = getattr(gm.Failure, outcome.failure)
    np.testing.assert_array_equal(
        sol.failure == expected_failure, [outcome.failure == "none"] * 2 + [True]
    )
    np.testing.assert_array_equal(sol.failure == gm.Failure.none, [True, True, outcome.failure == "none"])
    result = getattr(diffrax.RESULTS, outcome.result)
    assert bool((sol.result == result)[2])
    # both in one gm.Failure: the precondition where one failed, else diffrax's code
    ended = expected_failure if outcome.failure != "none" else getattr(gm.Failure, outcome.result)
    np.testing.assert_array_equal(sol.outcome == ended, [False, False, True])
    if outcome.failure != "none":  # not integrated: y0 at t0, not reached afterwards
        np.testing.assert_array_equal(sol.states.q[2, 0], y0.q[2])
        assert np.all(np.isinf(sol.states.q[2, 1:])) and sol.t_final[2] == 0.0
    ref = _reference(id(system))
    assert np.all((sol.result == diffrax.RESULTS.successful)[:2])
    for get in (
        lambda s: s.ts, lambda s: s.states.q, lambda s: s.states.v, lambda s: s.energy,
        lambda s: s.constraint_residual, lambda s: s.t_final, lambda s: s.stats["num_steps"],
    ):  # fmt: skip
        np.testing.assert_array_equal(get(sol)[:2], get(ref))


@pytest.mark.parametrize("call, outcome", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@as_users_see_it
def test_bad_input(call, outcome):
    if isinstance(outcome, Raises):
        with pytest.raises(outcome.exception) as info:
            call()
        # equinox's runtime errors carry the message after the stack trace
        assert re.search(outcome.match, str(info.value), re.DOTALL), str(info.value)[-2000:]
    elif isinstance(outcome, Reports):
        report = call()
        assert isinstance(report, gm.ValidationReport)
        assert report.codes() == outcome.codes, str(report)
        assert re.search(outcome.match, str(report), re.DOTALL), str(report)
        if outcome.codes:
            with pytest.raises(ValueError, match="(?s)" + outcome.match.lstrip("^")):
                report.raise_if_invalid()
    elif isinstance(outcome, Exits):
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            code = call()
        message = err.getvalue()
        assert code == outcome.code, message
        assert re.search(outcome.match, message), message
        assert len(message.strip().splitlines()) == 1 and "Traceback" not in message
    elif isinstance(outcome, Stops):
        sol = call()
        assert sol.result == getattr(diffrax.RESULTS, outcome.result), sol.result
        np.testing.assert_allclose(sol.t_final, outcome.t_final, rtol=1e-12)
        n = len(outcome.ts)
        np.testing.assert_allclose(sol.ts[:n], outcome.ts, rtol=1e-12)
        assert np.all(np.isinf(sol.ts[n:])) and np.all(np.isinf(sol.states.q[n:]))
    else:
        _check_flagged(call, outcome)


@pytest.mark.parametrize("run", [_sim, _vak], ids=["simulate", "simulate_vakonomic"])
@as_users_see_it
def test_numpy_bools_are_flags(run):
    """`throw=np.bool_(False)` (what NumPy comparisons return) is a flag like `False`: the run is
    not refused, and its options hold a Python bool (a static field of the compiled program)."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)  # equinox: "a JAX array is being set as static"
        sol = run(throw=np.bool_(False), progress=np.bool_(False))()
    assert np.all(diffrax.is_successful(sol.result))


@as_users_see_it
def test_the_table_is_comprehensive():
    """At least 60 cases, unique ids, over every category of bad input."""
    ids = [c[0] for c in CASES]
    assert len(ids) >= 60 and len(set(ids)) == len(ids)
    kinds = {type(c[2]) for c in CASES}
    assert kinds == {Raises, Reports, Exits, Flagged, Stops}
    flagged_codes = {c[2].failure for c in CASES if isinstance(c[2], Flagged)}
    # the other codes are flagged in test_failures.py: a rank-deficient W, non-finite
    # multipliers of simulate_vakonomic (the `flagged` outcome runs gm.simulate), and a point off
    # the group (the `flagged` batches here are on coordinates); and in test_contact.py a rolling
    # body's contact (at the start and during the run)
    others = {"work_space", "nonfinite_multipliers", "off_manifold", "contact_undefined", "lift_off"}
    from geomech import _checks

    table = {c.failure for c in _checks.CONDITIONS if c.failure}
    assert flagged_codes == (table | {"none"}) - others  # "none": flagged, then nothing fails


@as_users_see_it
def test_the_condition_table_is_documented():
    """docs/errors.md lists every row of the condition table (`_checks.CONDITIONS`) with its codes
    and its message and fix as the code has them, so the two cannot drift apart."""
    import pathlib

    from geomech import _checks

    doc = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "errors.md").read_text()
    for c in _checks.CONDITIONS:
        failure = f"`{c.failure}`" if c.failure else "—"
        row = f"| `{c.name}` | `{c.code}` | {failure} | {c.text().replace('|', chr(92) + '|')} |"
        assert row in doc, f"docs/errors.md lacks the row of condition {c.name!r}:\n{row}"
    for c in _checks.CONDITIONS:  # every code of the table a trajectory can carry
        assert c.failure is None or f"`{c.failure}`" in doc, c.failure
    assert "| `successful` (also `none`) |" in doc


# -- checks of several steps ----------------------------------------------------------------------


@as_users_see_it
def test_state_off_constraint_manifold():
    system = gm.LagrangianSystem(UNSTABLE, constraint=gm.HolonomicConstraint(lambda q: q @ q - 1.0))
    on = gm.State(jnp.array([0.6, 0.8]), jnp.array([-0.8, 0.6]))
    np.testing.assert_array_equal(gm.check_on_constraint(system, on).q, on.q)
    slightly_off = gm.State(on.q * (1 + 1e-10), on.v)
    gm.check_on_constraint(system, slightly_off)  # within the stated tolerance (1e-8)
    off = gm.State(on.q * 1.01, on.v)
    with pytest.raises(RUNTIME, match="off the constraint manifold"):
        gm.check_on_constraint(system, off)
    with pytest.raises(RUNTIME, match="off the constraint manifold"):
        eqx.filter_jit(gm.check_on_constraint)(system, gm.State(on.q, on.v + 0.1 * on.q))
    # evaluations slightly off C (as inside an integrator) keep working
    assert jnp.all(jnp.isfinite(gm.acceleration(system, gm.State(on.q * (1 + 1e-6), on.v))))


class _Damping(eqx.Module):
    c: jax.Array

    def __call__(self, q, v):
        return -self.c * v


_RUN_PATHS = {
    "eager": (lambda f: f, RUNTIME),
    "eqx.filter_jit": (eqx.filter_jit, RUNTIME),
    # plain jax.jit: JAX's own error type, with geomech's (equinox's) message in its text
    "jax.jit": (jax.jit, jax.errors.JaxRuntimeError),
    "jax.vmap": (lambda f: lambda c: jax.vmap(f)(jnp.stack([c, c])), RUNTIME),
    "jax.grad": (jax.grad, RUNTIME),
}


@pytest.mark.parametrize("path", sorted(_RUN_PATHS))
@as_users_see_it
def test_run_time_failure_raises_on_every_path(path):
    """A failure during the run (here `max_steps` reached) raises whatever the caller reads
    (only the states here) and under every transformation, with the error type documented in
    docs/errors.md; both types are `RuntimeError`s."""
    sleigh = gm.models.ChaplyginSleigh()

    def final_x(c):
        system = gm.LagrangianSystem(
            sleigh.lagrangian, force=_Damping(c), constraint=gm.LinearConstraint(sleigh.row)
        )
        return gm.simulate(system, sleigh.initial_state(), 0.0, 1.0, max_steps=2).states.q[-1, 0]

    transform, error = _RUN_PATHS[path]
    with pytest.raises(error, match="maximum number of solver steps") as caught:
        transform(final_x)(jnp.asarray(0.5))
    assert isinstance(caught.value, RuntimeError)


# -- a property: over random systems and random corruptions of the inputs, `simulate` gives a clear
# error or a correct result, never a non-finite success. Every draw has the same structure (n = 3,
# k = 1, a batch of two: the clean state on C and a corrupted copy), so `simulate` compiles once;
# tolerances are values of the controller, not static. It runs with the annotation checker.

RANDOM_N, RANDOM_K = 3, 1
RANDOM_SAVE = diffrax.SaveAt(ts=jnp.linspace(0.0, 0.4, 3))
STATE_CORRUPTIONS = ("none", "nan", "inf", "off_C", "fast")
ARGUMENT_CORRUPTIONS = ("negative_tol", "zero_tols", "nan_tol", "bad_t1", "wrong_shape")


def _corrupt_state(state, kind, index, scale):
    q, v = np.array(state.q), np.array(state.v)
    if kind == "nan":
        q[index] = np.nan
    elif kind == "inf":
        v[index] = np.inf
    elif kind == "off_C":
        v[index] += scale
    elif kind == "fast":  # on C, large speeds: may be hard to integrate, never garbage
        v *= 1.0 + 10.0 * scale
    return gm.State(q, v)


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(STATE_CORRUPTIONS + ARGUMENT_CORRUPTIONS),
    index=st.integers(0, RANDOM_N - 1),
    scale=st.floats(0.01, 2.0),
    tol=st.floats(1e-10, 1e-5),
)
def test_clear_error_or_correct_result(seed, kind, index, scale, tol):
    system, state, t0 = random_system(seed, n=RANDOM_N, k=RANDOM_K)
    if kind == "fast":  # scale the velocity on C: φ is nonlinear in v, so project again
        state = gm.project_to_constraints(system, _corrupt_state(state, kind, index, scale), t0)
    bad = state if kind == "fast" else _corrupt_state(state, kind, index, scale)
    y0 = _pair(state, bad)
    kw = dict(rtol=tol, atol=tol, t1=t0 + 0.4)
    if kind == "negative_tol":
        kw["rtol"] = -tol
    elif kind == "zero_tols":
        kw.update(rtol=0.0, atol=0.0)
    elif kind == "nan_tol":
        kw["atol"] = float("nan")
    elif kind == "bad_t1":
        kw["t1"] = [float("nan"), float("inf"), -float("inf")][index]
    elif kind == "wrong_shape":
        y0 = gm.State(jnp.ones((2, RANDOM_N + 1)), jnp.ones((2, RANDOM_N + 1)))
    saveat = diffrax.SaveAt(ts=t0 + RANDOM_SAVE.subs.ts) if kind != "bad_t1" else RANDOM_SAVE
    try:
        sol = gm.simulate(system, y0, t0, saveat=saveat, throw=False, **kw)
    except (ValueError, TypeError, eqx.EquinoxRuntimeError) as e:
        assert kind in ARGUMENT_CORRUPTIONS, f"{kind}: {e}"  # a clear error for bad arguments
        assert str(e).strip()
        return
    assert kind in STATE_CORRUPTIONS, f"{kind} was accepted"
    ok = np.asarray(sol.result == diffrax.RESULTS.successful)
    for i in np.nonzero(ok)[0]:  # never a non-finite success
        assert np.all(np.isfinite(sol.states.q[i])) and np.all(np.isfinite(sol.states.v[i]))
        assert np.all(np.isfinite(sol.energy[i]))
    # a correct result for the clean member: exactly the run without the corrupted one (which
    # may itself stop early: a random W can reach a singular configuration, reported as such)
    clean = gm.simulate(system, _pair(state, state), t0, saveat=saveat, throw=False, **kw)
    np.testing.assert_array_equal(sol.states.q[0], clean.states.q[0])
    np.testing.assert_array_equal(sol.states.v[0], clean.states.v[0])
    assert (sol.result == clean.result)[0]
    expected = {"nan": "nonfinite_state", "inf": "nonfinite_state", "off_C": "off_constraint"}
    if kind in expected:
        assert (sol.failure == getattr(gm.Failure, expected[kind]))[1] and not ok[1]
    if kind in ("none", "fast"):
        assert (sol.failure == gm.Failure.none)[1]
    if kind == "none":  # the same state twice: the same trajectory, to the integration's accuracy
        # (not bit for bit: XLA:CPU vectorizes a batch's loops so that some lanes round unlike
        # others, e.g. the third of three copies of one state differs in the last bit from the
        # first two; bit equality holds lane by lane, against `clean` above)
        scale = 1.0 + np.max(np.abs(np.asarray(sol.states.q[0])))
        np.testing.assert_allclose(sol.states.q[0], sol.states.q[1], rtol=0, atol=10 * tol * scale)


def _pair(a, b):
    return gm.State(jnp.stack([a.q, b.q]), jnp.stack([a.v, b.v]))
