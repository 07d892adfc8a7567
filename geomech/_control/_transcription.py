"""The discrete mechanics and optimal control (DMOC) transcription of an
`OptimalControlProblem` ([OberBloebaum2011]; on Lie groups [KobilarovMarsden2011]).

Nodes $t_k = t_0 + kh$, $k = 0, \\dots, N-1$, carry the configurations $q_k$ and the discrete
momenta $p_k$; interval $k$ carries the control $u_k$ (constant on $[t_k, t_{k+1}]$) and the
multiplier $\\lambda_k$. The equations of interval $k$ are one step of `gm.VariationalIntegrator`'s
discrete Lagrange–d'Alembert scheme ([MW] Part 1 and §3.2, [CM], [MP]; left-trivialized on
groups, [KobilarovMarsdenSukhatme2010]) with the control as a force, in position–momentum form
([OberBloebaum2011] (3.4)–(3.6)):

- $p_k + D_1L_d(q_k, q_{k+1}) + f^-_k = A(q_k)^\\top\\lambda_k$ (the forced discrete
  Lagrange–d'Alembert equations with the constraint covectors of [CM]),
- $p_{k+1} = D_2L_d(q_k, q_{k+1}) + f^+_k$ (the discrete Legendre transform),
- $\\phi_d(q_k, q_{k+1}) = 0$ ([MP]: $A(q_{k+1/2})\\,\\Delta q_k/h + c = 0$ for linear
  constraints; $h(q_{k+1}) = 0$ for holonomic ones, [MW] §3.5),

with $p_0 = \\partial L/\\partial v(q_0, v_0)$ when $v_0$ is given, and at the end, when $v_f$ is
given, $p_{N-1} = \\partial L/\\partial v(q_f, v_f) + A(q_f)^\\top\\lambda_{N-1}$ (a momentum that
the velocity step of the integrator maps to $v_f$). The cost is
$\\sum_k h\\,\\ell(t_{k+1/2}, q_k \\oplus \\tfrac12\\Delta q_k, \\Delta q_k/h, u_k) + \\Phi(t_{N-1},
q_{N-1})$, the midpoint rule of the discrete Lagrangian. The plan is therefore, to the solver's
tolerance, a trajectory of `gm.VariationalIntegrator` driven by the piecewise-constant controls.

The unknowns of stage $k$ (interval $k$) are $z_k = (\\xi_{k+1}, u_k, \\lambda_k[, h_k],
p_{k+1})$, with $\\xi_{k+1}$ the step of $q_{k+1}$ in the chart centred at it
($q_{k+1} \\oplus \\xi_{k+1}$): the equations of interval $k$ depend on $z_{k-1}$ and $z_k$ only
and have their pivots in $z_k$ (they determine $q_{k+1}$, $\\lambda_k$ and $p_{k+1}$ from the
state $(q_k, p_k)$ and the control, as one step of the integrator does), so the KKT matrix is
block tridiagonal with nonsingular Schur complements (`_blocktri.py`), the ordering of the
Riccati recursion of [RaoWrightRawlings1998]. Slots a stage does not use (the fixed $q_f$, the
initial momentum when $v_0$ is given, ...) are masked: a fixed unknown and an empty equation
get an identity row.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from .._bundle import State
from .._variational import DiscreteMechanicsSolver
from ._problem import OptimalControlProblem


def oplus(problem: OptimalControlProblem, q, psi):
    """$q \\oplus \\psi$ for one point."""
    return problem.system.manifold.oplus(q, psi)


def ominus(problem: OptimalControlProblem, qa, qb):
    """$q_b \\ominus q_a$: $\\psi$ with $q_b = q_a \\oplus \\psi$ for one pair of nearby points."""
    return problem.system.manifold.ominus(qb, qa)


def take(tree, index):
    """Node `index` (an int or a slice) of stacked points."""
    return jax.tree_util.tree_map(lambda a: a[index], tree)


class Layout(eqx.Module):
    """The sizes of the transcription: nodes $N$ (stages $N-1$), $n = \\dim Q$, $m$ controls,
    $k$ constraint rows, and the optional slots: a free horizon (`nt`), a free initial momentum
    (`n0`), a final-velocity condition (`nf`)."""

    N: int = eqx.field(static=True)
    n: int = eqx.field(static=True)
    m: int = eqx.field(static=True)
    k: int = eqx.field(static=True)
    nt: int = eqx.field(static=True)
    n0: int = eqx.field(static=True)
    nf: int = eqx.field(static=True)

    @property
    def stages(self) -> int:
        return self.N - 1

    @property
    def s(self) -> int:
        """Unknowns of a stage: $(\\xi_{k+1}, u_k, \\lambda_k, h_k, p_{k+1}, p_0, \\lambda_{N-1})$."""
        return 2 * self.n + self.m + self.k + self.nt + self.n0 + (self.k if self.nf else 0)

    @property
    def r(self) -> int:
        """Equations of a stage: momentum, Legendre, discrete constraint, time link, final."""
        return 2 * self.n + self.k + self.nt + self.nf

    def split(self, z):
        """$(\\xi, u, \\lambda, h, p, p_0, \\lambda_{N-1})$ of a stage's unknowns."""
        sizes = [self.n, self.m, self.k, self.nt, self.n, self.n0, self.k if self.nf else 0]
        ends = np.cumsum(sizes)
        return [z[e - s : e] for s, e in zip(sizes, ends, strict=True)]


class Transcription(eqx.Module):
    """The NLP of an `OptimalControlProblem`: values, residuals and their block-tridiagonal
    derivatives at a point `(q, w)`: the node points (stacked, $N$), and `w` `(N-1, s - n)`
    holding each stage's unknowns other than $\\xi$."""

    problem: OptimalControlProblem
    layout: Layout

    @staticmethod
    def of(problem: OptimalControlProblem) -> "Transcription":
        n, k = problem.check()
        layout = Layout(
            problem.num_nodes,
            n,
            problem.num_controls,
            k,
            int(problem.free_time),
            n if problem.v0 is None else 0,
            0 if problem.vf is None else n,
        )
        return Transcription(problem, layout)

    # -- masks (static, numpy) --------------------------------------------------------------

    def _offsets(self):
        lay = self.layout
        sizes = [lay.n, lay.m, lay.k, lay.nt, lay.n, lay.n0, lay.k if lay.nf else 0]
        return np.concatenate([[0], np.cumsum(sizes)])

    def fixed(self) -> np.ndarray:
        """`(N-1, s)`: the unknowns that do not move (identity rows)."""
        lay, p = self.layout, self.problem
        o = self._offsets()
        out = np.zeros((lay.stages, lay.s), bool)
        if p.qf is not None:
            out[-1, o[0] : o[1]] = True  # q_{N-1} = q_f
        if p.v0 is None:
            out[0, o[2] : o[3]] = True  # p_0 is free: λ_0 would be redundant
        out[1:, o[5] : o[6]] = True  # the p_0 slot lives on the first stage
        out[:-1, o[6] : o[7]] = True  # the λ_{N-1} slot on the last
        return out

    def rows(self) -> np.ndarray:
        """`(N-1, r)`: the equations that exist (the others are identity rows)."""
        lay = self.layout
        out = np.ones((lay.stages, lay.r), bool)
        start = 2 * lay.n + lay.k
        if lay.nt:
            out[0, start] = False  # h_k - h_{k-1} = 0 from the second stage on
        if lay.nf:
            out[:-1, start + lay.nt :] = False  # the final condition on the last stage
        return out

    # -- the equations of one interval ---------------------------------------------------------

    def step(self, z) -> Array:
        """The time step $h$ of a stage."""
        p, lay = self.problem, self.layout
        if lay.nt:
            return lay.split(z)[3][0]
        return jnp.asarray(p.horizon, z.dtype) / (lay.N - 1)

    def interval(self, qa, qb, xp, zc, k, first, last):
        """The equations (`(r,)`) and the cost of interval `k`, from node `a` = $k$ to node `b`;
        `xp` the state of stage $k-1$ (its `coupling` unknowns $(\\xi_k, h_{k-1}, p_k)$, unused
        on the first interval), `zc` the unknowns of stage $k$; `first`, `last` (0 or 1) mark
        the first and the last interval."""
        rows, cost = self.interval_nonlinear(qa, qb, xp, zc, k, first, last)
        return rows + self.momentum_terms(xp, zc, first, last), cost

    def momentum_terms(self, xp, zc, first, last) -> Array:
        """The terms of an interval's equations in the unknown momenta, which enter them
        linearly and the cost not at all: $p_k$ in the momentum rows ($p_0$ on the first
        interval when $v_0$ is free), $p_{k+1}$ in the Legendre rows and the final condition."""
        lay = self.layout
        p_a = xp[lay.n + lay.nt :]
        _, _, _, _, p_b, p0, _ = lay.split(zc)
        momentum = (1 - first) * p_a
        if self.problem.v0 is None:
            momentum = momentum + first * p0
        rows = [momentum, p_b, jnp.zeros(lay.k + lay.nt, zc.dtype)]
        if lay.nf:
            rows.append(last * p_b)
        return jnp.concatenate(rows)

    def interval_nonlinear(self, qa, qb, xp, zc, k, first, last):
        """`interval` without `momentum_terms` (the unknown momenta in `xp`, `zc` unread)."""
        p, lay = self.problem, self.layout
        n, nt = lay.n, lay.nt
        xi_a, h_prev = xp[:n], xp[n : n + nt]
        xi_b, u, lam, h_c, _, _, lam_f = lay.split(zc)
        h = self.step(zc)
        t = p.t0 + k * h
        system = p.system
        qa = oplus(p, qa, (1 - first) * xi_a)
        qb = oplus(p, qb, xi_b)
        dq = ominus(p, qa, qb)
        dms = DiscreteMechanicsSolver(p.controlled_system(u), "midpoint", None, 16)
        # (D1 Ld + f^-, D2 Ld + f^+): the forced discrete Legendre transforms ([MW] §3.2,
        # [OberBloebaum2011] (3.4)), left-trivialized on a group
        minus, plus = dms.discrete_momenta(t, qa, h, dq)
        momentum = minus  # + p_k (`momentum_terms`)
        if p.v0 is not None:  # p_0 = ∂L/∂v(q_0, v_0)
            momentum = momentum + first * system.momentum(State(qa, jnp.asarray(p.v0, zc.dtype)), t)
        rows = []
        if lay.k:
            A_a = dms.constraint_covectors(t, qa, jnp.zeros_like(dq))
            momentum = momentum - A_a.T @ lam  # the reaction A(q_k)^T λ_k ([CM])
        rows += [momentum, -plus]  # p_{k+1} - D2 Ld - f^+ (`momentum_terms`)
        if lay.k:
            # φ_d(q_k, q_{k+1}) = 0 ([MP]; holonomic rows h(q_{k+1}) = 0, [MW] §3.5)
            rows.append(dms.discrete_constraint(t, qa, h, dq))
        if lay.nt:
            rows.append((1 - first) * (h_c - h_prev))
        if lay.nf:  # p_{N-1} = ∂L/∂v(q_f, v_f) + A(q_f)^T λ_{N-1}
            final = -system.momentum(State(qb, jnp.asarray(p.vf, zc.dtype)), t + h)
            if lay.k:
                final = final - dms.constraint_covectors(t + h, qb, jnp.zeros_like(dq)).T @ lam_f
            rows.append(last * final)
        cost = h * p.cost_rate(t + h / 2, oplus(p, qa, dq / 2), dq / h, u)  # midpoint rule
        if p.terminal_cost is not None:
            cost = cost + last * p.terminal_cost(t + h, qb)
        return jnp.concatenate(rows), cost

    # -- assembled over the stages -------------------------------------------------------------

    def points(self, q):
        """The node points with the given ones ($q_0$, and $q_f$ if fixed) taken from the
        problem (so that derivatives with respect to them flow)."""
        p = self.problem
        q = jax.tree_util.tree_map(lambda a, b: a.at[0].set(b), q, p.q0)
        if p.qf is not None:
            q = jax.tree_util.tree_map(lambda a, b: a.at[-1].set(b), q, p.qf)
        return q

    def _flags(self, dtype):
        S = self.layout.stages
        ks = jnp.arange(S)
        return ks.astype(dtype), (ks == 0).astype(dtype), (ks == S - 1).astype(dtype)

    def stage_z(self, w, xi=None):
        """The unknowns $z$ of every stage, `(N-1, s)`: $(\\xi, w)$ with $\\xi = 0$ by default."""
        if xi is None:
            xi = jnp.zeros((self.layout.stages, self.layout.n), w.dtype)
        return jnp.concatenate([xi, w], axis=1)

    def _pairs(self, q, z):
        """`(q_k, q_{k+1}, x_{k-1}, z_k)` of every interval: `x_{k-1}` the state (`coupling`
        unknowns) of the stage before (a zero placeholder on the first)."""
        q = self.points(q)
        xp = z[:-1, np.asarray(self.coupling())]
        xp = jnp.concatenate([jnp.zeros_like(xp[:1]), xp])
        return take(q, slice(0, -1)), take(q, slice(1, None)), xp, z

    def _embed(self, a):
        """`a` (`(..., c)`, on the `coupling` unknowns) as `(..., s)`, zero elsewhere: a product
        with a constant selection matrix (XLA's scatters loop over their indices)."""
        E = np.eye(self.layout.s)[:, np.asarray(self.coupling())]
        return a @ jnp.asarray(E.T, a.dtype)

    def residuals(self, q, w) -> tuple[Float[Array, ""], Float[Array, "S r"]]:
        """The cost $f$ and the equations $c$ of every stage (`(N-1, r)`, zero on empty rows)."""
        ks, first, last = self._flags(w.dtype)
        rows, cost = jax.vmap(self.interval)(*self._pairs(q, self.stage_z(w)), ks, first, last)
        return jnp.sum(cost), rows * jnp.asarray(self.rows(), w.dtype)

    def derivatives(self, q, w, y_weights, cost_scale) -> "Derivatives":
        """Everything a Newton step needs at `(q, w)`, in the chart centred at the points: the
        cost and its gradient `(N-1, s)`, the equations `(N-1, r)`, the Jacobian blocks
        (`J_diag[k]` = equations of stage $k$ by its unknowns, `J_lower[k]` = equations of
        stage $k+1$ by the state (`coupling`) unknowns of stage $k$), and the Hessian blocks of
        $\\mathcal{L} = \\sigma f + y^\\top c$ (`y_weights` = $y$ times the row scales), laid out
        alike, with its gradient. Fixed unknowns and empty rows are masked out (zero)."""
        c = len(self.coupling())
        ks, first, last = self._flags(w.dtype)
        live = jnp.asarray(self.rows(), w.dtype)
        free = jnp.asarray(~self.fixed(), w.dtype)
        free_c = free[:, np.asarray(self.coupling())]
        y = y_weights * live

        runs = self._linear_runs()
        n_nl = sum(b - a for kind, a, b in runs if kind == 0)
        n_lin = sum(b - a for kind, a, b in runs if kind == 1)

        def parts(xx):  # (x_{k-1}, z_k) -> (the nonlinear unknowns, the momenta)
            at, pieces = 0, ([], [])
            for kind, a, b in runs:
                pieces[kind].append(xx[at : at + b - a])
                at += b - a
            return tuple(jnp.concatenate(p_) for p_ in pieces)

        def join(nonlinear, linear, axis=-1):  # the inverse of `parts`, along `axis`
            src = (nonlinear, linear)
            return jnp.concatenate(
                [jax.lax.slice_in_dim(src[kind], a, b, axis=axis) for kind, a, b in runs], axis
            )

        def one(qa, qb, xp, zc, k, f, l, yk):
            # the interval reads the state of the stage before and the unknowns of its own
            x_nl, x_lin = parts(jnp.concatenate([xp, zc]))

            def split(xx_):
                return xx_[:c], xx_[c:]

            # one forward-mode pass over the unknowns that enter nonlinearly, of the gradient of
            # σ f + y^T c: the Hessian, the Jacobian's columns and the cost gradient together
            def first_order(a):
                def lagrangian(a_):
                    rows_, cost_ = self.interval_nonlinear(qa, qb, *split(join(a_, x_lin)), k, f, l)
                    return cost_scale * cost_ + yk @ rows_, (rows_, cost_)

                g, (rows_, cost_) = jax.grad(lagrangian, has_aux=True)(a)
                return (g, rows_, cost_), (rows_, cost_)

            (H_nl, J_nl, gf_nl), (rows, cost) = jax.jacfwd(first_order, has_aux=True)(x_nl)
            # the momenta: linear terms (no Hessian columns), a Jacobian of ones and zeros
            J_lin, terms = jax.jacfwd(
                lambda b: (self.momentum_terms(*split(join(x_nl, b)), f, l),) * 2, has_aux=True
            )(x_lin)
            rows = rows + terms
            zero = lambda *shape: jnp.zeros(shape, x_nl.dtype)
            J = join(J_nl, J_lin)
            H = join(join(H_nl, zero(n_nl, n_lin)), zero(n_lin, n_nl + n_lin), axis=0)
            gf = join(gf_nl, zero(n_lin))
            gL = cost_scale * gf + J.T @ yk
            return rows, cost, J, H, gL, gf

        rows, cost, J, H, gL, gf = jax.vmap(one)(
            *self._pairs(q, self.stage_z(w)), ks, first, last, y
        )
        shift = lambda a: jnp.concatenate([a[1:], jnp.zeros_like(a[:1])])  # from k to k - 1
        grad_L = (gL[:, c:] + shift(self._embed(gL[:, :c]))) * free
        grad_f = (gf[:, c:] + shift(self._embed(gf[:, :c]))) * free
        W_diag = H[:, c:, c:] + shift(self._embed(self._embed(H[:, :c, :c]).mT).mT)
        W_lower = H[1:, c:, :c] * free[1:, :, None] * free_c[:-1, None, :]
        J_diag = J[:, :, c:] * live[:, :, None] * free[:, None, :]
        J_lower = J[1:, :, :c] * live[1:, :, None] * free_c[:-1, None, :]
        W_diag = W_diag * free[:, :, None] * free[:, None, :]
        return Derivatives(
            cost=jnp.sum(cost),
            grad_f=grad_f,
            c=rows * live,
            J_diag=J_diag,
            J_lower=J_lower,
            W_diag=W_diag,
            W_lower=W_lower,
            grad_L=grad_L,
        )

    def _linear_runs(self) -> list[tuple[int, int, int]]:
        """$(x_{k-1}, z_k)$ (the `coupling` unknowns of the stage before, the unknowns of the
        stage) as runs `(kind, start, stop)`: kind 0 the unknowns that enter an interval
        nonlinearly, kind 1 the momenta, which enter its equations linearly and its cost not at
        all; `start:stop` indexes the run's kind."""
        lay = self.layout
        o = self._offsets()
        c = len(self.coupling())
        linear = np.zeros(c + lay.s, int)
        linear[lay.n + lay.nt : c] = 1  # p_k
        linear[c + o[4] : c + o[6]] = 1  # p_{k+1}, p_0
        runs, count, i = [], [0, 0], 0
        while i < len(linear):
            j = i
            while j < len(linear) and linear[j] == linear[i]:
                j += 1
            kind = int(linear[i])
            runs.append((kind, count[kind], count[kind] + j - i))
            count[kind] += j - i
            i = j
        return runs

    def coupling(self) -> tuple[int, ...]:
        """The unknowns of stage $k$ that the equations and the cost of interval $k+1$ read: the
        state $(\\xi_{k+1}, h_k, p_{k+1})$ (the columns of the KKT matrix's sub-diagonal blocks)."""
        o = self._offsets()
        return (*range(o[0], o[1]), *range(o[3], o[5]))

    def lagrangian_gradient(self, q, w, y_weights, cost_scale):
        """$\\nabla_z(\\sigma f + y^\\top c)$ `(N-1, s)` (masked) and the equations $c$
        `(N-1, r)`: the first-order conditions without the bounds."""
        c = len(self.coupling())
        ks, first, last = self._flags(w.dtype)
        live = jnp.asarray(self.rows(), w.dtype)
        y = y_weights * live

        def one(qa, qb, xp, zc, k, f, l, yk):
            def lag(xx):
                rows, cost = self.interval(qa, qb, xx[:c], xx[c:], k, f, l)
                return cost_scale * cost + yk @ rows, rows

            return jax.grad(lag, has_aux=True)(jnp.concatenate([xp, zc]))

        g, rows = jax.vmap(one)(*self._pairs(q, self.stage_z(w)), ks, first, last, y)
        shift = lambda a: jnp.concatenate([a[1:], jnp.zeros_like(a[:1])])
        free = jnp.asarray(~self.fixed(), w.dtype)
        return (g[:, c:] + shift(self._embed(g[:, :c]))) * free, rows * live

    # -- bounds --------------------------------------------------------------------------------

    def bound_values(self, q, w) -> Float[Array, "S s"]:
        """The values that the bounds apply to: the coordinates of $q_{k+1}$ (coordinate
        manifolds) and $w$."""
        lay = self.layout
        if not self.problem.has_coordinates:
            qv = jnp.zeros((lay.stages, lay.n), w.dtype)
        else:
            qv = jnp.asarray(q, w.dtype)[1:]
        return jnp.concatenate([qv, w], axis=1)

    def bounds(self, dtype) -> tuple[Float[Array, "S s"], Float[Array, "S s"]]:
        """Lower and upper bounds of every stage's unknowns (`±inf` where none and on fixed
        unknowns)."""
        p, lay = self.problem, self.layout
        o = self._offsets()
        S = lay.stages
        lower = jnp.full((S, lay.s), -jnp.inf, dtype)
        upper = jnp.full((S, lay.s), jnp.inf, dtype)

        def put(lo_hi, a, b, lower, upper):
            lo, hi = (jnp.broadcast_to(jnp.asarray(x, dtype), (S, b - a)) for x in lo_hi)
            return lower.at[:, a:b].set(lo), upper.at[:, a:b].set(hi)

        if p.state_bounds is not None:
            lower, upper = put(p.state_bounds, o[0], o[1], lower, upper)
        if p.control_bounds is not None:
            lower, upper = put(p.control_bounds, o[1], o[2], lower, upper)
        if lay.nt:
            N1 = lay.N - 1
            h_bounds = (p.horizon.lower / N1 * jnp.ones(1), p.horizon.upper / N1 * jnp.ones(1))
            lower, upper = put(h_bounds, o[3], o[4], lower, upper)
        fixed = jnp.asarray(self.fixed())
        return jnp.where(fixed, -jnp.inf, lower), jnp.where(fixed, jnp.inf, upper)

    def advance(self, q, w, dz, alpha):
        """The point $(q_{k+1} \\oplus \\alpha\\,d\\xi_k, w + \\alpha\\,dw)$."""
        n = self.layout.n
        step = alpha * dz
        rest = jax.vmap(lambda a, b: oplus(self.problem, a, b))(
            take(q, slice(1, None)), step[:, :n]
        )
        q = jax.tree_util.tree_map(lambda a, b: jnp.concatenate([a[:1], b]), q, rest)
        return q, w + step[:, n:]

    def interval_quantities(self, q, w):
        """At the nodes: each interval's time step `(N-1,)`, increment $\\Delta q_k$ `(N-1, n)`
        and discrete constraint $\\phi_d$ `(N-1, k)`."""
        p, lay = self.problem, self.layout
        q = self.points(q)
        z = self.stage_z(w)
        ks = jnp.arange(lay.stages).astype(w.dtype)

        def one(qa, qb, zc, k):
            u = lay.split(zc)[1]
            h = self.step(zc)
            dq = ominus(p, qa, qb)
            dms = DiscreteMechanicsSolver(p.controlled_system(u), "midpoint", None, 16)
            dc = (
                dms.discrete_constraint(p.t0 + k * h, qa, h, dq)
                if lay.k
                else jnp.zeros(0, dq.dtype)
            )
            return h, dq, dc

        return jax.vmap(one)(take(q, slice(0, -1)), take(q, slice(1, None)), z, ks)


class Derivatives(eqx.Module):
    """The values and derivatives of `Transcription.derivatives` (equations unscaled)."""

    cost: Array
    grad_f: Array
    c: Array
    J_diag: Array
    J_lower: Array
    W_diag: Array
    W_lower: Array
    grad_L: Array
