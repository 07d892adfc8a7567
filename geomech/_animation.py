"""`geomech.plot.animate`: a solution and a `Scene` as one self-contained HTML page
(docs/seeing_it.md).

The page carries everything it runs: three.js r185 (the minified ES modules of the npm package
`three`, MIT, vendored in `geomech/_vendor/three` with its LICENSE, which the page repeats), its
`OrbitControls`, geomech's viewer (`_viewer/viewer.js`) and the frames as base64 float32 arrays.
A small classic script (`_viewer/loader.js`) turns the inlined modules into blob URLs and imports
them, so the page opens from a file, an `<iframe srcdoc>` or a web server, offline, and fetches
nothing from another host.
"""

import base64
import html
import json
import pathlib
import re

import numpy as np

from ._scene import Scene

HERE = pathlib.Path(__file__).resolve().parent
THREE = HERE / "_vendor" / "three"
VIEWER = HERE / "_viewer"
THREE_VERSION = "0.185.0"  # the npm package `three`, release r185


def _read(path: pathlib.Path) -> str:
    return path.read_text(encoding="utf-8")


def _script(kind: str, ident: str, text: str) -> str:
    """A `<script>` element holding `text` as it is: the text must not end the element early
    (`</script`) nor start an HTML comment (`<!--`, which changes how `</script` is parsed)."""
    if re.search(r"</script|<!--", text, flags=re.I):
        raise ValueError(
            f"the script {ident!r} cannot be inlined: it contains '</script' or '<!--'."
        )
    ident = f' id="{ident}"' if ident else ""
    return f'<script type="{kind}"{ident}>{text}</script>'


def _b64(x, dtype) -> str:
    return base64.b64encode(np.ascontiguousarray(x, dtype=dtype).tobytes()).decode("ascii")


def page(data: dict, title: str) -> str:
    """The HTML document: `data` (the viewer's JSON) with the viewer and three.js inlined."""
    licence = _read(THREE / "LICENSE").replace("--", "- -")
    payload = json.dumps(data, separators=(",", ":"), allow_nan=False).replace("</", "<\\/")
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en">',
        "<head>",
        '<meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{html.escape(title)}</title>",
        f"<!-- Written by geomech.plot.animate. It includes three.js r{THREE_VERSION.split('.')[1]}"
        f" (the npm package three {THREE_VERSION}), whose licence follows.\n\n{licence}\n-->",
        f"<style>{_read(VIEWER / 'page.css')}</style>",
        "</head>",
        "<body>",
        '<div id="view"></div><div id="legend"></div><div id="bar"></div>',
        _script("application/json", "geomech-data", payload),
        _script("text/plain", "three-core", _read(THREE / "three.core.min.js")),
        _script("text/plain", "three-module", _read(THREE / "three.module.min.js")),
        _script("text/plain", "three-orbit", _read(THREE / "OrbitControls.js")),
        _script("text/plain", "geomech-viewer", _read(VIEWER / "viewer.js")),
        _script("text/javascript", "", _read(VIEWER / "loader.js")),
        "</body>",
        "</html>",
    ]
    return "\n".join(parts) + "\n"


class Animation:
    """A written animation: `html` the self-contained page, `path` where it was saved (or
    `None`). In a notebook it shows inline (an `<iframe srcdoc>` of `height` pixels);
    `save(path)` writes it to a file that any browser opens, offline."""

    def __init__(self, html: str, path: pathlib.Path | None = None, height: int = 480):
        self.html, self.path, self.height = html, path, height

    def save(self, path) -> pathlib.Path:
        """Write the page to `path` (UTF-8); returns the path."""
        path = pathlib.Path(path)
        path.write_text(self.html, encoding="utf-8")
        self.path = path
        return path

    @property
    def size(self) -> int:
        """The page's size in bytes."""
        return len(self.html.encode("utf-8"))

    def _repr_html_(self) -> str:
        return (
            f'<iframe srcdoc="{html.escape(self.html, quote=True)}" sandbox="allow-scripts" '
            f'style="width: 100%; height: {int(self.height)}px; border: 1px solid #d5dae0;">'
            "</iframe>"
        )

    def __repr__(self) -> str:
        where = f", saved to {self.path}" if self.path is not None else ""
        return f"Animation({self.size / 1e6:.2f} MB{where})"


def _common_times(ts: np.ndarray) -> np.ndarray:
    """The saved times shared by every trajectory of a batch `(B, T)`; a failed trajectory's
    times after it stopped (padding) are ignored."""
    reached = np.where(np.isfinite(ts), ts, np.nan)
    with np.errstate(all="ignore"):
        t = np.nanmax(reached, axis=0) if np.isfinite(reached).any() else reached[0]
    same = np.isnan(reached) | np.isclose(reached, t, rtol=1e-6, atol=0.0)
    if not np.all(same):
        raise ValueError(
            "animate needs the same saved times for every trajectory of a batch: save at "
            "diffrax.SaveAt(ts=...)."
        )
    return t


def _bounds(frames: list[dict[str, np.ndarray]], radius: float, pivot) -> dict[str, list]:
    """The box holding the bodies (their origins and `radius` around), the traced points and
    the pivot, for the camera."""
    origins = np.concatenate([f["position"].reshape(-1, 3) for f in frames])
    points = [f[k].reshape(-1, 3) for f in frames for k in ("contact", "point") if k in f]
    points += [] if pivot is None else [np.asarray(pivot, float)[None]]
    lo, hi = origins.min(axis=0) - radius, origins.max(axis=0) + radius
    if points:
        points = np.concatenate(points)
        lo, hi = np.minimum(lo, points.min(axis=0)), np.maximum(hi, points.max(axis=0))
    return {"min": lo.tolist(), "max": hi.tolist()}


def build(
    sol,
    scene: Scene,
    *,
    title: str,
    time_unit: str,
    every: int,
    max_bodies: int,
    speed: float,
    autoplay: bool,
    loop: bool,
) -> Animation:
    """The `Animation` of `sol` drawn by `scene` (arguments checked by `geomech.plot.animate`)."""
    ts = np.asarray(sol.ts, dtype=float)
    if ts.ndim not in (1, 2):
        raise ValueError(f"animate: `sol.ts` must have shape (T,) or (B, T), got {ts.shape}.")
    batch = ts.shape
    frames = scene.frames(sol.states.q, batch)
    ts2 = ts.reshape(-1, batch[-1])
    frames = {k: v.reshape(ts2.shape[0], batch[-1], -1) for k, v in frames.items()}
    t = _common_times(ts2)
    keep = np.flatnonzero(np.isfinite(t))[::every]
    if len(keep) < 2:
        raise ValueError("animate needs at least two saved times (after `every`).")
    if np.any(np.diff(t[keep]) <= 0):
        raise ValueError("animate needs increasing saved times.")
    t = t[keep]
    B = ts2.shape[0]
    bodies, drawn, kept_frames = [], [], []
    for b in range(min(B, max_bodies)):
        f = {k: v[b, keep] for k, v in frames.items()}
        reached = np.isfinite(ts2[b, keep]) & np.all(
            [np.all(np.isfinite(v), axis=-1) for v in f.values()], axis=0
        )
        if not reached[0]:
            continue  # failed before its first saved time: nothing to draw
        last = np.maximum.accumulate(np.where(reached, np.arange(len(t)), 0))
        f = {k: v[last] for k, v in f.items()}  # held at the last state reached
        wxyz = f["wxyz"] / np.linalg.norm(f["wxyz"], axis=-1, keepdims=True)
        bodies.append(
            {
                "label": f"trajectory {b}",
                "wxyz": _b64(wxyz, np.float32),
                "position": _b64(f["position"], np.float32),
                "contact": _b64(f["contact"], np.float32) if "contact" in f else None,
                "point": _b64(f["point"], np.float32) if "point" in f else None,
                "t_final": float(t[int(np.flatnonzero(reached)[-1])]),
            }
        )
        drawn.append(b)
        kept_frames.append(f)
    if not bodies:
        raise ValueError("animate: no trajectory has a finite state at its first saved time.")
    mesh = scene.mesh
    order = np.argsort(mesh.pattern, kind="stable")
    if B > 1:
        shown = f"{B}" if len(drawn) == B else f"{len(drawn)} of {B}"
        title = f"{title} ({shown} trajectories)"
    data = {
        "title": title,
        "time_unit": time_unit,
        "ts": _b64(t, np.float32),
        "mesh": {
            "vertices": _b64(mesh.vertices, np.float32),
            "faces": _b64(mesh.faces[order], np.uint32),
            "light": int(np.sum(mesh.pattern == 0)),
        },
        "radius": mesh.radius(),
        "bodies": bodies,
        "plane": None if scene.plane is None else float(scene.plane),
        "pivot": None if scene.pivot is None else np.asarray(scene.pivot, float).tolist(),
        "bounds": _bounds(kept_frames, mesh.radius(), scene.pivot),
        "contact_label": scene.contact_label,
        "point_label": scene.point_label,
        "speed": float(speed),
        "autoplay": bool(autoplay),
        "loop": bool(loop),
    }
    return Animation(page(data, title))
