"""The benchmark script: its hand-written baselines compute the same accelerations as the library,
and `--quick` runs end to end and prints the documented JSON."""

import importlib.util
import json
import pathlib
import subprocess
import sys

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "run.py"


def _load():
    spec = importlib.util.spec_from_file_location("geomech_benchmarks", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_hand_written_baselines_match_generic():
    """The comparison is fair only if both right-hand sides compute the same X_R (also off C)."""
    bench = _load()
    key = jax.random.PRNGKey(3)
    for make, hand in (
        (bench.sleigh_states, bench.sleigh_hand),
        (bench.chain_states(4), bench.chain_hand),
    ):
        model, s = make(key, 3)
        dv = 0.1 * jax.random.normal(key, s.v.shape)  # off the constraint manifold too
        both = eqx.filter_jit(
            jax.vmap(
                lambda m, h, q_, v_: (bench.generic(m, 0.0, q_, v_), h(m, 0.0, q_, v_)),
                in_axes=(None, None, 0, 0),
            )
        )
        for v in (s.v, s.v + dv):
            a_gen, a_hand = both(model, hand, s.q, v)
            np.testing.assert_allclose(a_hand, a_gen, rtol=1e-10, atol=1e-10)
            assert jnp.all(jnp.isfinite(a_gen))


def test_quick_run_prints_json():
    out = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--cases", "sleigh"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    data = json.loads(out.stdout)
    assert data["machine"]["cpu_count"] >= 1 and data["settings"]["quick"]
    entry = data["cases"]["sleigh"]
    for impl in ("generic", "hand"):
        r = entry[impl]
        for k in ("acc_per_s_single", "acc_per_s_vmapped", "compile_s", "grad_over_forward"):
            assert np.isfinite(r[k]), (impl, k, r[k])  # measured, not NaN (no speed assertions)
        assert r["traj_per_s"] and all(np.isfinite(v) for v in r["traj_per_s"].values())
    # same trajectories, same work: equal step counts for the two right-hand sides
    assert entry["generic"]["steps_mean"] == entry["hand"]["steps_mean"]
    assert set(entry["ratio_generic_over_hand"]) >= {
        "acc_per_s_vmapped",
        "traj_per_s",
        "grad_over_forward",
    }
