"""Analysis tools: consistent states from chosen entries, linearization about steady
motions, stability boundaries. Against closed forms (pendulum, rolling disk, Chaplygin sleigh),
a peer (sympy.physics.mechanics `KanesMethod.linearize`), every solver, finite differences and
theorem statements (Orlando's formula)."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from helpers import solvers as every_solver
from random_systems import random_system

import geomech as gm
import geomech.models
from geomech._stability import characteristic_coefficients, hurwitz_determinant

# -- random systems with a holonomic row, nonlinear-in-v rows and W != D ------------------------


class RandomHolonomic(eqx.Module):
    """$h(t, q) = \\sin(w\\cdot q) + \\tfrac12 q^\\top S q/n + 0.3\\,t\\,(c\\cdot q) - h_0$, zero at
    the chosen $q$ (a time-dependent holonomic constraint, so $\\phi$ contains
    $\\partial_t h$)."""

    w: jax.Array
    S: jax.Array
    c: jax.Array
    offset: jax.Array

    def raw(self, t, q):
        return jnp.sin(self.w @ q) + 0.5 * q @ self.S @ q / q.shape[0] + 0.3 * t * (self.c @ q)

    def __call__(self, t, q):
        return jnp.atleast_1d(self.raw(t, q) - self.offset)


class TimeFreeRows(eqx.Module):
    """The random nonlinear-in-v constraint $\\phi(t, q, v)$ of `random_systems`."""

    phi: eqx.Module

    def __call__(self, t, q, v):
        return self.phi(t, q, v)


class TwoRowAnnihilator(eqx.Module):
    """$C$ for $\\mathcal{W} = \\ker C$ with 3 rows: $Dh$ (so $\\mathcal{W}$ is tangent to $h = 0$)
    and the random generalized rows (3.19 holds for these seeds)."""

    h: RandomHolonomic
    C: eqx.Module

    def __call__(self, t, q, v):
        Dh = jax.jacfwd(lambda q_: self.h(t, q_))(q)
        return jnp.concatenate([Dh, self.C(t, q, v)])


def holonomic_random_system(seed, n=5, t=0.3):
    """n = 5 coordinates, m = 1 holonomic row $h(t, q)$, k = 3 (the holonomic row's
    $Dh\\,v + \\partial_t h$ and 2 random rows nonlinear in $v$), $\\mathcal{W} \\ne \\mathcal{D}$,
    time dependent."""
    base, state, t = random_system(
        seed, n=n, k=2, generalized=True, time_dependent=True, force=False, t=t
    )
    rng = np.random.default_rng(seed + 100)
    h = RandomHolonomic(
        *(jnp.asarray(rng.normal(size=s)) for s in ((n,), (n, n), (n,))), jnp.zeros(())
    )
    h = eqx.tree_at(lambda x: x.offset, h, h.raw(t, state.q))
    constraint = gm.Constraint.stack(
        [gm.HolonomicConstraint(h), gm.Constraint(TimeFreeRows(base.constraint.phi))]
    )
    ws = gm.Subspace(annihilator=TwoRowAnnihilator(h, base.work_space.annihilator))
    system = gm.LagrangianSystem(
        base.lagrangian, constraint=constraint, work_space=ws, time_dependent=True
    )
    return system, state, t


FIXED_Q, FIXED_V = (0, 1, 3, 4), (1, 2)  # free: q[2] from h; v[0], v[3], v[4] from φ
FREE_Q, FREE_V = jnp.array([2]), jnp.array([0, 3, 4])


@eqx.filter_jit
def consistent_batch(system, states, t):
    return jax.vmap(
        lambda s: gm.consistent_state(system, s, fixed_q=FIXED_Q, fixed_v=FIXED_V, t=t)
    )(states)


@pytest.mark.parametrize("seed", [0, 1])
def test_consistent_state_random_systems(seed):
    """Fixed entries kept bit for bit, the result on C (h = 0, and φ = 0 including ∂_t h and the
    rows nonlinear in v), locally unique: other starting values of the free entries give the same
    state. Batched with vmap, under jit (one compiled program for both seeds)."""
    system, state, t = holonomic_random_system(seed)
    key_q, key_v = jax.random.split(jax.random.PRNGKey(seed))
    dq = 0.02 * jax.random.normal(key_q, (4, 5)).at[0].set(0.0)  # the first start is `state` itself
    dv = 0.2 * jax.random.normal(key_v, (4, 5)).at[0].set(0.0)
    mask_q = jnp.zeros(5).at[FREE_Q].set(1.0)  # perturb only the free entries
    mask_v = jnp.zeros(5).at[FREE_V].set(1.0)
    starts = gm.State(state.q[None] + dq * mask_q[None], state.v[None] + dv * mask_v[None])
    out = consistent_batch(system, starts, t)
    for i in range(4):
        s = gm.State(out.q[i], out.v[i])
        assert jnp.all(s.q[jnp.array(FIXED_Q)] == state.q[jnp.array(FIXED_Q)])
        assert jnp.all(s.v[jnp.array(FIXED_V)] == state.v[jnp.array(FIXED_V)])
        np.testing.assert_allclose(system.position_residual(s, t), 0.0, atol=1e-12)
        np.testing.assert_allclose(system.constraint_residual(s, t), 0.0, atol=1e-11)
        np.testing.assert_allclose(s.q, out.q[0], rtol=0, atol=1e-12)
        np.testing.assert_allclose(s.v, out.v[0], rtol=0, atol=1e-11)
    assert (
        jnp.abs(out.v[0] - state.v).max() > 1e-2
    )  # the given state was off C: something was solved


def test_consistent_state_gradient_matches_finite_differences():
    """d(state)/d(fixed entries) by the implicit function theorem (forward mode) vs central
    differences; reverse mode agrees, and the starting values of the free entries have no
    influence."""
    system, state, t = holonomic_random_system(0)
    fq, fv = jnp.array(FIXED_Q), jnp.array(FIXED_V)

    def of_fixed(x):  # x = (q[fixed_q], v[fixed_v]) -> the consistent state (q, v)
        s = gm.State(state.q.at[fq].set(x[:4]), state.v.at[fv].set(x[4:]))
        out = gm.consistent_state(system, s, fixed_q=FIXED_Q, fixed_v=FIXED_V, t=t)
        y = jnp.concatenate([out.q, out.v])
        return y, y

    with_jacobian = eqx.filter_jit(jax.jacfwd(of_fixed, has_aux=True))  # one program: J and value
    x0 = jnp.concatenate([state.q[fq], state.v[fv]])
    J, y0 = with_jacobian(x0)
    eps = 1e-6
    J_fd = jnp.stack(
        [
            (with_jacobian(x0 + eps * e)[1] - with_jacobian(x0 - eps * e)[1]) / (2 * eps)
            for e in jnp.eye(6)
        ],
        1,
    )
    np.testing.assert_allclose(J, J_fd, rtol=1e-6, atol=1e-7)
    assert (
        jnp.abs(J[2]).max() > 1e-2 and jnp.abs(J[5:]).max() > 1e-2
    )  # the test has something to check
    # reverse mode: the gradient of |v|² with respect to the whole given state
    g = eqx.filter_jit(
        jax.grad(
            lambda s: jnp.sum(
                gm.consistent_state(system, s, fixed_q=FIXED_Q, fixed_v=FIXED_V, t=t).v ** 2
            )
        )
    )(state)
    assert g.q[2] == 0.0 and jnp.all(
        g.v[FREE_V] == 0.0
    )  # starting values of free entries: no influence
    expected = J[5:].T @ (2 * y0[5:])
    np.testing.assert_allclose(
        jnp.concatenate([g.q[fq], g.v[fv]]), expected, rtol=1e-10, atol=1e-12
    )


def test_linearization_matches_finite_differences_random_system():
    """A general (non-equilibrium) state of a time-dependent system with a holonomic row, rows
    nonlinear in v and W != D: A (autodiff) vs central differences of f(z) = (q̇_c, a_s), read off
    `rate` at perturbed held entries (linearize reconstructs the other entries each time)."""
    system, state, t = holonomic_random_system(1)
    c, s = (0, 1, 3), (1, 2)
    kw = dict(coordinates=c, speeds=s, fixed_q=(4,), t=t)
    lin_of = eqx.filter_jit(lambda x: gm.linearize(system, x, **kw))
    lin = lin_of(state)
    x0, eps = lin.state, 1e-6

    def rate_at(dz):
        return lin_of(
            gm.State(x0.q.at[jnp.array(c)].add(dz[:3]), x0.v.at[jnp.array(s)].add(dz[3:]))
        ).rate

    A_fd = jnp.stack(
        [(rate_at(eps * e) - rate_at(-eps * e)) / (2 * eps) for e in jnp.eye(5)], axis=1
    )
    assert lin.A.shape == (5, 5) and jnp.abs(lin.A).max() > 1.0
    np.testing.assert_allclose(lin.A, A_fd, rtol=1e-6, atol=1e-6)
    # the rate is f at the consistent state: q̇_c = v_c, and a_s from gm.acceleration
    a = gm.acceleration(system, x0, t=t)
    np.testing.assert_allclose(
        lin.rate, jnp.concatenate([x0.v[jnp.array(c)], a[jnp.array(s)]]), rtol=1e-12
    )
    assert gm.on_constraint(system, x0, t)


# -- closed forms ------------------------------------------------------------------------------


def test_pendulum_small_oscillations():
    """Cartesian pendulum ([Zanella] §1.1; x down, h = x² + y² − l²) linearized in (y, ẏ) with x, ẋ
    reconstructed from h = 0 and 2(x ẋ + y ẏ) = 0: at the bottom y'' = −(g/l) y, eigenvalues
    ±i√(g/l); at the top ±√(g/l). The given x is off C and is corrected by Newton."""
    model = gm.models.CartesianPendulum(m=1.5, l=2.0, g=9.81)
    system = model.system()
    w2 = model.g / model.l
    for x_given, sign in ((1.9, -1.0), (-1.9, 1.0)):
        lin = gm.linearize(
            system,
            gm.State(jnp.array([x_given, 0.0]), jnp.array([0.3, 0.0])),
            coordinates=(1,),
            speeds=(1,),
        )
        np.testing.assert_allclose(lin.state.q, [np.copysign(model.l, x_given), 0.0], atol=1e-14)
        np.testing.assert_allclose(lin.state.v, 0.0, atol=1e-14)
        np.testing.assert_allclose(lin.A, [[0.0, 1.0], [sign * w2, 0.0]], atol=1e-12)
        np.testing.assert_allclose(lin.rate, 0.0, atol=1e-12)
        expected = np.sqrt(w2) * (np.array([1.0, -1.0]) if sign > 0 else np.array([1j, -1j]))
        np.testing.assert_allclose(
            np.sort_complex(lin.eigenvalues), np.sort_complex(expected), atol=1e-12
        )
    # float32 as well
    lin32 = gm.linearize(
        system,
        gm.State(jnp.array([1.9, 0.0], jnp.float32), jnp.zeros(2, jnp.float32)),
        coordinates=(1,),
        speeds=(1,),
    )
    assert lin32.A.dtype == jnp.float32
    np.testing.assert_allclose(np.abs(lin32.eigenvalues.imag), np.sqrt(w2), rtol=1e-5)


def disk_minimal(model, spin, lean=0.0):
    """The upright (lean = 0) disk rolling straight along x with spin rate `spin` (ψ̇), linearized in
    (θ; φ̇, θ̇) with x, y, φ, ψ held (cyclic) and ψ̇ held (it changes only to second order)."""
    state = gm.State(jnp.array([0.0, 0.0, 0.0, lean, 0.0]), jnp.array([0.0, 0.0, 0.0, 0.0, spin]))
    return model.system(), state


DISK_SETS = dict(coordinates=(3,), speeds=(2, 3), fixed_q=(0, 1, 2, 4), fixed_v=(4,))


def disk_closed_form(model, spin):
    """Linearized upright rolling disk ([Routh1905] Art. 244;
    [NeimarkFufaev1972] ch. III), A, B the moments of
    inertia about a diameter and the axis, Ω = ψ̇:
    yaw   A φ̈ = −B Ω θ̇                          (angular momentum about the vertical),
    lean  (A + mR²) θ̈ = m g R θ + (B + mR²) Ω φ̇    (moments about the contact line),
    signs for this model's convention (θ > 0 leans toward −y, φ̇ > 0 turns toward +y).
    So λ(λ² − d), d = [m g R − (B + mR²) B Ω²/A]/(A + mR²), and the straight rolling is stable
    iff Ω² > Ω_c² = m g R A / (B (B + mR²)); uniform disk: Ω_c² = g/(3R), i.e. speed² > g R/3."""
    A, B = model.inertia()
    m, R, g = model.m, model.R, model.g
    J = A + m * R**2
    mat = jnp.array(
        [
            [0.0, 0.0, 1.0],
            [0.0, 0.0, -B * spin / A],
            [m * g * R / J, (B + m * R**2) * spin / J, 0.0],
        ]
    )
    d = (m * g * R - (B + m * R**2) * B * spin**2 / A) / J
    return mat, d, jnp.sqrt(m * g * R * A / (B * (B + m * R**2)))


def test_rolling_disk_linearization_closed_form():
    """Below and above the critical spin (batched with vmap: one compiled program)."""
    model = gm.models.RollingDisk(m=1.3, R=0.7, g=9.81, A=0.21, B=0.37)  # a non-uniform disk
    spins = jnp.array([1.0, 4.0])  # the critical spin is 2.35 here
    lin = eqx.filter_jit(jax.vmap(lambda w: gm.linearize(*disk_minimal(model, w), **DISK_SETS)))(
        spins
    )
    for i, spin in enumerate(spins):
        mat, d, crit = disk_closed_form(model, spin)
        np.testing.assert_allclose(lin.A[i], mat, atol=1e-12)
        np.testing.assert_allclose(
            lin.state.v[i], [model.R * spin, 0, 0, 0, spin], atol=1e-14
        )  # ẋ = R ψ̇
        np.testing.assert_allclose(lin.rate[i], 0.0, atol=1e-12)
        ev = np.sort_complex(np.asarray(lin.eigenvalues[i]))
        root = np.sqrt(complex(d))
        np.testing.assert_allclose(ev, np.sort_complex(np.array([0.0, root, -root])), atol=1e-10)
        assert (max(ev.real) > 1e-3) == (spin < crit)
    # uniform disk: Ω_c² = g/(3R)
    uniform = gm.models.RollingDisk(m=2.0, R=0.5, g=9.81)
    np.testing.assert_allclose(disk_closed_form(uniform, 0.0)[2] ** 2, 9.81 / (3 * 0.5), rtol=1e-14)


def disk_family(spin, model):
    return disk_minimal(model, spin)


def test_rolling_disk_critical_speed_and_its_derivative():
    """stability_boundary finds Ω_c of the closed form; dΩ_c/d(m, R, g, A, B) by implicit
    differentiation matches the closed form's derivative."""
    p0 = jnp.array([1.3, 0.7, 9.81, 0.21, 0.37])
    disk = lambda p: gm.models.RollingDisk(m=p[0], R=p[1], g=p[2], A=p[3], B=p[4])
    kw = dict(DISK_SETS, zero_eigenvalues=1, bracket=(1.0, 10.0))

    def boundary(p):
        mu = gm.stability_boundary(disk_family, 2.0, disk(p), **kw)
        return mu, mu

    with_derivative = eqx.filter_jit(jax.jacfwd(boundary, has_aux=True))  # one compiled program
    dmu, mu = with_derivative(p0)
    closed = lambda p: disk_closed_form(disk(p), 0.0)[2]
    np.testing.assert_allclose(mu, closed(p0), rtol=1e-11)
    np.testing.assert_allclose(dmu, jax.grad(closed)(p0), rtol=1e-8)
    # at the boundary the nonzero pair is a double zero: every real part vanishes
    lin = gm.linearize(*disk_minimal(disk(p0), mu), **DISK_SETS)
    np.testing.assert_allclose(jnp.abs(lin.eigenvalues), 0.0, atol=1e-5)


def test_chaplygin_sleigh_straight_line():
    """[Goicolea] Ex. 7.7 (model docstring): knife edge at A = G − (l/2) ê₁, u̇ = (l/2)ω², ω̇ = −uω/l.
    About straight motion (ω = 0, u = u₀) the turning rate obeys δω̇ = −(u₀/l) δω: moving forward
    (u₀ > 0, knife edge behind the centre of mass) is stable, backward (knife ahead) unstable,
    with rate |u₀|/l; the longitudinal speed is neutral (eigenvalue 0)."""
    model = gm.models.ChaplyginSleigh(m=1.0, l=0.8)
    for u0 in (0.6, -0.6):
        state = model.initial_state(u0=u0, omega0=0.0, theta0=0.3)
        # (ẋ, θ̇) as speeds, ẏ from the knife-edge constraint, (x, y, θ) cyclic
        lin = gm.linearize(model.system(), state, coordinates=(), speeds=(0, 2), fixed_q=(0, 1, 2))
        ev = np.sort(np.asarray(lin.eigenvalues.real))
        np.testing.assert_allclose(ev, np.sort([0.0, -u0 / model.l]), atol=1e-12)
        np.testing.assert_allclose(lin.eigenvalues.imag, 0.0, atol=1e-12)
        assert (ev.max() > 0.1) == (
            u0 < 0
        )  # unstable exactly when moving with the knife edge ahead


def damped_pendulum(mu, k):
    """The Cartesian pendulum at the bottom with a viscous force −c m v, c = μ² − k."""
    model = gm.models.CartesianPendulum(m=1.5, l=2.0, g=9.81)
    force = lambda q, v: -(mu**2 - k) * model.m * v
    system = gm.LagrangianSystem(
        model.lagrangian, force=force, constraint=gm.HolonomicConstraint(model.h)
    )
    return system, gm.State(jnp.array([2.0, 0.0]), jnp.zeros(2))


def test_hopf_boundary_of_a_damped_pendulum():
    """crossing='complex' (Newton): the damped pendulum linearizes to y'' + c y' + (g/l) y = 0,
    Hurwitz Δ₁ = c, so a complex pair crosses the imaginary axis at μ* = √k, dμ*/dk = 1/(2√k)."""

    def boundary(k):
        mu = gm.stability_boundary(
            damped_pendulum, 0.7, k, coordinates=(1,), speeds=(1,), crossing="complex"
        )
        return mu, mu

    dmu, mu = eqx.filter_jit(jax.jacfwd(boundary, has_aux=True))(jnp.array(0.64))
    np.testing.assert_allclose(mu, 0.8, rtol=1e-12)
    np.testing.assert_allclose(dmu, 1 / (2 * 0.8), rtol=1e-9)


def test_stability_boundary_value_errors():
    """A bracket without a sign change, and zero_eigenvalues larger than the structural count
    (the damped pendulum has no zero eigenvalue), are reported, not returned as results."""
    kw = dict(coordinates=(1,), speeds=(1,))
    k = jnp.array(0.64)
    with pytest.raises(Exception, match="same sign at both ends"):
        gm.stability_boundary(damped_pendulum, 0.0, k, crossing="complex", bracket=(0.9, 1.2), **kw)
    with pytest.raises(Exception, match="lowest coefficients are not zero"):
        gm.stability_boundary(damped_pendulum, 0.0, k, zero_eigenvalues=1, bracket=(0.5, 1.2), **kw)


def test_characteristic_polynomial_and_orlando_formula():
    """Faddeev–LeVerrier coefficients are those of ∏(λ − λ_i); the Hurwitz determinant Δ_{N−1}
    equals Orlando's (−1)^{N(N−1)/2} ∏_{i<j}(λ_i + λ_j) ([Gantmacher1959] vol. 2, ch. XV)."""
    rng = np.random.default_rng(0)
    both = jax.jit(
        lambda A: (
            characteristic_coefficients(A),
            hurwitz_determinant(characteristic_coefficients(A)),
        )
    )
    for N in (2, 3, 5, 6):
        A = jnp.asarray(rng.normal(size=(N, N)))
        lam = np.linalg.eigvals(np.asarray(A))
        c, delta = both(A)
        np.testing.assert_allclose(c[::-1], np.real(np.poly(lam)), rtol=1e-10, atol=1e-10)
        pairs = np.prod([lam[i] + lam[j] for i in range(N) for j in range(i + 1, N)])
        np.testing.assert_allclose(delta, (-1) ** (N * (N - 1) // 2) * pairs.real, rtol=1e-9)
        assert abs(pairs.imag) < 1e-9


# -- the same A from every solver, and from sympy.physics.mechanics -----------------------------


def test_all_solvers_give_the_same_linearization():
    """Every principle gives the same A (Chaplygin sleigh while turning, not a steady motion;
    NonholonomicMomentum with the model's SE(2) action)."""
    model = gm.models.ChaplyginSleigh(m=1.0, l=0.8)
    state = model.initial_state(u0=0.7, omega0=0.9, theta0=0.3)
    solvers = list(every_solver(action=model.action()).values())
    sets = dict(coordinates=(2,), speeds=(0, 2), fixed_q=(0, 1))  # (θ; ẋ, θ̇), ẏ from the knife edge
    As = [gm.linearize(model.system(), state, solver=solver, **sets).A for solver in solvers]
    assert jnp.abs(As[0]).max() > 0.5
    for solver, A in zip(solvers[1:], As[1:], strict=True):
        np.testing.assert_allclose(A, As[0], rtol=1e-12, atol=1e-12, err_msg=type(solver).__name__)


def sympy_disk_linearization(m, R, g, q_op, u_op):
    """The rolling disk built independently in sympy.physics.mechanics (frames Rz(φ) Rx(θ) Ry(ψ),
    the rolling constraints from the velocity of the material contact point) and linearized by
    `KanesMethod.linearize` [PetersonGedeHubbard2014] at a general state: A for the state
    (x, y, φ, θ, ψ, φ̇, θ̇, ψ̇), with (ẋ, ẏ) dependent speeds."""
    import sympy as sm
    import sympy.physics.mechanics as me
    m, R, g = sm.Float(m), sm.Float(R), sm.Float(g)
    q = me.dynamicsymbols("x y phi theta psi")
    u = me.dynamicsymbols("u1:6")
    N = me.ReferenceFrame("N")
    Y = N.orientnew("Y", "Axis", (q[2], N.z))
    L = Y.orientnew(
        "L", "Axis", (q[3], Y.x)
    )  # L.y is the disk's axis, L.z points contact -> centre
    D = L.orientnew("D", "Axis", (q[4], L.y))
    O = me.Point("O")
    O.set_vel(N, 0)
    P = O.locatenew("P", q[0] * N.x + q[1] * N.y)
    G = P.locatenew("G", R * L.z)
    kd = [qi.diff() - ui for qi, ui in zip(q, u, strict=True)]
    kd_map = {qi.diff(): ui for qi, ui in zip(q, u, strict=True)}
    D.set_ang_vel(N, D.ang_vel_in(N).subs(kd_map))
    G.set_vel(N, G.pos_from(O).dt(N).subs(kd_map))
    contact = G.vel(N) + D.ang_vel_in(N).cross(
        P.pos_from(G)
    )  # velocity of the material contact point
    vc = [contact.dot(N.x), contact.dot(N.y)]
    disk = me.RigidBody(
        "disk", G, D, m, (me.inertia(L, m * R**2 / 4, m * R**2 / 2, m * R**2 / 4), G)
    )
    km = me.KanesMethod(
        N, q_ind=q, u_ind=u[2:], u_dependent=u[:2], kd_eqs=kd, velocity_constraints=vc
    )
    km.kanes_equations([disk], [(G, -m * g * N.z)])
    op = dict(zip(q, map(sm.Float, q_op), strict=True))
    op.update(dict(zip(u[2:], map(sm.Float, u_op), strict=True)))
    op.update(sm.solve([c.subs(op) for c in vc], u[:2]))
    # the operating point's q̇ and u̇, from sympy's own equations of motion
    rhs = km.mass_matrix_full.subs(op).LUsolve(km.forcing_full.subs(op))
    op.update({qi.diff(): op[ui] for qi, ui in zip(q, u, strict=True)})
    op.update(dict(zip([ui.diff() for ui in km.u], rhs[5:], strict=True)))
    A = km.linearize(op_point=op, A_and_B=True)[0]
    return np.array(A.evalf(), dtype=float)


def test_rolling_disk_linearization_matches_sympy_kane():
    m, R, g = 1.3, 0.7, 9.81
    q_op, u_op = [0.1, -0.2, 0.4, 0.3, 0.5], [0.5, -0.2, 4.0]
    A_ref = sympy_disk_linearization(m, R, g, q_op, u_op)
    state = gm.State(jnp.array(q_op), jnp.array([0.0, 0.0, *u_op]))
    lin = gm.linearize(
        gm.models.RollingDisk(m=m, R=R, g=g).system(),
        state,
        coordinates=(0, 1, 2, 3, 4),
        speeds=(2, 3, 4),
    )
    assert np.abs(A_ref).max() > 5.0
    np.testing.assert_allclose(lin.A, A_ref, rtol=1e-10, atol=1e-10)


# -- vmap, and errors ---------------------------------------------------------------------------


def test_errors_name_the_argument(no_typecheck):  # geomech's own messages, as users see them
    system = gm.models.CartesianPendulum(l=2.0).system()
    s = gm.State(jnp.array([2.0, 0.0]), jnp.zeros(2))
    cases = [
        (dict(fixed_q=(0, 0), fixed_v=(1,)), ValueError, "fixed_q repeats"),
        (dict(fixed_q=(2,), fixed_v=(1,)), ValueError, "fixed_q index 2 is out of range"),
        (dict(fixed_q=(-1,), fixed_v=(1,)), ValueError, "out of range"),
        (dict(fixed_q=(1.0,), fixed_v=(1,)), TypeError, "fixed_q must contain integer"),
        (dict(fixed_q=1, fixed_v=(1,)), TypeError, "fixed_q must be a sequence"),
        (dict(fixed_q=(True,), fixed_v=(1,)), TypeError, "bool"),
        (dict(fixed_q=(), fixed_v=(1,)), ValueError, "under-determined"),
        (dict(fixed_q=(0, 1), fixed_v=(1,)), ValueError, "over-determined"),
        (dict(fixed_q=(1,), fixed_v=()), ValueError, "fixed_v holds 0 of the n = 2 speeds"),
    ]
    for kw, exc, match in cases:
        with pytest.raises(exc, match=match):
            gm.consistent_state(system, s, **kw)
    lin_cases = [
        (dict(coordinates=(1,), speeds=(1,), fixed_q=(1,)), "coordinates and fixed_q both contain"),
        (dict(coordinates=(), speeds=(), fixed_q=(1,), fixed_v=(1,)), "nothing to linearize"),
        (dict(coordinates=(0, 1), speeds=(1,)), "coordinates \\+ fixed_q holds 2"),
        (dict(coordinates=(1,), speeds=(0, 1)), "speeds \\+ fixed_v holds 2"),
        (dict(coordinates=(1,), speeds=(5,)), "speeds index 5 is out of range"),
    ]
    for kw, match in lin_cases:
        with pytest.raises(ValueError, match=match):
            gm.linearize(system, s, **kw)
    with pytest.raises(ValueError, match="crossing must be"):
        gm.stability_boundary(
            disk_family, 1.0, None, coordinates=(1,), speeds=(1,), crossing="hopf"
        )
    with pytest.raises(ValueError, match="zero_eigenvalues"):
        gm.stability_boundary(
            disk_family, 1.0, None, coordinates=(1,), speeds=(1,), zero_eigenvalues=-1
        )
    with pytest.raises(ValueError, match="needs at least 2"):
        gm.stability_boundary(
            disk_family, 1.0, None, coordinates=(1,), speeds=(), crossing="complex"
        )


def test_singular_choice_reports_the_rank():
    """At the bottom of the pendulum x is not a coordinate (∂h/∂y = 2y = 0): holding x leaves y
    undetermined, rank 0 < 1; also under jit. A state too far off C fails to converge, loudly."""
    system = gm.models.CartesianPendulum(l=2.0).system()
    s = gm.State(jnp.array([2.0, 0.0]), jnp.zeros(2))
    with pytest.raises(Exception, match="rank 0 < 1"):
        gm.consistent_state(system, s, fixed_q=(0,), fixed_v=(0,))
    with pytest.raises(Exception, match="rank 0 < 1"):
        jax.jit(lambda s: gm.consistent_state(system, s, fixed_q=(0,), fixed_v=(0,)).q)(s)
    with pytest.raises(Exception, match="rank 0 < 1"):
        gm.linearize(system, s, coordinates=(0,), speeds=(0,))
    with pytest.raises(Exception, match="did not converge"):  # x = 3 > l: no y solves h = 0
        gm.consistent_state(
            system, gm.State(jnp.array([3.0, 0.5]), jnp.zeros(2)), fixed_q=(0,), fixed_v=(0,)
        )
