"""What `geomech run --out DIR` writes: data (.npz, long-format .csv), summary.json and plots.

The directory is checked before anything is simulated (`prepare`), the size of the output is
estimated before anything is allocated (`check_size`), and a run is written into a temporary
directory first and then moved in, replacing the files of an earlier run listed in its
`summary.json` (only with `--overwrite`), so no two runs are ever mixed.
"""

import json
import os
import pathlib
import platform
import shlex
import shutil
import tempfile

from ._parse import UsageError

MANIFEST = "summary.json"
_TMP_PREFIX = ".geomech-"


def _earlier_run(path: pathlib.Path) -> list[str]:
    """The files an earlier `geomech run` wrote into `path` (from its summary.json)."""
    try:
        files = json.loads((path / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    return [f for f in files if isinstance(f, str) and "/" not in f and f not in ("", ".", "..")]


def prepare(out: str, overwrite: bool) -> pathlib.Path:
    """Check `--out` before simulating: a new or empty directory, or (with `overwrite`) one that
    holds only an earlier geomech run."""
    path = pathlib.Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory.")
    if path.is_dir():
        existing = {p.name for p in path.iterdir() if not p.name.startswith(_TMP_PREFIX)}
        if existing and not overwrite:
            raise UsageError(
                f"--out {out} is not empty ({len(existing)} entries): choose a new directory, or "
                "pass --overwrite to replace an earlier geomech run there."
            )
        foreign = sorted(existing - {MANIFEST, *_earlier_run(path)})
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise UsageError(
                f"--out {out} holds files that no geomech run wrote ({shown}); --overwrite only "
                "replaces an earlier run: choose another directory."
            )
    else:
        try:
            path.mkdir(parents=True)
        except OSError as e:
            raise UsageError(f"cannot create --out {out}: {e.strerror}.") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out} is not writable.")
    return path


def check_size(setup, batch: int, points: int, out: str | None, limit_mb: float) -> None:
    """Refuse a run whose saved output (`batch` × `points` × (2n + 4) numbers: q, v, t, energy
    and residuals; with `--out` also the CSV text) is above `--max-output-mb` or the free disk."""
    itemsize = setup.dtype.itemsize
    values = batch * points * (2 * setup.n + 4)
    size = values * itemsize
    what = f"{batch} × {points} × (2n + 4 = {2 * setup.n + 4}) values of {itemsize} bytes"
    if out is not None:  # the .npz, and the CSV at up to 25 characters a number
        size += values * itemsize + values * (25 if itemsize == 8 else 16)
        what += ", with the .npz and .csv files"
    mb = size / 2**20
    if mb > limit_mb:
        raise UsageError(
            f"the output would take about {mb:,.0f} MB ({what}), above --max-output-mb "
            f"{limit_mb:g}: lower --batch or --points, or raise --max-output-mb."
        )
    if out is not None:
        free = shutil.disk_usage(out).free / 2**20
        if mb > free:
            raise UsageError(
                f"the output would take about {mb:,.0f} MB but {out} has {free:,.0f} MB free: "
                "lower --batch or --points, or choose another --out."
            )


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figures(setup, sol, *, energy_conserved: bool) -> dict:
    """The figures of a run, by file stem: `trajectory` (one panel per coordinate: the curve, or
    for an ensemble the median with percentile bands), `path` (the model's configuration-space
    path, where it declares one) and `drift` (energy and residuals; the ensemble maximum)."""
    from .. import plot
    from ._setup import pretty

    plt = _pyplot()
    model = setup.model
    labels = [pretty(c) for c in model.coordinates]
    time_unit = model.time_unit
    out = {}
    fig = plot.ensemble(sol, labels=labels, units=model.units, time_unit=time_unit)
    fig.suptitle(f"{setup.name}: {fig.get_suptitle() or 'coordinates'}")
    out["trajectory"] = fig
    if model.path_coordinates is not None:
        fig, ax = plt.subplots(figsize=(5.5, 5.0), layout="constrained")
        plot.path(sol, model.path_coordinates, labels=labels, units=model.units, ax=ax)
        ax.set_title(
            f"{setup.name}: path in configuration space"
            + (f" ({ax.get_title()})" if ax.get_title() else "")
        )
        out["path"] = fig
    fig, ax = plt.subplots(figsize=(6.4, 4.0), layout="constrained")
    plot.drift(sol, energy="drift" if energy_conserved else "change", ax=ax)
    ax.set_xlabel(f"t [{time_unit}]" if time_unit else "t")
    ax.set_title(
        f"{setup.name}: "
        + ("energy drift" if energy_conserved else "energy change")
        + " and constraint residuals"
    )
    out["drift"] = fig
    return out


def _csv(path, setup, sol) -> None:
    """Long format: one row per trajectory and saved time, states reached only."""
    import numpy as np

    q, v = np.asarray(sol.states.q), np.asarray(sol.states.v)
    ts = np.asarray(sol.ts)
    columns = [
        np.asarray(sol.energy),
        np.asarray(sol.constraint_residual),
        np.asarray(sol.position_residual),
    ]
    if q.ndim == 2:
        q, v, ts = q[None], v[None], ts[None]
        columns = [c[None] for c in columns]
    B, T, n = q.shape
    trajectory = np.repeat(np.arange(B), T)
    table = np.column_stack(
        [ts.reshape(-1), q.reshape(-1, n), v.reshape(-1, n), *(c.reshape(-1) for c in columns)]
    )
    keep = np.all(np.isfinite(table[:, : 1 + 2 * n]), axis=1)  # states after a failure are padding
    labels = setup.labels
    header = [
        "trajectory",
        "t",
        *labels,
        *(f"{c}_dot" for c in labels),
        "energy",
        "constraint_residual",
        "position_residual",
    ]
    digits = 17 if q.dtype == np.float64 else 9
    fmt = ["%d"] + [f"%.{digits}g"] * table.shape[1]
    np.savetxt(
        path,
        np.column_stack([trajectory[keep], table[keep]]),
        delimiter=",",
        header=",".join(header),
        comments="",
        fmt=fmt,
    )


def _versions() -> dict:
    from importlib import metadata

    out = {"python": platform.python_version()}
    for name in ("geomech", "jax", "jaxlib", "equinox", "diffrax", "numpy", "matplotlib"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
    return out


def _machine() -> dict:
    import jax

    try:
        load = list(os.getloadavg())
    except OSError:
        load = None
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "processor": platform.processor() or None,
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15_min": load,
        "jax_backend": jax.default_backend(),
        "devices": [str(d) for d in jax.devices()],
    }


def write(
    path: pathlib.Path, setup, sol, summary: dict, argv, *, results, energy_conserved: bool
) -> list[str]:
    """Write the run into `path` (checked by `prepare`); `results` names each trajectory's
    `diffrax.RESULTS` code. Returns the lines to print."""
    import numpy as np

    tmp = pathlib.Path(tempfile.mkdtemp(prefix=_TMP_PREFIX, dir=path))
    lines, files = [], []
    try:
        name = setup.name
        np.savez(
            tmp / f"{name}.npz",
            ts=np.asarray(sol.ts),
            q=np.asarray(sol.states.q),
            v=np.asarray(sol.states.v),
            energy=np.asarray(sol.energy),
            constraint_residual=np.asarray(sol.constraint_residual),
            position_residual=np.asarray(sol.position_residual),
            result=np.asarray(results),  # diffrax.RESULTS names per trajectory
            labels=np.asarray(setup.labels),
            units=np.asarray(setup.model.units),
        )
        _csv(tmp / f"{name}.csv", setup, sol)
        files += [f"{name}.npz", f"{name}.csv"]
        if _pyplot() is None:
            lines.append("plots skipped: matplotlib is not installed (pip install 'geomech[plot]')")
        else:
            import matplotlib.pyplot as plt

            for stem, fig in figures(setup, sol, energy_conserved=energy_conserved).items():
                fig.savefig(tmp / f"{stem}.png", dpi=100)
                plt.close(fig)
                files.append(f"{stem}.png")
        record = {
            **summary,
            "command": shlex.join(["geomech", *argv]),
            "versions": _versions(),
            "machine": _machine(),
            "files": [*files, MANIFEST],
        }
        (tmp / MANIFEST).write_text(json.dumps(record, indent=2) + "\n")
        for old in _earlier_run(path):  # replace the earlier run (prepare allowed only that)
            (path / old).unlink(missing_ok=True)
        for f in [*files, MANIFEST]:
            os.replace(tmp / f, path / f)
            lines.append(f"wrote {path / f}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return lines
