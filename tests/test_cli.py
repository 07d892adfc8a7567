"""The `geomech` command: its outputs, its numbers against `simulate`, and its user errors."""

import json
import subprocess
import sys

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import geomech as gm
import geomech.models as gmm
from geomech import cli


@pytest.fixture(autouse=True)
def float64_after():
    yield
    jax.config.update("jax_enable_x64", True)  # a --float32 run switches it off for the process


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_names_every_model_and_its_parameters(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    for name, cls in gmm.MODELS.items():
        assert f"{name}: " in out
        coordinates = getattr(cls(), "coordinates", None)
        if coordinates:
            assert f"q = ({', '.join(coordinates)})" in out
    assert "l=1.0" in out and "W ≠ D" in out  # the pendulum's length; thesis Example 2's W


@pytest.mark.parametrize("name", list(gmm.MODELS))
def test_run_writes_outputs_that_match_simulate(capsys, tmp_path, name):
    t1 = 0.3  # default --points (201): the compilation is shared with `geomech demo`
    code, out, err = run(capsys, "run", name, "--t1", str(t1), "--out", str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["successful"] == 1 and "failure" not in summary, summary  # it integrated
    assert code == 0, err
    for png in ("trajectory.png", "drift.png"):
        assert (tmp_path / png).stat().st_size > 1000
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    data = np.load(tmp_path / f"{name}.npz")
    csv = np.loadtxt(tmp_path / f"{name}.csv", delimiter=",", skiprows=1)

    # the same simulation through the public API
    model = gmm.MODELS[name]()
    system, y0 = model.system(), model.initial_state()
    ts = jnp.linspace(model.t0, t1, 201)
    tol = jnp.asarray(1e-8)  # as arrays, like the command: the compiled solve is reused
    sol = gm.simulate(
        system,
        y0,
        model.t0,
        t1,
        saveat=diffrax.SaveAt(ts=ts),
        rtol=tol,
        atol=tol,
        max_steps=100_000,
        throw=False,
    )
    np.testing.assert_allclose(data["q"], sol.states.q, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(csv[:, 0], ts, rtol=1e-12)
    np.testing.assert_allclose(csv[:, 1 : 1 + y0.q.size], sol.states.q, rtol=1e-9, atol=1e-12)
    e = np.asarray(sol.energy)
    np.testing.assert_allclose(e[0], system.energy(y0, model.t0), rtol=1e-12)
    np.testing.assert_allclose(
        summary["energy_drift"], np.max(np.abs(e - e[0])), rtol=1e-6, atol=1e-13
    )
    np.testing.assert_allclose(
        summary["constraint_residual"], np.max(sol.constraint_residual), rtol=1e-6, atol=1e-13
    )
    np.testing.assert_allclose(summary["final_q"], sol.states.q[-1], rtol=1e-9, atol=1e-12)
    assert f"{summary['energy_drift']:.3e}" in out


def test_failed_integration_exits_nonzero(capsys, tmp_path, monkeypatch):
    """A trajectory that does not reach t1 (here: max_steps forced to 4) is reported as a failure
    with exit code 1, not as a success."""
    simulate = gm.simulate
    monkeypatch.setattr(gm, "simulate", lambda *a, **k: simulate(*a, **{**k, "max_steps": 4}))
    code, out, _ = run(capsys, "run", "pendulum", "--t1", "0.5", "--points", "5", "--out", str(tmp_path))
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert code == 1 and summary["successful"] == 0
    assert "maximum number of solver steps" in summary["failure"] and "0 / 1 successful" in out


def test_run_ensemble(capsys, tmp_path):
    code, out, _ = run(
        capsys,
        "run",
        "sleigh",
        "--batch",
        "5",
        "--t1",
        "0.5",
        "--points",
        "5",
        "--out",
        str(tmp_path),
    )
    assert code == 0
    data = np.load(tmp_path / "sleigh.npz")
    assert data["q"].shape == (5, 5, 3)
    assert not (tmp_path / "sleigh.csv").exists()
    system = gmm.ChaplyginSleigh()()
    residual = jax.vmap(jax.vmap(system.constraint_residual))(gm.State(data["q"], data["v"]))
    np.testing.assert_allclose(
        residual, 0.0, atol=1e-7
    )  # every ensemble member starts and stays on C
    assert len({tuple(q) for q in data["q"][:, 0]}) == 5  # distinct initial states
    assert "5 / 5 successful" in out


def test_run_float32(capsys, tmp_path):
    code, out, _ = run(
        capsys,
        "run",
        "pendulum",
        "--float32",
        "--t1",
        "0.5",
        "--points",
        "5",
        "--out",
        str(tmp_path),
    )
    assert code == 0 and "float32" in out
    assert np.load(tmp_path / "pendulum.npz")["q"].dtype == np.float32


def test_compare_solvers_agree(capsys):
    # the defaults of `geomech demo`'s comparison: compiled once for both tests
    code, out, _ = run(capsys, "compare", "thesis_example2")
    assert code == 0, out
    for solver in ("projection", "gauss", "gibbs-appell", "gibbs-appell-d", "kane", "multipliers"):
        assert solver in out
    worst = float(out.split("largest disagreement:")[1].split()[0])
    assert worst < 1e-10


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "no_such_model"], "unknown model"),
        (["run", "pendulum", "--solver", "nope"], "unknown solver"),
        (["run", "pendulum", "--param", "mass=2"], "no parameter 'mass'"),
        (["run", "pendulum", "--param", "m=heavy"], "needs a float"),
        (["run", "pendulum", "--param", "m=0"], "mass matrix"),
        (["run", "rolling_disk", "--param", "m=-1"], "mass matrix"),
        (["run", "pendulum", "--t1", "-1"], "--t1"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_errors_are_one_line(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == cli.EXIT_USER_ERROR
    assert fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_violating_3_19_is_a_user_error(capsys):
    # thesis Example 2: (3.19) fails where A(q) = m1/m2; put the initial state there
    model = gmm.ThesisExample2()
    A0 = float(model.A(model.initial_state().q))
    code, _, err = run(capsys, "compare", "thesis_example2", "--param", f"m1={A0 * model.m2!r}")
    assert code == cli.EXIT_USER_ERROR
    assert "(3.19)" in err and len(err.strip().splitlines()) == 1


def test_demo(capsys):
    code, out, _ = run(capsys, "demo")
    assert code == 0
    assert (
        "Holonomic" in out and "Nonholonomic" in out and "Generalized" in out and "ensemble" in out
    )
    worst = float(out.split("largest disagreement with Projection:")[1].split()[0])
    assert worst < 1e-10


def test_python_dash_m_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "geomech", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "demo" in done.stdout
