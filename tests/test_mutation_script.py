"""The mutation-testing script `benchmarks/mutation.py`: its mutant generator and
`apply` on a small module and on a real one. The kill-suite itself is not run here (minutes per
mutant); the score is recorded in `benchmarks/mutation_report.md`."""

import ast
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


def _load():
    spec = importlib.util.spec_from_file_location(
        "geomech_benchmarks_mutation", ROOT / "benchmarks" / "mutation.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


mutation = _load()

SOURCE = '''"""A docstring with 1 + 2 in it."""


def f(x: "int" = 0, y=2.0):
    """Doc: a - b."""
    if x < 0:
        raise ValueError(f"x = {x + 1} must be >= 0")
    z = -x * 0.5 + y / 2
    ok = x > 1 and True
    return max(z, x) if ok else z - 1
'''


def _run(source, x, y):
    namespace = {}
    exec(compile(source, "<mutant>", "exec"), namespace)
    return namespace["f"](x, y)


def test_generates_the_documented_mutants_and_skips_the_rest():
    mutants = mutation.generate("m.py", SOURCE)
    got = {(m.line, m.kind, m.original, m.mutated) for m in mutants}
    want = {
        (8, "unary-minus-removed", "-x", "x"),
        (8, "binop", "-x * 0.5", "(-x / 0.5)"),
        (8, "constant", "0.5", "1.5"),
        (8, "binop", "-x * 0.5 + y / 2", "(-x * 0.5 - y / 2)"),
        (8, "binop", "y / 2", "(y * 2)"),
        (8, "constant", "2", "3"),
        (9, "boolop", "x > 1 and True", "(x > 1 or True)"),
        (9, "compare", "x > 1", "(x >= 1)"),
        (9, "constant", "1", "2"),
        (9, "bool", "True", "False"),
        (10, "swap-args", "max(z, x)", "max(x, z)"),
        (10, "binop", "z - 1", "(z + 1)"),
        (10, "constant", "1", "2"),
    }
    assert got == want  # nothing from the docstrings, the annotation, the defaults, the raise
    assert all(m.function == "f" for m in mutants)


def test_each_mutant_applies_to_a_different_valid_program():
    mutants = mutation.generate("m.py", SOURCE)
    inputs = [(3, 5.0), (1, 5.0), (2, -7.0), (0, 1.0)]
    original = [_run(SOURCE, *xy) for xy in inputs]
    unchanged = []
    for m in mutants:
        new = mutation.apply(SOURCE, m)
        assert ast.dump(ast.parse(new)) != ast.dump(ast.parse(SOURCE))
        # only the segment changed
        assert new[: m.start] + m.original + new[m.start + len(m.mutated) :] == SOURCE
        if [_run(new, *xy) for xy in inputs] == original:
            unchanged.append(m.mutated)
    assert unchanged == ["max(x, z)"]  # the one equivalent mutant: max is symmetric
    # `-x * 0.5 + y / 2` → `-x * 0.5 - y / 2`: the value is what the mutated formula says
    sub = next(m for m in mutants if m.original == "-x * 0.5 + y / 2")
    assert _run(mutation.apply(SOURCE, sub), 3, 5.0) == max(-3 * 0.5 - 5.0 / 2, 3)


def test_apply_refuses_a_stale_mutant():
    m = mutation.generate("m.py", SOURCE)[0]
    with pytest.raises(ValueError, match="changed"):
        mutation.apply(SOURCE.replace("y=2.0", "y=2.50"), m)


@pytest.mark.parametrize("path", ["geomech/_solver/_projection.py", "geomech/_linalg.py"])
def test_real_modules(path):
    """On the library's own files: mutants are generated, each applies, none touches a docstring."""
    source = (ROOT / path).read_text()
    mutants = mutation.generate(path)
    assert mutants
    for m in mutants:
        mutation.apply(source, m)
    tree = ast.parse(source)
    docstrings = [
        ast.get_docstring(n, clean=False)
        for n in ast.walk(tree)
        if isinstance(n, ast.FunctionDef | ast.ClassDef | ast.Module)
    ]
    for m in mutants:
        assert not any(m.original in (d or "") and len(m.original) > 3 for d in docstrings)
    kinds = {m.kind for m in mutation.generate("geomech/_linalg.py")}
    assert {"binop", "constant", "compare", "swap-args", "negate-return"} <= kinds
    assert set(mutation.expand(mutation.GROUPS["formulas"])) >= {path}
