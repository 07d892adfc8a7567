"""`gm.validate`: every problem of a system at a state, with one set of tolerances.

The numerical conditions are those of `_checks` (also used by `assemble`'s runtime checks and by
the on-$\\mathcal{C}$ check of `simulate`), evaluated once at the state; a problem that follows
from an earlier one (a non-finite $M$ because $L$ is non-finite, condition (3.19) when $M$ is
singular) is not repeated.
"""

import dataclasses

import equinox as eqx
import numpy as np

from ._bundle import State
from ._checks import (
    ADMISSIBILITY,
    CONDITION_3_19,
    MASS_MATRIX,
    NONFINITE,
    admissibility_margin,
    condition_3_19_margin,
    constraint_tolerance,
    mass_matrix_margin,
    position_residual,
    velocity_residual,
    work_space_margin,
)
from ._stages import assemble
from ._system import LagrangianSystem


@dataclasses.dataclass(frozen=True)
class Problem:
    """One problem found by `gm.validate`.

    **Fields:**

    - `code`: a short stable name: `'type'`, `'shape'`, `'nonfinite'`, `'mass_matrix'`,
        `'admissibility'`, `'work_space'`, `'condition_3_19'` or `'off_constraint'`.
    - `message`: one line saying what is wrong and how to fix it.
    - `value`, `tolerance`: the measured number and the bound it violates, where there is one
        (margins must exceed `tolerance`, residuals must not).
    """

    code: str
    message: str
    value: float | None = None
    tolerance: float | None = None

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"


@dataclasses.dataclass(frozen=True)
class ValidationReport:
    """What `gm.validate` found: `report.ok` (also `bool(report)`), `report.problems` (a tuple of
    `gm.Problem`), a readable `str(report)`, and `report.raise_if_invalid()`."""

    problems: tuple[Problem, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def codes(self) -> tuple[str, ...]:
        """The codes of the problems, in order."""
        return tuple(p.code for p in self.problems)

    def __str__(self) -> str:
        if self.ok:
            return (
                "valid: shapes, finite values, regular M (2.6), admissibility (3.7), "
                "condition (3.19) and on C all hold"
            )
        count = len(self.problems)
        lines = [f"{count} problem{'s' if count > 1 else ''}:"]
        lines += [f"  - {p}" for p in self.problems]
        return "\n".join(lines)

    def raise_if_invalid(self) -> "ValidationReport":
        """Raise a `ValueError` listing every problem; return the report if there is none."""
        if not self.ok:
            raise ValueError(str(self))
        return self


@eqx.filter_jit
def _measure(system: LagrangianSystem, state: State, t) -> dict:
    """Every quantity `validate` looks at, computed once (unchecked stages)."""
    st = assemble(system, state, t, checks=False)
    q, v, t = st.state.q, st.state.v, st.t
    out = {
        "L": system.L(t, q, v),
        "force": system.external_force(t, q, v),
        "known_work": system.known_work_force(t, q, v),
        "M": st.M,
        "Q": st.Q,
        "mass_matrix": mass_matrix_margin(st.M, st.M_cho),
    }
    if st.k > 0:
        h = system.position_residual(st.state, t)
        out.update(
            phi=st.phi,
            h=h,
            A=st.A,
            b=st.b,
            velocity_residual=velocity_residual(st.phi, v),
            position_residual=position_residual(h),
            admissibility=admissibility_margin(st.A),
            condition_3_19=condition_3_19_margin(st.A, st.C, st.M_cho),
        )
        ws = system.work_space
        if ws is not None:  # W must be given by n - k independent vectors or k independent rows
            out["C"] = st.C
            out["work_space"] = work_space_margin(ws, t, q, v)
    return out


def _nonfinite(x) -> str | None:
    """`None` if every entry of `x` is finite, else a short description of where it is not."""
    x = np.asarray(x)
    bad = ~np.isfinite(x)
    if not bad.any():
        return None
    if x.ndim == 0:
        return f"{x.item()}"
    where = [tuple(int(i) for i in idx) for idx in np.argwhere(bad)[:4]]
    where = [w[0] if len(w) == 1 else w for w in where]
    more = ", ..." if bad.sum() > 4 else ""
    return f"non-finite entries at {', '.join(map(str, where))}{more}"


def validate(system: LagrangianSystem, state: State, t=0.0) -> ValidationReport:
    """Every problem of `system` at `state`, not only the first.

    Checks, with the tolerances `assemble` and `simulate` use:

    - shapes of every user function against `state` (`'shape'`);
    - finite $q$, $v$, $t$, and finite values at the state of $L$, $F^e$, $\\phi$, $h$, $F^0$,
        $M$, $Q$, $A = \\partial\\phi/\\partial v$, $b$ and $C$, naming the user function that
        produced a non-finite value (`'nonfinite'`);
    - regular $L$ (2.6): $M$ positive definite (`'mass_matrix'`);
    - admissibility (3.7): $\\operatorname{rank}\\partial\\phi/\\partial v = k$ (`'admissibility'`);
    - a work space of full rank (`'work_space'`) and condition (3.19), $AM^{-1}C^\\top$
        invertible (`'condition_3_19'`);
    - the state on $\\mathcal{C}$: $|\\phi| \\le \\text{tol}\\,(1 + |v|_\\infty)$ and
        $|h| \\le \\text{tol}$, tol = `1e-8` in float64, `1e-4` in float32 (`'off_constraint'`).

    Problems that follow from an earlier one are not repeated (e.g. no (3.19) problem when $M$ is
    singular). Runs one compiled evaluation of the stages; not traceable itself (call it on
    concrete values, before `jit`).

    **Arguments:**

    - `system`: a `LagrangianSystem`.
    - `state`: one point `State(q, v)` (no batch axis).
    - `t`: the time.

    **Returns:** a `gm.ValidationReport`; `report.raise_if_invalid()` raises a `ValueError`
    listing every problem.
    """
    problems: list[Problem] = []
    report = lambda: ValidationReport(tuple(problems))
    if not isinstance(system, LagrangianSystem):
        problems.append(
            Problem("type", f"expected a gm.LagrangianSystem, got {type(system).__name__}.")
        )
        return report()
    if not isinstance(state, State):
        problems.append(Problem("type", f"expected a gm.State(q, v), got {type(state).__name__}."))
        return report()
    if np.ndim(t) != 0:
        problems.append(Problem("shape", f"t must be a scalar, got shape {np.shape(t)}."))
        return report()
    try:
        system.require_coordinates("gm.validate")
        k = system.check_shapes(state, t)
    except (TypeError, ValueError) as e:
        problems.append(Problem("shape", str(e).strip().splitlines()[0]))
        return report()

    for name, x in (("q", state.q), ("v", state.v), ("t", t)):
        where = _nonfinite(x)
        if where is not None:
            problems.append(
                Problem("nonfinite", f"{name} is not finite ({where}): give finite q, v, t.")
            )
    if problems:  # everything below is evaluated at the state
        return report()

    m = {
        key: np.asarray(x) if not isinstance(x, tuple) else tuple(map(float, x))
        for key, x in _measure(system, state, t).items()
    }
    finite = {}
    for name, what, inputs, fix in NONFINITE:
        if name not in m:
            continue
        where = _nonfinite(m[name])
        finite[name] = where is None
        if where is not None and all(finite.get(i, True) for i in inputs):
            problems.append(
                Problem("nonfinite", f"{what} is not finite at this state ({where}): {fix}.")
            )

    def margin(code, base, detail, needed=()):
        if not all(finite.get(n, True) for n in needed):
            return False
        value, tol = m[code]
        if value > tol:
            return True
        problems.append(
            Problem(code, f"{base} ({detail} = {value:.3g}, needs > {tol:.3g}).", value, tol)
        )
        return False

    regular = margin("mass_matrix", MASS_MATRIX, "smallest Cholesky pivot² / largest |M_ii|", ["M"])
    if k == 0:
        return report()
    admissible = margin("admissibility", ADMISSIBILITY, "σ_min of ∂φ/∂v with unit rows", ["A"])
    full_w = True
    if "work_space" in m:
        what = "basis columns" if system.work_space.basis is not None else "annihilator rows"
        full_w = margin(
            "work_space",
            f"the work space W is rank deficient: its {what} are linearly dependent; give "
            f"dim W = n − k = {state.q.shape[0] - k} independent vectors (or k = {k} independent "
            "rows)",
            "σ_min with unit vectors",
            ["C"],
        )
    if regular and admissible and full_w:
        margin("condition_3_19", CONDITION_3_19, "σ_min of Â Ĉᵀ", ["A", "C"])

    tol = constraint_tolerance(state.q.dtype)
    fix = "make the initial data consistent, e.g. with gm.project_to_constraints(system, state)"
    for name, residual, what in (
        ("phi", "velocity_residual", "|φ| / (1 + |v|∞)"),
        ("h", "position_residual", "|h|"),
    ):
        value = float(m[residual])
        if finite[name] and not value <= tol:
            problems.append(
                Problem(
                    "off_constraint",
                    f"the state is off the constraint manifold C: {what} = {value:.3g} > "
                    f"{tol:.3g}; {fix}.",
                    value,
                    tol,
                )
            )
    return report()
