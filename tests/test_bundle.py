import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm


def test_state_converts_and_vmaps():
    s = gm.State([1, 2], [3, 4])
    assert s.q.dtype == jnp.float64 and s.v.shape == (2,)
    batch = gm.State(jnp.ones((5, 3)), jnp.zeros((5, 3)))
    norms = jax.vmap(lambda st: st.q @ st.q + st.v @ st.v)(batch)
    np.testing.assert_allclose(norms, 3.0)


def test_state_shape_mismatch():
    with pytest.raises(ValueError, match="same shape"):
        gm.State(jnp.ones(3), jnp.ones(2))


def test_manifolds():
    assert gm.Euclidean(3).dim == 3
    c = gm.Circle()
    np.testing.assert_allclose(c.wrap(jnp.array([3 * jnp.pi / 2])), [-jnp.pi / 2])
    p = gm.Product(gm.Euclidean(2), gm.Circle())
    assert p.dim == 3
    np.testing.assert_allclose(p.wrap(jnp.array([5.0, -7.0, 2 * jnp.pi + 0.5])), [5.0, -7.0, 0.5])
    with pytest.raises(ValueError, match="positive integer"):
        gm.Euclidean(0)
    with pytest.raises(TypeError):
        gm.Product(3)
    with pytest.raises(ValueError, match="dimension 3"):
        p.check(jnp.ones(2))


def test_vertical_lift_roundtrip():
    u = jnp.array([1.0, -2.0, 0.5])
    X = gm.vertical_lift(u)
    np.testing.assert_array_equal(X.dq, 0.0)
    np.testing.assert_array_equal(gm.vertical_lift_inverse(X), u)


def test_two_form_flat_sharp_inverse():
    rng = np.random.default_rng(0)
    n = 3
    S = rng.normal(size=(n, n))
    M = rng.normal(size=(n, n))
    M = M @ M.T + n * np.eye(n)
    omega = gm.TwoForm(jnp.asarray(np.block([[S - S.T, -M], [M, np.zeros((n, n))]])))
    X = gm.TangentVector(jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=n)))
    Y = gm.TangentVector(jnp.asarray(rng.normal(size=n)), jnp.asarray(rng.normal(size=n)))
    np.testing.assert_allclose(omega(X, Y), -omega(Y, X), rtol=1e-12)
    np.testing.assert_allclose(omega.flat(X) @ Y.flat(), omega(X, Y), rtol=1e-12)
    Z = omega.sharp(omega.flat(X))
    np.testing.assert_allclose(Z.flat(), X.flat(), rtol=1e-12)


def test_special_field_and_horizontal_form():
    X = gm.SpecialVectorField(lambda s: -s.q)
    s = gm.State(jnp.array([1.0, 2.0]), jnp.array([0.5, 0.0]))
    Xs = X(s)
    assert Xs.is_special_at(s)
    F = gm.HorizontalForm(lambda q, v: jnp.array([1.0, -1.0]) * q)
    np.testing.assert_allclose(F(s, Xs), 0.5)  # F(X) = F(π_* X) = F(v)
    np.testing.assert_allclose(F.on_tq(s), [1.0, -2.0, 0.0, 0.0])


def test_state_is_pytree_for_filter_jit():
    f = eqx.filter_jit(lambda s: s.q * 2)
    np.testing.assert_allclose(f(gm.State(jnp.ones(2), jnp.ones(2))), 2.0)
