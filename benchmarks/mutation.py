"""Mutation testing of geomech's formula modules and of its integration engine.

Each mutant is one small change to the source that a test suite able to catch a wrong answer must
notice: an arithmetic operator swapped (`+`↔`-`, `*`↔`/`; `@` is kept), a unary minus removed or a
returned value negated, a numeric constant changed (0→1, 1→2, 2→3, 0.5→1.5, x→x+1), a comparison
swapped (`<`↔`<=`, `>`↔`>=`, `==`↔`!=`, `is`↔`is not`, `in`↔`not in`), `and`↔`or`,
`True`↔`False`, or the two positional arguments of a call swapped. Docstrings, messages (strings),
type annotations, `raise` statements and the tests of `if`s whose body only raises are left alone
(errors have their own tests).

Every mutant is written into a temporary copy of the package (the working tree is never modified),
and a fixed kill-suite of test nodes runs on it in one process (`pytest -p no:xdist -x`) under a
timeout: a failing (or erroring) suite kills the mutant, a passing one lets it survive. The score
of a group is (killed + timed out) / tested; mutants listed in `EQUIVALENT` below (no observable
change, explained there) are reported apart, and the score over the others is printed too.

    python benchmarks/mutation.py                      # every group, every mutant
    python benchmarks/mutation.py --groups formulas --max-mutants 150 --seed 0 --out report.json
    python benchmarks/mutation.py --list               # the mutants, not run
    python benchmarks/mutation.py --rerun report.json  # the survivors of an earlier run again

Prints a markdown report (and `--out` JSON) per group and module: mutants, killed, survived,
timed out, score, and the surviving mutants (file:line, original → mutated).
"""

import argparse
import ast
import copy
import dataclasses
import datetime
import glob
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GROUPS = {
    "formulas": [
        "geomech/_system.py",
        "geomech/_stages.py",
        "geomech/_constraint.py",
        "geomech/_linalg.py",
        "geomech/_operators.py",
        "geomech/_solver/*.py",
        "geomech/_udwadia_kalaba.py",
    ],
    "engine": ["geomech/_engine.py", "geomech/_frontend.py"],
}

# The kill-suites: fixed test nodes, fastest and most discriminating first (`-x` stops at the first
# failure, so a killed mutant usually costs one or two tests). Measured on the 2-core VM.
_FORMULA_SUITE = [
    "tests/test_solvers.py::test_every_solver_matches_reference[random_mixed]",
    "tests/test_solvers.py::test_every_solver_matches_reference[random_ideal]",
    "tests/test_solvers.py::test_every_solver_matches_reference[thesis_example2]",
    "tests/test_solvers.py::test_every_solver_matches_reference[random_generalized]",
    "tests/test_solvers.py::test_every_solver_matches_reference[pendulum_holonomic]",
    "tests/test_stages_fast_paths.py::test_fast_paths_match_plain_formulas[diag_generalized_time]",
    "tests/test_stages_fast_paths.py::test_fast_paths_match_plain_formulas[chain]",
    "tests/test_system.py::test_harmonic_oscillator_closed_form",
    "tests/test_system.py::test_legendre_energy_mass",
    "tests/test_system.py::test_X_U_invariant_equals_fast",
    "tests/test_system.py::test_lemma_3_2_and_3_3",
    "tests/test_system.py::test_energy_power_with_force",
    "tests/test_constraint.py::test_projections_3_20",
    "tests/test_constraint.py::test_lemma2",
    "tests/test_example2.py::test_Y_R_closed_form",
    "tests/test_pendulum.py::test_tension_closed_form",
    "tests/test_udwadia_kalaba.py::test_P1_P2",
    "tests/test_udwadia_kalaba.py::test_properties_1_2_3",
    # added for the survivors of the first run (benchmarks/mutation_report.md)
    "tests/test_stages_fast_paths.py::test_column_coloring_is_valid_and_as_small_as_known",
    "tests/test_constraint.py::test_stacked_constraints",
    "tests/test_example2.py::test_W_given_by_one_vector",
    "tests/test_bad_input.py::test_bad_input[inadmissible-proportional-rows]",
    "tests/test_solvers.py::test_known_work_accepted_where_principle_generalizes",
    "tests/test_solvers.py::test_kane_bases_are_the_documented_constructions",
    "tests/test_integrate.py::test_baumgarte_stages_impose_the_stabilized_constraint_dynamics",
    "tests/test_integrate.py::test_project_to_constraints_nonlinear_and_holonomic",
    "tests/test_solvers.py::test_accelerations_and_their_jacobians_at_small_and_large_n",
    # added for the survivors of the second run
    "tests/test_solvers.py::test_known_work_rejected_where_principle_does_not_generalize",
    "tests/test_stages_fast_paths.py::test_fast_paths_match_plain_formulas[diag_generalized_shifted]",
]
_ENGINE_SUITE = [
    "tests/test_integrate.py::test_projection_conserves_energy_and_stays_on_C",
    "tests/test_integrate.py::test_diagnostics_are_energy_and_residuals",
    "tests/test_integrate.py::test_y0_off_constraint_manifold_raises",
    "tests/test_integrate.py::test_ensemble_equals_solo_runs_and_isolates_a_failure",
    "tests/test_integrate.py::test_fixed_step_nonfinite_trajectory_stops",
    "tests/test_integrate.py::test_implicit_integrator_with_projection",
    "tests/test_failures.py::test_failing_member_is_flagged_and_the_others_are_untouched",
    # added for the survivors of the first engine run
    "tests/test_bad_input.py::test_bad_input[output-above-limit]",
    "tests/test_bad_input.py::test_bad_input[output-steps-huge]",
    "tests/test_integrate.py::test_progress_shows_a_tqdm_bar",
    "tests/test_sharding.py::test_sharded_ensemble_equals_unsharded",
]
SUITES = {"formulas": _FORMULA_SUITE, "engine": _ENGINE_SUITE}

# Mutants with no observable change, keyed by (path, enclosing function, original, mutated): the
# reason is printed in the report and they are left out of the score over non-equivalent mutants.
_KERNEL_SWITCH = (
    "which of two implementations of the same factorization/solve runs at n = 8 or 9 (the unrolled "
    "`jnp` kernel or LAPACK): the same values to round-off; both branches are killed by "
    "`test_accelerations_and_their_jacobians_at_small_and_large_n` (n = 4 and n = 10)"
)
EQUIVALENT: dict[tuple[str, str, str, str], str] = {
    ("geomech/_linalg.py", "unit_rows", "-1", "1"): (
        "`axis=1` for `axis=-1`: every caller passes a 2-D matrix (`_checks`, `Kane(basis=)`), "
        "where the two axes are the same"
    ),
    ("geomech/_linalg.py", "unit_rows", "1.0", "2.0"): (
        "the divisor of a zero row (norm 0): 0/1 and 0/2 are both 0, the other rows are unchanged"
    ),
    ("geomech/_system.py", "LagrangianSystem.check_state", "0", "1"): (
        "`x[1]` for `x[0]` (the batch member whose shapes are checked): all members of a batch "
        "have the same shapes, and `gm.State` holds JAX arrays, which clamp the index for a batch "
        "of one"
    ),
    (
        "geomech/_solver/_kane.py",
        "_user_basis",
        "min_singular_value(unit_rows(E.T)) <= tol",
        "(min_singular_value(unit_rows(E.T)) < tol)",
    ): (
        "`<` for `<=` in a rank test: differs only when the smallest singular value equals the "
        "tolerance exactly (a degenerate basis is flagged either way: "
        "`test_kane_basis_not_spanning_W`)"
    ),
    ("geomech/_stages.py", "assemble", "True", "False"): (
        "`ideal=False` for the stages of an unconstrained system (k = 0): `ideal` only chooses "
        "between a Cholesky and an LU solve of the k × k matrix $AM^{-1}C^T$, empty here"
    ),
    (
        "geomech/_solver/_kane.py",
        "Kane.W_basis",
        "orthonormal_basis(stages)[:, : stages.n - stages.k]",
        "-(orthonormal_basis(stages)[:, :stages.n - stages.k])",
    ): (
        "the basis $-E$ for $E$: Kane's equations $E^T(Ma - Q - F^0) = 0$ and every documented "
        "property of `W_basis` ($M$-orthonormal, in $\\ker C$) hold for both signs"
    ),
    (
        "geomech/_stages.py",
        "_constraint_stages",
        "n_colors < pattern.shape[0]",
        "(n_colors <= pattern.shape[0])",
    ): (
        "with one colour per row the compressed reverse passes are the plain ones (seed $e_i$ for "
        "row $i$), and the mask keeps exactly $A$'s structural nonzeros: the same $A$"
    ),
    ("geomech/_engine.py", "_project_saved", "0", "1"): (
        "the time given to the projection for an unused `SaveAt(steps=True)` slot (0 or 1): its "
        "result is discarded by the `jnp.where` that follows"
    ),
    ("geomech/_engine.py", "integrate.solve_one", "False", "True"): (
        "a skipped trajectory's frozen right-hand side returns its state instead of zero: it "
        "integrates ẏ = y from a finite stand-in whose output is then replaced (y0 at t0, inf "
        "after), and the others are untouched; only the skipped member's own step count (cost) "
        "changes (3 → 5 steps in test_failures' cases), so no result can tell"
    ),
    (
        "geomech/_engine.py",
        "_fill_implicit_tolerances",
        "getattr(rf, a) is _USE_STEPSIZE_TOL",
        "(getattr(rf, a) is not _USE_STEPSIZE_TOL)",
    ): (
        "no tolerance filled into an implicit integrator's root finder: with diffrax 0.7 the "
        "solve is bit for bit the same (Kvaerno5 on the pendulum: same 216 steps and final state "
        "with the function removed), so the fill is redundant with this diffrax"
    ),
    ("geomech/_engine.py", "integrate.solve_one", "0", "1"): (
        "`ts_final[1]` for `ts_final[0]` on an array of one saved time: JAX clamps the index"
    ),
    # (the key also matches `T += 1 if sub.ts is None ...`, which the exact sizes of
    # test_bad_input's output-* cases kill, so it is never a survivor to explain)
    ("geomech/_frontend.py", "check_output_size", "0", "1"): (
        "`leaves[1].dtype` for `leaves[0].dtype`: q and v (and the multipliers) share one dtype"
    ),
    (
        "geomech/_engine.py",
        "GuardedSolver.step",
        "jnp.abs(t1 - t0) <= 16 * eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1))",
        "(jnp.abs(t1 - t0) < 16 * eps * jnp.maximum(jnp.abs(t0), jnp.abs(t1)))",
    ): (
        "`<` for `<=` in the step-collapse test: differs only when the step equals the threshold "
        "exactly"
    ),
    ("geomech/_linalg.py", "<module>", "8", "9"): _KERNEL_SWITCH,
    ("geomech/_linalg.py", "cholesky", "n > _SMALL", "(n >= _SMALL)"): _KERNEL_SWITCH,
    ("geomech/_linalg.py", "solve_lower", "n > _SMALL", "(n >= _SMALL)"): _KERNEL_SWITCH,
    ("geomech/_linalg.py", "solve_upper_transposed", "n > _SMALL", "(n >= _SMALL)"): _KERNEL_SWITCH,
}


# -- generating mutants -----------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Mutant:
    path: str  # relative to the repository root
    function: str  # enclosing qualified name ("<module>" at top level)
    line: int
    start: int  # character offsets of the replaced source segment
    end: int
    kind: str
    original: str  # the segment
    mutated: str  # its replacement

    @property
    def id(self) -> str:
        return f"{self.path}:{self.line}:{self.start}:{self.kind}:{self.mutated}"

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


_BINOP_SWAP = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult}
_CMP_SWAP = {
    ast.Lt: ast.LtE,
    ast.LtE: ast.Lt,
    ast.Gt: ast.GtE,
    ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq,
    ast.NotEq: ast.Eq,
    ast.Is: ast.IsNot,
    ast.IsNot: ast.Is,
    ast.In: ast.NotIn,
    ast.NotIn: ast.In,
}
# calls whose two positional arguments are not interchangeable values (swapping only raises)
_NO_SWAP_CALLS = {
    "isinstance",
    "getattr",
    "hasattr",
    "setattr",
    "error_if",
    "zeros",
    "ones",
    "full",
    "field",
}


def _new_constant(value):
    """0→1, 1→2, 2→3, 0.5→1.5, any other x → x + 1 (ints stay ints)."""
    return {0.5: 1.5}.get(value, value + 1)


def _skipped_subtrees(tree: ast.AST) -> set[int]:
    """ids of nodes not to mutate: docstrings, annotations, f-strings, `raise` and `assert`
    statements, the test of an `if` whose body only raises, `static=` of `eqx.field`."""
    skip: list[ast.AST] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise | ast.Assert | ast.JoinedStr):
            skip.append(node)
        elif isinstance(node, ast.If) and all(isinstance(s, ast.Raise) for s in node.body):
            skip.append(node.test)
        elif isinstance(node, ast.arg) and node.annotation is not None:
            skip.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            if node.returns is not None:
                skip.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            skip.append(node.annotation)
        elif isinstance(node, ast.keyword) and node.arg == "static":
            skip.append(node)
        elif isinstance(node, ast.arguments):  # default values are the API's, not formulas
            skip.extend(d for d in node.defaults + node.kw_defaults if d is not None)
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                skip.append(body[0])
    return {id(n) for s in skip for n in ast.walk(s)}


def _call_name(call: ast.Call) -> str:
    f = call.func
    return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""


def _variants(node: ast.AST):
    """`(kind, mutated node)` for each mutation of `node` itself."""
    if isinstance(node, ast.BinOp) and type(node.op) in _BINOP_SWAP:
        new = copy.copy(node)
        new.op = _BINOP_SWAP[type(node.op)]()
        yield "binop", new
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        yield "unary-minus-removed", node.operand
    elif isinstance(node, ast.Constant) and type(node.value) is bool:
        yield "bool", ast.Constant(not node.value)
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float):
        yield "constant", ast.Constant(_new_constant(node.value))
    elif isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in _CMP_SWAP:
                new = copy.copy(node)
                new.ops = list(node.ops)
                new.ops[i] = _CMP_SWAP[type(op)]()
                yield "compare", new
    elif isinstance(node, ast.BoolOp):
        new = copy.copy(node)
        new.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        yield "boolop", new
    elif isinstance(node, ast.Return) and _numeric_looking(node.value):
        yield "negate-return", ast.UnaryOp(ast.USub(), node.value)
    elif (
        isinstance(node, ast.Call)
        and len(node.args) == 2
        and _call_name(node) not in _NO_SWAP_CALLS
    ):
        a, b = node.args
        if _swappable(a) and _swappable(b) and ast.dump(a) != ast.dump(b):
            new = copy.copy(node)
            new.args = [b, a]
            yield "swap-args", new


def _numeric_looking(value) -> bool:
    """Whether a returned expression looks like an array (an arithmetic expression, an index, or
    a call of a lower-case function other than `zeros`), so that negating it is a formula mutant
    and not a type error (or an equivalent `-0`)."""
    if isinstance(value, ast.BinOp | ast.Subscript):
        return True
    if isinstance(value, ast.Call):
        name = _call_name(value)
        return bool(name) and name[0].islower() and not name.startswith("zeros")
    return False


def _swappable(arg) -> bool:
    """Arguments worth swapping: values, not the time `t`, an object (`self`, `stages`, `system`), a
    dtype or shape, a literal, a lambda."""
    if isinstance(arg, ast.Starred | ast.Constant | ast.Lambda | ast.Tuple | ast.List):
        return False
    if isinstance(arg, ast.Name) and arg.id in ("t", "self", "stages", "system"):
        return False
    return not (isinstance(arg, ast.Attribute) and arg.attr in ("dtype", "shape"))


class _Offsets:
    """Character offsets of AST positions (whose columns are UTF-8 byte offsets)."""

    def __init__(self, source: str):
        self.lines = source.splitlines(keepends=True)
        self.starts = [0]
        for line in self.lines:
            self.starts.append(self.starts[-1] + len(line))

    def __call__(self, lineno: int, col: int) -> int:
        line = self.lines[lineno - 1]
        return self.starts[lineno - 1] + len(line.encode()[:col].decode())


def generate(path: str, source: str | None = None) -> list[Mutant]:
    """Every mutant of the file `path` (relative to the repository root), in source order."""
    source = (ROOT / path).read_text() if source is None else source
    tree = ast.parse(source)
    skip = _skipped_subtrees(tree)
    offsets = _Offsets(source)
    mutants = []

    def visit(node, scope):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            scope = f"{scope}.{node.name}" if scope != "<module>" else node.name
        if id(node) not in skip and hasattr(node, "lineno"):
            for kind, new in _variants(node):
                if isinstance(node, ast.Return):  # replace the returned expression only
                    target, text = node.value, f"-({ast.unparse(node.value)})"
                else:
                    target = node
                    text = ast.unparse(new)
                    if not isinstance(
                        new, ast.Constant | ast.Name | ast.Call | ast.Attribute | ast.Subscript
                    ):
                        text = f"({text})"
                start = offsets(target.lineno, target.col_offset)
                end = offsets(target.end_lineno, target.end_col_offset)
                mutants.append(
                    Mutant(path, scope, target.lineno, start, end, kind, source[start:end], text)
                )
        for child in ast.iter_child_nodes(node):
            visit(child, scope)

    visit(tree, "<module>")
    return sorted(mutants, key=lambda m: (m.start, m.end, m.kind, m.mutated))


def apply(source: str, mutant: Mutant) -> str:
    """`source` with the mutant's segment replaced; raises if the result is not valid Python or
    not a different program."""
    if source[mutant.start : mutant.end] != mutant.original:
        raise ValueError(f"{mutant.id}: the source has changed since the mutant was generated.")
    new = source[: mutant.start] + mutant.mutated + source[mutant.end :]
    if ast.dump(ast.parse(new)) == ast.dump(ast.parse(source)):
        raise ValueError(f"{mutant.id}: the mutant is the same program.")
    return new


def expand(patterns: list[str]) -> list[str]:
    paths = []
    for p in patterns:
        for f in sorted(glob.glob(str(ROOT / p))):
            rel = str(Path(f).relative_to(ROOT))
            if rel not in paths:
                paths.append(rel)
    return paths


# -- running the kill-suite -------------------------------------------------------------------


def _env(workdir: Path, jax_cache: str | None) -> dict:
    env = dict(os.environ)
    env.update(PYTHONPATH=str(workdir), PYTHONDONTWRITEBYTECODE="1", JAX_PLATFORMS="cpu")
    if jax_cache:
        env.update(
            JAX_COMPILATION_CACHE_DIR=jax_cache,
            JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS="0",
            JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES="0",
        )
    return env


def run_suite(workdir: Path, nodes: list[str], timeout: float, env: dict) -> tuple[str, float, str]:
    """`(status, seconds, detail)`: "survived" if the suite passes, "killed" if a test fails or
    errors (detail: the first failing node), "timeout" past `timeout` seconds."""
    cmd = [
        sys.executable,
        "-m",
        "pytest",
        "-p",
        "no:xdist",
        "-p",
        "no:cacheprovider",
        "-x",
        "-q",
        "--no-header",
        *nodes,
    ]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        return "timeout", time.perf_counter() - t0, ""
    except BaseException:  # interrupted (SIGTERM, Ctrl-C): leave no test run behind
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    seconds = time.perf_counter() - t0
    if proc.returncode == 0:
        return "survived", seconds, ""
    failed = [line for line in out.splitlines() if line.startswith(("FAILED", "ERROR"))]
    detail = failed[0] if failed else f"pytest exit code {proc.returncode}: " + out.strip()[-300:]
    if not failed:  # no test failed or errored (e.g. no tests collected): the suite is wrong
        return "error", seconds, detail
    return "killed", seconds, detail


def _copy_tree(workdir: Path):
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("geomech", "tests"):
        shutil.copytree(ROOT / name, workdir / name, ignore=ignore)
    shutil.copy2(ROOT / "pyproject.toml", workdir / "pyproject.toml")


def run_mutants(mutants: list[Mutant], nodes: list[str], args, log) -> tuple[float, list[dict]]:
    """Run the kill-suite on the unmutated copy (it must pass: its time sets the timeout), then on
    each mutant. Returns the baseline seconds and one record per mutant."""
    workdir = Path(tempfile.mkdtemp(prefix="geomech-mutation-"))
    records = []
    try:
        _copy_tree(workdir)
        env = _env(workdir, args.jax_cache)
        if args.timeout is not None:  # no baseline run
            return _mutants_in(
                workdir, mutants, nodes, args.timeout, env, log, records, journal=args.journal
            )
        status, baseline, detail = run_suite(workdir, nodes, 3600, env)
        if status != "survived":
            raise RuntimeError(f"the kill-suite fails without a mutant: {detail}")
        log(f"baseline: kill-suite passes in {baseline:.1f} s")
        timeout = args.timeout_factor * baseline + 30
        return _mutants_in(
            workdir, mutants, nodes, timeout, env, log, records, baseline, args.journal
        )
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)


def _mutants_in(
    workdir, mutants, nodes, timeout, env, log, records, baseline=float("nan"), journal=None
):
    for i, m in enumerate(mutants):
        target = workdir / m.path
        original = target.read_text()
        try:
            target.write_text(apply(original, m))
            status, seconds, detail = run_suite(workdir, nodes, timeout, env)
        finally:
            target.write_text(original)
        records.append(
            dict(
                dataclasses.asdict(m),
                id=m.id,
                status=status,
                seconds=round(seconds, 1),
                detail=detail,
                suite=len(nodes),
            )
        )
        if journal is not None:  # one JSON line per mutant as soon as it is done (--resume)
            with open(journal, "a") as f:
                f.write(json.dumps(records[-1]) + "\n")
        log(
            f"[{i + 1}/{len(mutants)}] {status:8s} {seconds:5.1f}s {m.where} {m.kind}: "
            + _change(m.original, m.mutated)
        )
    return baseline, records


# -- the report -------------------------------------------------------------------------------


def _change(original: str, mutated: str) -> str:
    return f"{_show(original)} → {_show(mutated)}"


def _show(text: str, width: int = 90) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def equivalence(record: dict) -> str | None:
    return EQUIVALENT.get(
        (record["path"], record["function"], record["original"], record["mutated"])
    )


def summarize(records: list[dict], generated: dict[str, int]) -> dict:
    """Counts and scores per module and in total for one group."""

    def counts(rs, n_generated):
        c = {
            s: sum(r["status"] == s for r in rs) for s in ("killed", "timeout", "survived", "error")
        }
        tested = c["killed"] + c["timeout"] + c["survived"]
        equivalent = sum(r["status"] == "survived" and equivalence(r) is not None for r in rs)
        caught = c["killed"] + c["timeout"]
        return dict(
            generated=n_generated,
            tested=tested,
            **c,
            equivalent=equivalent,
            score=round(caught / tested, 4) if tested else None,
            score_non_equivalent=round(caught / (tested - equivalent), 4)
            if tested > equivalent
            else None,
        )

    modules = {p: counts([r for r in records if r["path"] == p], n) for p, n in generated.items()}
    return dict(modules=modules, total=counts(records, sum(generated.values())))


def markdown(report: dict) -> str:
    out = [
        f"Command: `{report['command']}`  ",
        f"Date: {report['date']}, commit {report['commit']}",
        "",
    ]
    for name, g in report["groups"].items():
        t = g["summary"]["total"]
        out += [
            f"## Group `{name}`",
            "",
            f"Kill-suite ({len(g['suite'])} nodes, baseline {g['baseline_s']:.1f} s): "
            + ", ".join(f"`{n}`" for n in g["suite"]),
            "",
            "| module | generated | tested | killed | timeout | survived | equivalent | score "
            "| score (non-equivalent) |",
            "|---|---|---|---|---|---|---|---|---|",
        ]
        rows = list(g["summary"]["modules"].items()) + [("**total**", t)]
        for p, c in rows:
            pct = lambda x: "–" if x is None else f"{100 * x:.1f} %"
            out.append(
                f"| {p} | {c['generated']} | {c['tested']} | {c['killed']} | {c['timeout']} "
                f"| {c['survived']} | "
                f"{c['equivalent']} | {pct(c['score'])} | {pct(c['score_non_equivalent'])} |"
            )
        survivors = [r for r in g["mutants"] if r["status"] in ("survived", "error")]
        out += ["", f"Surviving mutants ({len(survivors)}):", ""]
        for r in survivors:
            why = equivalence(r)
            note = f" — equivalent: {why}" if why else ""
            status = "" if r["status"] == "survived" else f" ({r['status']}: {r['detail']})"
            out.append(
                f"- `{r['path']}:{r['line']}` ({r['function']}, {r['kind']}): "
                f"`{_show(r['original'])}` → `{_show(r['mutated'])}`{status}{note}"
            )
        out.append("")
    return "\n".join(out)


def _git_commit() -> str:
    try:
        return subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
        ).stdout.strip()
    except OSError:
        return "unknown"


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--groups", nargs="+", choices=list(GROUPS), default=list(GROUPS))
    parser.add_argument(
        "--modules",
        nargs="+",
        help="only these files (paths relative to the repository root, globs allowed)",
    )
    parser.add_argument(
        "--max-mutants", type=int, help="a random sample of at most this many mutants per group"
    )
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample")
    parser.add_argument("--out", help="write the JSON report here")
    parser.add_argument("--markdown", help="write the markdown report here")
    parser.add_argument(
        "--list", action="store_true", help="print the mutants and their counts; run nothing"
    )
    parser.add_argument(
        "--rerun",
        help="run only the survivors (and errors) of this JSON report, against the kill-suite "
        "(or --tests); "
        "the report merges both runs, for the union of both suites",
    )
    parser.add_argument(
        "--only",
        nargs="+",
        help="only the mutants whose id contains one of these strings (ids: --list --ids)",
    )
    parser.add_argument(
        "--tests", nargs="+", help="run these test nodes instead of the group's kill-suite"
    )
    parser.add_argument("--ids", action="store_true", help="with --list: print the mutant ids")
    parser.add_argument(
        "--timeout",
        type=float,
        help="a fixed timeout per mutant in seconds (then the baseline is not run)",
    )
    parser.add_argument(
        "--timeout-factor", type=float, default=3.0, help="timeout = factor × baseline + 30 s"
    )
    parser.add_argument(
        "--jax-cache",
        default=None,
        help="persistent JAX compilation cache directory for the kill-suite runs",
    )
    parser.add_argument(
        "--journal", help="append each mutant's result here as a JSON line (default: OUT.jsonl)"
    )
    parser.add_argument(
        "--resume", action="store_true", help="skip the mutants already in the journal"
    )
    parser.add_argument(
        "--report-only", action="store_true", help="with --resume: report the journal, run nothing"
    )
    parser.add_argument("--keep", action="store_true", help="keep the temporary copy")
    args = parser.parse_args(argv)
    log = lambda msg: print(msg, file=sys.stderr, flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # so the temporary copy is removed
    if args.journal is None and args.out:
        args.journal = args.out + "l" if args.out.endswith(".json") else args.out + ".jsonl"
    if args.resume and not args.journal:
        parser.error("--resume needs --journal or --out")

    previous = None
    if args.rerun:
        previous = json.loads(Path(args.rerun).read_text())
    only = set(args.modules and expand(args.modules) or [])
    report = dict(
        command="python benchmarks/mutation.py " + " ".join(sys.argv[1:] if argv is None else argv),
        date=datetime.datetime.now().isoformat(timespec="minutes"),
        commit=_git_commit(),
        groups={},
    )
    for name in args.groups:
        paths = [p for p in expand(GROUPS[name]) if not only or p in only]
        if not paths:
            continue
        all_mutants = [m for p in paths for m in generate(p)]
        generated = {p: sum(m.path == p for m in all_mutants) for p in paths}
        mutants, carried = all_mutants, []
        if previous is not None:  # the earlier run's killed mutants stay killed by a superset suite
            earlier = previous["groups"].get(name, {}).get("mutants", [])
            carried = [r for r in earlier if r["status"] not in ("survived", "error")]
            ids = {r["id"] for r in earlier} - {r["id"] for r in carried}
            mutants = [m for m in all_mutants if m.id in ids]
        if args.only:
            mutants = [m for m in mutants if any(s in m.id for s in args.only)]
        if args.max_mutants is not None and len(mutants) > args.max_mutants:
            # in random order, so that a run stopped early has tested a random sample
            mutants = random.Random(args.seed).sample(mutants, args.max_mutants)
        done = []
        if args.resume and Path(args.journal).exists():  # mutants already run (by id)
            lines = Path(args.journal).read_text().splitlines()
            done = [r for r in map(json.loads, lines) if r["path"] in generated]
            mutants = [m for m in mutants if m.id not in {r["id"] for r in done}]
        if args.list:
            for m in mutants:
                print(
                    m.id
                    if args.ids
                    else f"{m.where} ({m.function}, {m.kind}): {_change(m.original, m.mutated)}"
                )
            print(
                f"# group {name}: {len(mutants)} of {len(all_mutants)} mutants; "
                f"per module {generated}"
            )
            continue
        log(f"group {name}: {len(mutants)} of {len(all_mutants)} mutants")
        suite = args.tests or SUITES[name]
        if args.report_only:  # the journal's results only
            baseline, records = float("nan"), []
        else:
            baseline, records = run_mutants(mutants, suite, args, log)
        records = done + records
        if previous is not None:
            # the earlier run's survivors passed its suite: run against `suite` alone, the results
            # are those of the union of both suites (its kills stay kills)
            earlier_suite = previous["groups"][name]["suite"]
            suite = earlier_suite + [n for n in suite if n not in earlier_suite]
            records = sorted(carried + records, key=lambda r: (r["path"], r["start"], r["kind"]))
        report["groups"][name] = dict(
            suite=suite,
            baseline_s=round(baseline, 1),
            summary=summarize(records, generated),
            mutants=records,
        )
    if args.list:
        return
    if args.out:
        Path(args.out).write_text(json.dumps(report, indent=1))
    text = markdown(report)
    if args.markdown:
        Path(args.markdown).write_text(text)
    print(text)


if __name__ == "__main__":
    main()
