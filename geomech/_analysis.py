"""Analysis at a state: consistent states from chosen coordinates, linearization about steady
motions, and stability boundaries.

Everything here is built on the public functions (`acceleration`) and the system's residuals:
the holonomic constraints $h(t, q) = 0$ (`position_residual`) and the kinematic constraints
$\\phi(t, q, v) = 0$ (3.6) (`constraint_residual`, which for a holonomic row is
$Dh\\,v + \\partial_t h$). Root finding is optimistix's Newton method, differentiated by the
implicit function theorem (`optimistix.ImplicitAdjoint`).
"""

import operator
from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Complex, Float

from . import _checks
from ._bundle import State
from ._dynamics import acceleration
from ._linalg import min_singular_value, rank_tolerance, unit_rows
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._system import LagrangianSystem

# -- index sets -------------------------------------------------------------------------------


def _indices(name: str, idx, n: int) -> tuple[int, ...]:
    """`idx` as a tuple of distinct ints in `0..n-1`; a `TypeError`/`ValueError` naming `name`."""
    if isinstance(idx, jax.core.Tracer):
        raise TypeError(f"{name} must be static (a tuple of Python ints), not a traced array.")
    if isinstance(idx, (str, bytes)) or not hasattr(idx, "__iter__"):
        raise TypeError(f"{name} must be a sequence of integer indices (e.g. (0, 2)), got {idx!r}.")
    out = []
    for i in idx:
        if isinstance(i, bool):
            raise TypeError(f"{name} must contain integer indices, got the bool {i!r}.")
        try:
            i = operator.index(i)
        except TypeError:
            raise TypeError(
                f"{name} must contain integer indices, got {i!r} in {tuple(idx)!r}."
            ) from None
        if not 0 <= i < n:
            raise ValueError(
                f"{name} index {i} is out of range: indices must lie in 0..{n - 1} (n = {n})."
            )
        out.append(i)
    dup = sorted({i for i in out if out.count(i) > 1})
    if dup:
        raise ValueError(f"{name} repeats the index(es) {dup}: each index may appear once.")
    return tuple(out)


def _disjoint(name1: str, idx1: tuple[int, ...], name2: str, idx2: tuple[int, ...]):
    both = sorted(set(idx1) & set(idx2))
    if both:
        raise ValueError(
            f"{name1} and {name2} both contain the index(es) {both}: an entry is either one or "
            "the other."
        )


def _complement(held: tuple[int, ...], n: int) -> tuple[int, ...]:
    return tuple(i for i in range(n) if i not in held)


def _sizes(system: LagrangianSystem, state: State, t) -> tuple[int, int, int]:
    """$(n, m, k)$: coordinates, holonomic constraints $h$, kinematic constraints $\\phi$ (after
    the shape checks)."""
    k = system.check_shapes(state, t)
    n = state.v.shape[0]  # on a Lie group: the tangent directions of the chart centred at q
    m = jax.eval_shape(lambda s: system.position_residual(s, t), state).shape[0]
    return n, m, k


# -- consistent states ------------------------------------------------------------------------


def _rank(J: Float[Array, "m m"]) -> Array:
    """Numerical rank of `J` with unit rows (scale-free in each equation); NaN counts as rank 0."""
    s = jnp.linalg.svd(jax.lax.stop_gradient(unit_rows(J)), compute_uv=False)
    return jnp.sum(s > rank_tolerance(J.dtype, J.shape[1]) * s[0])


class _Newton(eqx.Module):
    """The root finder of the constraint solves and its iteration budget."""

    solver: optx.Newton
    max_steps: int = eqx.field(static=True)


def _newton(dtype, rtol: float | None, atol: float | None, max_steps: int) -> _Newton:
    eps = jnp.finfo(dtype).eps
    tol = float(eps**0.75)  # 1.8e-12 in float64, 6.5e-6 in float32: a few digits above round-off
    solver = optx.Newton(rtol=tol if rtol is None else rtol, atol=tol if atol is None else atol)
    return _Newton(solver, max_steps)


class _Scale(eqx.Module):
    """The units of one block solve (`_solve_block`): `size` of the terms of each residual row,
    `row_norm` of each row of the Jacobi-scaled Jacobian of all coordinates, and `col_scale` of
    each free entry ($1/\\sqrt{M_{ii}}$)."""

    size: Float[Array, " m"]
    row_norm: Float[Array, " m"]
    col_scale: Float[Array, " f"]


def _solve_block(residual, y0, args, *, what: str, free, held: str, newton: _Newton, scale: _Scale):
    """Solve `residual(y, args) = 0` for `y` near `y0` (Newton, implicit derivatives w.r.t. `args`).

    `scale` (`_Scale`) makes the solve free of units: each residual row is
    divided by the size of its terms at `y0` (so Newton's `atol` is relative, `_checks`), and the
    Jacobian's full rank is judged on $\\hat J_{ij} = J_{ij}\\,$`col_scale[j]`$/$`row_norm[i]`,
    the free columns of the Jacobi-scaled Jacobian of all coordinates. Before the solve it must
    have full rank at `y0` (else an error stating the rank found); after it, the solve must have
    converged to finite values at which it still has (a root where it is singular, e.g. the
    double root $y = 0$ of $x^2 + y^2 = 1$ at $x = 1$, does not determine the free entries).
    """
    size, row_norm, col_scale = (
        jax.lax.stop_gradient(x) for x in (scale.size, scale.row_norm, scale.col_scale)
    )
    size = jnp.where(size > 0, size, 1.0)
    scaled = lambda y, a: residual(y, a) / size
    m = y0.shape[0]
    J = jax.jacfwd(residual)(y0, args)
    r = _rank(J)
    msgs = [
        f"{held} leaves the {m} entries {free} free for the {m} {what}, but the constraints' "
        f"Jacobian with respect to them has rank {rank} < {m} at this state: the held entries "
        "over-determine some constraints and leave some free entries undetermined. Hold a "
        "different set (the free entries must be solvable for from the constraints), or move away "
        "from this singular configuration."
        for rank in range(m)
    ]
    y0 = eqx.branched_error_if(jax.lax.stop_gradient(y0), r < m, jnp.minimum(r, m - 1), msgs)
    sol = optx.root_find(scaled, newton.solver, y0, args, max_steps=newton.max_steps, throw=False)
    bad = (sol.result != optx.RESULTS.successful) | ~jnp.all(jnp.isfinite(sol.value))
    y = eqx.error_if(
        sol.value,
        bad,
        f"Newton's method on the {what} for the free entries {free} did not converge (the state "
        "may be far from the constraint manifold, or close to a singular configuration): start "
        "from values closer to C, or pass larger rtol/atol or max_steps to consistent_state.",
    )
    # at the solution: σ_min of Ĵ below ε^{1/4} (1.2e-4 in float64), well above where Newton
    # stops on a double root (|Ĵ| ~ √atol) and below any regular configuration's
    J_hat = jax.jacfwd(residual)(jax.lax.stop_gradient(y), args) * col_scale[None, :] / row_norm[:, None]
    sigma = min_singular_value(J_hat)
    return eqx.error_if(
        y,
        ~(sigma > float(jnp.finfo(y0.dtype).eps ** 0.25)),
        f"{held} leaves the entries {free} free for the {what}, and Newton's method converged, "
        "but to a point where the constraints' Jacobian with respect to them is singular (a "
        "singular configuration, e.g. a double root): the free entries are not determined by "
        "the held ones there and their derivatives would be infinite. Hold a different set, or "
        "move away from this configuration.",
    )


def _scales(X, x, M, free, rest=0.0) -> _Scale:
    """`scale` of `_solve_block` for the rows of `X x + rest` in all coordinates (`_checks`), with
    the entries `free` solved for."""
    d = _checks.jacobi_scales(M)
    return _Scale(
        _checks.term_sizes(X, x, d) + jnp.abs(rest),
        jnp.linalg.norm(X / jnp.sqrt(d)[None, :], axis=1),
        1 / jnp.sqrt(d[free]),
    )


def _position_residual(y, args):
    system, state, t, free = args
    return system.position_residual(State(state.q.at[free].set(y), state.v), t)


def _velocity_residual(y, args):
    system, state, t, free = args
    return system.constraint_residual(State(state.q, state.v.at[free].set(y)), t)


def _consistent(system, state, t, free_q, free_v, newton, held=("fixed_q", "fixed_v")) -> State:
    """The traced part of `consistent_state` (sizes already checked); `held` names the held sets.
    On a Lie group the coordinates are those of the chart centred at `state.q`, $\\psi = 0$
    there (docs/lie_groups.md): held entries are tangent directions kept at $\\psi_i = 0$."""
    q, v = state.q, state.v
    n = v.shape[0]
    M = system.mass_matrix(state, t)
    if free_q:
        # h(t, q) = 0 for the free coordinates (holonomic part of (3.6)), Newton from given values
        fq = jnp.array(free_q)
        chart = system.manifold.chart(q)  # the identity on ℝⁿ and S¹
        local, at = chart.system(system), State(chart.origin, v)
        H = _checks.position_jacobian(local, at, t)
        y = _solve_block(
            _position_residual,
            at.q[fq],
            (local, at, t, fq),
            what="holonomic constraints h",
            free=free_q,
            held=f"{held[0]} = {_complement(free_q, n)}",
            newton=newton,
            scale=_scales(H, _checks.point_scale(system, state), M, fq),
        )
        q = chart.point(at.q.at[fq].set(y))
    if free_v:
        # φ(t, q, v) = 0 (3.6) for the free speeds; holonomic rows are Dh v + ∂_t h
        fv = jnp.array(free_v)
        phi = lambda v_: system.constraint_residual(State(q, v_), t)
        A = jax.jacfwd(phi)(v)
        y = _solve_block(
            _velocity_residual,
            v[fv],
            (system, State(q, v), t, fv),
            what="velocity constraints φ",
            free=free_v,
            held=f"{held[1]} = {_complement(free_v, n)}",
            newton=newton,
            scale=_scales(A, v, M, fv, phi(v) - A @ v),
        )
        v = v.at[fv].set(y)
    return State(q, v)


def _check_counts(n, m, k, held_q, held_v, name_q, name_v):
    """The held entries must leave exactly $m$ free coordinates and $k$ free speeds."""
    if n - len(held_q) != m:
        what = "under" if n - len(held_q) > m else "over"
        raise ValueError(
            f"{name_q} holds {len(held_q)} of the n = {n} coordinates, leaving "
            f"{n - len(held_q)} free, but there are m = {m} holonomic constraints to solve them "
            f"from: the positions are {what}-determined. Hold exactly n - m = {n - m} coordinates."
        )
    if n - len(held_v) != k:
        what = "under" if n - len(held_v) > k else "over"
        raise ValueError(
            f"{name_v} holds {len(held_v)} of the n = {n} speeds, leaving {n - len(held_v)} free, "
            f"but there are k = {k} velocity constraints φ (holonomic rows included) to solve them "
            f"from: the speeds are {what}-determined. Hold exactly n - k = {n - k} speeds."
        )


def consistent_state(
    system: LagrangianSystem,
    state: State,
    *,
    fixed_q: Sequence[int] = (),
    fixed_v: Sequence[int] = (),
    t=0.0,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 32,
) -> State:
    """A state on the constraint manifold $\\mathcal{C}$ that keeps the chosen entries exactly.

    The coordinates `q[i]`, `i in fixed_q`, and speeds `v[j]`, `j in fixed_v`, keep their given
    values bit for bit; the others are solved for, starting from their given values:

    1. the $n - |$`fixed_q`$|$ free coordinates from the $m$ holonomic constraints $h(t, q) = 0$
       (Newton's method);
    2. then the $n - |$`fixed_v`$|$ free speeds from the $k$ velocity constraints
       $\\phi(t, q, v) = 0$ (3.6), which include $Dh\\,v + \\partial_t h = 0$ for the holonomic
       rows (Newton's method; one step when $\\phi$ is linear in $v$).

    So exactly $n - m$ coordinates and $n - k$ speeds must be fixed, and the free entries must be
    solvable for: the Jacobians $\\partial h/\\partial q_{\\text{free}}$ ($m \\times m$) and
    $\\partial\\phi/\\partial v_{\\text{free}}$ ($k \\times k$) must be invertible. Wrong counts
    raise a `ValueError` before tracing; a rank-deficient Jacobian at the state raises an error
    (`eqx.error_if`) stating the rank found; so does a Newton iteration that does not converge.
    (Unlike `project_to_constraints`, which moves every entry to the $M$-nearest point of
    $\\mathcal{C}$.)

    The result is differentiable with respect to the fixed entries (and the system's parameters)
    by the implicit function theorem (`optimistix.ImplicitAdjoint`); its derivative with respect
    to the starting values of the free entries is zero. Works under `jit` and `vmap`.

    On a Lie group the coordinates are those of the chart centred at `state.q` (docs/lie_groups.md):
    `fixed_q` indexes tangent directions held at $\\psi_i = 0$, the result is
    $q \\oplus \\psi$ (docs/lie_groups.md).

    **Arguments:**

    - `system`: a `LagrangianSystem`.
    - `state`: one point `State(q, v)` (batch with `jax.vmap`).
    - `fixed_q`: indices of the coordinates to keep (distinct, in `0..n-1`).
    - `fixed_v`: indices of the speeds to keep.
    - `t`: the time.
    - `rtol`, `atol`: Newton tolerances (default $\\varepsilon^{3/4}$ of the dtype: `1.8e-12` in
        float64); `max_steps`: Newton iterations allowed.

    **Returns:** the consistent `State`.
    """
    n, m, k = _sizes(system, state, t)
    fq = _indices("fixed_q", fixed_q, n)
    fv = _indices("fixed_v", fixed_v, n)
    _check_counts(n, m, k, fq, fv, "fixed_q", "fixed_v")
    newton = _newton(state.v.dtype, rtol, atol, max_steps)
    t = jnp.asarray(t, state.v.dtype)  # an array, so that a new t does not recompile
    return _consistent_jit(system, state, t, _complement(fq, n), _complement(fv, n), newton)


@eqx.filter_jit
def _consistent_jit(system, state, t, free_q, free_v, newton):
    return _consistent(system, state, t, free_q, free_v, newton)


# -- linearization ----------------------------------------------------------------------------


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
        return _complement(self.coordinates + self.fixed_q, self.n)

    @property
    def free_v(self) -> tuple[int, ...]:
        return _complement(self.speeds + self.fixed_v, self.n)


def _check_linearize_args(
    system, state, t, coordinates, speeds, fixed_q, fixed_v, body_symmetries=()
) -> _Selection:
    n, m, k = _sizes(system, state, t)
    c = _indices("coordinates", coordinates, n)
    s = _indices("speeds", speeds, n)
    fq = _indices("fixed_q", fixed_q, n)
    fv = _indices("fixed_v", fixed_v, n)
    sym = _indices("body_symmetries", body_symmetries, n)
    _disjoint("coordinates", c, "fixed_q", fq)
    _disjoint("speeds", s, "fixed_v", fv)
    if not c and not s:
        raise ValueError("coordinates and speeds are both empty: there is nothing to linearize.")
    _check_counts(n, m, k, c + fq, s + fv, "coordinates + fixed_q", "speeds + fixed_v")
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


def _linearization(system, state, solver, t, sel: _Selection, newton: _Newton):
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
    x0 = _consistent(system, state, t, free_q, free_v, newton, held)
    fq, fv = jnp.array(free_q, int), jnp.array(free_v, int)
    chart = system.manifold.chart(x0.q)  # on a Lie group: ψ = 0 in the chart centred at x0.q
    local, at = chart.system(system), State(chart.origin, x0.v)

    def rhs(z):
        psi = at.q.at[ci].set(z[:p])
        if free_q:  # the free coordinates from h = 0, to first order at z0
            y = _newton_step(
                _position_residual, at.q[fq], (local, State(psi, at.v), t, fq), (local, at, t, fq)
            )
            psi = psi.at[fq].set(y)
        q = chart.point(psi)
        v = x0.v.at[si].set(z[p:])
        if free_v:  # the free speeds from φ = 0 (3.6), to first order at z0
            y = _newton_step(
                _velocity_residual, x0.v[fv], (system, State(q, v), t, fv), (system, x0, t, fv)
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
    A, rate, held_rate, x = _linearization(system, state, solver, t, sel, newton)
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
    sel = _check_linearize_args(
        system, state, t, coordinates, speeds, fixed_q, fixed_v, body_symmetries
    )
    newton = _newton(state.v.dtype, None, None, 32)
    t = jnp.asarray(t, state.v.dtype)  # an array, so that a new t does not recompile
    return _linearize_jit(system, state, solver, t, sel, newton)


# -- stability boundaries ---------------------------------------------------------------------


def characteristic_coefficients(A: Float[Array, "N N"]) -> Float[Array, " N+1"]:
    """$c_0, \\dots, c_N$ with $\\det(\\lambda I - A) = \\sum_j c_j\\lambda^j$ ($c_N = 1$), by the
    Faddeev–LeVerrier recursion ([ZadehDesoer1963] pp. 303–305):
    $M_0 = 0$, $M_j = A M_{j-1} + c_{N-j+1} I$, $c_{N-j} = -\\operatorname{tr}(A M_j)/j$.
    Polynomial in the entries of $A$, so exactly differentiable (meant for small $N$)."""
    N = A.shape[0]
    eye = jnp.eye(N, dtype=A.dtype)
    c = [jnp.ones((), A.dtype)]  # c_N, c_{N-1}, ...
    Mj = jnp.zeros_like(A)
    for j in range(1, N + 1):
        Mj = A @ Mj + c[-1] * eye
        c.append(-jnp.trace(A @ Mj) / j)
    return jnp.stack(c[::-1])


def hurwitz_determinant(c: Float[Array, " N1"]) -> Float[Array, ""]:
    """$\\Delta_{N-1}$, the Hurwitz determinant of order $N - 1$ of $\\sum_j c_j\\lambda^j$
    (degree $N$, $c_N > 0$): with $a_i = c_{N-i}$, $H_{ij} = a_{2j-i}$ (1-based, $a_i = 0$
    outside $0..N$) and $\\Delta_{N-1} = \\det H_{[1..N-1]}$ ([Gantmacher1959] vol. 2,
    ch. XV §6). By Orlando's formula (ibid. §7)
    $\\Delta_{N-1} = (-1)^{N(N-1)/2} a_0^{N-1}\\prod_{i<j}(\\lambda_i + \\lambda_j)$, so it
    vanishes exactly when two roots sum to zero, e.g. a pair $\\pm i\\omega$."""
    N = c.shape[0] - 1
    if N < 2:
        return jnp.ones((), c.dtype)
    a = c[::-1]
    idx = jnp.array([[2 * (j + 1) - (i + 1) for j in range(N - 1)] for i in range(N - 1)])
    inside = (idx >= 0) & (idx <= N)
    H = jnp.where(inside, a[jnp.clip(idx, 0, N)], 0.0)
    return jnp.linalg.det(H)


class _Boundary(eqx.Module):
    """The options of `stability_boundary` that every evaluation of $g(\\mu)$ reads."""

    sets: tuple  # (coordinates, speeds, fixed_q, fixed_v, body_symmetries) as given, checked per system
    solver: AbstractSolver
    t: Float[Array, ""]
    newton: _Newton
    crossing: str = eqx.field(static=True)
    zero_eigenvalues: int = eqx.field(static=True)


def _crossing_value(mu, family, fargs, options: _Boundary):
    """The smooth crossing function $g(\\mu)$ and the size of the structural-zero coefficients."""
    system, state = family(mu, fargs)
    sel = _check_linearize_args(system, state, options.t, *options.sets)
    t = jnp.asarray(options.t, state.q.dtype)
    A, _, _, _ = _linearization(system, state, options.solver, t, sel, options.newton)
    N = A.shape[0]
    z = options.zero_eigenvalues
    # scale-free coefficients: ĉ_j = c_j / ρ^(N-j), ρ = RMS entry of A (> 0), same roots in μ
    rho = jnp.sqrt(jnp.sum(A**2) / N)
    rho = jnp.where(rho > 0, rho, 1.0)  # A = 0 (e.g. at rest): every coefficient is zero anyway
    chat = characteristic_coefficients(A) / rho ** jnp.arange(N, -1, -1)
    deflated = chat[z:]  # p(λ) = λ^z p̃(λ): drop the z structural zero eigenvalues
    if options.crossing == "real":
        g = deflated[0]  # p̃(0) = ∏(-λ_i) over the other eigenvalues
    else:
        g = hurwitz_determinant(deflated)
    structural = jnp.max(jnp.abs(chat[:z]), initial=0.0)
    return g, structural


def _boundary_function(mu, args):
    family, fargs, options, ends = args
    if ends is None:  # Newton
        g, structural = _crossing_value(mu, family, fargs, options)
        return g, (structural, -jnp.ones_like(g))
    # bisection: the bracket ends are evaluated in the same (vmapped) program as mu, so the
    # compiled program holds one copy of the linearization; g is oriented to be < 0 at the lower end
    g, structural = jax.vmap(lambda m: _crossing_value(m, family, fargs, options))(
        jnp.stack([mu, *ends])
    )
    return jnp.where(g[1] > 0, -g[0], g[0]), (structural[0], g[1] * g[2])


def stability_boundary(
    family: Callable,
    mu0,
    args=None,
    *,
    coordinates: Sequence[int],
    speeds: Sequence[int],
    fixed_q: Sequence[int] = (),
    fixed_v: Sequence[int] = (),
    body_symmetries: Sequence[int] = (),
    solver: AbstractSolver = Projection(),
    t=0.0,
    crossing: str = "real",
    zero_eigenvalues: int = 0,
    bracket: tuple | None = None,
    rtol: float | None = None,
    atol: float | None = None,
    max_steps: int = 100,
) -> Float[Array, ""]:
    """The parameter value $\\mu^*$ at which a family of steady motions loses (or gains) linear
    stability: where an eigenvalue of its linearization crosses the imaginary axis.

    `family(mu, args) -> (system, state)` gives the steady motion at each value of a scalar
    parameter `mu` (e.g. the forward speed), and `linearize(system, state, coordinates=...,
    speeds=..., ...)` its matrix $A(\\mu)$. $\\mu^*$ is the root of a **smooth** function
    $g(\\mu)$ built from $A(\\mu)$, found by optimistix (Newton from `mu0`, or bisection in
    `bracket`); it is differentiable with respect to `args` (e.g. the system's parameters
    $\\theta$) by the implicit function theorem,
    $d\\mu^*/d\\theta = -(\\partial g/\\partial\\theta)/(\\partial g/\\partial\\mu)$
    (`optimistix.ImplicitAdjoint`).

    **Why not the largest real part itself.** $\\max\\operatorname{Re}\\lambda(\\mu)$ is not
    smooth where eigenvalues collide, which is where mechanical systems lose stability: for the
    rolling disk a pair $\\pm\\sqrt{d(\\mu)}$ turns from real to imaginary, so the largest real
    part $\\sqrt{\\max(d, 0)}$ has an infinite slope at the root and is flat beyond it, and
    `jnp.linalg.eig` has no derivative at the repeated eigenvalue. Instead $g$ comes from the
    characteristic polynomial $\\det(\\lambda I - A) = \\sum_j c_j\\lambda^j$ (Faddeev–LeVerrier:
    polynomial in $A$, so exactly differentiable), divided by $\\lambda^z$ for the
    $z$ = `zero_eigenvalues` eigenvalues that vanish for every $\\mu$ (e.g. a family of
    neighbouring steady motions):

    - `crossing="real"`: $g = \\tilde c_0 = \\prod(-\\lambda_i)$ over the other eigenvalues. Its
        sign changes where a real eigenvalue passes through $0$, or a pair $\\pm\\lambda$ passes
        through $0$ from the real to the imaginary axis (conservative or reversible systems such
        as the rolling disk, where $\\tilde c_0 \\propto -d(\\mu)$).
    - `crossing="complex"`: $g = \\Delta_{N-1}$, the Hurwitz determinant (Routh–Hurwitz; by
        Orlando's formula $\\propto\\prod_{i<j}(\\lambda_i + \\lambda_j)$). Its sign changes where
        a complex pair crosses the imaginary axis (a Hopf or flutter boundary of a dissipative
        system). It is identically zero when the eigenvalues come in pairs $\\pm\\lambda$: not for
        conservative systems.

    The coefficients are scaled by powers of the RMS entry of $A$, so $g$ is dimensionless. A
    root of $g$ is a crossing of the imaginary axis; whether stability is lost or gained there,
    and that no other eigenvalue has a positive real part, is read from
    `linearize(...).eigenvalues` on either side. With `bracket`, every evaluation of $g$ also
    evaluates it at both ends (one vmapped program, so one copy of the linearization is
    compiled) to orient it and to check that the bracket contains a sign change. Errors are
    raised (`eqx.error_if`) if it does not, if the root finding fails, or if the $z$ lowest
    coefficients are not zero at $\\mu^*$ (`zero_eigenvalues` too large).

    **Arguments:**

    - `family`: `(mu, args) -> (system, state)`, the steady motion at parameter `mu`.
    - `mu0`: a real scalar: Newton's starting point (with `bracket`, only its dtype is used).
    - `args`: passed to `family`; $\\mu^*$ is differentiable with respect to its arrays.
    - `coordinates`, `speeds`, `fixed_q`, `fixed_v`, `body_symmetries`, `solver`, `t`: as for
        `linearize`.
    - `crossing`: `"real"` or `"complex"` (above).
    - `zero_eigenvalues`: the number $z$ of eigenvalues that are zero for every $\\mu$.
    - `bracket`: optional `(lower, upper)` containing one crossing; bisection instead of Newton.
    - `rtol`, `atol`, `max_steps`: for the root finder (default tolerances
        $\\varepsilon^{3/4}$ of the dtype).

    **Returns:** $\\mu^*$, a scalar array.
    """
    if crossing not in ("real", "complex"):
        raise ValueError(f"crossing must be 'real' or 'complex', got {crossing!r}.")
    if (
        isinstance(zero_eigenvalues, bool)
        or not isinstance(zero_eigenvalues, int)
        or zero_eigenvalues < 0
    ):
        raise ValueError(f"zero_eigenvalues must be an int >= 0, got {zero_eigenvalues!r}.")
    if not callable(family):
        raise TypeError("family must be a callable (mu, args) -> (system, state).")
    mu0 = jnp.asarray(mu0)
    if mu0.shape != () or not jnp.issubdtype(mu0.dtype, jnp.floating):
        raise ValueError(f"mu0 must be a real scalar, got shape {mu0.shape} and dtype {mu0.dtype}.")
    N = (
        len(coordinates) + len(speeds)
        if isinstance(coordinates, Sequence) and isinstance(speeds, Sequence)
        else None
    )
    need = 1 if crossing == "real" else 2
    if N is not None and N - zero_eigenvalues < need:
        raise ValueError(
            f"the linearization has N = {N} eigenvalues; with zero_eigenvalues = "
            f"{zero_eigenvalues} the crossing={crossing!r} criterion needs at least {need} others."
        )
    return _boundary_jit(
        family,
        mu0,
        args,
        (coordinates, speeds, fixed_q, fixed_v, body_symmetries),
        solver,
        jnp.asarray(t, mu0.dtype),  # an array, so that a new t does not recompile
        crossing,
        zero_eigenvalues,
        bracket,
        rtol,
        atol,
        max_steps,
    )


@eqx.filter_jit
def _boundary_jit(
    family, mu0, args, sets, solver, t, crossing, zero_eigenvalues, bracket, rtol, atol, max_steps
):
    tol = float(jnp.finfo(mu0.dtype).eps ** 0.75)
    rtol = tol if rtol is None else rtol
    atol = tol if atol is None else atol
    options = _Boundary(
        sets=sets,
        solver=solver,
        t=t,
        newton=_newton(mu0.dtype, None, None, 32),
        crossing=crossing,
        zero_eigenvalues=zero_eigenvalues,
    )
    if bracket is None:
        finder, bounds, ends = optx.Newton(rtol=rtol, atol=atol), None, None
    else:
        ends = (jnp.asarray(bracket[0], mu0.dtype), jnp.asarray(bracket[1], mu0.dtype))
        finder = optx.Bisection(rtol=rtol, atol=atol, flip=False)
        bounds, mu0 = dict(lower=ends[0], upper=ends[1]), 0.5 * (ends[0] + ends[1])
    sol = optx.root_find(
        _boundary_function,
        finder,
        mu0,
        (family, args, options, ends),
        bounds,
        has_aux=True,
        max_steps=max_steps,
        throw=False,
    )
    structural, end_product = sol.aux
    mu = eqx.error_if(
        sol.value,
        ~(end_product <= 0),
        f"stability_boundary: the {crossing!r} crossing function has the same sign at both ends of "
        "bracket (or is not finite there): the bracket must contain exactly one crossing.",
    )
    mu = eqx.error_if(
        mu,
        (sol.result != optx.RESULTS.successful) | ~jnp.isfinite(mu),
        "stability_boundary: the root finding did not converge: start mu0 closer to the "
        "boundary, pass a bracket=(lower, upper) around it, or check that the chosen crossing "
        "changes sign there.",
    )
    zero_tol = float(jnp.finfo(mu0.dtype).eps ** (1 / 3))
    return eqx.error_if(
        mu,
        ~(structural <= zero_tol),
        f"stability_boundary: zero_eigenvalues={zero_eigenvalues}, but the characteristic "
        f"polynomial's {zero_eigenvalues} lowest coefficients are not zero at the boundary: A has "
        "fewer eigenvalues that vanish for every parameter value. Lower zero_eigenvalues.",
    )
