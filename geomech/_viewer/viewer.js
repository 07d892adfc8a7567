// geomech's animation viewer: bodies moving along a saved solution, drawn with three.js.
// The page that geomech.plot.animate writes loads this module with three.js itself (inlined in
// the same file) and calls start(data, ready); nothing is fetched from anywhere.
import * as THREE from "three";
import { OrbitControls } from "three/addons/controls/OrbitControls.js";

const AXIS_COLOURS = ["#d62728", "#2ca02c", "#1f77b4"];
const PALETTE = ["#4c72b0", "#55a868", "#c44e52", "#8172b3", "#ccb974", "#64b5cd", "#937860", "#da8bc3"];
const CONTACT_COLOUR = "#e07b39";
const POINT_COLOUR = "#7b4fa0";
const SPEEDS = [0.05, 0.1, 0.25, 0.5, 1, 2, 4];

function decode(text, Type) {
  const bin = atob(text);
  const bytes = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
  return new Type(bytes.buffer);
}

function element(tag, attributes, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attributes || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

// the body axes e1, e2, e3 as thin rods (WebGL draws lines one pixel wide)
function bodyAxes(length) {
  const group = new THREE.Group();
  const rod = new THREE.CylinderGeometry(0.012 * length, 0.012 * length, length, 12);
  rod.translate(0, length / 2, 0); // along +y from the origin
  const tip = new THREE.ConeGeometry(0.035 * length, 0.1 * length, 16);
  tip.translate(0, length, 0);
  const turns = [[0, 0, -Math.PI / 2], [0, 0, 0], [Math.PI / 2, 0, 0]]; // +y onto e1, e2, e3
  AXIS_COLOURS.forEach((colour, i) => {
    const material = new THREE.MeshStandardMaterial({ color: colour, roughness: 0.5 });
    for (const g of [rod, tip]) {
      const m = new THREE.Mesh(g, material);
      m.rotation.set(...turns[i]);
      group.add(m);
    }
  });
  return group;
}

function niceStep(x) {
  const p = Math.pow(10, Math.floor(Math.log10(x)));
  return x / p < 2 ? p : x / p < 5 ? 2 * p : 5 * p;
}

export function start(data, ready) {
  const ts = decode(data.ts, Float32Array);
  const T = ts.length;
  const t0 = ts[0];
  const t1 = ts[T - 1];
  const unit = data.time_unit ? " " + data.time_unit : "";

  // -- renderer, camera, controls -------------------------------------------------------------
  const view = document.getElementById("view");
  const renderer = new THREE.WebGLRenderer({ antialias: true, preserveDrawingBuffer: true });
  renderer.setPixelRatio(window.devicePixelRatio || 1);
  renderer.shadowMap.enabled = true;
  renderer.shadowMap.type = THREE.PCFShadowMap;
  view.appendChild(renderer.domElement);

  const scene = new THREE.Scene();
  scene.background = new THREE.Color("#f3f5f8");
  const lo = new THREE.Vector3().fromArray(data.bounds.min);
  const hi = new THREE.Vector3().fromArray(data.bounds.max);
  const centre = lo.clone().add(hi).multiplyScalar(0.5);
  const size = Math.max(hi.clone().sub(lo).length() / 2, 1e-6);

  const camera = new THREE.PerspectiveCamera(35, 1, size / 100, size * 200);
  camera.up.set(0, 0, 1);
  const distance = (1.1 * size) / Math.sin(THREE.MathUtils.degToRad(35 / 2));
  const az = THREE.MathUtils.degToRad(-62);
  const el = THREE.MathUtils.degToRad(26);
  camera.position.set(
    centre.x + distance * Math.cos(el) * Math.cos(az),
    centre.y + distance * Math.cos(el) * Math.sin(az),
    centre.z + distance * Math.sin(el),
  );
  const controls = new OrbitControls(camera, renderer.domElement);
  controls.target.copy(centre);
  controls.update();

  scene.add(new THREE.HemisphereLight("#ffffff", "#8090a0", 1.6));
  const sun = new THREE.DirectionalLight("#ffffff", 2.2);
  sun.position.set(centre.x + 0.6 * size, centre.y - 0.9 * size, centre.z + 2.5 * size);
  sun.target.position.copy(centre);
  scene.add(sun, sun.target);

  // -- the floor, the pivot, the spatial frame --------------------------------------------------
  if (data.plane !== null) {
    const extent = 3 * size;
    const step = niceStep(extent / 10);
    const half = Math.ceil(extent / step) * step;
    const floor = new THREE.Mesh(
      new THREE.PlaneGeometry(2 * half, 2 * half),
      new THREE.MeshStandardMaterial({ color: "#e4e8ee", roughness: 0.95 }),
    );
    floor.position.set(Math.round(centre.x / step) * step, Math.round(centre.y / step) * step, data.plane);
    floor.receiveShadow = true;
    scene.add(floor);
    const grid = new THREE.GridHelper(2 * half, Math.round((2 * half) / step), "#9aa3ad", "#c5ccd4");
    grid.rotation.x = Math.PI / 2;
    grid.position.set(floor.position.x, floor.position.y, data.plane + size * 1e-4);
    scene.add(grid);
    sun.castShadow = true;
    const s = sun.shadow.camera;
    s.left = s.bottom = -2 * size;
    s.right = s.top = 2 * size;
    s.near = 0.1 * size;
    s.far = 6 * size;
    sun.shadow.mapSize.set(1024, 1024);
  }
  if (data.pivot !== null) {
    const dot = new THREE.Mesh(
      new THREE.SphereGeometry(0.025 * data.radius, 16, 8),
      new THREE.MeshStandardMaterial({ color: "#222222" }),
    );
    dot.position.fromArray(data.pivot);
    scene.add(dot);
    if (data.plane === null) {
      const frame = new THREE.AxesHelper(1.6 * data.radius);
      frame.position.fromArray(data.pivot);
      frame.material.transparent = true;
      frame.material.opacity = 0.25;
      scene.add(frame);
    }
  }

  // -- the bodies ------------------------------------------------------------------------------
  const geometry = new THREE.BufferGeometry();
  geometry.setAttribute("position", new THREE.BufferAttribute(decode(data.mesh.vertices, Float32Array), 3));
  geometry.setIndex(new THREE.BufferAttribute(decode(data.mesh.faces, Uint32Array), 1));
  const nFaces = geometry.index.count / 3;
  geometry.addGroup(0, 3 * data.mesh.light, 0);
  geometry.addGroup(3 * data.mesh.light, 3 * (nFaces - data.mesh.light), 1);
  geometry.computeVertexNormals();
  geometry.computeBoundingBox();

  const bodies = data.bodies.map((b, k) => {
    const colour = new THREE.Color(PALETTE[k % PALETTE.length]);
    const materials = [colour, colour.clone().multiplyScalar(0.55)].map(
      (c) => new THREE.MeshStandardMaterial({ color: c, roughness: 0.55, metalness: 0.05 }),
    );
    const mesh = new THREE.Mesh(geometry, materials);
    mesh.castShadow = true;
    const axes = bodyAxes(1.3 * data.radius);
    const group = new THREE.Group();
    group.add(mesh, axes);
    scene.add(group);
    const trace = (field, colour) => {
      if (b[field] === null) return null;
      const g = new THREE.BufferGeometry();
      g.setAttribute("position", new THREE.BufferAttribute(decode(b[field], Float32Array), 3));
      const line = new THREE.Line(g, new THREE.LineBasicMaterial({ color: colour, transparent: true }));
      line.frustumCulled = false;
      scene.add(line);
      return line;
    };
    return {
      label: b.label,
      wxyz: decode(b.wxyz, Float32Array),
      position: decode(b.position, Float32Array),
      tFinal: b.t_final,
      group, mesh, axes, materials,
      traces: [trace("contact", CONTACT_COLOUR), trace("point", POINT_COLOUR)].filter((x) => x),
    };
  });

  // -- the controls bar and the legend ---------------------------------------------------------
  const bar = document.getElementById("bar");
  const play = element("button", { id: "play", title: "play / pause (space)" }, "\u25b6");
  const slider = element("input", { id: "slider", type: "range", min: "0", max: "10000", step: "1", value: "0" });
  const clock = element("span", { id: "clock" });
  const speed = element("select", { id: "speed", title: "playback speed" });
  for (const s of SPEEDS) speed.appendChild(element("option", { value: String(s) }, s + "\u00d7"));
  speed.value = String(SPEEDS.includes(data.speed) ? data.speed : 1);
  const showAxes = element("input", { type: "checkbox", id: "show-axes", checked: "" });
  const showTraces = element("input", { type: "checkbox", id: "show-traces", checked: "" });
  const axesLabel = element("label", {}, " axes");
  axesLabel.prepend(showAxes);
  const tracesLabel = element("label", {}, " paths");
  tracesLabel.prepend(showTraces);
  bar.append(play, slider, clock, speed, axesLabel, tracesLabel);
  let which = null;
  if (bodies.length > 1) {
    which = element("select", { id: "which", title: "which trajectory" });
    which.appendChild(element("option", { value: "all" }, "all " + bodies.length));
    bodies.forEach((b, k) => which.appendChild(element("option", { value: String(k) }, b.label)));
    bar.append(which);
  }
  const legend = document.getElementById("legend");
  legend.append(element("b", {}, data.title));
  const key = (colour, text) => {
    const row = element("div");
    row.append(element("span", { class: "swatch", style: "background:" + colour }), text);
    legend.append(row);
  };
  ["e\u2081", "e\u2082", "e\u2083"].forEach((e, i) => key(AXIS_COLOURS[i], "body axis " + e));
  if (data.bodies.some((b) => b.contact !== null)) key(CONTACT_COLOUR, data.contact_label);
  if (data.bodies.some((b) => b.point !== null)) key(POINT_COLOUR, data.point_label);

  // -- time ------------------------------------------------------------------------------------
  let t = t0;
  let playing = false;
  let dirty = true;
  const qa = new THREE.Quaternion();
  const qb = new THREE.Quaternion();

  function locate(time) {
    if (!(time > ts[0])) return [0, 0];
    if (time >= ts[T - 1]) return [T - 1, 0];
    let a = 0;
    let b = T - 1;
    while (b - a > 1) {
      const m = (a + b) >> 1;
      if (ts[m] <= time) a = m;
      else b = m;
    }
    return [a, (time - ts[a]) / (ts[b] - ts[a])];
  }

  function visible(k) {
    return which === null || which.value === "all" || which.value === String(k);
  }

  function update() {
    const [i, f] = locate(t);
    const j = Math.min(i + 1, T - 1);
    const all = which !== null && which.value === "all";
    bodies.forEach((b, k) => {
      const w = b.wxyz;
      qa.set(w[4 * i + 1], w[4 * i + 2], w[4 * i + 3], w[4 * i]);
      qb.set(w[4 * j + 1], w[4 * j + 2], w[4 * j + 3], w[4 * j]);
      b.group.quaternion.slerpQuaternions(qa, qb, f);
      const p = b.position;
      b.group.position.set(
        p[3 * i] + f * (p[3 * j] - p[3 * i]),
        p[3 * i + 1] + f * (p[3 * j + 1] - p[3 * i + 1]),
        p[3 * i + 2] + f * (p[3 * j + 2] - p[3 * i + 2]),
      );
      const shown = visible(k);
      b.group.visible = shown;
      b.axes.visible = shown && showAxes.checked;
      const faint = all && k > 0;
      for (const m of b.materials) {
        m.transparent = faint;
        m.opacity = faint ? 0.3 : 1;
        m.depthWrite = !faint;
      }
      for (const line of b.traces) {
        line.visible = shown && showTraces.checked;
        line.material.opacity = faint ? 0.35 : 1;
        line.geometry.setDrawRange(0, i + 1);
      }
    });
    slider.value = String(Math.round((10000 * (t - t0)) / Math.max(t1 - t0, 1e-30)));
    const shownBody = bodies.find((b, k) => visible(k));
    const stopped = shownBody && t > shownBody.tFinal ? " (stopped at " + shownBody.tFinal.toPrecision(4) + unit + ")" : "";
    clock.textContent = "t = " + t.toFixed(3) + unit + stopped;
    play.textContent = playing ? "\u275a\u275a" : "\u25b6";
    dirty = true;
  }

  function resize() {
    const w = Math.max(view.clientWidth || window.innerWidth, 1); // 0 while the page is hidden
    const h = Math.max(view.clientHeight || window.innerHeight, 1);
    renderer.setSize(w, h, true);
    camera.aspect = w / h;
    camera.updateProjectionMatrix();
    dirty = true;
  }

  function render() {
    renderer.render(scene, camera);
    dirty = false;
  }

  function seek(time) {
    t = Math.min(Math.max(time, t0), t1);
    update();
    render();
  }

  function setPlaying(on) {
    playing = on;
    if (playing && t >= t1) t = t0;
    update();
  }

  let last = null;
  function tick(now) {
    if (playing) {
      const dt = last === null ? 0 : Math.min((now - last) / 1000, 0.1);
      t += dt * Number(speed.value);
      if (t > t1) t = data.loop ? t0 + ((t - t0) % Math.max(t1 - t0, 1e-30)) : t1;
      if (!data.loop && t >= t1) playing = false;
      update();
    }
    last = now;
    if (dirty) render();
    requestAnimationFrame(tick);
  }

  play.addEventListener("click", () => setPlaying(!playing));
  slider.addEventListener("input", () => {
    playing = false;
    t = t0 + (Number(slider.value) / 10000) * (t1 - t0);
    update();
  });
  for (const e of [speed, showAxes, showTraces].concat(which ? [which] : [])) e.addEventListener("change", update);
  controls.addEventListener("change", () => (dirty = true));
  window.addEventListener("resize", resize);
  window.addEventListener("keydown", (e) => {
    if (e.key === " ") {
      setPlaying(!playing);
      e.preventDefault();
    }
  });

  // -- what scripts (tests, frame export) ask ---------------------------------------------------
  const nextFrame = () => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
  window.geomech = {
    t0, t1, bodies: bodies.length,
    time: () => t,
    // the view alone, for frames of a video: no controls bar
    bare: () => {
      bar.style.display = "none";
      view.style.inset = "0";
      resize();
      render();
      return nextFrame();
    },
    play: () => setPlaying(true),
    pause: () => setPlaying(false),
    seek: (time) => {
      playing = false;
      seek(time);
      return nextFrame();
    },
    pose: (k) => {
      const g = bodies[k].group;
      return { wxyz: [g.quaternion.w, g.quaternion.x, g.quaternion.y, g.quaternion.z], position: g.position.toArray() };
    },
    // the body's bounding box on the screen, in CSS pixels of the page
    box: (k) => {
      const g = bodies[k].group;
      g.updateMatrixWorld(true);
      const b = geometry.boundingBox;
      const r = renderer.domElement.getBoundingClientRect();
      let left = Infinity, top = Infinity, right = -Infinity, bottom = -Infinity;
      for (const x of [b.min.x, b.max.x]) for (const y of [b.min.y, b.max.y]) for (const z of [b.min.z, b.max.z]) {
        const v = new THREE.Vector3(x, y, z).applyMatrix4(g.matrixWorld).project(camera);
        const px = r.left + ((v.x + 1) / 2) * r.width;
        const py = r.top + ((1 - v.y) / 2) * r.height;
        left = Math.min(left, px); right = Math.max(right, px);
        top = Math.min(top, py); bottom = Math.max(bottom, py);
      }
      return { left, top, right, bottom };
    },
  };

  resize();
  const start = /(?:^#|&)t=([-+0-9.eE]+)/.exec(window.location.hash);
  if (start) seek(Number(start[1]));
  else {
    seek(t0);
    setPlaying(data.autoplay);
  }
  render();
  requestAnimationFrame(tick);
  nextFrame().then(() => ready.resolve(true));
}
