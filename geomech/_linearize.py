"""Linearization about steady motions: `linearize` and its `Linearization`.

Built on the public `acceleration` and on the consistent states of `_consistent.py`: the entries
left out of the chosen coordinates are solved for on $\\mathcal{C}$ there, and differentiated by
the implicit function theorem.
"""

from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Complex, Float

from ._bundle import State
from ._consistent import (
    ConstraintNewton,
    check_counts,
    complement,
    consistent,
    constraint_newton,
    disjoint,
    free_position_residual,
    free_velocity_residual,
    indices,
    sizes,
)
from ._dynamics import acceleration
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._system import LagrangianSystem


class Linearization(eqx.Module):
    """The linearization of the constrained dynamics $X_R$ about a state, in chosen minimal
    coordinates $(q_c, v_s)$ = (`q[coordinates]`, `v[speeds]`), returned by `linearize`.

    **Fields:**

    - `A`: the $(p + r) \\times (p + r)$ matrix $\\partial \\dot z/\\partial z$ of
        $\\dot z = f(z)$, $z = (q_c, v_s)$, along $\\mathcal{C}$: $\\delta\\dot z = A\\,\\delta z$.
    - `eigenvalues`: the eigenvalues of `A` (complex).
    - `state`: the consistent state the linearization was taken at.
    - `rate`: $f(z)$ at that state, i.e. $(\\dot q_c, \\dot v_s)$; it is zero at an equilibrium of
        the reduced dynamics (a steady motion), where `A` decides linear stability.
    - `held_rate`: the rates of the held entries, $(\\dot q_{\\text{fixed\\_q}},
        \\dot v_{\\text{fixed\\_v}})$ (in the turning frame for `body_symmetries`). Where one is
        not zero, `rate = 0` alone does not make the state a steady motion: it is one only if
        the dynamics does not depend on that held coordinate (a cyclic coordinate, e.g. a rolling
        disk's position and heading) or it is a declared body symmetry; a held speed must not
        change (its $\\dot v$ should be zero). E.g. a spinning top held about its axis in a
        chart that does not turn with it (no `body_symmetries`) has `rate = 0` but
        `held_rate` = its spin, and its `A` is not the linearization of the steady spin.
    """

    A: Float[Array, "N N"]
    eigenvalues: Complex[Array, " N"]
    state: State
    rate: Float[Array, " N"]
    held_rate: Float[Array, " H"]


class _Selection(eqx.Module):
    """The checked index sets of `linearize`: $z = $ (`q[coordinates]`, `v[speeds]`), with
    `fixed_q`, `fixed_v` held too and the other (free) entries solved for on $\\mathcal{C}$."""

    n: int = eqx.field(static=True)
    coordinates: tuple[int, ...] = eqx.field(static=True)
    speeds: tuple[int, ...] = eqx.field(static=True)
    fixed_q: tuple[int, ...] = eqx.field(static=True)
    fixed_v: tuple[int, ...] = eqx.field(static=True)
    body_symmetries: tuple[int, ...] = eqx.field(static=True)

    @property
    def free_q(self) -> tuple[int, ...]:
        return complement(self.coordinates + self.fixed_q, self.n)

    @property
    def free_v(self) -> tuple[int, ...]:
        return complement(self.speeds + self.fixed_v, self.n)


def check_linearize_args(
    system, state, t, coordinates, speeds, fixed_q, fixed_v, body_symmetries=()
) -> _Selection:
    n, m, k = sizes(system, state, t)
    c = indices("coordinates", coordinates, n)
    s = indices("speeds", speeds, n)
    fq = indices("fixed_q", fixed_q, n)
    fv = indices("fixed_v", fixed_v, n)
    sym = indices("body_symmetries", body_symmetries, n)
    disjoint("coordinates", c, "fixed_q", fq)
    disjoint("speeds", s, "fixed_v", fv)
    if not c and not s:
        raise ValueError("coordinates and speeds are both empty: there is nothing to linearize.")
    check_counts(n, m, k, c + fq, s + fv, "coordinates + fixed_q", "speeds + fixed_v")
    if not set(sym) <= set(fq):
        raise ValueError(
            f"body_symmetries {sym} must be held directions, in fixed_q {fq}: the linearization "
            "is taken in the frame that turns with them."
        )
    return _Selection(n, c, s, fq, fv, sym)


def _newton_step(residual, y0, args, jac_args):
    """$y_0 - J^{-1} R(y_0)$ with $J = \\partial R/\\partial y$ at `(y0, jac_args)`: where $R = 0$
    at the base point, its derivative in `args` is the implicit-function derivative
    $-J^{-1}\\partial R$."""
    J = jax.jacfwd(residual)(y0, jac_args)
    return y0 - jnp.linalg.solve(J, residual(y0, args))


def linearization(system, state, solver, t, sel: _Selection, newton: ConstraintNewton):
    """$A = \\partial f/\\partial z$ at the consistent state, its $f(z_0)$, and the state.

    The consistent state $x_0$ is found once (`consistent_state`); near it, $z \\mapsto$ state is
    one Newton step from $x_0$ with the Jacobians at $x_0$, whose derivative at $z_0$ is exactly
    that of the implicit function $z \\mapsto$ (dependent entries) on $\\mathcal{C}$. So
    `jax.jacfwd` never differentiates through the Newton iterations, and $A$ is
    still exact, also as a function of the system's parameters (its derivatives in them are exact).
    """
    c, s, free_q, free_v = sel.coordinates, sel.speeds, sel.free_q, sel.free_v
    p = len(c)
    ci, si = jnp.array(c, int), jnp.array(s, int)
    held = ("coordinates + fixed_q", "speeds + fixed_v")
    x0 = consistent(system, state, t, free_q, free_v, newton, held)
    fq, fv = jnp.array(free_q, int), jnp.array(free_v, int)
    chart = system.manifold.chart(x0.q)  # on a Lie group: ψ = 0 in the chart centred at x0.q
    local, at = chart.system(system), State(chart.origin, x0.v)

    def rhs(z):
        psi = at.q.at[ci].set(z[:p])
        if free_q:  # the free coordinates from h = 0, to first order at z0
            y = _newton_step(
                free_position_residual,
                at.q[fq],
                (local, State(psi, at.v), t, fq),
                (local, at, t, fq),
            )
            psi = psi.at[fq].set(y)
        q = chart.point(psi)
        v = x0.v.at[si].set(z[p:])
        if free_v:  # the free speeds from φ = 0 (3.6), to first order at z0
            y = _newton_step(
                free_velocity_residual,
                x0.v[fv],
                (system, State(q, v), t, fv),
                (system, x0, t, fv),
            )
            v = v.at[fv].set(y)
        a = acceleration(system, State(q, v), solver, t)  # X_R = (v, a_R), Prop. 2 / Cor. 2
        if sel.body_symmetries:
            rate, a = _turning_with(system, sel.body_symmetries, q, psi, v, a)
        else:
            rate = system.manifold.dexp_inverse(psi, v)  # ψ̇ (docs/lie_groups.md)
        f = jnp.concatenate([rate[ci], a[si]])
        held = jnp.concatenate([rate[jnp.array(sel.fixed_q, int)], a[jnp.array(sel.fixed_v, int)]])
        return f, (f, held)

    z0 = jnp.concatenate([at.q[ci], x0.v[si]])
    A, (rate, held_rate) = jax.jacfwd(rhs, has_aux=True)(z0)
    return A, rate, held_rate, x0


def _turning_with(system, directions, q, psi, v, a):
    """$(\\dot\\delta, \\dot s)$ and $\\dot{\\tilde v}$ in the frame that turns with the body
    symmetries $e_i$, $i \\in$ `directions` (`linearize`), at $s = 0$: the chart
    $q_0\\exp(\\delta)\\exp(s e_i)$ has velocity $\\mathrm{dexp}_{-\\delta}\\dot\\delta + \\dot s\\,e_i$,
    and $\\tilde v = \\mathrm{Ad}_{\\exp(s e_i)}v$ changes by $\\dot s\\,\\mathrm{ad}_{e_i}v$
    ([Bloch2003]; Ad as in [Sola2018]). $\\mathrm{Ad}_{\\exp(-s e_i)}v$ is the velocity at $q\\exp(s e_i)$ of
    $q\\exp(\\epsilon v)\\exp(s e_i)$."""
    manifold = system.manifold
    idx = jnp.array(directions, int)
    J = jax.jacfwd(lambda psi_dot: manifold.dexp(psi, psi_dot))(jnp.zeros_like(v))
    J = J.at[:, idx].set(jnp.eye(v.shape[0], dtype=v.dtype)[:, idx])
    rate = jnp.linalg.solve(J, v)

    def moved(s, u):  # Ad_{exp(-s e_i)} u, the velocity u seen from q exp(s e_i)
        turn = lambda p: manifold.oplus(p, jnp.zeros_like(u).at[idx].set(s))
        curve = lambda eps: manifold.ominus(turn(manifold.oplus(q, eps * u)), turn(q))
        return jax.jvp(curve, (jnp.zeros((), u.dtype),), (jnp.ones((), u.dtype),))[1]

    zero = jnp.zeros(len(directions), v.dtype)
    _, minus_ad = jax.jvp(lambda s: moved(s, v), (zero,), (rate[idx],))  # -ṡ ad_{e_i} v
    return rate, a - minus_ad


@eqx.filter_jit
def _linearize_jit(system, state, solver, t, sel, newton):
    A, rate, held_rate, x = linearization(system, state, solver, t, sel, newton)
    return Linearization(A, jnp.linalg.eigvals(A), x, rate, held_rate)


def linearize(
    system: LagrangianSystem,
    state: State,
    *,
    coordinates: Sequence[int],
    speeds: Sequence[int],
    fixed_q: Sequence[int] = (),
    fixed_v: Sequence[int] = (),
    body_symmetries: Sequence[int] = (),
    solver: AbstractSolver = Projection(),
    t=0.0,
) -> Linearization:
    """Linearize the constrained dynamics $X_R$ at `state` in chosen coordinates and speeds.

    With $z = (q_c, v_s)$ = (`q[coordinates]`, `v[speeds]`) ($p + r$ numbers), every other entry
    is reconstructed on $\\mathcal{C}$ by `consistent_state`, holding `coordinates + fixed_q` and
    `speeds + fixed_v`; then $\\dot z = f(z) = (\\dot q_c, a_R(q, v)_s)$ with $a_R$ from
    `acceleration`.
    The result's `A` is $\\partial f/\\partial z$, computed exactly by forward-mode autodiff
    (`jax.jacfwd`) through the implicit function theorem, not by finite differences.

    **Choosing a minimal set.** With $n$ coordinates, $m$ holonomic constraints $h$ and $k$
    velocity constraints $\\phi$ (the $m$ rows $Dh\\,v + \\partial_t h$ included):

    - `coordinates` and `fixed_q` together hold exactly $n - m$ coordinates, and the other $m$ must
        be solvable from $h = 0$ ($\\partial h/\\partial q_{\\text{other}}$ invertible);
    - `speeds` and `fixed_v` together hold exactly $n - k$ speeds, and the other $k$ must be
        solvable from $\\phi = 0$ ($\\partial\\phi/\\partial v_{\\text{other}}$ invertible).

    `fixed_q` are coordinates left out of the linearization but held at their values: cyclic
    coordinates (the dynamics does not depend on them, e.g. the position and heading of a rolling
    disk). `fixed_v` are speeds held at their values, e.g. a prescribed forward speed or spin whose
    rate of change vanishes to first order. Wrong counts, overlapping or repeated indices raise a
    `ValueError` before tracing; a singular choice raises an error stating the rank found.

    On a Lie group $z = (\\delta_c, v_s)$: the tangent directions of the chart centred at the
    state's $q$, perturbed point $q \\oplus \\delta$, rate $\\dot\\psi = \\mathrm{dexp}^{-1}_{-\\delta} v$
    (docs/lie_groups.md says when its eigenvalues decide stability).

    **About a relative equilibrium on a Lie group.** A steady motion that turns the body about one
    of its own axes $e_i$ (a disk rolling upright, a top spinning) is not an equilibrium of that
    chart. If the system is invariant under $q \\mapsto q\\exp(s e_i)$ (a body symmetry, e.g. an
    axisymmetric body about its axis), name $i$ in `body_symmetries` (it must be held, in
    `fixed_q`): the linearization is then taken in the frame that turns with the body about $e_i$,
    with the chart $q\\exp(\\delta)\\exp(s e_i)$ and the velocity
    $\\tilde v = \\mathrm{Ad}_{\\exp(s e_i)}v$, in which the steady motion is an equilibrium:
    $\\dot\\delta$ and $\\dot s$ from $v = \\mathrm{dexp}_{-\\delta}\\dot\\delta + \\dot s\\,e_i$, and
    $\\dot{\\tilde v} = a_R + \\dot s\\,\\mathrm{ad}_{e_i}v$ at $s = 0$ ([Bloch2003]: the
    reduced dynamics of the quotient by the symmetry). This is what Euler angles do with a cyclic
    spin angle; invariance is the caller's claim, not checked.

    For a pendulum in Cartesian $(x, y)$ with $h = x^2 + y^2 - l^2$ ($n = 2$, $m = k = 1$):
    `coordinates=(1,), speeds=(1,)` linearizes in $(y, \\dot y)$ with $x, \\dot x$ dependent.

    **Arguments:**

    - `system`, `state`: the system and the state to linearize at (its held entries are kept, the
        others are first made consistent).
    - `coordinates`, `speeds`: indices of the coordinates and speeds in $z$ ($p$ and $r$ of them).
    - `fixed_q`, `fixed_v`: indices held fixed and left out of $z$.
    - `body_symmetries`: tangent directions in `fixed_q` that are body symmetries (above; on a
        Lie group only).
    - `solver`: the solver for $a_R$ (all solvers give the same `A`).
    - `t`: the time.

    **Returns:** a `Linearization` with `A`, `eigenvalues`, `state`, `rate` and `held_rate`
    (read both rates before reading stability from `eigenvalues`).
    """
    sel = check_linearize_args(
        system, state, t, coordinates, speeds, fixed_q, fixed_v, body_symmetries
    )
    newton = constraint_newton(state.v.dtype, None, None, 32)
    t = jnp.asarray(t, state.v.dtype)  # an array, so that a new t does not recompile
    return _linearize_jit(system, state, solver, t, sel, newton)
