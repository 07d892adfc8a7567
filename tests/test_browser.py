"""An animation page as a person sees it: opened from a file in a headless Chromium (Debian's
`chromium` package, driven over the DevTools protocol on a pipe), screenshots taken at two
times: the body moved between them, the page shows the solution's poses (between saved times
too), logged no error and loaded nothing from anywhere. Skipped only where no Chromium is
installed (`.ci/run` installs it)."""

import io
import types

import jax.numpy as jnp
import jaxlie
import matplotlib.image
import numpy as np
import pytest

import geomech as gm
import geomech.models as gmm
from geomech import _browser, plot

pytestmark = pytest.mark.skipif(
    _browser.find_chromium() is None,
    reason="no Chromium to open the page in: install Debian's `chromium` package "
    "(apt-get install chromium) or set $GEOMECH_CHROMIUM",
)

A, W = 0.5, 2.0  # the ball's radius and rolling rate


def rolling(t):
    """A ball rolling straight along x, turning at W about its axis e₂ kept horizontal:
    R(t) = exp(W t e₂), centre (A W t, 0, A); the contact point's velocity
    (A W, 0, 0) + W e₂ × (−A e₃) = 0: it rolls without slipping."""
    t = np.asarray(t, float)
    R = jaxlie.SO3.exp(jnp.asarray(t[..., None] * np.array([0.0, W, 0.0])))
    x = np.stack([A * W * t, 0.0 * t], axis=-1)
    return R, x


@pytest.fixture(scope="module")
def ball_page(tmp_path_factory):
    ts = np.linspace(0.0, 3.0, 61)
    R, x = rolling(ts)
    v = np.broadcast_to([0.0, W, 0.0, A * W, 0.0], (len(ts), 5))
    sol = types.SimpleNamespace(ts=ts, states=gm.State((R, jnp.asarray(x)), jnp.asarray(v)))
    path = tmp_path_factory.mktemp("page") / "ball.html"
    plot.animate(sol, gmm.ChaplyginSphere(a=A).scene(), path, title="a rolling ball")
    return path


def image(png: bytes) -> np.ndarray:
    return matplotlib.image.imread(io.BytesIO(png), format="png")[..., :3]


def test_the_body_moves_on_the_screen_and_the_page_logs_no_error(ball_page):
    with _browser.Chromium(width=800, height=500) as browser:
        browser.open(ball_page.as_uri())
        assert browser.evaluate("geomechReady.then(() => [geomech.t0, geomech.t1])") == [0, 3]
        shots, boxes = {}, {}
        for t in (0.5, 2.0, 0.525):  # two saved times, and one between two saved times
            browser.evaluate(f"geomech.seek({t})")
            shots[t], boxes[t] = image(browser.screenshot()), browser.evaluate("geomech.box(0)")
            pose = browser.evaluate("geomech.pose(0)")
            R, x = rolling(t)  # slerp and lerp are exact for a steady roll
            np.testing.assert_allclose(pose["wxyz"], np.asarray(R.wxyz), atol=2e-6)
            np.testing.assert_allclose(pose["position"], [*x, A], atol=2e-6)
        assert browser.evaluate("document.getElementById('clock').textContent") == "t = 0.525 s"
        errors, requests = browser.errors, browser.requests
    assert not errors, errors
    assert requests and all(u.split(":")[0] in ("file", "blob", "data") for u in requests), requests
    a, b = shots[0.5], shots[2.0]
    height, width, _ = a.shape
    assert (height, width) == (500, 800)
    for box in boxes.values():  # the ball is in view
        assert (
            0 <= box["left"] < box["right"] <= width and 0 <= box["top"] < box["bottom"] <= height
        )
    left = int(min(boxes[0.5]["left"], boxes[2.0]["left"]))
    right = int(np.ceil(max(boxes[0.5]["right"], boxes[2.0]["right"])))
    top = int(min(boxes[0.5]["top"], boxes[2.0]["top"]))
    bottom = int(np.ceil(max(boxes[0.5]["bottom"], boxes[2.0]["bottom"])))
    region = (slice(top, bottom), slice(left, right))
    # the body moved: its region changed between the two times, by much more than noise
    assert np.mean(np.abs(a[region] - b[region])) > 0.05
    # and it was drawn: in its box at t = 0.5 there are pixels of the ball's blue tones,
    # which the floor and the background (grey, almost white) do not have
    box = boxes[0.5]
    inside = a[int(box["top"]) : int(box["bottom"]), int(box["left"]) : int(box["right"])]
    blue = (inside[..., 2] - inside[..., 0]) > 0.15
    assert blue.mean() > 0.2
    assert ((a[..., 2] - a[..., 0]) > 0.15).mean() < 0.2  # not everywhere


def test_frames_are_exported_as_png(ball_page, tmp_path):
    frames = plot.export_frames(ball_page, tmp_path, fps=2.0, t1=1.0, width=320, height=200)
    assert [f.name for f in frames] == ["frame_00000.png", "frame_00001.png", "frame_00002.png"]
    images = [image(f.read_bytes()) for f in frames]
    assert images[0].shape == (200, 320, 3)
    assert np.mean(np.abs(images[0] - images[2])) > 0.002  # the ball rolled
    assert not (tmp_path / ".geomech-export.html").exists()
