"""geomech.plot draws what the solution contains (checked on the artists' data)."""

import types

import diffrax
import jax
import jax.numpy as jnp
import matplotlib
import numpy as np
import pytest

import geomech as gm
import geomech.models as gmm

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from geomech import plot  # noqa: E402


def oscillator(batch=None):
    """A Solution-like record of unit harmonic oscillators q = cos(t + c) (exact), n = 2."""
    ts = np.linspace(0.0, 3.0, 31)
    c = np.zeros(1) if batch is None else np.linspace(0.0, 1.0, batch)
    q = np.stack([np.cos(ts[None] + c[:, None]), 2 * np.sin(ts[None] + c[:, None])], -1)
    v = np.stack([-np.sin(ts[None] + c[:, None]), 2 * np.cos(ts[None] + c[:, None])], -1)
    energy = 0.5 * np.sum(v**2 + q**2, -1) + 1e-9 * ts  # a small known drift
    residual = 1e-12 * (1 + ts) * np.ones_like(energy)
    squeeze = (lambda x: x[0]) if batch is None else (lambda x: x)
    return types.SimpleNamespace(
        ts=ts if batch is None else np.broadcast_to(ts, (batch, ts.size)),
        states=gm.State(jnp.asarray(squeeze(q)), jnp.asarray(squeeze(v))),
        energy=squeeze(energy),
        constraint_residual=squeeze(residual),
        position_residual=squeeze(np.zeros_like(energy)),
        manifold=gm.Euclidean(2),  # as `gm.Solution` carries it
    )


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def test_trajectory_draws_each_coordinate():
    sol = oscillator()
    ax = plot.trajectory(sol, labels=["x", "y"])
    lines = ax.get_lines()
    assert len(lines) == 2
    np.testing.assert_allclose(lines[1].get_ydata(), np.asarray(sol.states.q)[:, 1])
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["x", "y"]
    ax = plot.trajectory(oscillator(batch=4), coordinates=[0])
    assert len(ax.get_lines()) == 4  # one line per trajectory
    with pytest.raises(ValueError, match="labels"):
        plot.trajectory(sol, labels=["x"])


def test_phase_portrait_is_q_against_v():
    sol = oscillator()
    ax = plot.phase_portrait(sol, 1)
    curve = ax.get_lines()[0]
    np.testing.assert_allclose(curve.get_xdata(), np.asarray(sol.states.q)[:, 1])
    np.testing.assert_allclose(curve.get_ydata(), np.asarray(sol.states.v)[:, 1])


def test_drift_plots_energy_change_and_residuals():
    sol = oscillator(batch=3)
    ax = plot.drift(sol)
    lines = {line.get_label(): line for line in ax.get_lines()}
    floor = lines.pop("round-off level").get_ydata()[0]
    assert len(lines) == 2  # no holonomic part: |h| is left out
    assert all("max over 3 trajectories" in k for k in lines)  # a batch shows its maximum
    energy = next(v for k, v in lines.items() if "E_L" in k)
    assert "(energy drift)" in energy.get_label()
    np.testing.assert_allclose(energy.get_ydata()[1:], 1e-9 * sol.ts[0][1:], rtol=1e-6)
    # the exact zero at t0 is drawn at the round-off level: no gap on the log scale
    assert energy.get_ydata()[0] == floor == np.finfo(float).eps * np.max(sol.energy[:, 0])
    assert ax.get_yscale() == "log"
    ax = plot.drift(oscillator(), energy="change")
    labels = [line.get_label() for line in ax.get_lines()]
    assert "$|E_L(t) - E_L(t_0)|$ (energy change)" in labels  # one trajectory: no "max over"
    with pytest.raises(ValueError, match="energy"):
        plot.drift(sol, energy="loss")


def test_ensemble_draws_median_and_bands_per_coordinate():
    sol = oscillator(batch=5)
    fig = plot.ensemble(sol, labels=["x", "y"], units=["m", "rad"], time_unit="s")
    ax_x, ax_y = fig.axes
    assert (ax_x.get_ylabel(), ax_y.get_ylabel()) == ("x [m]", "y [rad]")
    assert ax_y.get_xlabel() == "t [s]"
    q = np.asarray(sol.states.q)
    (median,) = ax_y.get_lines()
    np.testing.assert_allclose(median.get_ydata(), np.median(q[:, :, 1], axis=0))
    assert len(ax_y.collections) == 2  # the 5–95 % and 25–75 % bands
    band = ax_y.collections[0].get_paths()[0].vertices[:, 1]
    lo, hi = np.percentile(q[:, :, 1], [5, 95], axis=0)
    np.testing.assert_allclose([band.min(), band.max()], [lo.min(), hi.max()])
    assert "over 5 trajectories" in fig.get_suptitle()
    fig = plot.ensemble(oscillator(), velocities=True, labels=["x", "y"], units=["m", "m"])
    (curve,) = fig.axes[0].get_lines()  # one trajectory: the curve itself
    np.testing.assert_allclose(curve.get_ydata(), np.asarray(oscillator().states.v)[:, 0])
    assert fig.axes[0].get_ylabel() == "dx/dt"  # no time unit: no velocity unit


def test_ensemble_ignores_the_padding_of_failed_trajectories():
    sol = oscillator(batch=3)
    q = np.asarray(sol.states.q).copy()
    q[0, 10:] = np.inf  # trajectory 0 stopped at index 10
    sol.states = gm.State(jnp.asarray(q), sol.states.v)
    (median,) = plot.ensemble(sol).axes[0].get_lines()
    np.testing.assert_allclose(median.get_ydata()[10:], np.median(q[1:, 10:, 0], axis=0))


def test_path_draws_the_coordinate_pair():
    sol = oscillator(batch=4)
    ax = plot.path(sol, (0, 1), labels=["x", "y"], units=["m", "m"])
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("x [m]", "y [m]")
    lines = ax.get_lines()
    assert len(lines) == 5  # four paths and their start points
    q = np.asarray(sol.states.q)
    np.testing.assert_allclose(lines[2].get_xydata(), q[2])
    np.testing.assert_allclose(lines[-1].get_xydata(), q[:, 0])
    assert ax.get_aspect() == 1.0


def test_summary_figure_and_animation(tmp_path):
    sol = oscillator()
    fig = plot.summary(sol, labels=["x", "y"], title="oscillator")
    assert len(fig.axes) == 3
    points = lambda q: jnp.array([[0.0, 0.0], [q[0], q[1]]])
    anim = plot.animate_planar(sol, points, trace=1)
    anim._draw_next_frame(5, blit=False)
    seg = anim._fig.axes[0].get_lines()[0]
    np.testing.assert_allclose(seg.get_xdata(), [0.0, float(sol.states.q[5, 0])])
    path = tmp_path / "a.gif"
    anim.save(path, writer="pillow", fps=10)
    assert path.read_bytes()[:6] == b"GIF89a"
    with pytest.raises(ValueError, match="single trajectory"):
        plot.animate_planar(oscillator(batch=2), points)


def test_plots_a_real_simulation():
    model = gmm.CartesianPendulum()
    sol = gm.simulate(
        model(), model.initial_state(), 0.0, 2.0, saveat=diffrax.SaveAt(ts=jnp.linspace(0, 2, 21))
    )
    ax = plot.drift(sol)
    labels = [line.get_label() for line in ax.get_lines()]
    assert any("h(t, q)" in label for label in labels)  # the pendulum is holonomic
    drawn = {line.get_label(): line.get_ydata() for line in ax.get_lines()}
    e = np.asarray(sol.energy)
    drift = np.abs(e - e[0])
    floor = np.finfo(float).eps * max(1.0, abs(e[0]))
    np.testing.assert_allclose(
        drawn["$|E_L(t) - E_L(t_0)|$ (energy drift)"], np.maximum(drift, floor)
    )


def spinning_body(batch=None):
    """A Solution-like record of a body spinning about e₃ at ω = 2 (exact: R = exp(2t ê₃)),
    its reference point moving on x = (t, 2t)."""
    import jaxlie

    ts = np.linspace(0.0, 1.5, 16)
    R = jaxlie.SO3.exp(jnp.asarray(np.outer(2 * ts, [0.0, 0.0, 1.0])))
    x = jnp.asarray(np.stack([ts, 2 * ts], -1))
    v = jnp.broadcast_to(jnp.array([0.0, 0.0, 2.0, 1.0, 2.0]), (ts.size, 5))
    q, t = (R, x), ts
    if batch is not None:
        q = jax.tree_util.tree_map(lambda a: jnp.broadcast_to(a, (batch, *a.shape)), q)
        v, t = jnp.broadcast_to(v, (batch, *v.shape)), np.broadcast_to(ts, (batch, ts.size))
    manifold = gm.Product(gm.SO3(), gm.Euclidean(2))
    return types.SimpleNamespace(ts=t, states=gm.State(q, v), manifold=manifold)


def test_angular_velocity_orientation_and_contact_path_of_a_rigid_body():
    sol = spinning_body()
    ax = plot.angular_velocity(sol)
    lines = ax.get_lines()
    assert len(lines) == 3
    np.testing.assert_allclose(lines[2].get_ydata(), 2.0)  # ω₃
    np.testing.assert_allclose(lines[0].get_ydata(), 0.0)
    ax = plot.orientation(sol, point=(2.0, 0.0, 0.0))  # normalized: the body's first axis
    trace = [ln for ln in ax.get_lines() if ln.get_label() == "$R(t)\\,p$"][0]
    xs, ys, zs = trace.get_data_3d()
    np.testing.assert_allclose(xs, np.cos(2 * sol.ts), atol=1e-12)
    np.testing.assert_allclose(ys, np.sin(2 * sol.ts), atol=1e-12)
    np.testing.assert_allclose(zs, 0.0, atol=1e-12)
    ax = plot.contact_path(sol)  # the ℝ² factor
    np.testing.assert_allclose(ax.get_lines()[0].get_ydata(), 2 * sol.ts)
    # a contact point below the reference point: x + R (1, 0, 0), horizontal part
    ax = plot.contact_path(sol, lambda q: q[1] + q[0].apply(jnp.array([1.0, 0.0, 0.0]))[:2])
    np.testing.assert_allclose(ax.get_lines()[0].get_xdata(), sol.ts + np.cos(2 * sol.ts), atol=1e-12)


def test_rigid_body_plots_of_a_batch():
    sol = spinning_body(batch=3)
    assert len(plot.angular_velocity(sol).get_lines()) == 9
    assert len(plot.contact_path(sol).get_lines()) == 3 + 1  # the paths and the starts


def test_contact_path_tells_solutions_apart():
    """Two solutions on one axes: each path in its own colour (given, or the axes' next one) with
    its own legend entry; the other members of a batch in the same colour, thinner."""
    ax = plot.contact_path(spinning_body(), label="hard ball", color="tab:red")
    ax = plot.contact_path(spinning_body(batch=3), label="rubber ball", ax=ax)
    legend = {t.get_text() for t in ax.get_legend().get_texts()}
    assert legend == {"hard ball", "rubber ball"}
    by_label = {ln.get_label(): ln for ln in ax.get_lines()}
    hard, rubber = by_label["hard ball"], by_label["rubber ball"]
    assert matplotlib.colors.same_color(hard.get_color(), "tab:red")
    assert not matplotlib.colors.same_color(rubber.get_color(), hard.get_color())
    members = [ln for ln in ax.get_lines() if ln.get_linewidth() < 1.0]
    assert len(members) == 2 and all(ln.get_color() == rubber.get_color() for ln in members)
    assert len(ax.get_lines()) == 1 + 1 + 3 + 1  # paths and start points of both


def test_rolling_models_contact_point():
    """`model.contact_point(q)` (what `contact_path` and `geomech run` draw): below the centre for
    a ball; for the tilted rattleback the lowest point of its ellipsoid, found here by minimizing
    the height over the surface (SciPy), independent of the support-function formula."""
    import jaxlie
    import scipy.optimize

    R = jaxlie.SO3.exp(jnp.array([0.3, -0.2, 0.4]))
    x = jnp.array([0.1, -0.05])
    np.testing.assert_allclose(gmm.ChaplyginSphere().contact_point((R, x)), x, atol=1e-15)
    model = gmm.Rattleback()
    a, b, c = np.asarray(model.semi_axes)
    M = np.asarray(R.as_matrix())
    surface = lambda u: np.array(
        [a * np.cos(u[0]) * np.sin(u[1]), b * np.sin(u[0]) * np.sin(u[1]), c * np.cos(u[1])]
    )
    grid = [(u, w) for u in np.linspace(0, 2 * np.pi, 73) for w in np.linspace(0, np.pi, 37)]
    start = min(grid, key=lambda u: (M @ surface(u))[2])
    low = scipy.optimize.minimize(lambda u: (M @ surface(u))[2], start, tol=1e-14).x
    want = (M @ surface(low))[:2] + np.asarray(x)
    np.testing.assert_allclose(model.contact_point((R, x)), want, atol=1e-7)
    assert np.linalg.norm(want - np.asarray(x)) > 1e-2  # not below the centre


def test_summary_on_a_group_shows_the_velocity_not_a_phase_portrait():
    """On SO(3) × ℝ² the middle panel is v against t (no quaternion parameter against ω₁)."""
    sol = spinning_body()
    sol.energy = np.ones_like(sol.ts)
    sol.constraint_residual = sol.position_residual = np.zeros_like(sol.ts)
    labels = ["omega1", "omega2", "omega3", "vx", "vy"]
    fig = plot.summary(sol, labels=labels)
    lines = fig.axes[1].get_lines()
    assert [ln.get_label() for ln in lines] == labels
    for i, ln in enumerate(lines):
        np.testing.assert_allclose(ln.get_xdata(), sol.ts)
        np.testing.assert_allclose(ln.get_ydata(), np.asarray(sol.states.v)[:, i])
    assert len(fig.axes[0].get_lines()) == 4 + 2  # the quaternion and x over time


def test_conserved_draws_relative_drift():
    sol = spinning_body()
    drifting = lambda q, v: 1.0 + 1e-6 * q[1][0]  # x = t: drift 1e-6 t relative to 1
    exact = lambda q, v: v[2] ** 2  # constant
    ax = plot.conserved(sol, {"drifting": drifting, "exact": exact})
    lines = {ln.get_label(): ln.get_ydata() for ln in ax.get_lines()}
    np.testing.assert_allclose(lines["drifting"][1:], 1e-6 * sol.ts[1:], rtol=1e-6)
    assert np.all(lines["exact"] == np.finfo(float).eps)  # at the round-off floor


def test_rigid_body_plots_refuse_coordinates():
    with pytest.raises(ValueError, match="needs configurations on gm.SO3"):
        plot.angular_velocity(oscillator())
    with pytest.raises(ValueError, match="needs `contact=`"):
        plot.contact_path(oscillator())
    with pytest.raises(ValueError, match="non-zero vector"):
        plot.orientation(spinning_body(), point=(0.0, 0.0))
    with pytest.raises(ValueError, match="at least one"):
        plot.conserved(spinning_body(), {})
