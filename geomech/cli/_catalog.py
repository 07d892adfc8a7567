"""The model registry as data: what `geomech list` and the argument checks need, without JAX.

`catalog.json` is generated from the model classes (`geomech.models.MODELS`) by
`python -m geomech.cli._catalog`; `tests/test_cli.py` checks that it is up to date.
"""

import inspect
import json
import pathlib

PATH = pathlib.Path(__file__).with_name("catalog.json")


def load() -> dict[str, dict]:
    """The catalog: registry name -> record (reads `catalog.json`; imports nothing heavy)."""
    return json.loads(PATH.read_text(encoding="utf-8"))


def _settable(default) -> bool:
    """A default the command line can give: a number, string, boolean, `None` (a number or a comma
    list), or a tuple of numbers (a comma list of that length, e.g. principal moments)."""
    if default is None or isinstance(default, (bool, int, float, str)):
        return True
    return isinstance(default, tuple) and all(
        isinstance(x, (int, float)) and not isinstance(x, bool) for x in default
    )


def parameters(cls) -> dict[str, object]:
    """A model's command-line parameters and defaults: the keyword arguments of its constructor
    with a default `_settable` from the command line (a tuple becomes a list in the catalog)."""
    out = {}
    for name, p in inspect.signature(cls).parameters.items():
        if _settable(p.default):
            out[name] = list(p.default) if isinstance(p.default, tuple) else p.default
    return out


def fixed_parameters(cls) -> list[str]:
    """The keyword arguments of a model's constructor the command line cannot give (functions,
    such as thesis Example 2's `A(q)`)."""
    return [
        name
        for name, p in inspect.signature(cls).parameters.items()
        if p.default is not inspect.Parameter.empty and not _settable(p.default)
    ]


def _held(model, system, y0) -> dict[str, list[str]]:
    """The names of what an ensemble keeps (`cli._setup.held`): the coordinates (on a Lie group
    the tangent directions of the chart, named as the velocity's components) and speeds."""
    from . import _setup

    setup = _setup.Setup("", {}, model, system, y0, system.check_shapes(y0, model.t0))
    fixed_q, fixed_v = _setup.held(setup)
    return {
        "coordinates": [model.coordinates[i] for i in fixed_q],
        "speeds": [setup.velocity_labels[i] for i in fixed_v],
    }


def space_name(manifold) -> str | None:
    """A Lie-group configuration space by name (`SO3 x R3`), `None` for coordinates."""
    import geomech as gm

    if isinstance(manifold, gm.AbstractCoordinateManifold):
        return None
    factors = manifold.factors if isinstance(manifold, gm.Product) else (manifold,)
    names = [f"R{f.dim}" if f.dim is not None and f.dim > 0 and isinstance(
        f, gm.Euclidean) else type(f).__name__ for f in factors]
    return " x ".join(names)


def build() -> dict[str, dict]:
    """The catalog computed from the model classes (imports JAX and the models)."""
    import geomech.models as gmm

    catalog = {}
    for name, cls in gmm.MODELS.items():
        model = cls()
        system, y0 = model.system(), model.initial_state()
        catalog[name] = {
            "description": model.description,
            "coordinates": list(model.coordinates),
            "units": list(model.units),
            "time_unit": model.time_unit,
            "path_coordinates": None
            if model.path_coordinates is None
            else list(model.path_coordinates),
            "time_span": [float(t) for t in model.time_span],
            "parameters": parameters(cls),
            "fixed_parameters": fixed_parameters(cls),
            "point_parameters": None
            if model.point_parameters is None
            else list(model.point_parameters),
            "configuration_space": space_name(system.manifold),
            "n": int(y0.v.shape[-1]),
            "k": system.check_shapes(y0, model.t0),
            "time_dependent": system.time_dependent,
            "work_space": system.work_space is not None,
            "held": _held(model, system, y0),
            "scene": isinstance(model, gmm.AbstractSceneModel),
        }
    return catalog


def show_value(value) -> str:
    """A parameter's default as `--param` takes it (a list as `0.3,0.4,0.5`)."""
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def dumps(catalog: dict) -> str:
    return json.dumps(catalog, indent=2, ensure_ascii=False) + "\n"


def cmd_list(args) -> int:
    """`geomech list`: every model, its coordinates (with units), constraints and parameters; on
    a Lie group its configuration space, the stored point's parameters and the components of the
    velocity (with units); for a constrained model what an ensemble (`run --batch`) keeps."""
    for name, info in load().items():
        units = [f" [{u}]" if u else "" for u in info["units"]]
        coordinates = ", ".join(c + u for c, u in zip(info["coordinates"], units, strict=True))
        kind = "time-dependent, " if info["time_dependent"] else ""
        ws = ", W ≠ D" if info["work_space"] else ""
        params = ", ".join(f"{k}={show_value(v)}" for k, v in info["parameters"].items())
        t0, t1 = info["time_span"]
        print(f"{name}: {info['description']}")
        if info["point_parameters"] is None:
            space = f"q = ({coordinates})"
        else:  # on a Lie group: the velocity's components, the point as stored
            stored = ", ".join(info["point_parameters"])
            space = f"q on {info['configuration_space']} stored as ({stored}), v = ({coordinates})"
        print(f"    {space}; {kind}k = {info['k']} constraints{ws}; t in [{t0:g}, {t1:g}]")
        scene = "; 3-D scene: --animate" if info.get("scene") else ""
        print(f"    parameters: {params or '(none)'}{scene}")
        if info["k"]:
            held = info["held"]
            shown_q = (
                "all" if len(held["coordinates"]) == info["n"] else ", ".join(held["coordinates"])
            )
            print(
                f"    --batch keeps: coordinates {shown_q or '(none)'}; speeds "
                f"{', '.join(held['speeds']) or '(none)'} (the others follow from the constraints)"
            )
    return 0


if __name__ == "__main__":
    import jax

    jax.config.update("jax_enable_x64", True)
    PATH.write_text(dumps(build()), encoding="utf-8")
    print(f"wrote {PATH}")
