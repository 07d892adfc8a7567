"""What `geomech run --out DIR` writes: data (.npz, long-format .csv), a summary and plots, and
with `--animate` the 3-D animation, every file named after the model (`MODEL.npz`, `MODEL.csv`,
`MODEL_summary.json`, `MODEL_*.png`, `MODEL.html`), so runs of different models can share a
directory.

The directory is checked and claimed before anything is simulated (`prepare`): a lock per model,
held by the process until its files are in place, refuses a second run of the same model into the
same directory while the first one runs (two processes never delete each other's files). The size
of the output is estimated before anything is allocated (`check_size`). A run is written into a
temporary directory first (`.geomech-MODEL-partial-*`) and then moved in, replacing the files of
an earlier run of the same model listed in its summary (only with `--overwrite`), so no two runs
are ever mixed. Ctrl-C removes the temporary directory (`abandon`); one left by a killed process
is removed by the next run of the same model.
"""

import contextlib
import glob
import json
import os
import pathlib
import platform
import shlex
import shutil
import signal
import tempfile
import threading

from ._parse import UsageError

MANIFEST = "_summary.json"  # MODEL_summary.json: the run's numbers and the files it wrote
PLOTS = ("trajectory", "path", "contact", "drift")
_TMP_PREFIX = ".geomech-"
# what an interrupted process leaves (`abandon` removes it on Ctrl-C; a run of the same model
# removes what a killed one left, `prepare`): the claims held and the runs being written
_claims: set = set()
_partial: set = set()


def _partial_prefix(name: str) -> str:
    """The prefix of the temporary directory a run of model `name` is written into."""
    return f"{_TMP_PREFIX}{name}-partial-"


def abandon() -> None:
    """Ctrl-C (the process exits at once, `os._exit`): remove the runs being written (their
    partial files) and release the claims on `--out`."""
    for tmp in list(_partial):
        shutil.rmtree(tmp, ignore_errors=True)
    for claim in list(_claims):
        with contextlib.suppress(OSError):
            claim.release()


def files(name: str) -> list[str]:
    """Every file a run of model `name` may write (the summary last)."""
    return [
        f"{name}.npz",
        f"{name}.csv",
        *(f"{name}_{p}.png" for p in PLOTS),
        f"{name}.html",
        name + MANIFEST,
    ]


def _listed(manifest: pathlib.Path) -> list[str]:
    """The files a geomech run wrote into the manifest's directory (from its summary)."""
    try:
        listed = json.loads(manifest.read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return []
    if not isinstance(listed, list):
        return []
    return [f for f in listed if isinstance(f, str) and "/" not in f and f not in ("", ".", "..")]


def _earlier_run(path: pathlib.Path, name: str) -> list[str]:
    """The files an earlier run of model `name` wrote into `path` (only names of that model)."""
    return sorted(set(_listed(path / (name + MANIFEST))) & set(files(name)))


class Claim:
    """A model's output directory, locked for this process until `release` (or its end).

    The lock is `fcntl.flock` on `.geomech-MODEL.lock`, which the system releases when the
    process ends however it ends; without `fcntl` (Windows) the lock file is created exclusively
    and a crashed run leaves it behind (the error says so).
    """

    def __init__(self, path: pathlib.Path, name: str, out: str):
        self.path, self.name = path, name
        self._lock = path / f"{_TMP_PREFIX}{name}.lock"
        self._fd, self._flock = None, True
        busy = UsageError(
            f"another geomech run of {name} is writing into --out {out}: wait for it to finish, "
            "or choose another directory."
        )
        try:
            import fcntl
        except ImportError:  # pragma: no cover - not POSIX
            self._flock = False
            try:
                self._fd = os.open(self._lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                raise UsageError(f"{busy} (If no run is active, delete {self._lock}.)") from None
            _claims.add(self)
            return
        while True:
            fd = os.open(self._lock, os.O_CREAT | os.O_RDWR, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                os.close(fd)
                raise busy from None
            try:  # the file may have been released and removed between open and flock
                if os.path.samestat(os.fstat(fd), os.stat(self._lock)):
                    self._fd = fd
                    _claims.add(self)
                    return
            except FileNotFoundError:
                pass
            os.close(fd)

    def release(self) -> None:
        """Remove the lock file (while holding the lock) and release it."""
        _claims.discard(self)
        if self._fd is None:
            return
        if self._flock:  # unlinked while locked: a run waiting on this file retries (samestat)
            self._lock.unlink(missing_ok=True)
            os.close(self._fd)
        else:  # pragma: no cover - not POSIX
            os.close(self._fd)
            self._lock.unlink(missing_ok=True)
        self._fd = None


def prepare(out: str, overwrite: bool, name: str) -> Claim:
    """Check and claim `--out` for a run of model `name` before simulating: a new directory, or one
    that holds only earlier geomech runs (of other models; of this model only with `overwrite`)."""
    path = pathlib.Path(out)
    if path.exists() and not path.is_dir():
        raise UsageError(f"--out {out} is a file, not a directory.")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"cannot create --out {out}: {e.strerror}.") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out} is not writable.")
    claim = Claim(path, name, out)
    try:
        # a run of this model killed while writing (no other can be writing it: the claim is
        # ours) left its partial files in a temporary directory
        for tmp in path.glob(f"{glob.escape(_partial_prefix(name))}*"):
            shutil.rmtree(tmp, ignore_errors=True)
        existing = {p.name for p in path.iterdir() if not p.name.startswith(_TMP_PREFIX)}
        manifests = [path / f for f in existing if f.endswith(MANIFEST)]
        ours = {f for m in manifests for f in _listed(m)} | {m.name for m in manifests}
        foreign = sorted(existing - ours)
        if foreign:
            shown = ", ".join(foreign[:3]) + (", ..." if len(foreign) > 3 else "")
            raise UsageError(
                f"--out {out} holds files that no geomech run wrote ({shown}): choose another "
                "directory."
            )
        clash = sorted(existing & set(files(name)))
        if clash and not overwrite:
            raise UsageError(
                f"--out {out} holds an earlier run of {name} ({', '.join(clash)}): pass "
                "--overwrite to replace it, or choose another directory."
            )
        unlisted = sorted(set(clash) - set(_earlier_run(path, name)))
        if unlisted:
            raise UsageError(
                f"--out {out} holds files of {name} that its summary does not list "
                f"({', '.join(unlisted)}); --overwrite only replaces an earlier run: choose "
                "another directory."
            )
    except BaseException:
        claim.release()
        raise
    return claim


@contextlib.contextmanager
def _uninterrupted():
    """Hold back Ctrl-C (SIGINT) while the files are moved in: it takes effect after the last one."""
    if threading.current_thread() is not threading.main_thread():  # only there can it arrive
        yield
        return
    caught = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: caught.append(frame))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        if caught and callable(previous):
            previous(signal.SIGINT, caught[0])


def check_size(setup, batch: int, points: int, out: str | None, limit_mb: float) -> None:
    """Refuse a run whose saved output (`batch` × `points` × (2n + 4) numbers: q, v, t, energy
    and residuals, with q's stored parameters on a Lie group; with `--out` also the CSV text) is
    above `--max-output-mb` or the free disk."""
    itemsize = setup.dtype.itemsize
    width = len(setup.labels) + setup.n + 4  # q (a point's parameters on a group), v
    values = batch * points * width
    size = values * itemsize
    what = f"{batch} × {points} × {width} values of {itemsize} bytes"
    if out is not None:  # the .npz, and the CSV at up to 25 characters a number
        size += values * itemsize + values * (25 if itemsize == 8 else 16)
        what += ", with the .npz and .csv files"
    if size / 2**20 > limit_mb:
        raise UsageError(
            f"the output would take about {amount(size)} ({what}), above --max-output-mb "
            f"{limit_mb:g}: lower --batch or --points, or raise --max-output-mb."
        )
    if out is not None:
        free = shutil.disk_usage(out).free
        if size > free:
            raise UsageError(
                f"the output would take about {amount(size)} but {out} has {amount(free)} free: "
                "free space, lower --batch or --points, or choose another --out."
            )


def amount(size: int | float) -> str:
    """A number of bytes for a message, in a unit that shows it (never "0 MB" for 20 kB)."""
    for unit, scale in (("GB", 2**30), ("MB", 2**20), ("kB", 2**10)):
        if size >= scale:
            x = size / scale
            return f"{x:.1f} {unit}" if x < 10 else f"{x:,.0f} {unit}"
    return f"{size:.0f} bytes"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figures(setup, sol, *, energy_conserved: bool) -> dict:
    """The figures of a run, by file stem: `trajectory` (one panel per coordinate, on a Lie group
    per component of the velocity: the curve, or for an ensemble the median with percentile
    bands), `path` (the model's configuration-space
    path, where it declares one), `contact` (a rolling body's contact point on the plane) and
    `drift` (energy and residuals; the ensemble maximum)."""
    from .. import plot
    from ..models import AbstractRollingModel
    from ._setup import pretty

    plt = _pyplot()
    model = setup.model
    labels = [pretty(c) for c in model.coordinates]
    time_unit = model.time_unit
    out = {}
    # on a Lie group the coordinates name v's components (the body angular velocity): drawn
    what = "velocity" if setup.body_velocity else "coordinates"
    fig = plot.ensemble(
        sol, labels=labels, units=model.units, time_unit=time_unit, velocities=setup.body_velocity
    )
    fig.suptitle(f"{setup.name}: {fig.get_suptitle() or what}")
    out["trajectory"] = fig
    if model.path_coordinates is not None:
        fig, ax = plt.subplots(figsize=(5.5, 5.0), layout="constrained")
        plot.path(sol, model.path_coordinates, labels=labels, units=model.units, ax=ax)
        ax.set_title(
            f"{setup.name}: path in configuration space"
            + (f" ({ax.get_title()})" if ax.get_title() else "")
        )
        out["path"] = fig
    if isinstance(model, AbstractRollingModel):  # where a rolling body touches the plane
        fig, ax = plt.subplots(figsize=(5.5, 5.0), layout="constrained")
        plot.contact_path(
            sol, model.contact_point, units=model.length_unit, label=setup.name, ax=ax
        )
        ax.set_title(f"{setup.name}: path of the contact point on the plane")
        out["contact"] = fig
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
    """Long format: one row per trajectory and saved time, states reached only; the columns of
    $q$ are a Lie-group point's stored parameters (`q_w, q_x, q_y, q_z`, ...) on a group."""
    import numpy as np

    from ..plot import point_array

    q, v = point_array(sol.states.q), np.asarray(sol.states.v)
    ts = np.asarray(sol.ts)
    columns = [
        np.asarray(sol.energy),
        np.asarray(sol.constraint_residual),
        np.asarray(sol.position_residual),
    ]
    if q.ndim == 2:
        q, v, ts = q[None], v[None], ts[None]
        columns = [c[None] for c in columns]
    B, T, p = q.shape
    n = v.shape[-1]
    trajectory = np.repeat(np.arange(B), T)
    table = np.column_stack(
        [ts.reshape(-1), q.reshape(-1, p), v.reshape(-1, n), *(c.reshape(-1) for c in columns)]
    )
    keep = np.all(np.isfinite(table[:, : 1 + p + n]), axis=1)  # after a failure: padding
    header = [
        "trajectory",
        "t",
        *setup.labels,
        *setup.velocity_labels,
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
    claim: Claim,
    setup,
    sol,
    summary: dict,
    argv,
    *,
    results,
    energy_conserved: bool,
    animate: bool = False,
):
    """Write the run into the claimed directory (checked by `prepare`); `results` names each
    trajectory's `diffrax.RESULTS` code; with `animate` also `MODEL.html`, the model's scene
    (`geomech.plot.animate`). Returns the lines to print."""
    import numpy as np

    from ..plot import point_array

    path, name = claim.path, setup.name
    tmp = pathlib.Path(tempfile.mkdtemp(prefix=_partial_prefix(name), dir=path))
    _partial.add(tmp)
    lines, written = [], []
    try:
        np.savez(
            tmp / f"{name}.npz",
            ts=np.asarray(sol.ts),
            q=point_array(sol.states.q),  # a point's parameters on a Lie group
            v=np.asarray(sol.states.v),
            energy=np.asarray(sol.energy),
            constraint_residual=np.asarray(sol.constraint_residual),
            position_residual=np.asarray(sol.position_residual),
            result=np.asarray(results),  # diffrax.RESULTS names per trajectory
            labels=np.asarray(setup.labels),  # q's columns
            velocity_labels=np.asarray(setup.velocity_labels),  # v's columns
            units=np.asarray(setup.model.units),  # of the coordinates (of v on a group)
        )
        _csv(tmp / f"{name}.csv", setup, sol)
        written += [f"{name}.npz", f"{name}.csv"]
        if _pyplot() is None:
            lines.append("plots skipped: matplotlib is not installed (pip install 'geomech[plot]')")
        else:
            import matplotlib.pyplot as plt

            for stem, fig in figures(setup, sol, energy_conserved=energy_conserved).items():
                fig.savefig(tmp / f"{name}_{stem}.png", dpi=100)
                plt.close(fig)
                written.append(f"{name}_{stem}.png")
        if animate:
            from .. import plot

            title = f"{name} ({setup.model.description})"
            plot.animate(
                sol, setup.model.scene(), tmp / f"{name}.html", title=title,
                time_unit=setup.model.time_unit,
            )  # fmt: skip
            written.append(f"{name}.html")
        manifest = name + MANIFEST
        record = {
            **summary,
            "command": shlex.join(["geomech", *argv]),
            "versions": _versions(),
            "machine": _machine(),
            "files": [*written, manifest],
        }
        (tmp / manifest).write_text(json.dumps(record, indent=2) + "\n")
        with _uninterrupted():
            # the earlier run's files that this one does not replace go first (prepare allowed
            # it), the summary comes before the files it lists: a run of another model checking
            # the directory meanwhile finds every file listed in some summary
            for old in set(_earlier_run(path, name)) - {*written, manifest}:
                (path / old).unlink(missing_ok=True)
            for f in [manifest, *written]:
                os.replace(tmp / f, path / f)
            lines += [f"wrote {path / f}" for f in [*written, manifest]]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        _partial.discard(tmp)
        claim.release()
    return lines
