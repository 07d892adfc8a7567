"""The fast paths of the shared stages against the plain formulas.

`assemble` traces each user function once, recognizes structure at trace time (a structurally
diagonal $M$, sparse $A$ and $C$) and then computes $M$ and $A$ from fewer derivative passes
(compressed Hessian/Jacobian) and $A M^{-1} C^\\top$ from its nonzero terms. These tests check:

- every solver gives the acceleration of the plain formulas (each stage its own textbook
  autodiff call, dense linear algebra) to 1e-12 relative, on random systems with a dense
  $q$-dependent $M$ and with a diagonal $q$-dependent $M$ and banded constraints, gyroscopic
  terms, constraints nonlinear in $v$, $W \\ne D$, time dependence and known work, on and off
  the constraint manifold;
- the structure detection is right: diagonal $M$ and sparse $A$ found when they are structural,
  never when they are not (an $M$ diagonal only at the point, through a branch on $q$, through
  a traced parameter that happens to be zero) and the nonzero patterns are sound on a catalogue
  of functions;
- gradients through `simulate` match finite differences; float32 works.
"""

import functools

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import solvers as every_solver
from random_systems import random_system

import geomech as gm
import geomech.models as gmm
from geomech._operators import (
    DenseGram,
    DenseMass,
    DenseRows,
    DiagonalMass,
    EllColumns,
    EllRows,
    SparseGram,
)
from geomech._sparsity import nonzero_pattern
from geomech._stages import _coloring, _seeds

# -- the plain formulas ---------------------------------------------------------------------------


def plain_acceleration(system, state, t):
    """$a_R = a_{\\bar U} - M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}(A a_{\\bar U} - b)$ ((3.32), (5.41))
    with every stage its own autodiff call: $M$ by `jax.hessian`, $Q$ (2.10) from the mixed Hessian
    and $\\partial_t$, $A$, $b$ (Lemma 1) by `jax.jacfwd`, dense `jnp.linalg.solve`."""
    q, v = state.q, state.v
    t = jnp.asarray(t, q.dtype)
    L, phi = system.L, system.constraint.residual
    M = jax.hessian(L, argnums=2)(t, q, v)
    Lv = jax.grad(L, argnums=2)
    Q = (
        jax.grad(L, argnums=1)(t, q, v)
        - jax.jacfwd(Lv, argnums=1)(t, q, v) @ v
        - jax.jacfwd(Lv, argnums=0)(t, q, v)
        + system.external_force(t, q, v)
    )
    A = jax.jacfwd(phi, argnums=2)(t, q, v)
    b = -(jax.jacfwd(phi, argnums=1)(t, q, v) @ v + jax.jacfwd(phi, argnums=0)(t, q, v))
    C = A if system.work_space is None else system.work_space.annihilator_matrix(t, q, v)
    a = jnp.linalg.solve(M, Q + system.known_work_force(t, q, v))
    MinvCT = jnp.linalg.solve(M, C.T)
    return a - MinvCT @ jnp.linalg.solve(A @ MinvCT, A @ a - b)


SOLVERS = every_solver()


@eqx.filter_jit
def _compare(system, state, t, solvers):
    stages = gm.assemble(system, state, t, checks=False)
    accs = {k: s.acceleration(stages) for k, s in solvers.items()}
    return (
        accs,
        plain_acceleration(system, state, t),
        isinstance(stages.mass, DiagonalMass),
        isinstance(stages.gram, SparseGram),
    )


# -- random systems with a diagonal M and banded constraints --------------------------------------


def _band(k, n, shift=0):
    """Row i of a k x n band: columns 2i, 2i+1, 2i+2 (+ shift) (a numpy constant: structure from
    the code)."""
    i, j = np.arange(k)[:, None], np.arange(n)[None, :] - shift
    return (j >= 2 * i) & (j <= 2 * i + 2)


class LinearForce(eqx.Module):
    """$F^e = F_m v - 0.1 q$ (a module, so that its array follows dtype conversions)."""

    Fm: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        return self.Fm @ v - 0.1 * q


class DiagonalLagrangian(eqx.Module):
    """$L = \\tfrac12\\sum_i m_i(q) v_i^2 + \\tanh(g\\cdot q)(h \\cdot v)(1 + 0.3\\sin t) - V(q)$:
    diagonal, $q$-dependent $M$ with a gyroscopic term (linear in $v$)."""

    m0: jax.Array
    m1: jax.Array
    g: jax.Array
    h: jax.Array
    K: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        m = self.m0 * jnp.exp(0.3 * jnp.tanh(self.m1 @ jnp.sin(q)))
        gyro = jnp.tanh(self.g @ q) * (self.h @ v) * (1.0 + 0.3 * jnp.sin(t))
        return 0.5 * jnp.sum(m * v**2) + gyro - 0.5 * q @ self.K @ q - jnp.sum(jnp.cos(q))


class BandedConstraint(eqx.Module):
    """$\\phi_i = \\sum_j B_{ij} G_{ij}(q) v_j + 0.3\\tanh(v_{2i} v_{2i+1})
    + 0.2\\sin(q_{2i} + t/2) - \\phi_{0,i}$ with the band $B$ of `_band`: nonlinear in $v$, sparse
    in $v$."""

    G0: jax.Array
    G1: jax.Array  # (n,): G depends on q through tanh(G1 · cos q)
    offset: jax.Array
    time_dependent: bool = eqx.field(static=True)

    def raw(self, t, q, v):
        k, n = self.G0.shape
        G = jnp.where(_band(k, n), self.G0 + 0.3 * jnp.tanh(self.G1 @ jnp.cos(q)), 0.0)
        even = v[0 : 2 * k : 2]
        odd = v[1 : 2 * k : 2]
        return G @ v + 0.3 * jnp.tanh(even * odd) + 0.2 * jnp.sin(q[0 : 2 * k : 2] + 0.5 * t)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        return self.raw(t, q, v) - self.offset


class BandedAnnihilator(eqx.Module):
    """Rows of $C$ on the band of `_band` shifted by `shift` columns (with a shift the patterns
    of $A$ and $C$ differ, so the nonzero terms of $A M^{-1} C^\\top$ are not symmetric)."""

    C0: jax.Array
    C1: jax.Array
    time_dependent: bool = eqx.field(static=True)
    shift: int = eqx.field(static=True, default=0)

    def __call__(self, *args):
        t, q, v = args if self.time_dependent else (0.0, *args)
        k, n = self.C0.shape
        band = _band(k, n, self.shift)
        return jnp.where(band, self.C0 + 0.2 * jnp.tanh(self.C1 @ (q + 0.1 * v)), 0.0)


def diagonal_system(seed, n=8, k=3, *, generalized, time_dependent, known_work, t=0.3, shift=0):
    """A random system with a structurally diagonal $M$ and banded $A$ (and $C$), and a state on
    $\\mathcal{C}$."""
    rng = np.random.default_rng(seed)
    r = lambda *s: jnp.asarray(rng.normal(size=s))
    lag = DiagonalLagrangian(
        jnp.asarray(rng.uniform(0.5, 2.0, n)),
        0.5 * r(n, n),
        r(n),
        r(n),
        jnp.eye(n) + 0.1 * r(n, n) @ r(n, n).T,
        time_dependent,
    )
    q, v = r(n), r(n)
    con = BandedConstraint(r(k, n) + 2.0 * _band(k, n), 0.3 * r(n), jnp.zeros(k), time_dependent)
    con = eqx.tree_at(lambda c: c.offset, con, con.raw(t if time_dependent else 0.0, q, v))
    ws = None
    if generalized:
        ws = gm.Subspace(
            annihilator=BandedAnnihilator(
                r(k, n) + 2.0 * _band(k, n, shift), 0.3 * r(n), time_dependent, shift
            )
        )
    force = LinearForce(0.3 * r(n, n), time_dependent)
    F0 = None
    if known_work:
        F0 = (
            (lambda t_, q_, v_: 0.4 * jnp.tanh(q_) + 0.2 * v_[::-1])
            if time_dependent
            else (lambda q_, v_: 0.4 * jnp.tanh(q_) + 0.2 * v_[::-1])
        )
    system = gm.LagrangianSystem(
        lag,
        force=force,
        constraint=gm.Constraint(con),
        work_space=ws,
        known_work=F0,
        time_dependent=time_dependent,
    )
    return system, gm.State(q, v), t


def _dense_with_known_work(seed, **kw):
    system, state, t = random_system(seed, **kw)
    F0 = (
        (lambda t_, q_, v_: 0.4 * jnp.tanh(q_) + 0.2 * v_[::-1])
        if system.time_dependent
        else (lambda q_, v_: 0.4 * jnp.tanh(q_) + 0.2 * v_[::-1])
    )
    system = gm.LagrangianSystem(
        system.lagrangian,
        force=system.force,
        constraint=system.constraint,
        work_space=system.work_space,
        known_work=F0,
        time_dependent=system.time_dependent,
    )
    return system, state, t


SYSTEMS = {
    # name: (builder, expect diagonal M, expect the sparse A M⁻¹ Cᵀ)
    "dense_generalized": (lambda: random_system(11, n=5, k=2), False, False),
    "dense_ideal_time": (
        lambda: random_system(12, n=5, k=2, generalized=False, time_dependent=True),
        False,
        False,
    ),
    "dense_known_work": (lambda: _dense_with_known_work(13, n=5, k=2), False, False),
    "diag_ideal": (
        lambda: diagonal_system(1, generalized=False, time_dependent=False, known_work=False),
        True,
        True,
    ),
    "diag_generalized_time": (
        lambda: diagonal_system(2, generalized=True, time_dependent=True, known_work=False),
        True,
        True,
    ),
    "diag_generalized_shifted": (  # patterns of A and C differ: the Gram terms are not symmetric
        lambda: diagonal_system(4, generalized=True, time_dependent=False, known_work=False, shift=1),
        True,
        True,
    ),
    "diag_known_work": (
        lambda: diagonal_system(3, generalized=True, time_dependent=False, known_work=True),
        True,
        True,
    ),
    "chain": (
        lambda: (gmm.PlanarChain(5).system(), gmm.PlanarChain(5).initial_state(), 0.0),
        True,
        True,
    ),
    "sleigh": (
        lambda: (gmm.ChaplyginSleigh().system(), gmm.ChaplyginSleigh().initial_state(), 0.0),
        True,
        False,
    ),
    "rolling_disk": (
        lambda: (gmm.RollingDisk().system(), gmm.RollingDisk().initial_state(), 0.0),
        False,
        False,
    ),
}


@functools.cache
def compared(name):
    build, _, _ = SYSTEMS[name]
    system, state, t = build()
    solvers = {
        k: s for k, s in SOLVERS.items() if system.known_work is None or s.supports_known_work
    }
    dv = 0.3 * jnp.cos(jnp.arange(state.v.shape[0], dtype=state.v.dtype))
    off = gm.State(state.q + 0.05, state.v + dv)  # off the constraint manifold (and off h = 0)
    return [_compare(system, s, t, solvers) for s in (state, off)]


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_fast_paths_match_plain_formulas(name):
    """Every solver, on and off C: the acceleration of the plain formulas to 1e-12 relative."""
    _, diagonal, sparse = SYSTEMS[name]
    for accs, plain, got_diagonal, got_sparse in compared(name):
        assert (got_diagonal, got_sparse) == (diagonal, sparse)
        assert jnp.all(jnp.isfinite(plain))
        for key, a in accs.items():
            err = float(jnp.linalg.norm(a - plain))
            tol = 1e-12 if key == "projection" else 1e-10  # other principles: own solves, same X_R
            assert err <= tol * float(jnp.linalg.norm(plain)), (name, key, err)


@pytest.mark.parametrize("name", ["chain", "diag_generalized_shifted"])
def test_sparse_products_match_dense(name):
    """$A u$ and $C^\\top z$ from the nonzeros of each row of $A$ and column of $C$ (`EllRows`,
    `EllColumns`: what the projection (3.20) uses) equal the dense products, for vectors and matrices
    (the projector $\\Pi_D$ applies them to the identity)."""
    system, state, t = SYSTEMS[name][0]()
    st = gm.assemble(system, state, t, checks=False)
    assert isinstance(st.A_rows, EllRows)  # the sparse path is the one tested
    # columns of C: at most 2 of k = 5 nonzero for the chain, up to 2 of k = 3 (dense enough) when shifted
    assert isinstance(st.C_rows, EllColumns if name == "chain" else DenseRows)
    keys = jax.random.split(jax.random.PRNGKey(3), 4)
    for u in (jax.random.normal(keys[0], (st.n,)), jax.random.normal(keys[1], (st.n, 3))):
        np.testing.assert_allclose(st.A_times(u), st.A @ u, rtol=1e-13, atol=1e-13)
    for z in (jax.random.normal(keys[2], (st.k,)), jax.random.normal(keys[3], (st.k, 2))):
        np.testing.assert_allclose(st.C_transpose_times(z), st.C.T @ z, rtol=1e-13, atol=1e-13)
    P = st.A @ st.Pi_Wperp  # Π_W⊥ through the sparse products: A Π_W⊥ = A (3.20)
    np.testing.assert_allclose(P, st.A, rtol=1e-11, atol=1e-11 * float(jnp.abs(st.A).max()))


# -- structure detection --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "pattern, colors",
    [
        (np.eye(6, dtype=bool), 1),  # diagonal: one pass (M·1)
        (np.eye(6, dtype=bool) | np.eye(6, k=1, dtype=bool) | np.eye(6, k=-1, dtype=bool), 3),
        (np.ones((4, 4), dtype=bool), 4),  # dense: no compression
        (np.eye(3, 5, dtype=bool), 1),  # rectangular (rows of A): disjoint columns
        (np.zeros((3, 3), dtype=bool), 1),  # structurally zero: one (empty) pass
    ],
)
def test_column_coloring_is_valid_and_as_small_as_known(pattern, colors):
    """[CurtisPowellReid1974]: columns of one colour share no nonzero row (so one product recovers all
    of them), and the greedy colouring reaches the chromatic numbers of these patterns."""
    n_colors, got = _coloring(pattern)
    assert n_colors == colors and got.shape == (pattern.shape[1],)
    assert set(got.tolist()) == set(range(n_colors))
    for c in range(n_colors):
        cols = pattern[:, got == c]
        assert np.all(cols.sum(axis=1) <= 1), (c, cols)
    seeds = np.asarray(_seeds(tuple(got.tolist()), float))  # a 0/1 row per colour
    assert seeds.shape == (n_colors, pattern.shape[1])
    np.testing.assert_array_equal(seeds.sum(axis=0), np.ones(pattern.shape[1]))  # each column once


def _detected(L, n=3, constraint=None):
    """(diagonal M, sparse A M⁻¹ Cᵀ) as `simulate` sees them: inside `jit`, with every
    array of the system traced."""
    system = gm.LagrangianSystem(
        L, constraint=constraint or gm.LinearConstraint(lambda q: jnp.ones((1, q.shape[0])))
    )
    state = gm.State(jnp.zeros(n), jnp.zeros(n).at[0].set(1.0).at[1].set(-1.0))

    @eqx.filter_jit
    def go(system, state):
        st = gm.assemble(system, state, 0.0, checks=False)
        diagonal, sparse = isinstance(st.mass, DiagonalMass), isinstance(st.gram, SparseGram)
        return diagonal, sparse, gm.Projection().acceleration(st)

    return go(system, state)


@pytest.mark.parametrize(
    "L, rows, mass, A_type, C_type, gram",
    [
        # diagonal M, A with one nonzero in each row and column: every sparse path
        (lambda q, v: 0.5 * jnp.sum((1.0 + q**2) * v**2), np.eye(2, 4), DiagonalMass, EllRows, EllColumns, SparseGram),
        # a coupled (dense) M: a Cholesky solve and the dense Gram product
        (lambda q, v: 0.5 * v @ v + 0.3 * v[0] * v[1], np.eye(2, 4), DenseMass, EllRows, EllColumns, DenseGram),
        # sparse rows, full columns: Cᵀ z by a dense product, too many Gram terms for the sparse sum
        (lambda q, v: 0.5 * v @ v, np.array([[1, 1, 0, 0], [1, 1, 0, 0]]), DiagonalMass, EllRows, DenseRows, DenseGram),
        # a full row of A: dense products (a diagonal M is still solved by division)
        (lambda q, v: 0.5 * v @ v, np.ones((1, 4)), DiagonalMass, DenseRows, DenseRows, DenseGram),
    ],
)
def test_operator_types_chosen_by_structure(L, rows, mass, A_type, C_type, gram):
    """`assemble` picks the operator of $M$, of the rows of $A$, of the columns of $C = A$ and of
    $A M^{-1} C^\\top$ from the structure (the type decides the algorithm), and the stages give
    the dense formulas' values."""
    R = jnp.asarray(rows * (1.0 + np.arange(rows.size).reshape(rows.shape)))
    system = gm.LagrangianSystem(L, constraint=gm.LinearConstraint(lambda q: R))
    q = jnp.array([0.1, -0.2, 0.3, 0.4])
    v = jnp.array([1.0, 0.5, -0.5, 0.2])
    v = v - R.T @ jnp.linalg.solve(R @ R.T, R @ v)  # on the constraint
    st = gm.assemble(system, gm.State(q, v))
    assert (type(st.mass), type(st.A_rows), type(st.C_rows), type(st.gram)) == (mass, A_type, C_type, gram)
    M = jax.hessian(L, argnums=1)(q, v)
    np.testing.assert_allclose(st.M, M, rtol=1e-14)
    np.testing.assert_allclose(st.solve_M(R.T), jnp.linalg.solve(M, R.T), rtol=1e-13)
    np.testing.assert_allclose(st.schur(), R @ jnp.linalg.solve(M, R.T), rtol=1e-13)
    u, z = jnp.arange(4.0) - 1.5, jnp.arange(R.shape[0]) + 1.0
    np.testing.assert_allclose(st.A_times(u), R @ u, rtol=1e-14)
    np.testing.assert_allclose(st.C_transpose_times(z), R.T @ z, rtol=1e-14)


class Coupled(eqx.Module):
    c: jax.Array

    def __call__(self, q, v):
        return 0.5 * v @ v + self.c * v[0] * v[1] + jnp.cos(q[0])


def test_diagonal_mass_detected_only_when_structural():
    assert _detected(lambda q, v: 0.5 * jnp.sum((1.0 + q**2) * v**2))[0]  # q-dependent diagonal M
    # diagonal at q = 0 only: sin(q0) v0 v1 is an off-diagonal entry that vanishes at this state
    assert not _detected(lambda q, v: 0.5 * v @ v + jnp.sin(q[0]) * v[0] * v[1])[0]
    # a parameter-free branch on q choosing between a diagonal and a full M
    K = jnp.array([[2.0, 0.5, 0.0], [0.5, 2.0, 0.0], [0.0, 0.0, 1.0]])
    assert not _detected(lambda q, v: jnp.where(q[0] > 0, 0.5 * v @ v, 0.5 * v @ K @ v))[0]
    assert not _detected(
        lambda q, v: jax.lax.cond(q[0] > 0, lambda: 0.5 * v @ v, lambda: 0.5 * v @ K @ v)
    )[0]
    # a traced coupling that is zero at this value is not structure
    assert not _detected(Coupled(jnp.asarray(0.0)))[0]


def test_coupling_parameter_gradient_at_zero():
    """d a_R / d c at c = 0 (where M happens to be diagonal): against central differences."""
    state = gm.State(jnp.array([0.3, -0.2, 0.1]), jnp.array([0.4, 0.7, -0.5]))
    con = gm.LinearConstraint(lambda q: jnp.array([[1.0, 2.0, 0.0]]) + 0.1 * q[None, :])
    state = gm.State(
        state.q,
        state.v - (con.residual(0.0, state.q, state.v)[0] / 5.0) * jnp.array([1.0, 2.0, 0.0]),
    )

    def acc(c):
        return gm.acceleration(gm.LagrangianSystem(Coupled(c), constraint=con), state)

    g = jax.jacfwd(acc)(jnp.asarray(0.0))
    h = 1e-6
    fd = (acc(jnp.asarray(h)) - acc(jnp.asarray(-h))) / (2 * h)
    assert float(jnp.linalg.norm(g)) > 1e-3
    np.testing.assert_allclose(g, fd, rtol=1e-6, atol=1e-8)


PATTERN_CASES = {
    # name: (function of x (shape (4,)), expected pattern or None to check soundness only)
    "diag_hessian": (
        lambda x: jax.hessian(lambda y: jnp.sum(jnp.sin(y) * y))(x),
        np.eye(4, dtype=bool),
    ),
    "tridiagonal": (
        lambda x: jax.jacfwd(lambda y: jnp.diff(y**2, prepend=0.0, append=0.0))(x),
        None,
    ),
    "cumsum": (lambda x: jax.jacfwd(jnp.cumsum)(x), np.tril(np.ones((4, 4), bool))),
    "outer": (lambda x: jnp.outer(x[:2], x[2:]), np.ones((2, 2), bool)),
    "where": (
        lambda x: jnp.where(x > 0, jnp.zeros(4), jnp.diag(x)[0]),
        np.array([True, False, False, False]),
    ),
    "gather_const": (
        lambda x: x[jnp.array([3, 0])] * jnp.array([0.0, 1.0]),
        np.array([False, True]),
    ),
    "dynamic_index": (lambda x: jnp.zeros(4).at[jnp.argmax(x)].set(1.0), np.ones(4, bool)),
    "pad_slice_concat": (
        lambda x: jnp.concatenate([jnp.pad(x[1:3], (1, 1)), jnp.zeros(2)]),
        np.array([0, 1, 1, 0, 0, 0], bool),
    ),
    "cos_of_zero": (lambda x: jnp.cos(0.0 * x), np.ones(4, bool)),
    "divide": (lambda x: jnp.zeros(4).at[1].set(1.0) / (1.0 + x**2), np.array([0, 1, 0, 0], bool)),
    "einsum_block": (
        lambda x: jnp.kron(jnp.eye(2), jnp.outer(x[:2], x[:2])),
        np.kron(np.eye(2), np.ones((2, 2))).astype(bool),
    ),
    "scan": (
        lambda x: (
            jax.lax.scan(lambda c, y: (c * y, c), 1.0, x)[1] * jnp.array([1.0, 0.0, 1.0, 0.0])
        ),
        None,
    ),
    "while": (
        lambda x: jax.lax.fori_loop(0, 3, lambda i, y: y * x, jnp.zeros(4).at[0].set(1.0)),
        None,
    ),
    "sort": (lambda x: jnp.sort(x) * jnp.array([0.0, 1.0, 1.0, 1.0]), np.array([0, 1, 1, 1], bool)),
    "pow_zero": (lambda x: (0.0 * x) ** 0.0, np.ones(4, bool)),
}


@pytest.mark.parametrize("name", list(PATTERN_CASES))
def test_nonzero_pattern_sound(name):
    """Wherever the function is nonzero at random inputs the pattern says "maybe nonzero"; where an
    exact pattern is known, it is found."""
    fn, expected = PATTERN_CASES[name]
    pattern = nonzero_pattern(fn, jax.ShapeDtypeStruct((4,), jnp.float64))
    rng = np.random.default_rng(0)
    for _ in range(5):
        value = np.asarray(fn(jnp.asarray(rng.normal(size=4))))
        assert not np.any((value != 0) & ~pattern), (name, value, pattern)
    if expected is not None:
        np.testing.assert_array_equal(pattern, expected)


# -- gradients through simulate, float32 -------------------------------------------------------


def _final_loss(system, state, t1):
    sol = gm.simulate(system, state, 0.0, t1, rtol=1e-10, atol=1e-10)
    return jnp.sum(sol.states.q[-1] ** 2) + jnp.sum(sol.states.v[-1] ** 2)


@pytest.mark.parametrize("name", ["chain", "diag_ideal", "dense_generalized"])
def test_gradient_through_simulate_matches_finite_differences(name):
    """d(loss of the final state)/d(scale of the Lagrangian's parameters) through `simulate`, by
    reverse mode, against central differences (states stay on C: the scaling keeps φ)."""
    build, _, _ = SYSTEMS[name]
    system, state, t = build()
    if name == "chain":
        model = gmm.PlanarChain(3)
        system, state = model.system(), model.initial_state()

        def loss(s):
            return _final_loss(eqx.tree_at(lambda m: m.g, model, model.g * s).system(), state, 0.5)
    else:

        def loss(s):
            L = eqx.tree_at(lambda L_: L_.K, system.lagrangian, system.lagrangian.K * s)
            sys_ = gm.LagrangianSystem(
                L,
                force=system.force,
                constraint=system.constraint,
                work_space=system.work_space,
                time_dependent=system.time_dependent,
            )
            return _final_loss(sys_, state, 0.1)

    g = jax.grad(loss)(jnp.asarray(1.0))
    h = 1e-5
    fd = (loss(jnp.asarray(1.0 + h)) - loss(jnp.asarray(1.0 - h))) / (2 * h)
    np.testing.assert_allclose(g, fd, rtol=1e-5)


@pytest.mark.parametrize("name", ["chain", "diag_generalized_time"])
def test_float32(name):
    """The fast paths in float32: same structure, accelerations within float32 accuracy."""
    build, diagonal, sparse = SYSTEMS[name]
    system, state, t = build()
    accs64 = compared(name)[0][0]
    to32 = lambda x: x.astype(jnp.float32) if eqx.is_inexact_array(x) else x
    system32, state32 = jax.tree_util.tree_map(to32, (system, state))
    accs, _, got_diagonal, got_sparse = _compare(
        system32, state32, jnp.float32(t), {"projection": gm.Projection()}
    )
    assert (got_diagonal, got_sparse) == (diagonal, sparse)
    assert accs["projection"].dtype == jnp.float32
    np.testing.assert_allclose(
        accs["projection"],
        accs64["projection"],
        rtol=2e-4,
        atol=2e-4 * float(jnp.max(jnp.abs(accs64["projection"]))),
    )


def test_sparsity_rules_name_primitives_of_this_jax():
    """Every primitive name the structure rules rely on is a primitive of the installed JAX (a
    rename in JAX would otherwise silently turn a rule into "maybe nonzero everywhere")."""
    import gc

    import jax._src.lax.control_flow  # noqa: F401 (registers the primitives below)
    import jax._src.lax.special  # noqa: F401
    import jax._src.lax.windowed_reductions  # noqa: F401
    from jax.extend import core as jex

    from geomech import _sparsity

    primitives = {o.name for o in gc.get_objects() if isinstance(o, jex.Primitive)}
    named = set(_sparsity._RULES) | set(_sparsity._VALUES) | set(_sparsity._MOVES)
    assert named - primitives == set()
