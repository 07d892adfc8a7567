"""The package's structure, checked from its source: modules talk through public-to-the-package
names, the import graph has no cycles, and behaviour is chosen by protocol methods rather than by
testing concrete classes."""

import ast
import pathlib

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


def _module_level_imports(module, path, tree):
    for node in tree.body:  # module level only: imports inside functions are lazy on purpose
        if isinstance(node, ast.ImportFrom):
            yield node, _resolve(module, path, node)


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


def test_import_graph_has_no_cycles():
    graph = {m: set() for m in NAMES}
    for module, path, tree in MODULES:
        for node, source in _module_level_imports(module, path, tree):
            targets = [source] + [f"{source}.{a.name}" for a in node.names]
            graph[module].update(t for t in targets if t in NAMES and t != module)
    state = {}

    def visit(m, stack):
        if state.get(m) == "done":
            return
        if state.get(m) == "open":
            pytest.fail("import cycle: " + " -> ".join([*stack[stack.index(m):], m]))
        state[m] = "open"
        for n in sorted(graph[m]):
            # a package's __init__ importing its own submodules is not a cycle of the graph
            if not module_is_parent(n, m):
                visit(n, [*stack, m])
        state[m] = "done"

    def module_is_parent(parent, child):
        return child.startswith(parent + ".")

    for m in sorted(graph):
        visit(m, [])


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
