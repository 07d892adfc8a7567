"""Plots of simulations: trajectories, phase portraits, energy and constraint drift, animations.

Every function takes a `gm.Solution` (single or batched, leading axis `B`) and draws into a
matplotlib `Axes` (a new figure when `ax` is `None`), returning the axes (or the animation).
matplotlib is imported when a function is called, so `import geomech` does not need it:
`pip install 'geomech[plot]'`.
"""

from collections.abc import Callable, Sequence

import numpy as np


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
    - `labels`: names of all $n$ coordinates (default $q^1, \\dots, q^n$).
    - `velocities`: draw $v$ instead of $q$.
    - `ax`: a matplotlib `Axes` to draw into.

    **Returns:** the `Axes`.
    """
    ts = _batched(sol.ts, 1)
    ys = _batched(sol.states.v if velocities else sol.states.q, 2)
    n = ys.shape[-1]
    names = _labels(labels, n, "v" if velocities else "q")
    if velocities and labels is not None:
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
    q, v = _batched(sol.states.q, 2), _batched(sol.states.v, 2)
    name = label or f"q^{{{i + 1}}}"
    ax = _axes(ax)
    for b in range(q.shape[0]):
        _, x, y = _finite(ts[b], q[b, :, i], v[b, :, i])
        ax.plot(x, y, lw=1.0 if q.shape[0] == 1 else 0.6)
        ax.plot(x[:1], y[:1], "o", ms=3, color="k")
    ax.set_xlabel(f"${name.strip('$')}$")
    ax.set_ylabel(f"$\\dot {{{name.strip('$')}}}$")
    return ax


def drift(sol, *, ax=None):
    """Energy drift $|E_L(t) - E_L(t_0)|$ and constraint residuals $|\\phi|$, $|h|$ on a log scale.

    For a batch the largest value over the trajectories is drawn. A conservative system keeps the
    energy drift at the integrator's tolerance; growing residuals mean the state leaves
    $\\mathcal{C}$ (see stabilization in `simulate`).

    **Returns:** the `Axes`.
    """
    ts = _batched(sol.ts, 1)[0]
    series = {
        "$|E_L(t) - E_L(t_0)|$": _batched(sol.energy, 1) - _batched(sol.energy, 1)[:, :1],
        "$|\\phi(t, q, v)|$": _batched(sol.constraint_residual, 1),
        "$|h(t, q)|$": _batched(sol.position_residual, 1),
    }
    ax = _axes(ax)
    keep = np.isfinite(ts)
    for name, y in series.items():
        y = np.max(np.abs(y), axis=0)[keep]
        if name.startswith("$|h") and not np.any(y):
            continue  # no holonomic part
        ax.semilogy(ts[keep], np.where(y > 0, y, np.nan), label=name)  # exact zeros are left out
    ax.set_xlabel("t")
    ax.set_ylabel("drift")
    ax.legend(loc="best", fontsize="small")
    return ax


def summary(sol, *, labels=None, title: str | None = None):
    """A figure with the trajectory, the phase portrait of the first coordinate and the drift.

    **Returns:** the matplotlib `Figure`.
    """
    plt = _pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.6), constrained_layout=True)
    trajectory(sol, labels=labels, ax=axes[0])
    phase_portrait(sol, 0, label=None if labels is None else labels[0], ax=axes[1])
    drift(sol, ax=axes[2])
    if title:
        fig.suptitle(title)
    return fig


def animate(
    sol,
    points: Callable,
    *,
    links: Sequence[tuple[int, int]] | None = None,
    trace: int | None = None,
    ax=None,
    interval: int = 30,
    every: int = 1,
):
    """Animate a planar model from a single trajectory.

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
            "animate takes a single trajectory (states.q of shape (T, n)); index the batch first."
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
