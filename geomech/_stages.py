"""The stages every solver shares, computed once per state: $M$, $Q$, $A$, $b$, $C$, projections.

For a special field $X = (v, a)$, $d\\phi(X) = 0 \\iff A a = b$ with $A = \\partial\\phi/\\partial v$ and
$b = -(\\partial\\phi/\\partial q) v - \\partial_t\\phi$ (Lemma 1). $\\mathcal{W} = \\ker C$, with
$C = A$ for ideal constraints ($\\mathcal{W} = \\mathcal{D}$).
"""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from . import _linalg as la
from ._bundle import State
from ._checks import At, checked
from ._custom_types import RealScalarLike
from ._geometry import AbstractChart
from ._linalg import null_space
from ._operators import (
    AbstractGram,
    AbstractMass,
    AbstractRows,
    DenseGram,
    DenseRows,
    columns_operator,
    mass_operator,
    rows_operator,
    weighted_solve,
)
from ._sparsity import jaxpr_nonzero_pattern
from ._system import LagrangianSystem, check_system


class Stages(eqx.Module):
    """Everything about one state $(t, q, v)$ that the solvers need, computed once.

    `M a_U = Q`; `F0` is the known-work covector ($0$ for ideal constraints); `phi` is
    $\\phi(t, q, v)$; `A a = b` are the constraints on accelerations; `C` annihilates $\\mathcal{W}$.

    `system` and `state` are written in `chart`, the chart centred at the state's point
    (`LagrangianSystem.localized`): the system and state themselves on coordinate manifolds, the
    body frame at $\\psi = 0$ on a group; a solver reads more of the user's functions through
    `chart.pull` (e.g. `Kane(basis=fn)`).
    """

    system: LagrangianSystem
    state: State
    chart: AbstractChart
    t: Float[Array, ""]
    # M, the rows of A and of C and how A M⁻¹ Cᵀ is formed, each an operator whose type
    # (`_operators`, chosen by `assemble` from the structure found at trace time) decides the
    # algorithm: a diagonal M solved by division, sparse products, the nonzero terms of the Gram sum
    mass: AbstractMass
    Q: Float[Array, " n"]
    F0: Float[Array, " n"]
    phi: Float[Array, " k"]
    A_rows: AbstractRows
    b: Float[Array, " k"]
    C_rows: AbstractRows
    gram: AbstractGram
    ideal: bool = eqx.field(static=True)
    # whether the value conditions were checked (`assemble(checks=True)`); solvers with conditions
    # of their own check them likewise, or give NaN (reported per trajectory by `simulate`)
    checked: bool = eqx.field(static=True, default=True)

    # the matrices of the operators (unannotated: a vmapped `Stages` carries a batch axis)
    M = property(lambda self: self.mass.matrix, doc="$M$, `(n, n)`.")
    M_cho = property(lambda self: self.mass.cholesky, doc="The lower Cholesky factor of $M$.")
    A = property(lambda self: self.A_rows.matrix, doc="$A = \\partial\\phi/\\partial v$, `(k, n)`.")
    C = property(lambda self: self.C_rows.matrix, doc="$C$ with $\\mathcal{W} = \\ker C$, `(k, n)`.")

    @property
    def n(self) -> int:
        return self.M.shape[0]

    @property
    def k(self) -> int:
        return self.A.shape[0]

    def solve_M(self, x):
        """$M^{-1} x$ (by the Cholesky factor computed once, or a division when $M$ is diagonal)."""
        return self.mass.solve(x)

    def schur(self) -> Float[Array, "k k"]:
        """$S = A M^{-1} C^\\top$, invertible by (3.19), symmetric positive definite when $W = D$."""
        return self.gram(self.mass, self.A_rows, self.C_rows)

    def A_times(self, u: Float[Array, "n ..."]) -> Float[Array, "k ..."]:
        """$A u$."""
        return self.A_rows.mv(u)

    def C_transpose_times(self, z: Float[Array, "k ..."]) -> Float[Array, "n ..."]:
        """$C^\\top z$."""
        return self.C_rows.rmv(z)

    @property
    def a_U(self) -> Float[Array, " n"]:
        """Acceleration of $X_U$ (2.9)."""
        return self.solve_M(self.Q)

    @property
    def a_Ubar(self) -> Float[Array, " n"]:
        """Acceleration of $X_{\\bar U} = X_U + X_{F^0}$ (5.41); equal to $a_U$ for ideal constraints."""
        return self.solve_M(self.Q + self.F0)

    @property
    def a_0(self) -> Float[Array, " n"]:
        """An $X_0 \\in \\mathcal{S}(\\mathcal{C})$ (Lemma 1): $a_0 = M^{-1}A^\\top(AM^{-1}A^\\top)^{-1} b$."""
        gram = self.gram if self.ideal else DenseGram()  # self.gram forms A M⁻¹ Cᵀ
        return weighted_solve(self.mass, self.A_rows, self.A_rows, self.b, gram=gram)[1]

    def _Wperp_from(self, y: Float[Array, "k ..."]) -> Float[Array, "n ..."]:
        """$M^{-1}C^\\top(AM^{-1}C^\\top)^{-1} y$, the common factor of (3.20) and (3.32)."""
        # A M⁻¹ Cᵀ is invertible by (3.19), symmetric positive definite when W = D
        return weighted_solve(
            self.mass, self.A_rows, self.C_rows, y, gram=self.gram, symmetric=self.ideal
        )[1]

    def project_Wperp(self, u: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
        """$\\Pi_{\\mathcal{W}^\\perp} u = M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}A u$ (3.20)."""
        return self._Wperp_from(self.A_times(u))

    def project_Wperp_residual(self, a: Float[Array, " n"]) -> Float[Array, " n"]:
        """$\\Pi_{\\mathcal{W}^\\perp}(a - a_0) = M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}(A a - b)$ for any
        $X_0 \\in \\mathcal{S}(\\mathcal{C})$ (Lemma 1: $A a_0 = b$), without computing $a_0$."""
        return self._Wperp_from(self.A_times(a) - self.b)

    def project_D(self, u: Float[Array, "n ..."]) -> Float[Array, "n ..."]:
        """$\\Pi_{\\mathcal{D}} u = u - \\Pi_{\\mathcal{W}^\\perp} u$ (3.20)."""
        return u - self.project_Wperp(u)

    @property
    def Pi_D(self) -> Float[Array, "n n"]:
        return self.project_D(jnp.eye(self.n, dtype=self.M.dtype))

    @property
    def Pi_Wperp(self) -> Float[Array, "n n"]:
        return self.project_Wperp(jnp.eye(self.n, dtype=self.M.dtype))

    @property
    def bracket(self) -> Float[Array, "n n"]:
        """The Gram matrix $G$ of $[\\cdot,\\cdot]$ (4.1): $\\Pi_D^\\top M \\Pi_D + \\Pi_{W^\\perp}^\\top M
        \\Pi_{W^\\perp}$; $M$ itself for ideal constraints ($\\mathcal{W} = \\mathcal{D}$, Observation 8:
        $\\Pi_{W^\\perp} = I - \\Pi_D$ and $M\\Pi_D$ is symmetric, so the sum is $M\\Pi_D + M(I - \\Pi_D)$)."""
        if self.ideal:
            return self.M
        P, R = self.Pi_D, self.Pi_Wperp
        return P.T @ self.M @ P + R.T @ self.M @ R

    @property
    def D_basis(self) -> Float[Array, "n m"]:
        """An orthonormal basis of the virtual displacements $\\mathcal{D} = \\ker A$ (3.10)."""
        return null_space(self.A)

    @property
    def W_basis(self) -> Float[Array, "n m"]:
        """A basis of $\\mathcal{W}$ (the user's basis if one was given, else $\\ker C$)."""
        ws = self.system.work_space
        if ws is None:
            return self.D_basis
        return ws.basis_matrix(self.t, self.state.q, self.state.v)

    def M_orthonormalize(self, E: Float[Array, "n m"]) -> Float[Array, "n m"]:
        """Columns spanning the same subspace as the (independent) columns of `E`, $M$-orthonormal:
        $E L^{-\\top}$ with $E^\\top M E = L L^\\top$."""
        return la.solve_lower(la.cholesky(E.T @ self.M @ E), E.T).T

    def solve_with_constraints(self, R: Float[Array, "m n"], r: Float[Array, " m"]) -> Float[Array, " n"]:
        """The $a$ with $R a = r$ and $A a = b$ (Lemma 1), for rows $R$ that complete $A$ to rank $n$.

        Solved in the least-squares sense by a QR factorisation, so $R$ may contain redundant rows
        as long as the stacked system is consistent (used by Kane-type and Gibbs–Appell solvers).
        """
        Qf, Rf = la.qr(jnp.concatenate([R, self.A]))
        return la.solve_upper(Rf, Qf.T @ jnp.concatenate([r, self.b]))

    def solve_saddle(
        self, H: Float[Array, "n n"], P: Float[Array, "k n"], r: Float[Array, " n"]
    ) -> tuple[Float[Array, " n"], Float[Array, " k"]]:
        """The saddle-point (KKT) system $\\begin{pmatrix} H & -P^\\top \\\\ A & 0\\end{pmatrix}
        \\begin{pmatrix} a \\\\ \\lambda \\end{pmatrix} = \\begin{pmatrix} r \\\\ b \\end{pmatrix}$;
        returns $(a, \\lambda)$."""
        n, k = self.n, self.k
        K = jnp.block([[H, -P.T], [self.A, jnp.zeros((k, k), H.dtype)]])
        x = jnp.linalg.solve(K, jnp.concatenate([r, self.b]))
        return x[:n], x[n:]


def _patterns(jitted, owner, t, q, v, *static):
    """The structural nonzero patterns of the outputs of `jitted(owner, t, q, v, *static)` (a
    nested `jit`), read from its jaxpr; a later call with the same arguments finds that trace in
    the jit cache."""
    closed, shape = jax.make_jaxpr(
        lambda t, q, v: jitted(owner, t, q, v, *static), return_shape=True
    )(t, q, v)
    tree = jax.tree_util.tree_structure(shape)
    return jax.tree_util.tree_unflatten(tree, jaxpr_nonzero_pattern(closed))


def _traced(jitted, owner, t, q, v, *static):
    """`jitted(owner, t, q, v, *static)` and its outputs' structural nonzero patterns, from one
    trace (`_patterns`)."""
    return _patterns(jitted, owner, t, q, v, *static), jitted(owner, t, q, v, *static)


@eqx.filter_jit
def _call(fn, t, q, v):
    return fn(t, q, v)


def _coloring(pattern) -> tuple[int, np.ndarray]:
    """A greedy colouring of the columns of a boolean `pattern` such that columns of one colour
    have no nonzero row in common ([CurtisPowellReid1974]): a product with the 0/1 seed of a colour
    recovers each of its columns' nonzeros. Returns the number of colours and each column's."""
    overlap = (pattern.T.astype(np.int32) @ pattern.astype(np.int32)) > 0
    colors = np.full(pattern.shape[1], -1)
    for j in range(pattern.shape[1]):
        used = set(colors[overlap[j] & (colors >= 0)].tolist())
        colors[j] = next(c for c in range(pattern.shape[1] + 1) if c not in used)
    return int(colors.max(initial=-1)) + 1, colors


def _seeds(colors: tuple[int, ...], dtype) -> Array:
    """The 0/1 seed vectors of a colouring (each column's colour), one row per colour."""
    colors = np.asarray(colors)
    return jnp.asarray(np.arange(colors.max(initial=-1) + 1)[:, None] == colors[None, :], dtype)


@eqx.filter_jit
def _lagrangian_derivatives(system: LagrangianSystem, t, q, v, colors: tuple[int, ...]):
    """$Q$ (2.10) and $M$ times the seeds of the colouring `colors` of the columns of $M$ ($M$
    itself when every column has its own)."""
    form = system.form  # the Lagrangian's structure, chosen by its type (`_system.form_of`)
    seeds = None if colors == tuple(range(len(colors))) else _seeds(colors, v.dtype)
    return form.force(system, t, q, v), form.mass_times(system, t, q, v, seeds)


def _mass_and_force(system: LagrangianSystem, t, q, v):
    """$M = \\partial^2 L/\\partial v^2$ and $Q$ (2.10) (`_system.mass_times`,
    `_system.coordinate_force`) and the structural nonzero pattern of $M$.

    The fibre directions are the $e_j$ when tracing; if the structural pattern of $M$ lets several
    columns share a direction (a diagonal $M$: one direction, $M\\mathbf 1$), $M$ is evaluated
    from those fewer directions instead (compressed Hessian)."""
    n = q.shape[0]
    pattern = _patterns(_lagrangian_derivatives, system, t, q, v, tuple(range(n)))[1]
    n_colors, colors = _coloring(pattern)
    if n_colors == n:  # the traced call itself (found in the jit cache)
        Q, M = _lagrangian_derivatives(system, t, q, v, tuple(range(n)))
    else:
        Q, compressed = _lagrangian_derivatives(system, t, q, v, tuple(colors.tolist()))
        M = jnp.where(pattern, compressed[colors].T, 0.0)  # M_ij from the seed of j's colour
    return M, Q, pattern


@eqx.filter_jit
def _constraint_derivatives(constraint, t, q, v, colors: tuple[int, ...]):
    """$\\phi$, $b$ and the seeds of the colouring `colors` of the rows of $A$ times $A$."""
    phi, lin = jax.linearize(constraint.residual, t, q, v)
    b = -lin(jnp.ones_like(t), v, jnp.zeros_like(v))
    lin_v = lambda dv: lin(jnp.zeros_like(t), jnp.zeros_like(q), dv)
    (rows,) = jax.vmap(jax.linear_transpose(lin_v, v))(_seeds(colors, phi.dtype))
    return phi, b, rows  # rows = seedsᵀ A


def _constraint_stages(system: LagrangianSystem, t, q, v):
    """$\\phi$, $A = \\partial\\phi/\\partial v$ and
    $b = -(\\partial\\phi/\\partial q\\, v + \\partial_t\\phi)$ (Lemma 1) from one linearization of
    $\\phi$, with $A$ by reverse passes of its transpose, and the structural nonzero pattern of
    $A$. Rows of $A$ with no column in common share one reverse pass (compressed Jacobian). A
    constraint that knows them in closed form gives them itself (`closed_form`)."""
    constraint = system.constraint
    closed_form = constraint.closed_form()
    if closed_form is not None:
        (_, pattern, _), (phi, A, b) = _traced(_call, closed_form, t, q, v)
        return phi, A, b, pattern
    k = jax.eval_shape(constraint.residual, t, q, v).shape[0]
    pattern = _patterns(_constraint_derivatives, constraint, t, q, v, tuple(range(k)))[2]
    n_colors, colors = _coloring(pattern.T)
    if n_colors == k:  # the traced call itself (found in the jit cache)
        phi, b, A = _constraint_derivatives(constraint, t, q, v, tuple(range(k)))
    else:
        phi, b, compressed = _constraint_derivatives(constraint, t, q, v, tuple(colors.tolist()))
        A = jnp.where(pattern, compressed[colors], 0.0)  # A_il from the seed of row i's colour
    return phi, A, b, pattern


def assemble(system: LagrangianSystem, state: State, t: RealScalarLike = 0.0, *, checks: bool = True) -> Stages:
    """Compute the shared stages at `(t, state)`; shape errors raise before tracing.

    With `checks=True` the value conditions (regular $L$, admissibility (3.7), condition (3.19))
    are checked with `eqx.error_if`; simulations may turn them off and rely on non-finite values.

    $M$ and $Q$ come from JVPs of $\\partial L$, $\\phi$, $A$ and $b$ from one linearization of
    $\\phi$. Structure is recognized at trace time (`_sparsity`): when the pattern of $M$ or $A$
    lets columns (rows) share a derivative pass they are traced again with fewer passes, a
    diagonal $M$ is solved by division, and with sparse $A$, $C$ only the nonzero terms of
    $A M^{-1} C^\\top$ are formed. Values stay traced, so everything remains differentiable.
    """
    check_system(system)
    system.check_shapes(state, t)
    return stages_at(system, state, t, checks=checks)


def stages_at(system: LagrangianSystem, state: State, t, *, checks: bool) -> Stages:
    """`assemble` without its checks of the arguments (for callers that made them before
    tracing): the system written in the chart centred at the state's point
    (docs/lie_groups.md), then the stages there."""
    chart = system.manifold.chart(state.q)
    local = State(chart.origin, state.v)
    t = jnp.asarray(t, state.v.dtype)
    return _assemble(chart.system(system), local, chart, t, checks)


@eqx.filter_jit
def _assemble(
    system: LagrangianSystem, state: State, chart: AbstractChart, t, checks: bool
) -> Stages:
    # a nested jit: every evaluation of the stages in one program (the integrator's stages, the
    # initial step, the precondition checks of `simulate`) reuses one trace
    q, v = state.q, state.v
    # every stage in the state's dtype, whatever the dtype of the model's parameters (a float64
    # inertia or A(q) in a float32 run): what autodiff's cotangents already do
    in_dtype = lambda x: x.astype(v.dtype)
    M, Q, M_pattern = _mass_and_force(system, t, q, v)
    M, Q = in_dtype(M), in_dtype(Q)
    mass = mass_operator(M, M_pattern)
    F0 = in_dtype(system.known_work_force(t, q, v))
    if system.constraint is None:
        A = jnp.zeros((0, q.shape[0]), q.dtype)
        phi = b = jnp.zeros((0,), q.dtype)
        A_rows = C_rows = DenseRows(A)
        gram, ideal = DenseGram(), True
    else:
        phi, A, b, A_pattern = _constraint_stages(system, t, q, v)
        phi, A, b = in_dtype(phi), in_dtype(A), in_dtype(b)
        ideal = system.work_space is None
        if ideal:
            C, C_pattern = A, A_pattern
        else:
            C_pattern, C = _traced(_call, system.work_space.annihilator_matrix, t, q, v)
            C = in_dtype(C)
        A_rows, C_rows = rows_operator(A, A_pattern), columns_operator(C, C_pattern)
        gram = mass.gram(A_pattern, C_pattern)
    stages = Stages(
        system=system, state=state, chart=chart, t=t, mass=mass, Q=Q, F0=F0, phi=phi, A_rows=A_rows, b=b,
        C_rows=C_rows, gram=gram, ideal=ideal, checked=checks,
    )
    if not checks:
        return stages
    # the conditions of `assemble` in the table of `_checks`; the first that fails raises. Every
    # stage carries the check, so that it is not dead code whichever of them a solver uses.
    mass, Q, F0, A_rows, b, C_rows = checked(
        At(stages), (stages.mass, Q, F0, stages.A_rows, b, stages.C_rows)
    )
    return dataclasses.replace(stages, mass=mass, Q=Q, F0=F0, A_rows=A_rows, b=b, C_rows=C_rows)
