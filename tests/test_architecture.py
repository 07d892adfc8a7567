"""The package's structure, checked from its source: modules talk through public-to-the-package
names, the import graph has no cycles, and behaviour is chosen by protocol methods rather than by
testing concrete classes."""

import ast
import pathlib
import sys

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "geomech"
CONCRETE = {  # classes whose behaviour is reached through abstract methods, never isinstance
    "StackedConstraint",
    "LinearConstraint",
    "HolonomicConstraint",
    "Constraint",
    "Baumgarte",
    "ManifoldProjection",
    "NoStabilization",
}


def _modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        yield ".".join(parts), path, ast.parse(path.read_text(), filename=str(path))


def _resolve(module: str, path: pathlib.Path, node: ast.ImportFrom) -> str:
    """The absolute name of the module a `from ... import` statement reads from."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if path.name != "__init__.py":
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _imports(module, path, tree):
    """Every import of the module, at module level or inside a function: `(node, source)` with the
    absolute names it reads from (`import a.b` reads `a.b`)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            yield node, [_resolve(module, path, node)]
        elif isinstance(node, ast.Import):
            yield node, [alias.name for alias in node.names]


def _function_level(tree):
    """The import statements inside functions (and other nested bodies)."""
    top = {id(node) for node in tree.body}
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom)) and id(n) not in top
    ]


# Imports a function may defer: optional dependencies (extras), and the deliberate exceptions
# named here with their reason. Imports of geomech's own modules inside functions are allowed and
# counted in the import graph like any other.
OPTIONAL = ("matplotlib", "sympy", "tqdm", "mujoco")
DEFERRED = {
    # `geomech --help`, `list` and argument errors answer without importing JAX (tests/test_cli.py);
    # equinox is imported first with its checks as NaNs (`cli._checks_as_nans`)
    "geomech.cli": ("jax", "numpy", "equinox"),
    "geomech.cli._catalog": ("jax",),
    "geomech.cli._output": ("jax", "numpy"),
    # ... and `geomech --help` shows where the compilation cache is
    "geomech._cache": ("jax",),
    # the pre-0.7 location of shard_map, only on old JAX
    "geomech._engine": ("jax.experimental.shard_map",),
}


MODULES = list(_modules())
NAMES = {m for m, _, _ in MODULES}


def test_no_private_names_imported_from_sibling_modules():
    offenders = []
    for module, path, tree in MODULES:
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            source = _resolve(module, path, node)
            if not source.startswith("geomech"):
                continue
            for alias in node.names:
                imported = f"{source}.{alias.name}"
                if alias.name.startswith("_") and imported not in NAMES:
                    offenders.append(f"{module}: from {source} import {alias.name}")
    assert not offenders, "\n".join(offenders)


def _graph(modules) -> dict[str, set[str]]:
    """Module -> the package modules it imports, at module level or inside a function (a deferred
    import runs all the same)."""
    names = {m for m, _, _ in modules}
    graph = {m: set() for m in names}
    for module, path, tree in modules:
        for node, sources in _imports(module, path, tree):
            targets = list(sources)
            if isinstance(node, ast.ImportFrom):
                targets += [f"{sources[0]}.{a.name}" for a in node.names]
            graph[module].update(t for t in targets if t in names and t != module)
    return graph


def _cycle(graph) -> list[str] | None:
    """An import cycle of `graph`, or `None` (a package's `__init__` importing its own submodules,
    which import names from it, is not a cycle)."""
    state = {}

    def visit(m, stack):
        if state.get(m) == "done":
            return None
        if state.get(m) == "open":
            return [*stack[stack.index(m) :], m]
        state[m] = "open"
        for n in sorted(graph[m]):
            found = None if m.startswith(n + ".") else visit(n, [*stack, m])
            if found:
                return found
        state[m] = "done"
        return None

    for m in sorted(graph):
        if found := visit(m, []):
            return found
    return None


def test_import_graph_has_no_cycles():
    cycle = _cycle(_graph(MODULES))
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def _floors(graph) -> dict[str, int]:
    """The floor of every room (a top-level module or package of geomech, its `__init__` aside):
    1 for a room that imports no other, else one above the highest room it imports."""
    room = lambda m: ".".join(m.split(".")[:2])
    edges = {}
    for m, targets in graph.items():
        if room(m) != "geomech":
            edges.setdefault(room(m), set()).update(
                room(n) for n in targets if room(n) not in (room(m), "geomech")
            )
    floors = {}

    def floor(r):
        if r not in floors:
            floors[r] = 1 + max((floor(n) for n in edges[r]), default=0)
        return floors[r]

    return {r.removeprefix("geomech."): floor(r) for r in edges}


def test_the_architecture_page_shows_the_floors_of_the_import_graph():
    """docs/architecture.md's table of floors is the import order of the package as it stands."""
    page = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    section = page.split("## The import graph", 1)[1].split("\n## ", 1)[0]
    shown = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) == 2 and cells[0].isdigit():
            for name in cells[1].split(","):
                shown[name.strip().strip("`").removesuffix("/").removesuffix(".py")] = int(cells[0])
    assert shown == _floors(_graph(MODULES))


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path):
    """The check can fail: `b` imports `a` at module level, `a` imports `b` inside a function."""
    sources = {
        "pkg": "",
        "pkg.a": "def f():\n    from .b import g\n",
        "pkg.b": "import os\nfrom . import a\n",
    }
    modules = [
        (m, tmp_path / ("__init__.py" if m == "pkg" else m[4:] + ".py"), ast.parse(text))
        for m, text in sources.items()
    ]
    assert _cycle(_graph(modules)) == ["pkg.a", "pkg.b", "pkg.a"]
    modules[1] = ("pkg.a", modules[1][1], ast.parse("def f():\n    import os\n"))
    assert _cycle(_graph(modules)) is None


def test_imports_inside_functions_are_optional_or_named():
    """A function imports lazily only geomech's own modules (in the graph above), the standard
    library, an optional dependency, or an exception listed in `DEFERRED`."""
    offenders = []
    for module, path, tree in MODULES:
        allowed = OPTIONAL + DEFERRED.get(module, ())
        for node in _function_level(tree):
            (sources,) = [s for n, s in _imports(module, path, node) if n is node]
            for source in sources:
                top = source.split(".")[0]
                if top == "geomech" or top in sys.stdlib_module_names:
                    continue
                if not any(source == a or source.startswith(a + ".") for a in allowed):
                    offenders.append(f"{module}:{node.lineno} imports {source} inside a function")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("module", [m for m, _, _ in MODULES if m != "geomech"])
def test_no_isinstance_switches_on_concrete_classes(module):
    path, tree = next((p, t) for m, p, t in MODULES if m == module)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            classes = node.args[1]
            names = {n.id for n in ast.walk(classes) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(classes) if isinstance(n, ast.Attribute)}
            assert not names & CONCRETE, (
                f"{path.name}:{node.lineno} switches on {sorted(names & CONCRETE)}: ask the object "
                "through a method of its abstract class instead"
            )


# -- equinox's abstract/final rule, and the manifold answers for itself ---------------------------


def _geomech_classes():
    """Every class defined in geomech (importing each module)."""
    import importlib
    import inspect

    seen = {}
    for module, _, _ in MODULES:
        mod = importlib.import_module(module)
        for _, cls in inspect.getmembers(mod, inspect.isclass):
            if cls.__module__.startswith("geomech") and cls.__module__ == mod.__name__:
                seen[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return seen


def _overrides(classes) -> list[str]:
    """`Class.name` for every method or property of a geomech class that replaces a concrete
    (non-abstract) one of a geomech base class (dunders other than `__call__` aside: equinox and
    dataclasses write those)."""
    found = []
    for name, cls in classes.items():
        for attr, value in vars(cls).items():
            if attr.startswith("__") and attr != "__call__":
                continue
            if not callable(value) and not isinstance(value, property | classmethod | staticmethod):
                continue
            for base in cls.__mro__[1:]:
                if not base.__module__.startswith("geomech") or attr not in vars(base):
                    continue
                if not getattr(vars(base)[attr], "__isabstractmethod__", False):
                    found.append(f"{name}.{attr} overrides {base.__name__}.{attr}")
                break
    return found


def test_no_concrete_method_is_overridden():
    """Abstract classes declare, concrete classes are final (equinox's rule): no method
    of a geomech class replaces a concrete one of its geomech base classes."""
    offenders = _overrides(_geomech_classes())
    assert not offenders, "\n".join(offenders)


def test_the_override_check_can_fail():
    import equinox as eqx

    class Base(eqx.Module):
        def f(self):
            return 1

    class Derived(Base):
        def f(self):
            return 2

    Base.__module__ = Derived.__module__ = "geomech.fake"
    assert _overrides({"Derived": Derived}) == ["Derived.f overrides Base.f"]


# the questions "is this a group / coordinates?" outside the geometry wing: isinstance tests
# against manifold or jaxlie classes, and the old predicates
_MANIFOLD_CLASSES = {
    "AbstractCoordinateManifold", "AbstractLieGroup", "SO3", "SE3", "SE2",
    "Euclidean", "Circle", "Product", "BodyFrame", "MatrixLieGroup", "LieGroup",
}
_PREDICATES = {"on_group", "is_point", "user_chart", "coordinates_only"}
_POINT_ATTRIBUTES = {"parameters", "group", "translation", "rotation", "factors", "wxyz"}


def _group_branches(tree) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            names = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            names |= {n.attr for n in ast.walk(node.args[1]) if isinstance(n, ast.Attribute)}
            if names & _MANIFOLD_CLASSES or "jaxlie" in ast.unparse(node.args[1]):
                lines.append(node.lineno)
        elif isinstance(node, ast.Call) and getattr(node.func, "id", None) == "hasattr":
            attr = node.args[1]
            if isinstance(attr, ast.Constant) and attr.value in _POINT_ATTRIBUTES:
                lines.append(node.lineno)
        elif isinstance(node, ast.Attribute) and node.attr in _PREDICATES:
            lines.append(node.lineno)
        elif isinstance(node, ast.Name) and node.id in _PREDICATES:
            lines.append(node.lineno)
        elif isinstance(node, ast.Compare) and "manifold is None" in ast.unparse(node):
            lines.append(node.lineno)
    return lines


def test_callers_ask_the_manifold():
    """Outside the geometry wing (`geomech/_geometry/`) at most 10 places ask what kind of
    manifold a system lives on; everything else calls the manifold (docs/architecture.md)."""
    sites = [
        f"{module}:{line}"
        for module, _, tree in MODULES
        if not module.startswith("geomech._geometry")
        for line in _group_branches(tree)
    ]
    assert len(sites) <= 10, f"{len(sites)} group branches outside the wing:\n" + "\n".join(sites)
