"""The bicycle-sized benchmark system (benchmarks/bicycle.py) builds and is a well-posed constrained
system: n = 8 coordinates, one holonomic and four rolling constraints of full rank, a state on the
constraint manifold, and a finite `gm.acceleration` with A a = b, where A = ∂φ/∂v and
b = −(∂φ/∂q) v are computed here independently of the library's stages.

Compiling this Lagrangian (~9000 operations) is the slow part, so the test compiles one function;
energy conservation over a simulation is reported by `benchmarks/compile_time.py`."""

import importlib.util
from pathlib import Path

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import sympy  # noqa: F401  (the bicycle is derived with SymPy: a missing dependency fails, not skips)

import geomech as gm

ROOT = Path(__file__).resolve().parents[1]


def _load_bicycle():
    spec = importlib.util.spec_from_file_location("bicycle", ROOT / "benchmarks" / "bicycle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@eqx.filter_jit
def _check(bicycle, system):
    """Everything in one compiled call (compilation dominates for this Lagrangian)."""
    s = bicycle.upright_state(system, 5.0, 0.05, 0.1, 0.2, -0.3)
    a = gm.acceleration(system, s)
    phi = lambda q, v: system.constraint_residual(gm.State(q, v))
    A = jax.jacfwd(phi, argnums=1)(s.q, s.v)  # (3.6): d/dt φ = (∂φ/∂q) v + A a = 0
    b = -jax.jvp(lambda q: phi(q, s.v), (s.q,), (s.v,))[1]
    return s, {"a": a, "A": A, "Aa_minus_b": A @ a - b, "phi": phi(s.q, s.v)}


def test_bicycle_is_a_consistent_constrained_system():
    bicycle = _load_bicycle()
    size = bicycle.lagrangian_size()
    assert size["ops"] >= 2000, size  # "a Lagrangian of several thousand operations"
    system = bicycle.bicycle()
    s, out = _check(bicycle, system)
    assert s.q.shape == (8,) and out["A"].shape == (5, 8)
    assert np.linalg.matrix_rank(np.asarray(out["A"])) == 5  # admissible (3.7): 3 DOF left
    np.testing.assert_allclose(system.position_residual(s), 0.0, atol=1e-12)  # front wheel down
    np.testing.assert_allclose(out["phi"], 0.0, atol=1e-12)  # rolling, on C
    assert jnp.all(jnp.isfinite(out["a"]))
    scale = float(jnp.max(jnp.abs(out["A"]))) * float(jnp.max(jnp.abs(out["a"])))
    np.testing.assert_allclose(out["Aa_minus_b"], 0.0, atol=1e-12 * scale)
    assert abs(float(s.v[5]) * bicycle.BENCHMARK_PARAMETERS["rR"] - 5.0) < 1e-12
