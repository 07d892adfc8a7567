"""Plots of simulations: trajectories, phase portraits, energy and constraint drift, animations,
and for rigid bodies the angular velocity, the orientation, the contact path and conserved quantities.

Every function takes a `gm.Solution` (single or batched, leading axis `B`) and draws into a
matplotlib `Axes` (a new figure when `ax` is `None`), returning the axes (or the animation).
matplotlib is imported when a function is called, so `import geomech` does not need it:
`pip install 'geomech[plot]'`.

`animate` is the exception: it writes the bodies of a solution moving in 3-D as one
self-contained HTML page (three.js inside, nothing fetched; docs/seeing_it.md), drawn as a
`Scene` (a `Mesh` and where it is for each configuration); `export_frames` renders such a page to
PNG frames (and an MP4 with ffmpeg) in a headless Chromium.
"""

import contextlib
import pathlib
import shutil
import subprocess
import warnings
from collections.abc import Callable, Sequence

import jax
import numpy as np

from . import _animation, _browser
from ._animation import Animation as Animation
from ._geometry import (
    AbstractCoordinateManifold,
    angular_velocity_indices,
    attitude,
    point_parameters,
)
from ._mesh import Mesh as Mesh
from ._scene import Scene as Scene


def _pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("geomech.plot needs matplotlib: pip install 'geomech[plot]'.") from e
    return plt


def _axes(ax, **subplots):
    if ax is not None:
        return ax
    _, ax = _pyplot().subplots(**subplots)
    return ax


def point_array(q) -> np.ndarray:
    """The saved points `sol.states.q` as one NumPy array with the parameters last: coordinates
    as they are; on a Lie group the `jaxlie` element's parameters (the quaternion `wxyz` of an
    SO(3), `wxyz_xyz` of an SE(3)), the factors of a product concatenated in order
    (`(R, x)` -> `(w, x, y, z, x₁, x₂, x₃)`)."""
    return np.asarray(point_parameters(q))


def _rates(sol) -> bool:
    """Whether the velocities of `sol` are the rates $\\dot q$ of its coordinates (on a
    coordinate manifold; a group's are body velocities, named as they are)."""
    return isinstance(sol.manifold, AbstractCoordinateManifold)


def _batched(x, ndim):
    """`x` as a batch: add a leading axis if it has only `ndim` axes."""
    x = np.asarray(x)
    return x[None] if x.ndim == ndim else x


def _labels(labels, n, prefix):
    if labels is None:
        return [f"${prefix}^{{{i + 1}}}$" for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"got {len(labels)} labels for {n} coordinates.")
    return list(labels)


def _finite(ts, *ys):
    """Drop the `inf` padding of `SaveAt(steps=True)`."""
    keep = np.isfinite(ts)
    return (ts[keep], *(y[keep] for y in ys))


def trajectory(
    sol, coordinates: Sequence[int] | None = None, *, labels=None, velocities=False, ax=None
):
    """Coordinates (or velocities) against time.

    **Arguments:**

    - `sol`: a `gm.Solution`; a batch draws every trajectory, thinner.
    - `coordinates`: indices to draw (all by default).
    - `labels`: names of all $n$ coordinates (default $q^1, \\dots, q^n$). On a Lie group $q$
        is drawn as its stored parameters (`point_array`) and `labels` with `velocities` name
        the components of $v$ themselves (the body angular velocity: no $d/dt$ is added).
    - `velocities`: draw $v$ instead of $q$.
    - `ax`: a matplotlib `Axes` to draw into.

    **Returns:** the `Axes`.
    """
    ts = _batched(sol.ts, 1)
    ys = _batched(sol.states.v if velocities else point_array(sol.states.q), 2)
    n = ys.shape[-1]
    names = _labels(labels, n, "v" if velocities else "q")
    if velocities and labels is not None and _rates(sol):
        names = [f"d{name}/dt" for name in names]
    coordinates = range(n) if coordinates is None else coordinates
    ax = _axes(ax)
    colors = _pyplot().rcParams["axes.prop_cycle"].by_key()["color"]
    lw = 1.5 if ys.shape[0] == 1 else 0.6
    for j, i in enumerate(coordinates):
        for b in range(ys.shape[0]):
            t, y = _finite(ts[b], ys[b, :, i])
            ax.plot(t, y, color=colors[j % len(colors)], lw=lw, label=names[i] if b == 0 else None)
    ax.set_xlabel("t")
    ax.legend(loc="best", fontsize="small")
    return ax


def phase_portrait(sol, i: int = 0, *, label: str | None = None, ax=None):
    """The phase curve $(q^i(t), v^i(t))$ of coordinate `i`; a batch draws one curve per trajectory.

    **Returns:** the `Axes`.
    """
    ts = _batched(sol.ts, 1)
    q, v = _batched(point_array(sol.states.q), 2), _batched(sol.states.v, 2)
    name = label or f"q^{{{i + 1}}}"
    ax = _axes(ax)
    for b in range(q.shape[0]):
        _, x, y = _finite(ts[b], q[b, :, i], v[b, :, i])
        ax.plot(x, y, lw=1.0 if q.shape[0] == 1 else 0.6)
        ax.plot(x[:1], y[:1], "o", ms=3, color="k")
    ax.set_xlabel(f"${name.strip('$')}$")
    ax.set_ylabel(f"$\\dot {{{name.strip('$')}}}$")
    return ax


def _axis_label(name: str, unit: str = "") -> str:
    return f"{name} [{unit}]" if unit else name


def _units(units, n, time_unit="", velocities=False):
    """Per-coordinate units (`""` where unknown); velocities get `unit/time_unit`."""
    units = [""] * n if units is None else list(units)
    if len(units) != n:
        raise ValueError(f"got {len(units)} units for {n} coordinates.")
    if velocities:
        return [f"{u}/{time_unit}" if u and time_unit else "" for u in units]
    return units


@contextlib.contextmanager
def _all_nan_ok():
    """Silence NumPy's warning for a time at which every trajectory has failed (NaN is drawn)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        yield


def _reached(x):
    """`x` with the `inf` padding after a failed trajectory (and any non-finite value) as NaN."""
    x = np.asarray(x, float)
    return np.where(np.isfinite(x), x, np.nan)


def ensemble(
    sol,
    coordinates: Sequence[int] | None = None,
    *,
    labels=None,
    units=None,
    time_unit: str = "",
    velocities: bool = False,
    percentiles: tuple[float, float] = (5.0, 95.0),
    fig=None,
):
    """One panel per coordinate: for a batch the median over the trajectories and the band between
    two percentiles (and the interquartile band), for a single trajectory the curve itself.

    Each coordinate gets its own axis, so coordinates of different scales (positions, angles) stay
    readable; failed trajectories count only up to where they stopped.

    **Arguments:**

    - `sol`: a `gm.Solution`, batched (leading axis `B`) or not.
    - `coordinates`: indices to draw (all by default).
    - `labels`: names of all $n$ coordinates (default $q^1, \\dots, q^n$).
    - `units`: the unit of each coordinate (`""` where unknown); `time_unit` that of $t$.
    - `velocities`: draw $v$ instead of $q$ (on a Lie group `labels` and `units` then name the
        components of $v$ as given, as the models on groups do: see `trajectory`).
    - `percentiles`: the outer band.
    - `fig`: a matplotlib `Figure` to draw into (a new one by default).

    **Returns:** the `Figure`; `fig.axes[j]` is the panel of the `j`-th drawn coordinate.
    """
    plt = _pyplot()
    ts = _reached(_batched(sol.ts, 1))
    ys = _reached(_batched(sol.states.v if velocities else point_array(sol.states.q), 2))
    B, _, n = ys.shape
    names = _labels(labels, n, "v" if velocities else "q")
    derivative = velocities and _rates(sol)  # on a group `labels` name v's components
    if derivative and labels is not None:
        names = [f"d{name}/dt" for name in names]
    units = _units(units, n, time_unit, derivative)
    coordinates = list(range(n) if coordinates is None else coordinates)
    cols = min(len(coordinates), 3)
    rows = -(-len(coordinates) // cols)
    if fig is None:
        fig = plt.figure(figsize=(4.2 * cols, 2.6 * rows + 0.5), layout="constrained")
    axes = fig.subplots(rows, cols, sharex=True, squeeze=False).ravel()
    with _all_nan_ok():
        t = np.nanmedian(ts, axis=0)  # the saved times (equal across the batch for SaveAt(ts=...))
    for ax, i in zip(axes, coordinates, strict=False):
        y = ys[:, :, i]
        if B == 1:
            ax.plot(t, y[0], color="C0", lw=1.5)
        else:
            with _all_nan_ok():
                lo, q1, med, q3, hi = np.nanpercentile(
                    y, [percentiles[0], 25.0, 50.0, 75.0, percentiles[1]], axis=0
                )
            band = f"{percentiles[0]:g}–{percentiles[1]:g} %"
            ax.fill_between(t, lo, hi, color="C0", alpha=0.2, lw=0, label=band)
            ax.fill_between(t, q1, q3, color="C0", alpha=0.35, lw=0, label="25–75 %")
            ax.plot(t, med, color="C0", lw=1.5, label="median")
        ax.set_ylabel(_axis_label(names[i], units[i]))
        ax.grid(alpha=0.3)
    for ax in axes[len(coordinates) :]:
        ax.set_visible(False)
    for ax in axes[max(0, len(coordinates) - cols) : len(coordinates)]:  # no panel below them
        ax.set_xlabel(_axis_label("t", time_unit))
        ax.xaxis.set_tick_params(labelbottom=True)
    if B > 1:
        handles, names = axes[0].get_legend_handles_labels()
        fig.legend(handles, names, loc="outside lower center", ncols=3, fontsize="small")
        fig.suptitle(f"median and percentile bands over {B} trajectories", fontsize="medium")
    return fig


def path(
    sol,
    coordinates: tuple[int, int] = (0, 1),
    *,
    labels=None,
    units=None,
    max_paths: int = 200,
    ax=None,
):
    """The path in configuration space of a coordinate pair, e.g. the contact point $(x, y)$ of a
    rolling disk, with equal scales on both axes; a batch draws up to `max_paths` trajectories
    thinly (the first one highlighted), each starting at a dot.

    **Returns:** the `Axes`.
    """
    q = _reached(_batched(point_array(sol.states.q), 2))
    B, _, n = q.shape
    names = _labels(labels, n, "q")
    units = _units(units, n)
    i, j = coordinates
    ax = _axes(ax)
    shown = min(B, max_paths)
    for b in range(shown):
        first = b == 0
        ax.plot(
            q[b, :, i],
            q[b, :, j],
            color="C0" if first else "C7",
            lw=1.5 if first else 0.5,
            alpha=1.0 if first else 0.5,
            zorder=3 if first else 2,
            label="trajectory 0" if first and B > 1 else None,
        )
    ax.plot(q[:shown, 0, i], q[:shown, 0, j], "o", color="k", ms=2.5, zorder=4, label="start")
    ax.set_xlabel(_axis_label(names[i], units[i]))
    ax.set_ylabel(_axis_label(names[j], units[j]))
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    if B > 1:
        ax.set_title(f"{shown} of {B} trajectories" if shown < B else f"{B} trajectories")
    ax.legend(loc="best", fontsize="small")
    return ax


def drift(sol, *, energy: str = "drift", ax=None):
    """The energy change $|E_L(t) - E_L(t_0)|$ and the constraint residuals $|\\phi|$, $|h|$ on a
    log scale.

    For a batch the largest value over the trajectories is drawn (the legend says so). Values
    below the round-off level $\\varepsilon \\max(1, |E_L(t_0)|)$ (the energy change is exactly
    zero at $t_0$) are drawn at that level, marked by a dotted line, so the curves have no gaps.
    A conservative system keeps the energy drift at the integrator's tolerance; growing residuals
    mean the state leaves $\\mathcal{C}$ (see stabilization in `simulate`).

    **Arguments:**

    - `sol`: a `gm.Solution`, batched or not.
    - `energy`: `"drift"` where $E_L$ is conserved, `"change"` where it is not: moving
        (rheonomic or affine) constraints, a work space $\\mathcal{W} \\ne \\mathcal{D}$, forces.
    - `ax`: a matplotlib `Axes`.

    **Returns:** the `Axes`.
    """
    if energy not in ("drift", "change"):
        raise ValueError(f"energy must be 'drift' or 'change', got {energy!r}.")
    ts = _reached(_batched(sol.ts, 1))
    E = _reached(_batched(sol.energy, 1))
    B = E.shape[0]
    with _all_nan_ok():
        t = np.nanmedian(ts, axis=0)
    series = {
        f"$|E_L(t) - E_L(t_0)|$ (energy {energy})": E - E[:, :1],
        "$|\\phi(t, q, v)|$": _reached(_batched(sol.constraint_residual, 1)),
        "$|h(t, q)|$": _reached(_batched(sol.position_residual, 1)),
    }
    dtype = np.asarray(sol.energy).dtype
    eps = np.finfo(dtype if np.issubdtype(dtype, np.floating) else float).eps
    floor = eps * max(1.0, float(np.nanmax(np.abs(E[:, 0]), initial=0.0)))
    ax = _axes(ax)
    suffix = f", max over {B} trajectories" if B > 1 else ""
    for name, y in series.items():
        with _all_nan_ok():
            y = np.nanmax(np.abs(y), axis=0) if B > 1 else np.abs(y[0])
        if name.startswith("$|h") and not np.any(y > 0):
            continue  # no holonomic part
        ax.semilogy(t, np.maximum(y, floor), label=name + suffix)
    ax.axhline(floor, color="0.5", ls=":", lw=1, label="round-off level")
    ax.set_xlabel("t")
    ax.set_ylabel(f"energy {energy} and residuals")
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def summary(sol, *, labels=None, title: str | None = None):
    r"""A figure with the trajectory, the phase portrait of the first coordinate and the drift.

    On a Lie group (`sol.states.q` a `jaxlie` point, or a product of them with $\mathbb{R}^n$)
    a point's stored parameters are not paired with the components of $v$ (a quaternion's $w$
    has no rate among them), so the middle panel is $v$ against time instead: the body angular
    velocity on SO(3). There `labels` name the $\dim Q$ components of $v$ (a model's
    `coordinates`), and the first panel shows the point's stored parameters.

    **Returns:** the matplotlib `Figure`.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), constrained_layout=True)
    if not _rates(sol):
        trajectory(sol, ax=axes[0])
        trajectory(sol, labels=labels, velocities=True, ax=axes[1])
        axes[1].set_title("velocity", fontsize="medium")
    else:
        trajectory(sol, labels=labels, ax=axes[0])
        phase_portrait(sol, 0, label=None if labels is None else labels[0], ax=axes[1])
    drift(sol, ax=axes[2])
    if title:
        fig.suptitle(title)
    return fig


def animate_planar(
    sol,
    points: Callable,
    *,
    links: Sequence[tuple[int, int]] | None = None,
    trace: int | None = None,
    ax=None,
    interval: int = 30,
    every: int = 1,
):
    """Animate a planar model from a single trajectory with matplotlib (for bodies in 3-D, see
    `animate`).

    **Arguments:**

    - `sol`: an unbatched `gm.Solution`, saved at the frames to show (e.g. `SaveAt(ts=...)`).
    - `points`: `q -> (P, 2)` array of the positions to draw (NumPy or JAX), e.g. the bobs of a
        pendulum or the two ends of a sleigh.
    - `links`: pairs of point indices joined by a segment (default: consecutive points).
    - `trace`: index of a point whose path is drawn.
    - `ax`: a matplotlib `Axes`; `interval`: milliseconds per frame; `every`: use every n-th frame.

    **Returns:** a `matplotlib.animation.FuncAnimation` (save with `.save("x.gif")`, show it in a
    notebook with `IPython.display.HTML(anim.to_jshtml())`).
    """
    from matplotlib.animation import FuncAnimation

    q = np.asarray(sol.states.q)
    if q.ndim != 2:
        raise ValueError(
            "animate_planar takes a single trajectory (states.q of shape (T, n)); index the batch "
            "first."
        )
    q = q[np.isfinite(np.asarray(sol.ts))][::every]
    frames = np.stack([np.asarray(points(qi)) for qi in q])
    if frames.ndim != 3 or frames.shape[-1] != 2:
        raise ValueError(
            f"points(q) must return a (P, 2) array of planar positions, got {frames.shape[1:]}."
        )
    P = frames.shape[1]
    links = list(zip(range(P - 1), range(1, P), strict=True)) if links is None else list(links)
    ax = _axes(ax)
    lo, hi = frames.reshape(-1, 2).min(0), frames.reshape(-1, 2).max(0)
    pad = 0.1 * max(float(np.max(hi - lo)), 1e-9)
    ax.set_xlim(lo[0] - pad, hi[0] + pad)
    ax.set_ylim(lo[1] - pad, hi[1] + pad)
    ax.set_aspect("equal")
    segments = [ax.plot([], [], "-", lw=2, color="C0")[0] for _ in links]
    dots = ax.plot([], [], "o", color="C3")[0]
    path = ax.plot([], [], "-", lw=0.8, color="C1")[0] if trace is not None else None

    def draw(f):
        x = frames[f]
        for seg, (a, b) in zip(segments, links, strict=True):
            seg.set_data([x[a, 0], x[b, 0]], [x[a, 1], x[b, 1]])
        dots.set_data(x[:, 0], x[:, 1])
        if path is not None:
            path.set_data(frames[: f + 1, trace, 0], frames[: f + 1, trace, 1])
        return [*segments, dots] + ([path] if path is not None else [])

    return FuncAnimation(ax.figure, draw, frames=len(frames), interval=interval, blit=True)


# -- bodies in 3-D: one self-contained HTML page (docs/seeing_it.md) -----------------------------


def animate(
    sol,
    scene,
    path=None,
    *,
    title: str = "geomech",
    time_unit: str = "s",
    every: int = 1,
    max_bodies: int = 16,
    speed: float = 1.0,
    autoplay: bool = True,
    loop: bool = True,
    height: int = 480,
) -> Animation:
    """The bodies of a solution moving in 3-D, as one self-contained HTML page: the body's mesh
    with its axes ($e_1, e_2, e_3$ red, green, blue), the floor, the paths of the contact point
    and of a body point, a time slider with play/pause and speed, the camera turned with the
    mouse (drag), moved (right-drag) and zoomed (wheel). The page includes three.js and the
    frames (float32), fetches nothing, and opens in any browser, offline (docs/seeing_it.md).

    **Arguments:**

    - `sol`: a `gm.Solution` (or anything with `ts` and `states.q`), saved at the times to show
        (e.g. `diffrax.SaveAt(ts=jnp.linspace(t0, t1, 601))`: the page interpolates between
        them, slerp for the attitude). A batch (leading axis `B`) draws up to `max_bodies`
        trajectories together, the first opaque and the others faint, with a selector; a
        failed trajectory stays where it stopped.
    - `scene`: a `Scene`: a model's `model.scene()`, `Scene.rolling(rolling_body)`,
        `Scene.pivoted(rigid_body)`, `Scene.free(rigid_body)`, or your own
        `Scene(mesh, pose)`.
    - `path`: the file to write (e.g. `"rattleback.html"`), or `None`.
    - `title`: shown in the legend; `time_unit` on the clock.
    - `every`: use every `every`-th saved time.
    - `speed`: the initial playback speed (1: real time); `autoplay`, `loop`: start playing, and
        play again from the start.
    - `height`: of the inline view in a notebook, in pixels.

    **Returns:** an `Animation`: `anim.html` the page, `anim.save(path)`, and shown inline in a
    notebook. `export_frames(anim, directory)` renders it to PNG frames (and a video).
    """
    if not isinstance(scene, Scene):
        hint = (
            "; for the matplotlib animation of a planar model's points(q), use "
            "plot.animate_planar"
            if callable(scene)
            else ""
        )
        raise TypeError(
            "animate: `scene` must be a gm.plot.Scene (a model's `model.scene()`, "
            f"Scene.rolling(body), Scene.pivoted(body), ...), got {type(scene).__name__}{hint}."
        )
    for name, value in (("every", every), ("max_bodies", max_bodies), ("height", height)):
        if not isinstance(value, int | np.integer) or value < 1:
            raise ValueError(f"animate: `{name}` must be a positive integer, got {value!r}.")
    if not (np.isfinite(speed) and speed > 0):
        raise ValueError(f"animate: `speed` must be a finite positive number, got {speed!r}.")
    anim = _animation.build(
        sol,
        scene,
        title=str(title),
        time_unit=str(time_unit),
        every=int(every),
        max_bodies=int(max_bodies),
        speed=float(speed),
        autoplay=autoplay,
        loop=loop,
    )
    anim.height = int(height)
    if path is not None:
        anim.save(path)
    return anim


def export_frames(
    animation,
    directory,
    *,
    fps: float = 30.0,
    speed: float = 1.0,
    t0: float | None = None,
    t1: float | None = None,
    width: int = 1280,
    height: int = 720,
    video=None,
    chromium: str | None = None,
) -> list[pathlib.Path]:
    """Render an animation to PNG frames in a headless Chromium (Debian's `chromium` package,
    Chrome, or `$GEOMECH_CHROMIUM`), and optionally encode them as a video with ffmpeg.

    **Arguments:**

    - `animation`: an `Animation` (from `animate`) or the path of a saved page.
    - `directory`: where the frames `frame_00000.png`, `frame_00001.png`, ... are written
        (created if needed).
    - `fps`: frames per second of the video; `speed`: simulated time per second of video.
    - `t0`, `t1`: the simulated times to render (the whole solution by default).
    - `width`, `height`: the frame size in pixels (the controls bar is hidden).
    - `video`: a file to encode the frames into (e.g. `"rattleback.mp4"`, H.264 by ffmpeg, which
        must be on the `PATH`), or `None`.
    - `chromium`: the browser's executable (found on the `PATH` by default).

    **Returns:** the paths of the frames.
    """
    if not (np.isfinite(fps) and fps > 0 and np.isfinite(speed) and speed > 0):
        raise ValueError(f"export_frames: `fps` and `speed` must be positive, got {fps}, {speed}.")
    if video is not None and shutil.which("ffmpeg") is None:
        raise RuntimeError("export_frames: `video` needs ffmpeg on the PATH (e.g. apt install ffmpeg).")
    directory = pathlib.Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with contextlib.ExitStack() as stack:
        if isinstance(animation, Animation):
            page = directory / ".geomech-export.html"
            pathlib.Path(page).write_text(animation.html, encoding="utf-8")
            stack.callback(page.unlink, missing_ok=True)
        else:
            page = pathlib.Path(animation)
        browser = stack.enter_context(
            _browser.Chromium(chromium, width=width, height=height)
        )
        browser.open(page.resolve().as_uri() + "#t=0")
        start, end = browser.evaluate("geomechReady.then(() => [geomech.t0, geomech.t1])")
        browser.evaluate("geomech.bare()")
        start = start if t0 is None else float(t0)
        end = end if t1 is None else float(t1)
        count = int(np.floor((end - start) * fps / speed + 1e-9)) + 1
        frames = []
        for i, t in enumerate(start + np.arange(count) * speed / fps):
            browser.evaluate(f"geomech.seek({float(t)!r})")
            frames.append(directory / f"frame_{i:05d}.png")
            frames[-1].write_bytes(browser.screenshot())
        if browser.errors:
            raise _browser.BrowserError("the page logged errors:\n" + "\n".join(browser.errors))
    if video is not None:
        command = [
            "ffmpeg", "-y", "-loglevel", "error", "-framerate", f"{fps:g}",
            "-i", str(directory / "frame_%05d.png"),
            "-c:v", "libx264", "-pix_fmt", "yuv420p", str(video),
        ]  # fmt: skip
        subprocess.run(command, check=True)
    return frames


# -- rigid bodies on SO(3), SE(3) and products with SO(3) first (docs/lie_groups.md) ---------------


def _rotations(q):
    """The rotation matrices `(..., 3, 3)` of saved configurations on SO(3), SE(3), or a product
    whose first factor is one of them."""
    return np.asarray(attitude(q))


def angular_velocity(sol, *, time_unit: str = "s", ax=None):
    """The body angular velocity $\\omega = (\\omega_1, \\omega_2, \\omega_3)$ against time (the
    rattleback's spin reversal is the sign change of $\\omega_3$); a batch draws every trajectory,
    thinner, in the same colour per component.

    **Returns:** the `Axes`.
    """
    _rotations(sol.states.q)  # the configuration space, checked
    w = _reached(_batched(sol.states.v, 2))[..., list(angular_velocity_indices(sol.states.q))]
    ts = _reached(_batched(sol.ts, 1))
    ax = _axes(ax)
    B = w.shape[0]
    for b in range(B):
        for i in range(3):
            ax.plot(
                ts[b], w[b, :, i], color=f"C{i}", lw=1.5 if b == 0 else 0.5,
                label=f"$\\omega_{i + 1}$" if b == 0 else None,
            )  # fmt: skip
    ax.set_xlabel(_axis_label("t", time_unit))
    ax.set_ylabel(_axis_label("body angular velocity", f"rad/{time_unit}" if time_unit else ""))
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return ax


def orientation(sol, point=(0.0, 0.0, 1.0), *, trajectory: int = 0, ax=None):
    """The orientation as the trace of a body-fixed unit vector $R(t)\\,p$ on the unit sphere
    (by default the body's third axis; the start is a dot), with the sphere as a wire frame.

    **Arguments:**

    - `sol`: a `gm.Solution` on SO(3), SE(3) or a product whose first factor is one of them.
    - `point`: the body-fixed vector $p$ (normalized).
    - `trajectory`: which trajectory of a batch.
    - `ax`: a matplotlib 3-D `Axes` (`projection="3d"`).

    **Returns:** the `Axes`.
    """
    p = np.asarray(point, float)
    if p.shape != (3,) or not np.linalg.norm(p) > 0:
        raise ValueError(f"point must be a non-zero vector of shape (3,), got {point!r}.")
    R = _rotations(sol.states.q)
    R = R.reshape(-1, *R.shape[-3:])[trajectory]
    trace = _reached(R @ (p / np.linalg.norm(p)))
    if ax is None:
        ax = _pyplot().figure().add_subplot(projection="3d")
    u, v = np.meshgrid(np.linspace(0, 2 * np.pi, 25), np.linspace(0, np.pi, 13))
    sphere = (np.cos(u) * np.sin(v), np.sin(u) * np.sin(v), np.cos(v))
    ax.plot_wireframe(*sphere, color="0.85", lw=0.4)
    ax.plot(trace[:, 0], trace[:, 1], trace[:, 2], color="C0", lw=1.2, label="$R(t)\\,p$")
    ax.plot(*trace[:1].T, "o", color="k", ms=3, label="start")
    ax.set_box_aspect((1, 1, 1))
    ax.set_xlabel("x")
    ax.set_ylabel("y")
    ax.set_zlabel("z")
    ax.legend(loc="upper left", fontsize="small")
    return ax


def contact_path(
    sol,
    contact: Callable | None = None,
    *,
    units: str = "m",
    max_paths: int = 200,
    label: str | None = None,
    color=None,
    ax=None,
):
    r"""The path of a rolling body's contact point on the plane, with equal scales.

    **Arguments:**

    - `sol`: a `gm.Solution`.
    - `contact`: the contact point's $(x, y)$ from one configuration `q` (a JAX function,
        vmapped over the saved states): for the rolling-body models `model.contact_point`, for a
        `gm.RollingBody` `lambda q: body.contact(q)[:2]`. By default the first two coordinates
        of the $\mathbb{R}^n$ factor of a product $SO(3) \times \mathbb{R}^n$ (the reference
        point's position, which is the contact point's only for a body whose reference point
        lies above it, such as a ball's centre).
    - `units`, `max_paths`: as for `path`.
    - `label`: the legend entry of this solution's path (trajectory 0 of a batch), to tell two
        solutions drawn on the same axes apart; with it the start is drawn without its own entry.
    - `color`: the colour of that path and its start (matplotlib's next colour by default; the
        other trajectories of a batch are thinner, in the same colour, lighter).
    - `ax`: a matplotlib `Axes` (a new figure if `None`).

    **Returns:** the `Axes`.
    """
    q = sol.states.q
    if contact is None:
        if not (isinstance(q, tuple) and len(q) == 2):
            raise ValueError(
                "contact_path needs `contact=` unless q is a product (R, x) of SO(3) × ℝⁿ."
            )
        xy = np.asarray(q[1])[..., :2]
    else:
        batch = np.shape(sol.ts)
        flat = jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[len(batch) :]), q)
        xy = np.asarray(jax.vmap(contact)(flat)).reshape(*batch, 2)
    xy = _reached(_batched(xy, 2))
    B = xy.shape[0]
    ax = _axes(ax)
    (first,) = ax.plot(xy[0, :, 0], xy[0, :, 1], color=color, lw=1.5, label=label, zorder=3)
    color = first.get_color()  # the axes' next colour where none is given
    shown = min(B, max_paths)
    for b in range(1, shown):
        ax.plot(xy[b, :, 0], xy[b, :, 1], color=color, lw=0.5, alpha=0.35)
    start = None if label is not None else "start"
    ax.plot(xy[:shown, 0, 0], xy[:shown, 0, 1], "o", color=color, mec="k", ms=3, label=start)
    ax.set_xlabel(_axis_label("contact x", units))
    ax.set_ylabel(_axis_label("contact y", units))
    ax.set_aspect("equal", adjustable="datalim")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize="small")
    return ax


def conserved(sol, quantities: dict, *, ax=None):
    """The relative drift $|I(t) - I(t_0)| / \\max(|I(t_0)|, \\text{scale})$ of conserved
    quantities on a log scale (the largest over a batch), e.g. the Chaplygin sphere's energy,
    $(M, \\gamma)$ and $(M, M)$.

    **Arguments:**

    - `sol`: a `gm.Solution`.
    - `quantities`: name → a JAX function of one state `(q, v)` returning a scalar (vmapped
        over the saved states).
    - `ax`: a matplotlib `Axes`.

    Values below round-off are drawn at $\\varepsilon$ (dotted line).

    **Returns:** the `Axes`.
    """
    if not quantities:
        raise ValueError("quantities must name at least one function of (q, v).")
    batch = np.shape(sol.ts)
    flat = jax.tree_util.tree_map(lambda x: x.reshape(-1, *x.shape[len(batch) :]), sol.states)
    ts = _reached(_batched(sol.ts, 1))
    with _all_nan_ok():
        t = np.nanmedian(ts, axis=0)
    eps = np.finfo(np.asarray(sol.states.v).dtype).eps
    ax = _axes(ax)
    for name, fn in quantities.items():
        values = _reached(_batched(np.asarray(jax.vmap(fn)(flat.q, flat.v)).reshape(batch), 1))
        scale = np.maximum(
            np.abs(values[:, :1]), np.nanmax(np.abs(values), axis=1, keepdims=True) * eps
        )
        with _all_nan_ok():
            y = np.nanmax(np.abs(values - values[:, :1]) / np.where(scale > 0, scale, 1.0), axis=0)
        ax.semilogy(t, np.maximum(y, eps), label=name)
    ax.axhline(eps, color="0.5", ls=":", lw=1, label="round-off level")
    ax.set_xlabel("t")
    ax.set_ylabel("relative drift")
    ax.legend(loc="best", fontsize="small")
    ax.grid(alpha=0.3)
    return ax
