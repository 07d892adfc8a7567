"""An independent reference for the constrained dynamics $X_R$, deliberately plain.

It shares nothing with `geomech`: it never imports it. It takes the user's functions as explicit
`(t, q, v)` callables (a `Problem`), differentiates them by **finite differences** (no autodiff),
and solves for the acceleration with **NumPy** from three textbook formulas:

- the Lagrange-multiplier (KKT) system $\\begin{pmatrix} M & -C^\\top \\\\ A & 0 \\end{pmatrix}
  \\begin{pmatrix} a \\\\ \\lambda \\end{pmatrix} = \\begin{pmatrix} Q + F^0 \\\\ b \\end{pmatrix}$
  ([Zanella]; thesis (3.24) with $F^c = F^0 + C^\\top\\lambda$, §5.2);
- the Udwadia–Kalaba formula (thesis (5.10)–(5.11), [UdwadiaKalaba2001]): with $B = A M^{-1/2}$
  and its Moore–Penrose inverse $B^+$,
  $a = a_U + M^{-1/2}\\big(B^+(b - A a_U) + (I - B^+B)M^{-1/2}F^0\\big)$ for
  $\\mathcal{W} = \\mathcal{D}$;
  for $\\mathcal{W} = \\ker C \\ne \\mathcal{D}$, $B^+$ is replaced by the oblique inverse
  $\\hat C^\\top(B\\hat C^\\top)^{-1}$, $\\hat C = C M^{-1/2}$ (equal to $B^+$ when $C = A$), and
  $a_U$ by $a_{\\bar U} = M^{-1}(Q + F^0)$;
- d'Alembert's principle with a basis $E$ of $\\mathcal{W}$: the square system
  $E^\\top(M a - Q - F^0) = 0$, $A a = b$ (thesis Cor. 1, (3.24); (5.43)).

JAX is used only to *evaluate* the user's (JAX) functions at a batch of points (`jax.vmap` and
`jit` of the function itself, never a derivative); Equinox only to hold the functions as a PyTree.

Finite differences: for $x = (t, q, v)$ every derivative is a central difference along one or two
directions, $D_1(h) = [f(x + hd) - f(x - hd)]/2h$ or $D_2(h) = [f(x + h(d_1 + d_2))
- f(x + h(d_1 - d_2)) - f(x - h(d_1 - d_2)) + f(x - h(d_1 + d_2))]/4h^2$,
whose errors are even in $h$, extrapolated by Richardson over $h_j = h_0 2^{-j}$, $j < J$
(truncation $O(h_0^{2J})$; round-off $\\sim \\epsilon |f| / h_{J-1}^2$ for second differences).
With $h_0 = 0.05$, $J = 4$ the measured relative error of $M$, $Q$, $A$, $b$ and of $a_R$ against
autodiff is $\\lesssim 10^{-10}$ on the random systems of the tests (asserted $\\le 10^{-9}$ by
`test_reference.py::test_finite_differences_accuracy`; $h_0 = 0.1$ or $J = 6$ gave $\\sim 10^{-9}$).
Comparisons with this reference use `TOL = 1e-8` (relative), above that with a margin, and far below
the $O(1)$ relative change a wrong sign or factor in any term makes.

The quantities:

- $M = \\partial^2 L/\\partial v\\partial v$;
  $Q = \\partial L/\\partial q - \\frac{d}{ds}\\partial L/\\partial v\\,(t + s, q + s v, v)|_{s=0}
  + F^e$
  (the Euler–Lagrange equations $\\frac{d}{dt}\\partial_v L - \\partial_q L = F^e$ with
  $\\frac{d}{dt}\\partial_v L = M a + \\frac{d}{ds}\\partial_v L(t + s, q + sv, v)$);
- velocity constraints $\\phi(t, q, v)$: $A = \\partial\\phi/\\partial v$,
  $b = -\\frac{d}{ds}\\phi(t + s, q + s v, v)|_{s=0}$ (so $\\frac{d}{dt}\\phi = A a - b$);
- position constraints $h(t, q)$: $A = \\partial h/\\partial q$,
  $b = -\\frac{d^2}{ds^2}h(t + s, q + s v)|_{s=0}$ (so $\\frac{d^2}{dt^2}h = A a - b$).
"""

import dataclasses
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

H0 = 0.05  # largest finite-difference step
LEVELS = 4  # Richardson levels: steps H0, H0/2, H0/4, H0/8
TOL = 1e-8  # relative tolerance for comparisons with this reference (see the module docstring)


class Velocity(eqx.Module):
    """Constraints $\\phi(t, q, v) = 0$ (shape `(k,)`)."""

    phi: Callable


class Position(eqx.Module):
    """Holonomic constraints $h(t, q) = 0$ (shape `(k,)`), imposed as $\\dot h = 0$."""

    h: Callable


class Problem(eqx.Module):
    """A constrained mechanical system given by plain `(t, q, v)` callables.

    `constraints` are concatenated in order. $\\mathcal{W}$ is $\\mathcal{D}$ unless exactly one of
    `annihilator` ($C(t, q, v)$, `(k, n)`, $\\mathcal{W} = \\ker C$) or `W_basis` ($E(t, q, v)$,
    `(n, n - k)`) is given.
    """

    lagrangian: Callable
    constraints: tuple[Velocity | Position, ...] = ()
    force: Callable | None = None
    annihilator: Callable | None = None
    W_basis: Callable | None = None
    known_work: Callable | None = None


# -- evaluation of the user's functions at many points ------------------------------------------


@eqx.filter_jit
def _evaluate(f, *args):
    return jax.vmap(lambda *a: jnp.asarray(f(*a), jnp.float64))(*args)


def evaluate(f, *args):
    """`f` at each row of the stacked arguments, as a float64 NumPy array."""
    return np.asarray(_evaluate(f, *(jnp.asarray(a) for a in args)))


# -- finite differences ---------------------------------------------------------------------------


def _richardson_coefficients(levels):
    """$c_j$ with $\\sum_j c_j D(h_0 2^{-j})$ the Richardson limit of a difference with errors
    even in $h$."""
    col = list(np.eye(levels))
    for m in range(1, levels):
        col = [col[j] + (col[j] - col[j - 1]) / (4**m - 1) for j in range(1, len(col))]
    return col[0]


_C = _richardson_coefficients(LEVELS)
_STEPS = H0 / 2.0 ** np.arange(LEVELS)


def _stencil(x, d1, d2):
    """Points `(S, P, D)` and weights `(P,)` (Richardson coefficients and $1/h^p$ included) of the
    difference along `d1` (and `d2`) at the points `x` `(S, D)`; `d1`, `d2` are `(S, D)`."""
    pts, w = [], []
    for j, h in enumerate(_STEPS):
        if d2 is None:
            offsets, weights = [h * d1, -h * d1], np.array([1.0, -1.0]) / (2 * h)
        else:
            offsets = [h * (d1 + d2), h * (d1 - d2), -h * (d1 - d2), -h * (d1 + d2)]
            weights = np.array([1.0, -1.0, -1.0, 1.0]) / (4 * h * h)
        pts += [x + o for o in offsets]
        w.append(_C[j] * weights)
    return np.stack(pts, 1), np.concatenate(w)


def derivatives(f, x, directions, split):
    """Derivatives of `f` at the points `x` `(S, D)` along `directions`, a list of `(d1, d2)`
    with `d2` `None` for a first derivative; each `d` is `(S, D)`. `split(x)` maps flat points to
    `f`'s arguments. Returns `(S, len(directions), *f_shape)`."""
    S = x.shape[0]
    plans = [_stencil(x, d1, d2) for d1, d2 in directions]
    pts = np.concatenate([p for p, _ in plans], 1)  # (S, P, D)
    vals = evaluate(f, *split(pts.reshape(S * pts.shape[1], -1)))
    vals = vals.reshape(S, pts.shape[1], *vals.shape[1:])
    out, start = [], 0
    for p, w in plans:
        stop = start + p.shape[1]
        out.append(np.tensordot(w, vals[:, start:stop], axes=(0, 1)))
        start = stop
    return np.stack(out, 1)


def _unit(S, D, i):
    e = np.zeros((S, D))
    e[:, i] = 1.0
    return e


def _split_tqv(n):
    return lambda x: (x[:, 0], x[:, 1 : 1 + n], x[:, 1 + n :])


def _split_tq(n):
    return lambda x: (x[:, 0], x[:, 1:])


def mass_and_force(problem, t, q, v):
    """$M$ `(S, n, n)` and $Q$ `(S, n)` (with $F^e$) at the states, by finite differences of $L$."""
    S, n = q.shape
    D = 1 + 2 * n
    x = np.concatenate([t[:, None], q, v], 1)
    flow = np.concatenate([np.ones((S, 1)), v, np.zeros((S, n))], 1)  # (1, v, 0)
    ev = [_unit(S, D, 1 + n + i) for i in range(n)]
    pairs = [(i, j) for i in range(n) for j in range(i, n)]
    dirs = [(_unit(S, D, 1 + i), None) for i in range(n)]  # ∂L/∂q
    dirs += [(ev[i], ev[j]) for i, j in pairs]  # ∂²L/∂v∂v
    dirs += [(ev[i], flow) for i in range(n)]  # d/ds ∂L/∂v(t + s, q + s v, v)
    d = derivatives(problem.lagrangian, x, dirs, _split_tqv(n))
    dLdq, hess, mixed = d[:, :n], d[:, n : n + len(pairs)], d[:, n + len(pairs) :]
    M = np.zeros((S, n, n))
    for c, (i, j) in enumerate(pairs):
        M[:, i, j] = M[:, j, i] = hess[:, c]
    Q = dLdq - mixed
    if problem.force is not None:
        Q = Q + evaluate(problem.force, t, q, v)
    return M, Q


def constraint_rows(problem, t, q, v):
    """$A$ `(S, k, n)`, $b$ `(S, k)` with $\\frac{d}{dt}\\phi = A a - b$, and $\\phi$ `(S, k)`
    (for a position row, $\\phi = \\frac{d}{ds}h(t + s, q + s v)$), rows in order; and the values
    $h$ of the position rows `(S, m)`."""
    S, n = q.shape
    As, bs, phis, hs = [], [], [], [np.zeros((S, 0))]
    for c in problem.constraints:
        if isinstance(c, Velocity):
            D = 1 + 2 * n
            x = np.concatenate([t[:, None], q, v], 1)
            flow = np.concatenate([np.ones((S, 1)), v, np.zeros((S, n))], 1)
            dirs = [(_unit(S, D, 1 + n + i), None) for i in range(n)] + [(flow, None)]
            d = derivatives(c.phi, x, dirs, _split_tqv(n)).reshape(S, n + 1, -1)
            phis.append(evaluate(c.phi, t, q, v).reshape(S, -1))
        elif isinstance(c, Position):
            D = 1 + n
            x = np.concatenate([t[:, None], q], 1)
            flow = np.concatenate([np.ones((S, 1)), v], 1)
            dirs = [(_unit(S, D, 1 + i), None) for i in range(n)] + [(flow, flow), (flow, None)]
            d = derivatives(c.h, x, dirs, _split_tq(n)).reshape(S, n + 2, -1)
            phis.append(d[:, n + 1])
            hs.append(evaluate(c.h, t, q).reshape(S, -1))
        else:
            raise TypeError(f"unknown constraint {c!r}")
        As.append(np.swapaxes(d[:, :n], 1, 2))
        bs.append(-d[:, n])
    return tuple(np.concatenate(x, 1) for x in (As, bs, phis, hs))


# -- the textbook formulas (NumPy) ---------------------------------------------------------------


def null_space(X):
    """An orthonormal basis of $\\ker X$ (columns), by the SVD."""
    _, s, Vt = np.linalg.svd(X)
    return Vt[int(np.sum(s > 1e-12 * s[0])) :].T


def _sqrt_inv(M):
    w, V = np.linalg.eigh(M)
    return V @ np.diag(w**-0.5) @ V.T


@dataclasses.dataclass
class Reference:
    """The reference at `S` states; every field has a leading axis `S`."""

    M: np.ndarray
    Q: np.ndarray  # with F^e: M a_U = Q
    F0: np.ndarray
    A: np.ndarray
    b: np.ndarray
    C: np.ndarray  # W = ker C (C = A for W = D)
    E: np.ndarray  # a basis of W
    phi: np.ndarray  # φ (velocity level, every row): 0 on C
    h: np.ndarray  # h of the position rows: 0 on C
    a_U: np.ndarray
    a_kkt: np.ndarray
    lam: np.ndarray  # F^c = F0 + Cᵀλ
    a_uk: np.ndarray
    a_dalembert: np.ndarray

    def __getitem__(self, i):
        """The reference at state `i` (or a slice of states)."""
        return dataclasses.replace(
            self, **{f.name: getattr(self, f.name)[i] for f in dataclasses.fields(self)}
        )

    @property
    def a(self):
        return self.a_kkt

    @property
    def Fc(self):
        """$F^c = M(a_R - a_U)$, the covector in $M a = Q + F^c$."""
        return np.einsum("...ij,...j->...i", self.M, self.a_kkt - self.a_U)


def solve(problem: Problem, t, q, v) -> Reference:
    """The reference at the states `(t[s], q[s], v[s])` (`t` of shape `(S,)`, `q`, `v` `(S, n)`),
    on or off the constraint manifold."""
    t, q, v = (np.asarray(x, np.float64) for x in (t, q, v))
    S, n = q.shape
    M, Q = mass_and_force(problem, t, q, v)
    A, b, phi, h = constraint_rows(problem, t, q, v)
    k = A.shape[1]
    F0 = np.zeros((S, n)) if problem.known_work is None else evaluate(problem.known_work, t, q, v)
    if problem.annihilator is not None and problem.W_basis is not None:
        raise ValueError("give at most one of annihilator and W_basis")
    if problem.annihilator is not None:
        C = evaluate(problem.annihilator, t, q, v).reshape(S, k, n)
        E = np.stack([null_space(c) for c in C])
    elif problem.W_basis is not None:
        E = evaluate(problem.W_basis, t, q, v).reshape(S, n, n - k)
        C = np.stack([null_space(e.T).T for e in E])
    else:
        C = A
        E = np.stack([null_space(a) for a in A])
    out = {key: np.zeros((S, n)) for key in ("a_U", "a_kkt", "a_uk", "a_dalembert")}
    out["lam"] = np.zeros((S, k))
    for s in range(S):
        Ms, As, Cs, Es = M[s], A[s], C[s], E[s]
        a_U = np.linalg.solve(Ms, Q[s])
        # Lagrange multipliers (KKT)
        K = np.block([[Ms, -Cs.T], [As, np.zeros((k, k))]])
        x = np.linalg.solve(K, np.concatenate([Q[s] + F0[s], b[s]]))
        # Udwadia–Kalaba
        Mmh = _sqrt_inv(Ms)
        B = As @ Mmh
        if problem.annihilator is None and problem.W_basis is None:
            Bp = np.linalg.pinv(B)
            a_uk = a_U + Mmh @ (Bp @ (b[s] - As @ a_U) + (np.eye(n) - Bp @ B) @ Mmh @ F0[s])
        else:
            Ch = Cs @ Mmh
            a_Ubar = a_U + np.linalg.solve(Ms, F0[s])
            a_uk = a_Ubar + Mmh @ Ch.T @ np.linalg.solve(B @ Ch.T, b[s] - As @ a_Ubar)
        # d'Alembert with a basis of W
        R = np.concatenate([Es.T @ Ms, As])
        r = np.concatenate([Es.T @ (Q[s] + F0[s]), b[s]])
        out["a_U"][s], out["a_kkt"][s], out["lam"][s] = a_U, x[:n], x[n:]
        out["a_uk"][s], out["a_dalembert"][s] = a_uk, np.linalg.solve(R, r)
    return Reference(M, Q, F0, A, b, C, E, phi, h, **out)


def rel_err(x, ref, floor=0.0):
    """$|x - x_{ref}| / \\max(|x_{ref}|, \\text{floor})$ per state (norms over all but the leading
    axis). A `floor` of the quantity's natural scale keeps a vanishing reference value (a zero $b$
    or $Q$) from turning round-off into a large relative error."""
    x, ref = np.asarray(x), np.asarray(ref)
    S = ref.shape[0] if ref.ndim > 1 else 1
    x, ref = x.reshape(S, -1), ref.reshape(S, -1)
    return np.linalg.norm(x - ref, axis=1) / np.maximum(np.linalg.norm(ref, axis=1), floor)
