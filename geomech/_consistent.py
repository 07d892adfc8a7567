"""Consistent states from chosen coordinates: `consistent_state`, and the index-set checks and
Newton solves that `linearize` (`_linearize.py`) builds on.

Everything here is built on the system's residuals: the holonomic constraints $h(t, q) = 0$
(`position_residual`) and the kinematic constraints $\\phi(t, q, v) = 0$ (3.6)
(`constraint_residual`, which for a holonomic row is $Dh\\,v + \\partial_t h$). Root finding is
optimistix's Newton method, differentiated by the implicit function theorem
(`optimistix.ImplicitAdjoint`).
"""

import operator
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float

from . import _checks
from ._bundle import State
from ._linalg import min_singular_value, rank_tolerance, unit_rows
from ._system import LagrangianSystem

# -- index sets -------------------------------------------------------------------------------


def indices(name: str, idx, n: int) -> tuple[int, ...]:
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


def disjoint(name1: str, idx1: tuple[int, ...], name2: str, idx2: tuple[int, ...]):
    both = sorted(set(idx1) & set(idx2))
    if both:
        raise ValueError(
            f"{name1} and {name2} both contain the index(es) {both}: an entry is either one or "
            "the other."
        )


def complement(held: tuple[int, ...], n: int) -> tuple[int, ...]:
    return tuple(i for i in range(n) if i not in held)


def sizes(system: LagrangianSystem, state: State, t) -> tuple[int, int, int]:
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


class ConstraintNewton(eqx.Module):
    """The root finder of the constraint solves and its iteration budget."""

    solver: optx.Newton
    max_steps: int = eqx.field(static=True)


def constraint_newton(
    dtype, rtol: float | None, atol: float | None, max_steps: int
) -> ConstraintNewton:
    eps = jnp.finfo(dtype).eps
    tol = float(eps**0.75)  # 1.8e-12 in float64, 6.5e-6 in float32: a few digits above round-off
    solver = optx.Newton(rtol=tol if rtol is None else rtol, atol=tol if atol is None else atol)
    return ConstraintNewton(solver, max_steps)


class _Scale(eqx.Module):
    """The units of one block solve (`_solve_block`): `size` of the terms of each residual row,
    `row_norm` of each row of the Jacobi-scaled Jacobian of all coordinates, and `col_scale` of
    each free entry ($1/\\sqrt{M_{ii}}$)."""

    size: Float[Array, " m"]
    row_norm: Float[Array, " m"]
    col_scale: Float[Array, " f"]


def _solve_block(
    residual, y0, args, *, what: str, free, held: str, newton: ConstraintNewton, scale: _Scale
):
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


def free_position_residual(y, args):
    system, state, t, free = args
    return system.position_residual(State(state.q.at[free].set(y), state.v), t)


def free_velocity_residual(y, args):
    system, state, t, free = args
    return system.constraint_residual(State(state.q, state.v.at[free].set(y)), t)


def consistent(system, state, t, free_q, free_v, newton, held=("fixed_q", "fixed_v")) -> State:
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
            free_position_residual,
            at.q[fq],
            (local, at, t, fq),
            what="holonomic constraints h",
            free=free_q,
            held=f"{held[0]} = {complement(free_q, n)}",
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
            free_velocity_residual,
            v[fv],
            (system, State(q, v), t, fv),
            what="velocity constraints φ",
            free=free_v,
            held=f"{held[1]} = {complement(free_v, n)}",
            newton=newton,
            scale=_scales(A, v, M, fv, phi(v) - A @ v),
        )
        v = v.at[fv].set(y)
    return State(q, v)


def check_counts(n, m, k, held_q, held_v, name_q, name_v):
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
    n, m, k = sizes(system, state, t)
    fq = indices("fixed_q", fixed_q, n)
    fv = indices("fixed_v", fixed_v, n)
    check_counts(n, m, k, fq, fv, "fixed_q", "fixed_v")
    newton = constraint_newton(state.v.dtype, rtol, atol, max_steps)
    t = jnp.asarray(t, state.v.dtype)  # an array, so that a new t does not recompile
    return _consistent_jit(system, state, t, complement(fq, n), complement(fv, n), newton)


@eqx.filter_jit
def _consistent_jit(system, state, t, free_q, free_v, newton):
    return consistent(system, state, t, free_q, free_v, newton)
