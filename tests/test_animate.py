"""`geomech.plot.animate` without a browser: the meshes are the bodies they claim to be (volumes,
inertia, surfaces), every model's scene puts its body where the model says it is (a rolling
body touches the plane at its contact point, a top stands on its pivot), and the page carries
exactly those frames, fetches nothing and stays small. tests/test_browser.py looks at the page."""

import pathlib
import re
import types

import jax
import jax.numpy as jnp
import jaxlie
import numpy as np
import pytest
from helpers import decoded, page_data

import geomech as gm
import geomech.models as gmm
from geomech import plot
from geomech._animation import THREE, VIEWER

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCENE_MODELS = {n: c for n, c in gmm.MODELS.items() if issubclass(c, gmm.AbstractSceneModel)}


def batched(q, n: int):
    return jax.tree.map(lambda x: jnp.stack([x] * n), q)


def spin(ts, omega, position=None, batch=None):
    """A Solution-like record of a body turning at the constant spatial angular velocity `omega`
    about its frame's origin, R(t) = exp(t ω̂) (a free body spinning about a principal axis)."""
    R = jaxlie.SO3.exp(jnp.asarray(ts)[:, None] * jnp.asarray(omega)[None])
    v = jnp.broadcast_to(jnp.asarray(omega, float), (len(ts), 3))
    q = R
    if position is not None:  # on SO(3) × ℝ², standing still
        q = (R, jnp.broadcast_to(jnp.asarray(position, float), (len(ts), 2)))
        v = jnp.concatenate([v, jnp.zeros((len(ts), 2))], axis=1)
    if batch:
        q, v, ts = batched(q, batch), jnp.stack([v] * batch), np.stack([ts] * batch)
    return types.SimpleNamespace(ts=np.asarray(ts), states=gm.State(q, v))


# -- meshes --------------------------------------------------------------------------------------


def solid_inertia(mesh: plot.Mesh, mass: float):
    """Mass centre and inertia about it of the uniform solid bounded by a closed mesh, from the
    signed tetrahedra (0, p0, p1, p2): ∫x dV = Σ det/24 (p0+p1+p2) and
    ∫x xᵀ dV = Σ det/120 (Σ pᵢpᵢᵀ + (Σpᵢ)(Σpᵢ)ᵀ)."""
    p = mesh.vertices[mesh.faces]
    det = np.einsum("fi,fi->f", p[:, 0], np.cross(p[:, 1], p[:, 2]))
    s = p.sum(axis=1)
    volume = det.sum() / 6
    first = (det[:, None] * s).sum(0) / 24
    second = np.einsum("f,fki,fkj->ij", det, p, p) + np.einsum("f,fi,fj->ij", det, s, s)
    second /= 120
    rho = mass / volume
    c = first / volume
    covariance = rho * second - mass * np.outer(c, c)
    return c, np.trace(covariance) * np.eye(3) - covariance


@pytest.mark.parametrize(
    "mesh, volume",
    [
        (plot.Mesh.ellipsoid((1.0, 2.0, 3.0), (0.5, 0.0, -1.0)), 4 / 3 * np.pi * 6.0),
        (plot.Mesh.sphere(0.3), 4 / 3 * np.pi * 0.027),
        (plot.Mesh.disk(2.0, axis=(1.0, 1.0, 0.0), thickness=0.1), np.pi * 4.0 * 0.1),
        (plot.Mesh.cone(0.5, 2.0, axis=0), np.pi * 0.25 * 2.0 / 3),
        (plot.Mesh.box((0.1, 0.2, 0.3), (1.0, 2.0, 3.0)), 8 * 0.006),
    ],
    ids=["ellipsoid", "sphere", "disk", "cone", "box"],
)
def test_meshes_are_closed_and_face_outwards(mesh, volume):
    """The divergence-theorem volume is the solid's (within the polygonal approximation, from
    below): a hole or an inward face would change it."""
    assert volume * 0.98 < mesh.volume() <= volume * (1 + 1e-12)
    edges = np.concatenate([mesh.faces[:, [0, 1]], mesh.faces[:, [1, 2]], mesh.faces[:, [2, 0]]])
    edges = np.sort(edges, axis=1)
    _, count = np.unique(edges, axis=0, return_counts=True)
    assert mesh.pattern.shape == (len(mesh.faces),)
    if mesh.vertices.shape[0] == len(np.unique(mesh.vertices, axis=0)):  # no doubled vertices
        assert np.all(count == 2)  # closed: every edge in two triangles


def test_a_mesh_of_two_tones_shows_a_turn():
    """The ellipsoid's octants alternate: its two tones have equal areas."""
    m = plot.Mesh.sphere(1.0)
    p = m.vertices[m.faces]
    area = 0.5 * np.linalg.norm(np.cross(p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]), axis=1)
    assert np.isclose(area[m.pattern == 1].sum(), area[m.pattern == 0].sum(), rtol=1e-12)


def test_equimomental_ellipsoid_has_the_mass_centre_and_inertia_of_the_body():
    Q = np.asarray(jaxlie.SO3.exp(jnp.array([0.3, -0.5, 0.8])).as_matrix())
    inertia = Q @ np.diag([0.7, 1.1, 1.5]) @ Q.T
    body = gm.RigidBody(2.0, inertia, np.array([0.1, -0.2, 0.3]))
    c, I = solid_inertia(plot.Mesh.equimomental(body, rings=96, segments=192), 2.0)
    np.testing.assert_allclose(c, [0.1, -0.2, 0.3], atol=1e-12)
    np.testing.assert_allclose(I, inertia, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize(
    "surface",
    [
        gm.Sphere(0.4),
        gm.Ellipsoid(jnp.array([0.2, 0.03, 0.02])),
        gm.SupportFunction(lambda u: jnp.linalg.norm(jnp.array([0.3, 0.2, 0.1]) * u)),
        gm.ThinDisk(1.5, axis=1),
    ],
    ids=["sphere", "ellipsoid", "support_function", "thin_disk"],
)
def test_surface_meshes_lie_on_their_surfaces(surface):
    """Every vertex p is on the body's boundary: p·u ≤ h(u) for all directions u, with equality
    for u the direction in which p is extreme (h the surface's own support function)."""
    v = surface.mesh().vertices
    u = np.random.default_rng(0).normal(size=(400, 3))
    u /= np.linalg.norm(u, axis=1, keepdims=True)
    h = np.asarray(jax.vmap(surface.support)(jnp.asarray(u)))
    scale = np.max(h)
    assert np.max(v @ u.T - h[None]) < 0.02 * scale  # inside (the disk has its thickness)
    extreme = v[np.argmax(v @ u.T, axis=0)]
    np.testing.assert_allclose(np.sum(extreme * u, axis=1), h, atol=0.03 * scale)


# -- every model's scene ---------------------------------------------------------------------------


def states(name, model):
    """Configurations of `model` away from its default state."""
    if name == "sleigh":
        return [model.initial_state(theta0=t).q for t in (0.3, 2.0)]
    if name in ("rolling_disk", "rolling_disk_so3"):
        return [model.initial_state(lean=t).q for t in (0.1, -0.6)]
    if name in ("chaplygin_sphere", "routh_sphere", "turntable_ball", "rattleback"):
        turns = ((0.4, -0.7, 0.2), (-1.0, 0.3, 2.0))
        return [model.initial_state().q] + [model.initial_state(attitude=a).q for a in turns]
    R = jaxlie.SO3.exp(jnp.array([0.9, -0.4, 0.3]))
    return [model.initial_state().q, model.initial_state(R0=R).q]


def world(scene, q):
    """The mesh's vertices in space for one configuration, and the scene's frame quantities."""
    f = {k: v[0] for k, v in scene.frames(batched(q, 1), (1,)).items()}
    R = np.asarray(jaxlie.SO3(jnp.asarray(f["wxyz"])).as_matrix())
    return scene.mesh.vertices @ R.T + f["position"], f, R


@pytest.mark.parametrize("name", sorted(SCENE_MODELS))
def test_every_scene_places_its_body_where_the_model_says(name):
    model = SCENE_MODELS[name]()
    scene = model.scene()
    size = scene.mesh.radius()
    for q in states(name, model):
        vertices, f, R = world(scene, q)
        np.testing.assert_allclose(np.linalg.norm(f["wxyz"]), 1.0, rtol=1e-12)
        np.testing.assert_allclose(f["point"], f["position"] + R @ scene.point, atol=1e-12)
        if scene.contact is not None:
            # the body rests on the plane z = 0 and touches it at the contact point
            assert f["contact"][2] == pytest.approx(0.0, abs=1e-12)
            assert vertices[:, 2].min() == pytest.approx(0.0, abs=0.02 * size)
            low = vertices[vertices[:, 2] < vertices[:, 2].min() + 1e-3 * size]
            assert np.min(np.linalg.norm(low - f["contact"], axis=1)) < 0.1 * size
        if scene.pivot is not None and name != "pivoted_top":
            np.testing.assert_allclose(f["position"], scene.pivot, atol=1e-12)  # turns about it
        if scene.plane is not None:  # never through the floor (a drawn thin disk is 0.04 r
            assert vertices[:, 2].min() >= scene.plane - 0.02 * size  # thick: its edge dips)


def test_the_rolling_scene_is_the_rolling_body_geometry():
    """The ball's centre is its radius above the contact point, straight up."""
    ball = gmm.ChaplyginSphere(a=0.7)
    q = ball.initial_state(attitude=(0.5, 1.0, -2.0), position=(0.3, -0.4)).q
    _, f, _ = world(ball.scene(), q)
    np.testing.assert_allclose(f["position"], [0.3, -0.4, 0.7], atol=1e-12)
    np.testing.assert_allclose(f["contact"], [0.3, -0.4, 0.0], atol=1e-12)


def test_the_pivoted_top_is_drawn_as_the_heavy_top():
    """The same rotation on SO(3) (pivot frame) and on SO(3) × ℝ³ (centre-of-mass frame, x = ℓRe₃)
    puts the cone's vertices at the same places; its apex is the pivot."""
    R = jaxlie.SO3.exp(jnp.array([0.7, -0.2, 1.1]))
    heavy, pivoted = gmm.HeavyTop(ell=0.4), gmm.PivotedTop(ell=0.4)
    a, fa, _ = world(heavy.scene(), R)
    b, fb, _ = world(pivoted.scene(), pivoted.initial_state(R0=R).q)
    np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(fa["point"], fb["point"], atol=1e-12)
    apex = a[np.argmin(np.linalg.norm(a, axis=1))]
    np.testing.assert_allclose(apex, 0.0, atol=1e-12)
    centroid = solid_inertia(heavy.top(), 1.0)[0]
    np.testing.assert_allclose(centroid, [0.0, 0.0, 0.4], atol=2e-3)  # at the centre of mass


def test_the_euler_angle_disk_is_drawn_as_the_disk_on_SO3():
    """RollingDisk's scene (Euler angles) and RollingDiskSO3's (the group) agree at the mapped
    state (`RollingDiskSO3.from_euler`)."""
    disk, so3 = gmm.RollingDisk(R=0.5), gmm.RollingDiskSO3(R=0.5)
    state = disk.initial_state(lean=0.4)
    state = gm.State(state.q.at[2].set(0.7).at[4].set(1.3), state.v)
    a, fa, _ = world(disk.scene(), state.q)
    b, fb, _ = world(so3.scene(), so3.from_euler(state).q)
    np.testing.assert_allclose(a, b, atol=1e-12)
    np.testing.assert_allclose(fa["contact"], fb["contact"], atol=1e-12)


# -- the page ---------------------------------------------------------------------------------------

LOADS = re.compile(
    r"<(?:script|link|img|iframe|audio|video|source|object|embed)\b[^>]*?\b(?:src|href|data)\s*="
    r"|\burl\(|@import|\bfetch\(|XMLHttpRequest|\bimportScripts\(|\bimport\(\s*[\"'`]",
    flags=re.I,
)
INLINED = re.compile(
    r'(<script type="(?:text/plain|application/json)" id="([\w-]+)">)(.*?)(</script>)', re.S
)
SPECIFIER = re.compile(r"""\b(?:from|import)\s*["']([^"']+)["']""")


def test_the_page_is_self_contained_and_small(tmp_path):
    """10 s at 60 fps of the rattleback: under 2 MB; the page's own markup and loader load
    nothing (no element with a source, no stylesheet import or url(), no fetch); the inlined
    modules import only each other (the names the loader rewrites to their blob URLs); three.js
    is inlined byte for byte with its licence; the frames are those of the scene (float32)."""
    model = gmm.Rattleback()
    ts = np.linspace(0.0, 10.0, 601)
    sol = spin(ts, (0.0, 0.0, 5.0), position=(0.0, 0.0))
    anim = plot.animate(sol, model.scene(), tmp_path / "rattleback.html", title="rattleback")
    html = (tmp_path / "rattleback.html").read_text(encoding="utf-8")
    assert html == anim.html and anim.size == len(html.encode()) < 2 * 2**20
    inlined = {m[2]: m[3] for m in INLINED.finditer(html)}
    assert inlined["three-core"] == (THREE / "three.core.min.js").read_text()
    assert inlined["three-module"] == (THREE / "three.module.min.js").read_text()
    assert inlined["three-orbit"] == (THREE / "OrbitControls.js").read_text()
    assert inlined["geomech-viewer"] == (VIEWER / "viewer.js").read_text()
    markup = INLINED.sub(r"\1\4", html)
    assert not LOADS.findall(markup), LOADS.findall(markup)
    uncommented = {i: re.sub(r"/\*\*.*?\*/", "", t, flags=re.S) for i, t in inlined.items()}
    imported = {i: set(SPECIFIER.findall(text)) for i, text in uncommented.items()}
    assert imported == {
        "geomech-data": set(),
        "three-core": set(),
        "three-module": {"./three.core.min.js"},
        "three-orbit": {"three"},
        "geomech-viewer": {"three", "three/addons/controls/OrbitControls.js"},
    }
    assert "Permission is hereby granted" in markup and "three.js authors" in markup
    data = page_data(html)
    frames = model.scene().frames(sol.states.q, (601,))
    (body,) = data["bodies"]
    np.testing.assert_allclose(decoded(data["ts"], np.float32, 1)[:, 0], ts, rtol=1e-7)
    for key, width in (("wxyz", 4), ("position", 3), ("contact", 3), ("point", 3)):
        np.testing.assert_allclose(decoded(body[key], np.float32, width), frames[key], atol=1e-6)
    # the attitude is the spin itself: exp(5 t e3)
    w = decoded(body["wxyz"], np.float32, 4)
    np.testing.assert_allclose(w[:, 0], np.cos(2.5 * ts), atol=1e-6)
    np.testing.assert_allclose(w[:, 3], np.sin(2.5 * ts), atol=1e-6)
    mesh = decoded(data["mesh"]["vertices"], np.float32, 3)
    np.testing.assert_allclose(mesh, model.scene().mesh.vertices, atol=1e-7)
    assert data["plane"] == 0.0 and data["pivot"] is None


def test_the_test_finds_loads():
    for page in ['<img src="x.png">', '<script type="module" src=a.js>', "a{background:url(x)}",
                 "@import 'x.css'", "fetch('x')", '<link rel="stylesheet" href="//x/y.css">',
                 'import("https://x/m.js")']:  # fmt: skip
        assert LOADS.findall(page), page
    assert not LOADS.findall("const u = URL.createObjectURL(blob); import(u);")
    assert SPECIFIER.findall("import{a as b}from\"./x.js\";import * as T from 'three'") == [
        "./x.js",
        "three",
    ]


def test_an_ensemble_is_several_bodies_and_a_failed_one_stays_where_it_stopped():
    ts = np.linspace(0.0, 2.0, 21)
    sol = spin(ts, (0.0, 1.0, 0.0), batch=3)
    q = np.array(sol.states.q.wxyz)
    q[2, 12:] = np.inf  # trajectory 2 failed after t = 1.1
    times = np.array(sol.ts)
    times[2, 12:] = np.inf
    sol = types.SimpleNamespace(ts=times, states=gm.State(jaxlie.SO3(jnp.asarray(q)), sol.states.v))
    scene = gmm.FreeRigidBody().scene()
    data = page_data(plot.animate(sol, scene, title="three").html)
    assert [b["label"] for b in data["bodies"]] == [f"trajectory {b}" for b in range(3)]
    assert "3 trajectories" in data["title"]
    assert [b["t_final"] for b in data["bodies"]] == pytest.approx([2.0, 2.0, 1.1])
    w = decoded(data["bodies"][2]["wxyz"], np.float32, 4)
    np.testing.assert_allclose(w[12:], np.broadcast_to(w[11], w[12:].shape))  # held
    np.testing.assert_allclose(w[:12], q[2, :12], atol=1e-7)
    assert len(page_data(plot.animate(sol, scene, max_bodies=2).html)["bodies"]) == 2


def test_bad_input_is_named():
    ts = np.linspace(0.0, 1.0, 5)
    sol, scene = spin(ts, (0.0, 0.0, 1.0)), gmm.FreeRigidBody().scene()
    with pytest.raises(TypeError, match="animate_planar"):
        plot.animate(sol, lambda q: q)
    with pytest.raises(ValueError, match="every"):
        plot.animate(sol, scene, every=0)
    with pytest.raises(ValueError, match="speed"):
        plot.animate(sol, scene, speed=-1.0)
    with pytest.raises(ValueError, match="two saved times"):
        plot.animate(sol, scene, every=10)
    other = spin(ts, (0.0, 0.0, 1.0), batch=2)
    other.ts[1] *= 2
    with pytest.raises(ValueError, match="same saved times"):
        plot.animate(other, scene)
    with pytest.raises(ValueError, match="faces"):
        plot.Mesh(np.eye(3), [[0, 1, 3]])
    with pytest.raises(ValueError, match="vertices"):
        plot.Mesh(np.eye(2), [[0, 1, 1]])
    with pytest.raises(TypeError, match="pose"):
        plot.Scene(plot.Mesh.sphere(1.0), pose=None)
    with pytest.raises(ValueError, match="point"):
        plot.Scene(plot.Mesh.sphere(1.0), pose=lambda q: (q, jnp.zeros(3)), point=(1.0, 2.0))
    with pytest.raises(ValueError, match="semi_axes"):
        plot.Mesh.ellipsoid((1.0, -1.0, 1.0))


def test_a_user_mesh_and_pose(tmp_path):
    """A tetrahedron read as vertices and faces, carried by a pose of the user's making."""
    vertices = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])
    faces = np.array([[0, 2, 1], [0, 1, 3], [0, 3, 2], [1, 2, 3]])
    mesh = plot.Mesh(vertices, faces)
    assert mesh.volume() == pytest.approx(1 / 6)
    scene = plot.Scene(mesh, pose=lambda R: (R, jnp.array([1.0, 2.0, 3.0])), point=(1.0, 0.0, 0.0))
    sol = spin(np.linspace(0.0, np.pi, 3), (0.0, 0.0, 1.0))  # a half turn about e3
    data = page_data(plot.animate(sol, scene, tmp_path / "tetra.html").html)
    point = decoded(data["bodies"][0]["point"], np.float32, 3)
    np.testing.assert_allclose(point, [[2, 2, 3], [1, 3, 3], [0, 2, 3]], atol=1e-6)


def test_a_notebook_shows_the_page_inline():
    anim = plot.animate(
        spin(np.linspace(0.0, 1.0, 3), (0.0, 0.0, 1.0)), gmm.FreeRigidBody().scene()
    )
    inline = anim._repr_html_()
    assert inline.startswith("<iframe srcdoc=") and "<script" not in inline  # escaped
    assert "&lt;script type=&quot;text/plain&quot; id=&quot;three-core&quot;&gt;" in inline


def test_the_vendored_three_js_is_the_npm_package_unchanged():
    """The files match the hashes in the table of geomech/_vendor/three/README.md (copied from
    the npm tarball), which names the version the page says it includes."""
    import hashlib

    from geomech._animation import THREE_VERSION

    readme = (THREE / "README.md").read_text()
    rows = re.findall(r"^\| `([\w.]+)` \| `[\w./]+` \| `([0-9a-f]{64})` \|$", readme, flags=re.M)
    assert {name for name, _ in rows} == {p.name for p in THREE.iterdir()} - {"README.md"}
    for name, digest in rows:
        assert hashlib.sha256((THREE / name).read_bytes()).hexdigest() == digest, name
    assert f"version {THREE_VERSION}" in readme.replace("\n", " ")
