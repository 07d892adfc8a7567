"""The benchmark scripts: the hand-written baselines compute the same accelerations as the library,
and the `--quick` versions of run.py, gradients.py and compile_time.py run end to end and print the
documented JSON (peer.py: tests/test_peer.py; the bicycle: tests/test_bicycle.py)."""

import importlib.util
import json
import pathlib
import re
import subprocess
import sys

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "run.py"


def _load(name="run"):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    path = ROOT / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"geomech_benchmarks_{name}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(name, *args):
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *args],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert "[bench] device: cpu" in out.stderr  # the device is printed
    return json.loads(out.stdout)


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
    data = _run("run", "--quick", "--cases", "sleigh", "--scaling-links", "2", "4")
    assert data["machine"]["cpu_count"] >= 1 and data["settings"]["quick"]
    assert (
        data["machine"]["backend"] == "cpu" and "load average" in data["machine"]["uptime_at_start"]
    )
    entry = data["cases"]["sleigh"]
    for impl in ("generic", "hand"):
        r = entry[impl]
        for k in ("acc_per_s_single", "acc_per_s_vmapped", "compile_s"):
            assert np.isfinite(r[k]) and r[k] > 0, (impl, k, r[k])
        assert all(v > 0 for v in r["traj_per_s"].values())
    # same trajectories, same work: equal step counts for the two right-hand sides
    assert entry["generic"]["steps_mean"] == entry["hand"]["steps_mean"]
    assert set(entry["ratio_generic_over_hand"]) >= {"acc_per_s_vmapped", "traj_per_s"}
    assert "| sleigh | 8 |" in "\n".join(_load("report").run_tables(data))
    scale = data["scaling"]
    assert scale["n"] == [4, 8]
    for impl in ("generic", "hand"):
        assert np.isfinite(scale[impl]["exponent"])
        assert all(t > 0 for t in scale[impl]["s_per_step"])


def test_gradients_quick_checks_against_finite_differences():
    grads = _load("gradients")
    out = grads.main(["--quick", "--chains", "--repeat", "1"])
    case = out["cases"]["sleigh"]
    assert case["gradients_ok"], case
    for impl in ("generic", "hand"):
        r = case[impl]
        assert r["fd_check"]["max_rel_err"] <= 1e-4
        # the check is not vacuous: the directional derivatives are O(1)
        assert max(abs(x) for x in r["fd_check"]["directional_ad"]) > 1e-3
    assert case["grad_rel_diff_generic_hand"] <= 1e-6
    assert "| sleigh (n=3) |" in "\n".join(_load("report").gradient_tables(out))


def test_compile_time_quick():
    data = _run("compile_time", "--quick")
    disk = data["models"]["rolling_disk"]
    assert "error" not in disk, disk.get("error")
    assert disk["simulate_successful"]
    assert disk["relative_energy_drift"] < 1e-6
    assert "| rolling_disk | 5 |" in "\n".join(_load("report").compile_tables(data))


def test_adjoints_quick():
    """The adjoint study: storing every step changes nothing but the cost (the same discrete
    gradient to round-off); the continuous adjoint agrees to its tolerance."""
    out = _load("adjoints").main(["--chains", "2", "--batch", "2", "--t1", "0.5", "--repeat", "1"])
    (chain,) = out["chains"]
    assert chain["N"] == 2 and chain["steps"] > 1
    assert chain["all_steps_grad_rel_diff"] <= 1e-10
    assert chain["backsolve_grad_rel_diff"] <= 1e-4


def test_compile_floor_integrates_the_unconstrained_dynamics():
    """The compile-time floor of `compile_time.py` is plain JAX's Euler–Lagrange acceleration
    (2.10) of the same Lagrangian: it agrees with `gm.unconstrained_acceleration` (so the floor
    times a program that computes what geomech computes, less the constraints), and it runs."""
    import geomech as gm

    ct = _load("compile_time")
    disk = gm.models.RollingDisk()
    system, s = disk.system(), disk.initial_state()
    np.testing.assert_allclose(
        ct.floor_acceleration(system, s.q, s.v),
        gm.unconstrained_acceleration(system, s),
        rtol=1e-12,
        atol=1e-12,
    )
    res = ct.floor(system, s, 0.1, jacfwd=False)
    assert set(res) == {
        "floor_first_acceleration_s", "floor_simulate_trace_s", "floor_simulate_compile_s"
    }


def test_gradient_floor_quick():
    """The adjoint-cost floor (plain diffrax, linear oscillators): its gradient is the gradient
    (central differences), and the script prints the documented JSON."""
    mod = _load("gradient_floor")
    forward, gradient, v0, _ = mod.problem(4, 2, 1.0)
    g = gradient(v0)
    d = jnp.zeros_like(v0).at[1, 2].set(1.0)
    h = 1e-6
    fd = (forward(v0 + h * d) - forward(v0 - h * d)) / (2 * h)
    np.testing.assert_allclose(jnp.sum(g * d), fd, rtol=1e-6)
    assert abs(fd) > 1e-3  # not vacuous
    out = mod.main(["--quick"])
    (row,) = out["sizes"]
    assert row["n"] == 4 and row["steps_mean"] > 1
    assert set(row) == {"n", "steps_mean", "forward_s", "gradient_s", "gradient_over_forward"}
    # the forward-mode floor: its Jacobian is the central difference of its loss
    theta, e = jnp.array([0.02, 0.01]), jnp.array([0.0, 1.0])
    jac = jax.jacfwd(mod.damped(2, diffrax.ForwardMode()))(theta)
    loss = mod.damped(2, diffrax.RecursiveCheckpointAdjoint())
    np.testing.assert_allclose(jac @ e, (loss(theta + h * e) - loss(theta - h * e)) / (2 * h), rtol=1e-6)
    (row,) = mod.main(["--quick", "--forward-mode"])["forward_mode"]
    assert row["p"] == 1 and row["forward_mode_over_forward"] > 0


def test_forward_reverse_quick():
    """Forward against reverse mode (benchmarks/forward_reverse.py): both give the gradient, and
    the script prints the documented JSON with the load average."""
    mod = _load("forward_reverse")
    out = mod.main(["--quick", "--repeat", "1"])
    assert len(out["machine"]["loadavg_at_start"]) == 3 and "loadavg_at_end" in out["machine"]
    rows = out["cases"]["sleigh"]
    assert [r["p"] for r in rows] == [1, 2]
    for r in rows:
        assert r["grad_rel_diff"] < 1e-8
        assert r["forward_mode_s"] > 0 and r["reverse_mode_s"] > 0
        assert r["forward_mode_over_forward"] == r["forward_mode_s"] / r["forward_s"]


def test_lie_heavy_top_quick():
    """The SO(3) heavy-top ensemble against the same top in ZXZ angles: the two final rotations
    agree to the tolerance (the comparison times the same motion), the figures are printed."""
    out = _load("lie_heavy_top").main(["--batch", "2", "--t1", "0.3", "--repeat", "1"])
    assert out["max_rotation_difference"] < 1e-6
    assert out["min_sin_theta"] > 0.5
    for side in ("so3", "zxz_angles"):
        assert out[side]["steps_max"] > 1 and out[side]["best_run_s"] > 0
    assert set(out["ratio_so3_over_angles"]) == {"first_call_s", "best_run_s", "steps_mean", "us_per_trajectory_step"}


def test_rigid_hand_matches_geomech():
    """The hand-written Newton–Euler right-hand sides of benchmarks/rigid_bodies.py
    (`_rigid_hand.py`, quaternions, the contact force eliminated in closed form) are a fair
    reference: at random states on the constraint manifold their ω̇ equals `gm.acceleration`'s, and
    for the rolling bodies their ẋ equals the state's and the derivative of ẋ along the hand
    flow (a jvp) equals geomech's ẍ; Cramer's rule and `jnp.linalg.solve` agree; the states map
    back; γ = Rᵀe₃ and R(q) agree with jaxlie's."""
    import jaxlie

    import geomech as gm

    H = _load("_rigid_hand")

    @jax.jit
    def hand_side(hand, states):
        y = jax.vmap(hand.to_hand)(states)
        out = {"omega_dot": jax.vmap(hand.acceleration)(y), "v": jax.vmap(hand.from_hand)(y).v}
        if isinstance(hand, H.HandRolling):
            out["xdot"] = jax.vmap(hand.xdot)(y)
            along = lambda y_: jax.jvp(hand.xdot, (y_,), (hand.rhs(0.0, y_, None),))[1]
            out["xddot"] = jax.vmap(along)(y)
        return out

    key = jax.random.PRNGKey(7)
    for name in H.CASES:
        model, hands = H.case(name)
        system = model.system()
        k1, k2, key = jax.random.split(key, 3)
        omega = 3.0 * jax.random.normal(k1, (3, 2 if name == "suslov" else 3))
        attitude = 0.5 * jax.random.normal(k2, (3, 3))
        states = jax.vmap(lambda w, a, m=model, n=name: H.state(n, m, w, a))(omega, attitude)
        a_gm = jax.vmap(lambda s, sy=system: gm.acceleration(sy, s))(states)
        assert jnp.all(jnp.isfinite(a_gm)) and jnp.max(jnp.abs(a_gm[:, :3])) > 1e-2, name
        for variant, hand in hands.items():
            out = hand_side(hand, states)
            msg = f"{name} ({variant})"
            tol = 1e-10 * jnp.max(jnp.abs(a_gm[:, :3]))
            np.testing.assert_allclose(out["omega_dot"], a_gm[:, :3], rtol=0, atol=tol, err_msg=msg)
            np.testing.assert_allclose(out["v"], states.v, rtol=0, atol=1e-12, err_msg=msg)
            if "xdot" in out:
                np.testing.assert_allclose(out["xdot"], states.v[:, 3:], atol=1e-12, err_msg=msg)
                tol = 1e-10 * jnp.max(jnp.abs(a_gm[:, 3:]))
                np.testing.assert_allclose(out["xddot"], a_gm[:, 3:], rtol=0, atol=tol, err_msg=msg)
        R = jax.vmap(jaxlie.SO3.exp)(attitude)
        np.testing.assert_allclose(jax.vmap(H.rotation_matrix)(R.wxyz), R.as_matrix(), atol=1e-14)
        gamma = jax.vmap(lambda r: r.inverse().apply(jnp.array([0.0, 0.0, 1.0])))(R)
        np.testing.assert_allclose(jax.vmap(H.vertical)(R.wxyz), gamma, atol=1e-14)


def test_rigid_bodies_quick():
    """benchmarks/rigid_bodies.py --quick: geomech's `simulate` and the hand-written right-hand
    side, integrated side by side from the same nearby initial states, end in the same states
    (quaternion sign-aligned) and take about the same steps; the documented JSON is printed."""
    out = _load("rigid_bodies").main(["--quick"])
    assert len(out["machine"]["loadavg_at_start"]) == 3 and "loadavg_at_end" in out["machine"]
    for name in ("rattleback",):
        (row,) = out["models"][name]
        assert row["B"] == 2
        hand = row["hand"][row["hand_best"]]
        assert hand["successful"] == 2 and hand["steps_mean"] > 1
        g = row["geomech"]["projection"]
        assert g["successful"] == 2
        assert g["difference_from_hand_t1"]["all"] < 1e-7, (name, g)
        assert set(g["difference_from_hand_t1"]) == {"q", "x", "omega", "all"}
        assert 0.5 < g["steps_ratio_geomech_over_hand"] < 2.0, (name, g)
        assert g["ratio_per_step"] == g["us_per_trajectory_step"] / hand["us_per_trajectory_step"]
    assert "| rattleback | 2 | projection |" in "\n".join(out["table"])


def test_call_overhead_quick():
    """benchmarks/call_overhead.py on Suslov's problem: the call with the shape checks kept and
    the one with them traced again run the same program (the same steps), near the hand-written
    one's steps; the patched check is restored; the documented fields are printed."""
    from geomech import _system

    keep = _system._shapes_key
    out = _load("call_overhead").main(["--models", "suslov", "--t1", "0.5", "--repeat", "2"])
    assert _system._shapes_key is keep
    res = out["models"]["suslov"]
    kept, traced, hand = res["checks kept"], res["checks traced"], res["hand"]
    assert kept["steps"] == traced["steps"] > kept["short_steps"] >= 1
    assert 0.5 < kept["steps"] / hand["steps"] < 2.0
    for r in (kept, traced, hand):
        assert r["call_ms"] > 0 and r["us_per_step"] == pytest.approx(
            1e3 * (r["call_ms"] - r["short_call_ms"]) / (r["steps"] - r["short_steps"])
        )
    assert set(res["call_ratio_to_hand"]) == {"checks kept", "checks traced"}


def test_walk_of_one_simulate_on_so3(capsys):
    """benchmarks/walk.py (docs/architecture.md): the path from `simulate` to the solver on SO(3)
    is the documented one — the engine's guarded step, the constrained field, `Projection`."""
    _load("walk").main()
    out = capsys.readouterr().out
    assert "_solver/_projection.py acceleration" in out and "_engine.py integrate" in out
    frames = int(out.split("geomech frames from simulate to the solver:")[1].split()[0])
    jits = int(out.split("eqx.filter_jit boundaries on that path:")[1].split()[0])
    assert frames <= 12 and jits <= 2, out


def test_results_are_filed_and_listed():
    """Recorded results live in benchmarks/results/<benchmark>/ and figures in benchmarks/figures/,
    none at the top level, each listed in the manifest of benchmarks/README.md, and every
    results or figures path a page cites exists."""
    bench = ROOT / "benchmarks"
    assert not list(bench.glob("results_*.json")) and not list(bench.glob("*.png"))
    files = {str(p.relative_to(bench)) for p in (bench / "results").rglob("*.json")}
    files |= {str(p.relative_to(bench)) for p in (bench / "figures").glob("*.png")}
    readme = (bench / "README.md").read_text()
    manifest = readme.split("## Results manifest", 1)[1]
    listed = {line.split("`")[1] for line in manifest.splitlines() if line.startswith("| `")}
    assert listed == files
    pages = [ROOT / "README.md", bench / "README.md", *(ROOT / "docs").glob("*.md")]
    for page in pages:
        for cited in re.findall(r"((?:results|figures)/[\w./-]+\.(?:json|png))", page.read_text()):
            assert (bench / cited).exists(), f"{page.name} cites {cited}"
