// Loads the modules inlined in this page (three.js, its OrbitControls, geomech's viewer) from
// blob URLs made here, each import rewritten to the blob of the module it names, then starts the
// viewer. window.geomechReady resolves once the first frame is drawn (or rejects with the error).
(function () {
  "use strict";
  var done = {};
  window.geomechReady = new Promise(function (resolve, reject) {
    done.resolve = resolve;
    done.reject = reject;
  });
  function fail(error) {
    console.error(error);
    var box = document.createElement("div");
    box.id = "failure";
    box.textContent = "This animation could not be shown: " + (error && error.message ? error.message : error) +
      " (a browser with WebGL and JavaScript modules is needed).";
    document.body.appendChild(box);
    done.reject(error);
  }
  function source(id) {
    return document.getElementById(id).textContent;
  }
  function link(text, specifier, url) {
    var parts = text.split(specifier);
    if (parts.length < 2) throw new Error("geomech: a module does not import " + specifier);
    return parts.join(JSON.stringify(url));
  }
  function module(text) {
    return URL.createObjectURL(new Blob([text], { type: "text/javascript" }));
  }
  try {
    var core = module(source("three-core"));
    var three = module(link(source("three-module"), '"./three.core.min.js"', core));
    var orbit = module(link(source("three-orbit"), "'three'", three));
    var viewer = source("geomech-viewer");
    viewer = link(link(viewer, '"three/addons/controls/OrbitControls.js"', orbit), '"three"', three);
    import(module(viewer))
      .then(function (m) {
        m.start(JSON.parse(source("geomech-data")), done);
      })
      .catch(fail);
  } catch (error) {
    fail(error);
  }
})();
