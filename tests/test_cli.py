"""The `geomech` command: fast start, one simulation per run, its outputs against `simulate`, the
output directory, and its user errors (one line, exit status 2, no traceback)."""

import errno
import json
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
import types
import warnings

import diffrax
import jax
import jax.numpy as jnp
import jaxlie
import matplotlib
import numpy as np
import pytest
from helpers import decoded, page_data

import geomech as gm
import geomech.models as gmm
from geomech import _cache as gm_cache
from geomech import cli
from geomech.cli import _catalog, _output, _parse, _run, _setup

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


@pytest.fixture(autouse=True)
def float64_after():
    yield
    jax.config.update("jax_enable_x64", True)  # a --float32 run switches it off for the process
    plt.close("all")


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


# -- start fast: no JAX for --help, list and argument errors ----------------------------------

HEAVY = ("jax", "jaxlib", "diffrax", "equinox", "geomech.models", "matplotlib")


@pytest.mark.parametrize(
    "argv, code",
    [
        (["--help"], 0),
        (["run", "--help"], 0),
        (["list"], 0),
        (["run", "no_such_model"], 2),
        (["run", "pendulum", "--points", "1"], 2),
        (["run", "pendulum", "--param", "mass=2"], 2),
        (["run", "pendulum", "--t1", "-5"], 2),
        (["run", "pendulm"], 2),
        (["run", "pendulum", "--max-steps", "1e20"], 2),
        (["compare", "sleigh", "--states", "0"], 2),
        (["run", "pendulum", "--animate", "--out", "unused"], 2),
    ],
)
def test_fast_paths_import_no_jax(argv, code):
    """Checked in a fresh interpreter through `sys.modules`."""
    script = textwrap.dedent(
        f"""
        import sys
        from geomech.cli import main
        try:
            code = main({argv!r})
        except SystemExit as e:
            code = e.code
        heavy = sorted(m for m in sys.modules if m.startswith({HEAVY!r}))
        print("HEAVY", heavy, "CODE", code)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert f"HEAVY [] CODE {code}" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]


def test_catalog_is_up_to_date():
    """`catalog.json` (read by `list` without JAX) is what the model classes say; regenerate it
    with `python -m geomech.cli._catalog`."""
    assert _catalog.load() == json.loads(_catalog.dumps(_catalog.build()))


def test_models_page_lists_every_model():
    """docs/models.md's table: a row per registry name, with its class, n and k."""
    page = (pathlib.Path(__file__).resolve().parents[1] / "docs" / "models.md").read_text()
    rows = {m[1]: m for m in re.finditer(r"^\| `(\w+)` \| `(\w+)` \| ([^|]+) \| ([^|]+) \|", page, re.M)}
    assert set(rows) == set(gmm.MODELS)
    for name, info in _catalog.load().items():
        row = rows[name]
        assert row[2] == gmm.MODELS[name].__name__
        if name != "chain":  # n = 2N, k = N
            assert (row[3].strip(), row[4].strip()) == (str(info["n"]), str(info["k"])), name


def test_list_names_every_model_and_its_parameters(capsys):
    code, out, _ = run(capsys, "list")
    assert code == 0
    for name, cls in gmm.MODELS.items():
        model = cls()
        assert f"{name}: {model.description}" in out
        units = [f" [{u}]" if u else "" for u in model.units]
        shown = ", ".join(c + u for c, u in zip(model.coordinates, units, strict=True))
        if model.point_parameters is None:
            assert f"q = ({shown})" in out
        else:  # a Lie group: the stored point's parameters, v's components
            stored = ", ".join(model.point_parameters)
            assert f" stored as ({stored}), v = ({shown}); " in out
    assert "l=1.0" in out and "W ≠ D" in out  # the pendulum's length; thesis Example 2's W
    assert "q on SO3 x R3 stored as (q_w, q_x, q_y, q_z, x, y, z)" in out  # pivoted_top
    # array-valued parameters, as --param takes them; what an ensemble keeps
    assert "inertia=0.3,0.4,0.5" in out and "semi_axes=0.2,0.03,0.02" in out
    rattleback = out[out.index("rattleback:") :].splitlines()[3]
    kept = "--batch keeps: coordinates all; speeds omega1, omega2, omega3"
    assert rattleback.strip().startswith(kept)


def test_array_parameters_from_the_command_line():
    catalog = _catalog.load()
    parsed = _parse.parse_params("rattleback", catalog["rattleback"], ["semi_axes=0.1,0.02,0.01"])
    assert parsed == {"semi_axes": (0.1, 0.02, 0.01)}
    model = gmm.Rattleback(**parsed)  # what `run` builds
    np.testing.assert_array_equal(model.semi_axes, [0.1, 0.02, 0.01])
    with pytest.raises(_parse.UsageError, match="needs a comma list of 3 numbers"):
        _parse.parse_params("chaplygin_sphere", catalog["chaplygin_sphere"], ["inertia=0.3,0.4"])


# -- run: one simulation, its numbers against gm.simulate, its files --------------------------


def test_run_simulates_once(capsys, monkeypatch):
    traces, executions = [], []
    simulate, execute = gm.simulate, _run.execute
    monkeypatch.setattr(gm, "simulate", lambda *a, **k: traces.append(1) or simulate(*a, **k))
    monkeypatch.setattr(_run, "execute", lambda *a: executions.append(1) or execute(*a))
    code, out, _ = run(capsys, "run", "pendulum", "--t1", "0.3", "--points", "5", "--repeat", "2")
    assert code == 0
    assert len(traces) == 1 and len(executions) == 3  # traced once; executed once + 2 repeats
    for row in ("compile time", "run time (one execution)", "2 repeats", "steady state"):
        assert row in out
    assert "precision" in out and "float64 (x64 enabled)" in out


def _simulate_like_cli(name, t1, points=201):
    model = gmm.MODELS[name]()
    ts = jnp.linspace(model.t0, t1, points)
    sol = gm.simulate(
        model.system(),
        model.initial_state(),
        model.t0,
        t1,
        saveat=diffrax.SaveAt(ts=ts),
        rtol=1e-8,
        atol=1e-8,
        max_steps=100_000,
        throw=False,
    )
    return model, ts, sol


# Every model on coordinates; on groups, where `run` takes the same path for every model and each
# compiles its own program (CI time), one of each kind: SO(3) with a constraint, a rolling ball
# with an affine constraint (its energy changes), the rattleback (pivoted_top, SO(3) × ℝ³ with a
# holonomic constraint: test_run_on_a_group_matches_simulate).
RUN_MODELS = [name for name, cls in gmm.MODELS.items() if cls.point_parameters is None] + [
    "suslov",
    "turntable_ball",
    "rattleback",
]


def _saved_points(model, q):
    """The configurations of MODEL.npz's `q` columns: coordinates, or a group's parameters."""
    if model.point_parameters is None:
        return jnp.asarray(q)
    R = jaxlie.SO3(jnp.asarray(q[..., :4]))
    return R if q.shape[-1] == 4 else (R, jnp.asarray(q[..., 4:]))


@pytest.mark.parametrize("name", RUN_MODELS)
def test_run_writes_consistent_outputs(capsys, tmp_path, name):
    model = gmm.MODELS[name]()
    scene = isinstance(model, gmm.AbstractSceneModel)  # then --animate writes MODEL.html too
    code, out, err = run(
        capsys, "run", name, "--t1", "0.3", "--points", "21", "--out", str(tmp_path),
        *(["--animate"] if scene else []),
    )  # fmt: skip
    summary = json.loads((tmp_path / f"{name}_summary.json").read_text())
    assert summary["successful"] == 1 and code == 0, err  # the model integrated
    plots = ["trajectory", "drift"] + (["path"] if model.path_coordinates else [])
    plots += ["contact"] if isinstance(model, gmm.AbstractRollingModel) else []
    pngs = [f"{name}_{p}.png" for p in plots]
    written = [f"{name}.npz", f"{name}.csv", f"{name}_summary.json", *pngs]
    written += [f"{name}.html"] if scene else []
    assert sorted(summary["files"]) == sorted(written)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(summary["files"])
    for png in pngs:
        assert (tmp_path / png).read_bytes()[:4] == b"\x89PNG"
    data = np.load(tmp_path / f"{name}.npz")
    csv = np.loadtxt(tmp_path / f"{name}.csv", delimiter=",", skiprows=1)
    n = len(model.coordinates)
    p = len(model.point_parameters or model.coordinates)  # q's columns: a group's parameters
    np.testing.assert_array_equal(csv[:, 0], 0)  # one trajectory
    np.testing.assert_allclose(csv[:, 1], data["ts"], rtol=1e-15)
    np.testing.assert_allclose(csv[:, 2 : 2 + p], data["q"], rtol=1e-15)
    np.testing.assert_allclose(csv[:, 2 + p : 2 + p + n], data["v"], rtol=1e-15)
    assert data["q"].shape == (21, p) and data["v"].shape == (21, n)
    np.testing.assert_allclose(csv[:, -3], data["energy"], rtol=1e-15)
    e = data["energy"]
    assert summary["max_energy_change"] == pytest.approx(np.max(np.abs(e - e[0])), abs=1e-300)
    # moving constraints (rheonomic, or affine as on the turntable) change the energy
    assert summary["energy_conserved"] == (
        name not in ("bead_on_wire", "thesis_example2", "turntable_ball")
    )
    assert list(data["result"]) == ["successful"]
    assert f"{summary['max_energy_change']:.3e}" in out
    assert summary["command"].startswith(f"geomech run {name} --t1 0.3")
    assert summary["versions"]["jax"] == jax.__version__ and summary["machine"]["cpu_count"] >= 1
    if scene:  # the page shows the saved states, drawn by the model's scene
        page = page_data((tmp_path / f"{name}.html").read_text())
        frames = model.scene().frames(_saved_points(model, data["q"]), (21,))
        np.testing.assert_allclose(decoded(page["ts"], np.float32, 1)[:, 0], data["ts"], rtol=1e-6)
        (body,) = page["bodies"]
        for key in ("wxyz", "position"):
            got = decoded(body[key], np.float32, frames[key].shape[-1])
            np.testing.assert_allclose(got, frames[key], atol=1e-6)


@pytest.mark.parametrize("name", ["pendulum", "sleigh", "bead_on_wire"])
def test_run_matches_simulate(capsys, tmp_path, name):
    code, _, err = run(capsys, "run", name, "--t1", "0.3", "--out", str(tmp_path))
    assert code == 0, err
    model, ts, sol = _simulate_like_cli(name, 0.3)
    data = np.load(tmp_path / f"{name}.npz")
    summary = json.loads((tmp_path / f"{name}_summary.json").read_text())
    np.testing.assert_allclose(data["ts"], ts, rtol=1e-15)
    np.testing.assert_allclose(data["q"], sol.states.q, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(data["v"], sol.states.v, rtol=1e-9, atol=1e-12)
    e = np.asarray(sol.energy)
    np.testing.assert_allclose(e[0], model.system().energy(model.initial_state(), model.t0))
    np.testing.assert_allclose(
        summary["max_energy_change"], np.max(np.abs(e - e[0])), rtol=1e-6, atol=1e-13
    )
    np.testing.assert_allclose(
        summary["constraint_residual"], np.max(sol.constraint_residual), rtol=1e-6, atol=1e-13
    )
    np.testing.assert_allclose(summary["final_q"], sol.states.q[-1], rtol=1e-9, atol=1e-12)


def test_run_on_a_group_matches_simulate(capsys, tmp_path):
    """A model on SO(3) × ℝ³, an ensemble of two: the stored quaternion and position as the
    point's columns, the body angular velocity and ẋ as v's; trajectory 0 against `gm.simulate`,
    trajectory 1 from q₀ ⊕ δ on the group and on the pivot constraint."""
    name = "pivoted_top"
    argv = ["run", name, "--t1", "0.3", "--points", "7", "--batch", "2", "--out", str(tmp_path)]
    code, out, err = run(capsys, *argv)
    assert code == 0 and "2 / 2 successful" in out, err
    model, ts, sol = _simulate_like_cli(name, 0.3, points=7)
    R, x = sol.states.q
    data = np.load(tmp_path / f"{name}.npz")
    assert data["q"].shape == (2, 7, 7) and data["v"].shape == (2, 7, 6)
    np.testing.assert_allclose(data["q"][0], np.concatenate([R.wxyz, x], -1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(data["v"][0], sol.states.v, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(data["q"][1, :, :4], axis=-1), 1.0, rtol=1e-12)
    assert np.max(np.abs(data["q"][1, 0] - data["q"][0, 0])) > 1e-3  # another initial point
    h = jax.vmap(model.pivot)((jaxlie.SO3(data["q"][1, :, :4]), data["q"][1, :, 4:]))
    assert np.max(np.abs(h)) < 1e-7  # projected onto the pivot constraint, held
    assert list(data["labels"]) == ["q_w", "q_x", "q_y", "q_z", "x", "y", "z"]
    assert list(data["velocity_labels"]) == ["omega1", "omega2", "omega3", "vx", "vy", "vz"]
    header = (tmp_path / f"{name}.csv").read_text().splitlines()[0].split(",")
    assert header[2:15] == [*data["labels"], *data["velocity_labels"]]
    summary = json.loads((tmp_path / f"{name}_summary.json").read_text())
    np.testing.assert_allclose(summary["final_q"], data["q"][0, -1], rtol=1e-15)
    assert summary["position_residual"] < 1e-7 and summary["energy_conserved"]


def test_run_ensemble_writes_long_csv(capsys, tmp_path):
    argv = ["run", "sleigh", "--batch", "5", "--t1", "0.5", "--points", "4", "--out", str(tmp_path)]
    code, out, _ = run(capsys, *argv, "--animate")
    assert code == 0 and "5 / 5 successful" in out
    page = page_data((tmp_path / "sleigh.html").read_text())  # every member drawn
    assert len(page["bodies"]) == 5 and "(5 trajectories)" in page["title"]
    data = np.load(tmp_path / "sleigh.npz")
    assert data["q"].shape == (5, 4, 3)
    header = (tmp_path / "sleigh.csv").read_text().splitlines()[0].split(",")
    assert header == [
        "trajectory", "t", "x", "y", "theta", "x_dot", "y_dot", "theta_dot",
        "energy", "constraint_residual", "position_residual",
    ]  # fmt: skip
    csv = np.loadtxt(tmp_path / "sleigh.csv", delimiter=",", skiprows=1)
    assert csv.shape == (20, 11)
    np.testing.assert_array_equal(csv[:, 0], np.repeat(np.arange(5), 4))
    np.testing.assert_allclose(csv[:, 1], data["ts"].reshape(-1), rtol=1e-15)
    np.testing.assert_allclose(csv[:, 2:5], data["q"].reshape(-1, 3), rtol=1e-15)
    np.testing.assert_allclose(csv[:, 5:8], data["v"].reshape(-1, 3), rtol=1e-15)
    np.testing.assert_allclose(csv[:, 8], data["energy"].reshape(-1), rtol=1e-15)
    np.testing.assert_allclose(csv[:, 9], data["constraint_residual"].reshape(-1), rtol=1e-15)
    system = gmm.ChaplyginSleigh()()
    residual = jax.vmap(jax.vmap(system.constraint_residual))(gm.State(data["q"], data["v"]))
    np.testing.assert_allclose(residual, 0.0, atol=1e-7)  # every member starts and stays on C
    assert len({tuple(q) for q in data["q"][:, 0]}) == 5  # distinct initial states
    summary = json.loads((tmp_path / "sleigh_summary.json").read_text())
    assert summary["command"] == "geomech " + " ".join([*argv, "--animate"])


def test_ensemble_keeps_what_the_model_starts_from():
    """`run --batch` perturbs every entry by 0.02 N(0, 1) and then keeps the independent ones
    (`geomech list`): the rattleback's 64 members start within 5 sigma (0.1 rad/s) of its
    angular velocity (0, 0, 5) rad/s, on the rolling constraint, member 0 at the model's state
    (a projection onto the constraints turned a 0.02 rad tilt into omega3 from 0.13 to 5.2);
    a model on coordinates (the sleigh) keeps its independent speeds likewise."""
    setup = _setup.build("rattleback", {})
    y = _setup.ensemble(setup, 64, seed=0)
    w = np.asarray(y.v[:, :3])
    np.testing.assert_array_less(np.abs(w - np.array([0.0, 0.0, 5.0])), 0.1)
    assert np.std(w[:, 2]) > 0.01  # perturbed: 0.02 rad/s
    residual = jax.vmap(setup.system.constraint_residual)(y)
    np.testing.assert_allclose(residual, 0.0, atol=1e-12)
    np.testing.assert_array_equal(y.v[0], setup.y0.v)
    np.testing.assert_array_equal(y.q[0].wxyz[0], setup.y0.q[0].wxyz)
    np.testing.assert_array_equal(y.q[1][0], setup.y0.q[1])
    assert _setup.held(setup) == ((0, 1, 2, 3, 4), (0, 1, 2))

    setup = _setup.build("sleigh", {})
    fixed_q, fixed_v = _setup.held(setup)
    assert len(fixed_q) == 3 and len(fixed_v) == 2  # no holonomic constraint, one velocity row
    y = _setup.ensemble(setup, 16, seed=1)
    deviation = np.abs(np.asarray(y.v) - np.asarray(setup.y0.v))
    assert np.all(deviation[:, list(fixed_v)] < 0.1) and np.any(deviation[:, list(fixed_v)] > 0.01)
    np.testing.assert_allclose(jax.vmap(setup.system.constraint_residual)(y), 0.0, atol=1e-12)


def test_failed_trajectories_exit_1(capsys, tmp_path):
    code, out, _ = run(
        capsys, "run", "pendulum", "--batch", "2", "--t1", "3", "--max-steps", "2e1",
        "--points", "5", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == cli.EXIT_FAILED
    assert "max_steps" in out and "0 / 2 successful" in out
    summary = json.loads((tmp_path / "pendulum_summary.json").read_text())
    assert summary["failures"] == {"max_steps_reached": [0, 1]}
    assert list(np.load(tmp_path / "pendulum.npz")["result"]) == ["max_steps_reached"] * 2


def test_float32_precision_warning(capsys, tmp_path):
    code, out, err = run(
        capsys, "run", "pendulum", "--float32", "--t1", "0.5", "--points", "5",
        "--rtol", "1e-8", "--atol", "1e-8", "--out", str(tmp_path),
    )  # fmt: skip
    assert code == 0 and "float32 (--float32)" in out
    assert err.count("geomech: warning:") == 1 and "below what float32 can deliver" in err
    assert np.load(tmp_path / "pendulum.npz")["q"].dtype == np.float32


def test_simulate_warns_below_float32_precision():
    """The library's guard: a Python warning before tracing, once per setting."""
    model = gmm.CartesianPendulum()
    y0 = jax.tree.map(lambda x: x.astype(jnp.float32), model.initial_state())
    kwargs = dict(saveat=diffrax.SaveAt(t1=True), throw=False)
    with pytest.warns(gm.PrecisionWarning, match="float32 can deliver.*jax_enable_x64"):
        gm.simulate(model.system(), y0, 0.0, 0.1, rtol=1e-8, atol=1e-8, **kwargs)
    with warnings.catch_warnings():  # tolerances float32 can meet, and float64: no warning
        warnings.simplefilter("error", gm.PrecisionWarning)
        gm.simulate(model.system(), y0, 0.0, 0.1, rtol=1e-5, atol=1e-5, **kwargs)
        gm.simulate(model(), model.initial_state(), 0.0, 0.1, rtol=1e-12, atol=1e-12, **kwargs)


def test_without_matplotlib_data_is_written_and_plots_skipped(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` fails
    code, out, _ = run(
        capsys, "run", "pendulum", "--t1", "0.3", "--points", "5", "--out", str(tmp_path)
    )
    assert code == 0 and "plots skipped: matplotlib is not installed" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "pendulum.csv",
        "pendulum.npz",
        "pendulum_summary.json",
    ]


# -- the output directory: checked first, never mixed ------------------------------------------


def _no_simulation(monkeypatch):
    def fail(*a, **k):
        raise AssertionError("simulated although --out was refused")

    monkeypatch.setattr(_run, "simulate_once", fail)


def test_out_is_checked_before_simulating(capsys, tmp_path, monkeypatch):
    _no_simulation(monkeypatch)
    (tmp_path / "notes.txt").write_text("mine")
    for extra in ([], ["--overwrite"]):
        code, _, err = run(capsys, "run", "pendulum", "--out", str(tmp_path), *extra)
        assert code == cli.EXIT_USER_ERROR and len(err.strip().splitlines()) == 1
        assert "no geomech run wrote (notes.txt)" in err
    code, _, err = run(capsys, "run", "pendulum", "--out", str(tmp_path / "notes.txt"))
    assert code == cli.EXIT_USER_ERROR and "is a file" in err
    assert (tmp_path / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # no lock left behind
    other = tmp_path / "other"  # a file of pendulum's name that no pendulum run lists
    other.mkdir()
    (other / "pendulum.npz").write_text("")
    listed = {"files": ["pendulum.npz", "sleigh_summary.json"]}
    (other / "sleigh_summary.json").write_text(json.dumps(listed))
    code, _, err = run(capsys, "run", "pendulum", "--out", str(other), "--overwrite")
    assert code == cli.EXIT_USER_ERROR and "summary does not list (pendulum.npz)" in err


def test_models_share_out_and_overwrite_replaces_a_run_of_the_same_model(capsys, tmp_path):
    short = ["--t1", "0.3", "--points", "5", "--out", str(tmp_path)]
    assert run(capsys, "run", "sleigh", *short)[0] == 0
    sleigh = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert "sleigh_path.png" in sleigh
    assert run(capsys, "run", "pendulum", *short)[0] == 0  # another model: no --overwrite needed
    code, _, err = run(capsys, "run", "pendulum", *short, "--t1", "0.2")
    assert code == cli.EXIT_USER_ERROR and "earlier run of pendulum" in err and "--overwrite" in err
    assert run(capsys, "run", "pendulum", *short, "--t1", "0.2", "--overwrite")[0] == 0
    pendulum = ["pendulum.csv", "pendulum.npz", "pendulum_drift.png", "pendulum_summary.json"]
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == sorted([*sleigh, *pendulum, "pendulum_trajectory.png"])
    assert all((tmp_path / f).read_bytes() == b for f, b in sleigh.items())  # untouched
    assert json.loads((tmp_path / "pendulum_summary.json").read_text())["t1"] == 0.2


def _geomech(*argv):
    return subprocess.Popen(
        [sys.executable, "-m", "geomech", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_concurrent_runs_never_lose_files(tmp_path):
    """Three processes into the same new --out: the same model twice (one is refused, exit 2, while
    the other runs or after it wrote) and another model at the same time (it keeps its files)."""
    out = tmp_path / "new"
    short = ["--t1", "0.01", "--points", "3", "--out", str(out)]
    models = ("pendulum", "pendulum", "bead_on_wire")
    procs = [_geomech("run", m, *short) for m in models]
    done = [(p.wait(timeout=300), *p.communicate()) for p in procs]
    assert sorted(code for code, _, _ in done[:2]) == [0, 2] and done[2][0] == 0, done
    refused = next(err for code, _, err in done if code == 2)
    assert "another geomech run of pendulum" in refused or "earlier run of pendulum" in refused
    reported = [
        pathlib.Path(line.split("wrote ", 1)[1])
        for _, stdout, _ in done
        for line in stdout.splitlines()
        if line.strip().startswith("wrote ")
    ]
    assert {f.name for f in reported} >= {"pendulum.npz", "bead_on_wire.npz"}
    assert all(f.is_file() for f in reported)  # nothing a run reported has disappeared
    listed = [f for m in out.glob("*_summary.json") for f in json.loads(m.read_text())["files"]]
    assert sorted(p.name for p in out.iterdir()) == sorted(listed)  # nothing else, no lock left
    assert sorted(f.name for f in reported) == sorted(listed)


def test_ctrl_c_while_files_are_moved_in_takes_effect_after_the_last_one():
    # Python's own Ctrl-C handler, as in an interactive `geomech` process: a suite started in the
    # background by a non-interactive shell (`pytest &`) inherits SIGINT ignored, and no Ctrl-C
    # would ever arrive
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    moved = []
    try:
        with pytest.raises(KeyboardInterrupt):
            with _output._uninterrupted():
                os.kill(os.getpid(), signal.SIGINT)
                for f in range(100_000):  # bytecodes at which Python would run the handler
                    moved.append(f)
    finally:
        signal.signal(signal.SIGINT, outer)
    assert len(moved) == 100_000


def test_sigint_during_start_up_exits_130(tmp_path):
    """Ctrl-C at several moments of start-up (imports, tracing, compilation): status 130, no crash."""
    for delay in (0.3, 1.0, 2.0, 3.0, 4.0):
        out = tmp_path / str(delay)
        p = _geomech("run", "pendulum", "--t1", "0.01", "--points", "3", "--out", str(out))
        time.sleep(delay)
        p.send_signal(signal.SIGINT)
        code = p.wait(timeout=120)
        _, err = p.communicate()
        if code == 0:  # finished before the signal: nothing to interrupt
            continue
        assert code == cli.EXIT_INTERRUPTED, (delay, code, err[-2000:])
        assert err.strip().splitlines()[-1] == "geomech: interrupted"
        assert not [f.name for f in out.iterdir() if not f.name.startswith(".geomech-")]


def test_out_on_a_full_disk_names_sizes_that_show(tmp_path, monkeypatch):
    """The free-space check of --out in a unit that shows both sizes (never "about 0 MB but ...
    has 0 MB free"): B × T × (2n + 4) float64 values, the .npz as much again and the CSV at 25
    characters a value."""
    setup = types.SimpleNamespace(dtype=np.dtype(np.float64), labels=["x", "y"], n=2)
    values = 10 * 20 * (2 + 2 + 4)
    size = values * (8 + 8 + 25)  # 65,600 bytes
    usage = shutil.disk_usage(tmp_path)
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage._replace(free=2048))
    with pytest.raises(cli.UsageError) as info:
        _output.check_size(setup, 10, 20, str(tmp_path), 2048.0)
    assert f"about {size / 1024:.0f} kB but {tmp_path} has 2.0 kB free" in str(info.value)
    assert "free space" in str(info.value)
    assert _output.amount(3 * 2**30) == "3.0 GB" and _output.amount(512) == "512 bytes"


def _writing(argv, ready):
    """`geomech` (as the process's command: Ctrl-C handler installed) stopped for a minute in the
    middle of writing its files into --out, after creating `ready`."""
    script = textwrap.dedent(
        f"""
        import pathlib, sys, time
        from geomech.cli import _output, main
        csv = _output._csv
        def slow(*args):
            csv(*args)
            pathlib.Path({str(ready)!r}).touch()
            time.sleep(60)
        _output._csv = slow
        sys.argv = ["geomech", *{list(argv)!r}]
        sys.exit(main())
        """
    )
    p = subprocess.Popen([sys.executable, "-c", script], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not ready.exists():
        assert p.poll() is None and time.monotonic() < deadline, p.communicate()[1][-2000:]
        time.sleep(0.1)
    return p


def test_ctrl_c_or_a_kill_while_a_run_is_written_leaves_no_partial_files(capsys, tmp_path):
    """Ctrl-C while `run --overwrite` writes its files: status 130, the earlier run untouched and
    nothing else in --out (no temporary directory, no lock). A process killed there (SIGKILL)
    leaves its temporary directory, which the next run of the model removes."""
    out = tmp_path / "out"
    argv = ["run", "pendulum", "--t1", "0.01", "--points", "3", "--out", str(out)]
    assert run(capsys, *argv)[0] == 0
    earlier = {p.name: p.read_bytes() for p in out.iterdir()}
    p = _writing([*argv, "--overwrite"], tmp_path / "ready")
    p.send_signal(signal.SIGINT)
    assert p.wait(timeout=60) == cli.EXIT_INTERRUPTED
    assert p.communicate()[1].strip().splitlines()[-1] == "geomech: interrupted"
    assert {p.name: p.read_bytes() for p in out.iterdir()} == earlier
    p = _writing([*argv, "--overwrite"], tmp_path / "ready again")
    p.kill()
    p.wait(timeout=60)
    (partial,) = [f for f in out.iterdir() if f.name.startswith(".geomech-pendulum-partial-")]
    assert (partial / "pendulum.csv").exists()
    assert run(capsys, *argv, "--overwrite")[0] == 0
    assert not partial.exists() and not [f for f in out.iterdir() if f.name.startswith(".")]


# -- ensemble figures: the panels a person wants (checked on the figure objects) --------------


def _fake_ensemble(model, B=40, T=30):
    """A Solution-like record around the model's initial state (no simulation needed)."""
    y0 = model.initial_state()
    n = y0.v.shape[0]
    rng = np.random.default_rng(0)
    ts = np.linspace(0.0, 1.0, T)
    if model.point_parameters is None:
        q = jnp.asarray(np.asarray(y0.q) + ts[None, :, None] * rng.normal(size=(B, 1, n)))
    else:  # a Lie group: the point repeated, with leading (B, T) axes
        q = jax.tree.map(lambda x: jnp.broadcast_to(x, (B, T, *x.shape)), y0.q)
    v = np.broadcast_to(np.asarray(y0.v), (B, T, n)) + 0.0
    energy = 1.0 + 1e-9 * ts[None] * rng.normal(size=(B, 1))
    residual = np.abs(1e-12 * ts[None] * rng.normal(size=(B, 1)))
    return types.SimpleNamespace(
        ts=np.broadcast_to(ts, (B, T)),
        states=gm.State(q, jnp.asarray(v)),
        energy=energy,
        constraint_residual=residual,
        position_residual=np.zeros_like(residual),
        manifold=model.system().manifold,  # as `gm.Solution` carries it
    )


@pytest.mark.parametrize("name, conserved", [("rolling_disk", True), ("bead_on_wire", False)])
def test_ensemble_figures_have_the_expected_panels(name, conserved):
    model = gmm.MODELS[name]()
    y0 = model.initial_state()
    setup = _setup.Setup(name, {}, model, model.system(), y0, 2)
    B, n = 40, y0.q.shape[0]
    figs = _output.figures(setup, _fake_ensemble(model, B), energy_conserved=conserved)
    assert sorted(figs) == ["drift", "path", "trajectory"]  # both models declare (x, y) a path
    panels = [ax for ax in figs["trajectory"].axes if ax.get_visible()]
    assert len(panels) == n
    for ax, c, u in zip(panels, model.coordinates, model.units, strict=True):
        assert ax.get_ylabel() == f"{_setup.pretty(c)} [{u}]"
        assert len(ax.collections) == 2  # 5–95 % and 25–75 % bands
        assert [line.get_label() for line in ax.get_lines()] == ["median"]
    assert panels[-1].get_xlabel() == "t [s]"
    assert f"over {B} trajectories" in figs["trajectory"].get_suptitle()
    (path,) = figs["path"].axes
    assert (path.get_xlabel(), path.get_ylabel()) == ("$x$ [m]", "$y$ [m]")
    assert len(path.get_lines()) == B + 1  # every path and the start points
    (drift,) = figs["drift"].axes
    labels = [line.get_label() for line in drift.get_lines()]
    energy = "energy drift" if conserved else "energy change"
    assert any(energy in label and f"max over {B} trajectories" in label for label in labels)
    assert drift.get_yscale() == "log"
    for line in drift.get_lines():  # no gaps: every drawn value is finite and positive
        assert np.all(np.isfinite(line.get_ydata())) and np.all(np.asarray(line.get_ydata()) > 0)


@pytest.mark.parametrize("name", list(gmm.MODELS))
def test_every_model_has_units_on_its_plot_axes(name):
    """Coordinates, their path and time carry the model's units on every axis of `--out`'s plots
    (the drift plot's vertical axis mixes the energy and the residuals: no single unit)."""
    model = gmm.MODELS[name]()
    assert model.time_unit and all(model.units), "every model declares its units"
    setup = _setup.Setup(name, {}, model, model.system(), model.initial_state(), 0)
    figs = _output.figures(setup, _fake_ensemble(model, B=3, T=5), energy_conserved=True)
    labels = [ax.get_ylabel() for ax in figs["trajectory"].axes if ax.get_visible()]
    labels += [ax.get_xlabel() for fig in figs.values() for ax in fig.axes if ax.get_xlabel()]
    if "path" in figs:
        labels += [figs["path"].axes[0].get_ylabel()]
    units = [*model.units, model.time_unit]
    if isinstance(model, gmm.AbstractRollingModel):  # the contact point's position
        units.append(model.length_unit)
    assert labels and all(re.search(r" \[(.+)\]$", label)[1] in units for label in labels), labels


# -- the persistent compilation cache ---------------------------------------------------------


def test_a_second_run_loads_compiled_programs_from_the_cache(tmp_path):
    """Counted by JAX's cache events (`compilation_cache` in the summary), not timed; the cache is
    a temporary directory (`GEOMECH_CACHE_DIR`), as for every test."""
    cache = tmp_path / "cache"
    env = {**os.environ, "GEOMECH_CACHE_DIR": str(cache)}
    records = []
    for i, extra in enumerate(([], [], ["--no-cache"])):
        out = tmp_path / str(i)
        argv = ["run", "pendulum", "--t1", "0.01", "--points", "3", "--out", str(out), *extra]
        done = subprocess.run(
            [sys.executable, "-m", "geomech", *argv],
            capture_output=True,
            text=True,
            env=env,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        records.append(json.loads((out / "pendulum_summary.json").read_text()))
        assert "compilation cache" in done.stdout
        if i == 0:
            stored = sorted(p.name for p in cache.iterdir())
    first, second, off = (r["compilation_cache"] for r in records)
    assert first["dir"] == second["dir"] == str(cache) and off["dir"] is None
    assert first["programs"] > 0 and first["from_cache"] == 0 and stored
    # every program, the main integration program too (its checks are NaNs, not host callbacks)
    assert second["programs"] == first["programs"] == second["from_cache"]
    assert sorted(p.name for p in cache.iterdir()) == stored  # --no-cache wrote nothing


def test_a_failure_in_a_cached_process_is_reported(tmp_path):
    """The `geomech` process runs equinox's checks as NaNs (`EQX_ON_ERROR=nan`) so that its
    programs can be cached: a failed trajectory is still reported, with the failure status."""
    env = {k: v for k, v in os.environ.items() if k != "EQX_ON_ERROR"}
    env["GEOMECH_CACHE_DIR"] = str(tmp_path / "cache")
    argv = [
        "run",
        "pendulum",
        "--batch",
        "2",
        "--t1",
        "3",
        "--max-steps",
        "20",
        "--out",
        str(tmp_path),
    ]
    done = subprocess.run(
        [sys.executable, "-m", "geomech", *argv],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == cli.EXIT_FAILED, done.stderr[-2000:]
    summary = json.loads((tmp_path / "pendulum_summary.json").read_text())
    assert summary["failures"] == {"max_steps_reached": [0, 1]}


def test_help_shows_the_cache_and_in_process_runs_restore_jax_settings(
    capsys, tmp_path, monkeypatch
):
    with pytest.raises(SystemExit):
        cli.main(["--help"])
    assert str(gm_cache.default_cache_dir()) in capsys.readouterr().out.replace("\n", " ")
    before = jax.config.jax_compilation_cache_dir
    (tmp_path / "file").write_text("")
    monkeypatch.setenv("GEOMECH_CACHE_DIR", str(tmp_path / "file" / "cache"))
    code, out, err = run(capsys, "run", "pendulum", "--t1", "0.01", "--points", "3")
    assert code == 0 and re.search(r"compilation cache +off\n", out)  # could not be made
    assert err.startswith("geomech: warning: cannot create the compilation cache directory")
    assert jax.config.jax_compilation_cache_dir == before


def test_enable_compilation_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GEOMECH_CACHE_DIR", str(tmp_path / "env"))
    assert gm_cache.default_cache_dir() == tmp_path / "env"
    monkeypatch.delenv("GEOMECH_CACHE_DIR")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert gm_cache.default_cache_dir() == tmp_path / "xdg" / "geomech" / "jax"
    with gm_cache.compilation_cache(tmp_path / "nb") as path:
        assert path == tmp_path / "nb" and path.is_dir()
        assert jax.config.jax_compilation_cache_dir == str(path)
        assert gm.enable_compilation_cache(tmp_path / "other") == tmp_path / "other"
    (tmp_path / "file").write_text("")
    with pytest.raises(ValueError, match="cannot create the compilation cache directory"):
        gm.enable_compilation_cache(tmp_path / "file" / "sub")


def test_a_cache_enabled_in_a_with_block_gives_back_the_enclosing_one(tmp_path):
    """A `compilation_cache` block inside another (the CLI run in-process by a notebook or a
    test that has its own cache) restores the enclosing geomech cache itself, not JAX's plain
    cache for its directory (whose writes are not atomic)."""
    from jax._src import compilation_cache as jax_cache

    with gm_cache.compilation_cache(tmp_path / "outer") as outer:
        with gm_cache.compilation_cache(tmp_path / "inner"):
            assert str(jax_cache._cache.path) == str(tmp_path / "inner")
        assert type(jax_cache._cache).__name__ == "AtomicCache"
        assert str(jax_cache._cache.path) == str(outer)
        assert jax.config.jax_compilation_cache_dir == str(outer)


def _cached_run(cache, out, *extra):
    """`geomech run pendulum` (short) in a new process with the cache `cache`: its summary's
    `compilation_cache` record and its stderr."""
    argv = ["run", "pendulum", "--t1", "0.01", "--points", "3", "--out", str(out), *extra]
    done = subprocess.run(
        [sys.executable, "-m", "geomech", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "GEOMECH_CACHE_DIR": str(cache)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads((out / "pendulum_summary.json").read_text())["compilation_cache"], done.stderr


def test_a_copied_symlinked_or_damaged_cache_loads_and_heals(tmp_path):
    """The cache's keys do not depend on its path (JAX's XLA caches off): a copy reached through
    a symlink finds every program. Its entries truncated (an interrupted write), the run compiles
    them again with one warning line (no JAX warning per program, no --float32 remedy) and
    replaces them: the next run loads every program."""
    cache = tmp_path / "cache"
    first, err = _cached_run(cache, tmp_path / "1")
    assert first["programs"] > 0 and first["damaged"] == first["not_kept"] == 0 and not err
    copy = tmp_path / "copy"
    shutil.copytree(cache, copy)
    entries = sorted(copy.glob("*-cache"))
    assert entries and not list(copy.glob(".geomech-tmp-*"))  # written atomically
    truncated = {}
    for entry in entries:
        with open(entry, "r+b") as f:
            f.truncate(entry.stat().st_size // 2)
        truncated[entry] = entry.stat().st_size
    (tmp_path / "link").symlink_to(copy)
    damaged, err = _cached_run(tmp_path / "link", tmp_path / "2")
    assert damaged["damaged"] == damaged["programs"] == first["programs"]
    assert all(entry.stat().st_size > size for entry, size in truncated.items())  # replaced
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("geomech: warning: damaged entries in the compilation cache")
    assert "replaced" in lines[0] and "float32" not in lines[0]
    healed, err = _cached_run(copy, tmp_path / "3")  # the copy itself, not through the link
    assert healed["from_cache"] == healed["programs"] == first["programs"] and not err
    assert healed["damaged"] == 0


def test_the_cache_heals_keeps_reading_when_it_cannot_write_and_reports_once(
    tmp_path, monkeypatch
):
    """In one process, through JAX's own compilation path: a program is written and loaded (after
    `jax.clear_caches`), also through a symlink; a truncated entry is compiled again without
    JAX's warning, replaced (one warning) and loaded next time; with writes refused (a read-only
    or full directory) programs are still loaded, new ones are not kept, and one warning names
    the directory, the reason and the remedy."""
    f = jax.jit(lambda x: 2.0 * x + 1.0)
    xs = {n: jnp.ones(n) for n in (3, 4, 5, 6)}  # made outside the cache: f's programs only
    load = lambda n: (jax.clear_caches(), f(xs[n]).block_until_ready())
    delta = lambda before: {k: v - before[k] for k, v in gm_cache.cache_counts().items()}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gm_cache.compilation_cache(tmp_path / "cache") as path:
            before = gm_cache.cache_counts()
            load(3)
            load(3)
            assert delta(before) == {"requests": 2, "hits": 1, "damaged": 0, "unwritable": 0}
            (entry,) = path.glob("*-cache")
            (tmp_path / "link").symlink_to(path)
        with gm_cache.compilation_cache(tmp_path / "link"):
            before = gm_cache.cache_counts()
            load(3)
            assert delta(before)["hits"] == 1  # the same key through another path
        assert caught == []
        with gm_cache.compilation_cache(tmp_path / "cache"):
            size = entry.stat().st_size
            entry.write_bytes(entry.read_bytes()[: size // 2])
            before = gm_cache.cache_counts()
            load(3)
            load(3)
            assert delta(before) == {"requests": 2, "hits": 1, "damaged": 1, "unwritable": 0}
            assert entry.stat().st_size > size // 2  # replaced (by the program compiled again)
            (message,) = [str(w.message) for w in caught]
            assert message.startswith(f"damaged entries in the compilation cache {path} ")
            caught.clear()

            def refuse(*args):
                raise OSError(errno.EROFS, "Read-only file system")

            monkeypatch.setattr(os, "replace", refuse)
            before = gm_cache.cache_counts()
            for n in (4, 5, 6):
                load(n)
            load(3)  # still read
            assert delta(before) == {"requests": 4, "hits": 1, "damaged": 0, "unwritable": 3}
            (message,) = [str(w.message) for w in caught]
            assert f"compilation cache {path} cannot be written (Read-only file system)" in message
            assert "GEOMECH_CACHE_DIR" in message and "--no-cache" in message
            assert sorted(p.name for p in path.iterdir()) == [entry.name]  # no partial entries


def test_an_entry_another_process_wrote_meanwhile_is_kept_and_not_reported(tmp_path):
    """Two processes sharing a cache (the test suite's workers, parallel runs) compile the same
    program at once: both miss, and the second to write finds the first's entry in place. It is
    sound: kept as it is, and neither counted nor reported as damaged."""
    from jax._src import compilation_cache as jax_cache

    f = jax.jit(lambda x: 3.0 * x - 1.0)
    x = jnp.ones(7)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with gm_cache.compilation_cache(tmp_path / "cache") as path:
            f(x).block_until_ready()
            (entry,) = path.glob("*-cache")
            value, before = entry.read_bytes(), gm_cache.cache_counts()
            jax_cache._cache.put(entry.name.removesuffix("-cache"), value)  # the second write
            assert gm_cache.cache_counts() == before
            assert entry.read_bytes() == value
            assert sorted(p.name for p in path.iterdir()) == [entry.name]
    assert caught == []


def test_warnings_of_a_run_are_one_line_each_with_the_remedy_of_its_precision():
    def caught(*warnings_):
        return [types.SimpleNamespace(message=m, category=c) for m, c in warnings_]

    precision = ("rtol = 1e-17 and atol = 1e-17 are below what float64 can deliver", gm.PrecisionWarning)
    other = ("the compilation cache /x cannot be written (Read-only file system): ...", UserWarning)
    lines = _run.warning_lines(caught(precision, other, other), f64=True)
    assert lines == [f"{precision[0]} (here: raise --rtol and --atol)", other[0]]
    lines = _run.warning_lines(caught(precision), f64=False)
    assert lines == [f"{precision[0]} (here: drop --float32, or raise --rtol and --atol)"]


# -- compare, demo, entry point ----------------------------------------------------------------


@pytest.mark.parametrize("name", ["thesis_example2", "pivoted_top"])
def test_compare_solvers_agree(capsys, name):
    # the defaults of `geomech demo`'s comparison; a model on SO(3) × ℝ³ (random states q ⊕ δ)
    code, out, _ = run(capsys, "compare", name)
    assert code == 0, out
    for solver in ("projection", "gauss", "gibbs-appell", "gibbs-appell-d", "kane", "multipliers"):
        assert solver in out
    worst = float(out.split("largest disagreement:")[1].split()[0])
    assert worst < 1e-10


def test_demo(capsys):
    code, out, _ = run(capsys, "demo")
    assert code == 0
    for part in ("Holonomic", "Nonholonomic", "Generalized", "ensemble", "compiled in"):
        assert part in out
    worst = float(out.split("largest disagreement with Projection:")[1].split()[0])
    assert worst < 1e-10


def test_python_dash_m_entry_point():
    done = subprocess.run(
        [sys.executable, "-m", "geomech", "--help"], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0 and "demo" in done.stdout


# -- user errors: one line, exit status 2 -------------------------------------------------------


@pytest.mark.parametrize(
    "argv, fragment",
    [
        (["run", "no_such_model"], "unknown model"),
        (["run", "pendulm"], "did you mean pendulum"),
        (["run", "sleig"], "did you mean sleigh?"),
        (["run", "pendulum", "--solver", "nope"], "invalid choice"),
        (["run", "pendulum", "--param", "mass=2"], "no parameter 'mass'"),
        (["run", "pendulum", "--param", "m=heavy"], "needs a float"),
        (["run", "pendulum", "--param", "m=nan"], "finite"),
        (["run", "pendulum", "--param", "m"], "key=value"),
        (["run", "pendulum", "--param", "m=0"], "mass matrix"),
        (["run", "rolling_disk", "--param", "m=-1"], "mass matrix"),
        (["run", "pendulum", "--param", "form=spiral"], "form must be"),
        (["run", "pendulum", "--t1", "-1"], "--t1 must be after"),
        (["run", "pendulum", "--t1", "inf"], "finite"),
        (["run", "pendulum", "--points", "1"], "--points: must be >= 2"),
        (["run", "pendulum", "--rtol", "0"], "--rtol: must be > 0"),
        (["run", "pendulum", "--atol=-1e-9"], "--atol: must be > 0"),
        (["run", "pendulum", "--batch", "0"], "--batch: must be >= 1"),
        (["run", "pendulum", "--batch", "2.5"], "needs an integer"),
        (["run", "pendulum", "--max-steps", "0"], "--max-steps: must be >= 1"),
        (["run", "pendulum", "--max-steps", "1e20"], "--max-steps: must be <= 2147483647"),
        (["run", "pendulum", "--max-steps", "1e400"], "--max-steps: needs an integer"),
        (["run", "pendulum", "--seed", str(2**64)], "--seed: must be <= 4294967295"),
        (["run", "pendulum", "--t1", "-5"], "--t1 must be after the start time t0 = 0"),
        (["run", "sleigh", "--animate"], "give --out"),
        (["run", "pendulum", "--animate", "--out", "unused"], "has no 3-D scene"),
        (["run", "pendulum", "--repeat", "-1"], "--repeat: must be >= 0"),
        (["run", "pendulum", "--batch", "10000000"], "--max-output-mb"),
        (["run", "pendulum", "--max-output-mb", "0"], "must be > 0"),
        (["run", "thesis_example2", "--solver", "momentum"], "does not apply"),
        (["compare", "pendulum", "--states", "0"], "--states: must be >= 1"),
        (["compare", "pendulum", "--tol", "nan"], "finite"),
        (["frobnicate"], "invalid choice"),
    ],
)
def test_user_errors_are_one_line(capsys, monkeypatch, argv, fragment):
    _no_simulation(monkeypatch)
    code, _, err = run(capsys, *argv)
    assert code == cli.EXIT_USER_ERROR, err
    assert fragment in err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_runtime_failures_are_one_line(capsys, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("XLA ran out of something\nwith a long second line")

    monkeypatch.setattr(_run, "simulate_once", boom)
    code, _, err = run(capsys, "run", "pendulum")
    assert code == cli.EXIT_FAILED
    assert err.strip() == (
        "geomech: error: RuntimeError: XLA ran out of something "
        "(set GEOMECH_TRACEBACK=1 for the traceback)"
    )


def test_violating_3_19_is_a_user_error(capsys):
    # thesis Example 2: (3.19) fails where A(q) = m1/m2; put the initial state there
    model = gmm.ThesisExample2()
    A0 = float(model.A(model.initial_state().q))
    code, _, err = run(capsys, "compare", "thesis_example2", "--param", f"m1={A0 * model.m2!r}")
    assert code == cli.EXIT_USER_ERROR
    assert "(3.19)" in err and len(err.strip().splitlines()) == 1
