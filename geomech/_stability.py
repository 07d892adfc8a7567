"""Stability boundaries: `stability_boundary`, the parameter value at which an eigenvalue of
`linearize`'s matrix (`_linearize.py`) crosses the imaginary axis, found by optimistix from the
characteristic polynomial (`characteristic_coefficients`, `hurwitz_determinant`).
"""

from collections.abc import Callable, Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, Float

from ._consistent import ConstraintNewton, constraint_newton
from ._linearize import check_linearize_args, linearization
from ._solver._base import AbstractSolver
from ._solver._projection import Projection


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
    newton: ConstraintNewton
    crossing: str = eqx.field(static=True)
    zero_eigenvalues: int = eqx.field(static=True)


def _crossing_value(mu, family, fargs, options: _Boundary):
    """The smooth crossing function $g(\\mu)$ and the size of the structural-zero coefficients."""
    system, state = family(mu, fargs)
    sel = check_linearize_args(system, state, options.t, *options.sets)
    t = jnp.asarray(options.t, state.q.dtype)
    A, _, _, _ = linearization(system, state, options.solver, t, sel, options.newton)
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
        newton=constraint_newton(mu0.dtype, None, None, 32),
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
