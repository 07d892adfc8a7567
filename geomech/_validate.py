"""`gm.validate`: every problem of a system at a state, with one set of tolerances.

The numerical conditions are the rows of the table in `_checks` (also looped over by
`assemble`'s runtime checks and the preconditions of `simulate`), evaluated once at the state; a
problem that follows from an earlier one (a non-finite $M$ because $L$ is non-finite, condition
(3.19) when $M$ is singular) is not repeated.
"""

import dataclasses

import equinox as eqx
import jax
import numpy as np

from . import _checks
from ._bundle import State
from ._checks import At
from ._dynamics import constrained_acceleration
from ._solver._projection import Projection
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
def _measure(system: LagrangianSystem, state: State, t) -> tuple:
    """What each condition of `validate` measures at the state, computed once (unchecked
    stages): `(name, measure)` pairs in the order of the table."""
    # on a Lie group the stages are in the chart centred at q: the original point and the size
    # of its coordinates travel with them (as in `simulate`'s preconditions)
    stages = assemble(system, state, t, checks=False)
    # a contact's normal force with the acceleration of X_R (every solver's, to round-off)
    a_R = lambda: constrained_acceleration(stages, Projection())
    extra = _checks.contact_measures(system, state, t, a_R)
    at = At(stages, point=state, scale=_checks.point_scale(system, state), **extra)
    return tuple((c.name, c.measure(at)) for c in _checks.CONDITIONS if c.used_by("validate", at))


def _nonfinite(x) -> str | None:
    """`None` if every entry of `x` is finite, else a short description of where it is not."""
    # a group element (or a tuple of them): its parameters, e.g. the quaternion, flattened
    leaves = [np.asarray(leaf) for leaf in jax.tree_util.tree_leaves(x)]
    x = leaves[0] if len(leaves) == 1 else np.concatenate([leaf.ravel() for leaf in leaves])
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
    - regular $L$ (2.6): $M$ positive definite, judged on the Jacobi-scaled $D^{-1/2} M D^{-1/2}$
        (`'mass_matrix'`);
    - admissibility (3.7): $\\operatorname{rank}\\partial\\phi/\\partial v = k$ (`'admissibility'`);
    - a work space of full rank (`'work_space'`) and condition (3.19), $AM^{-1}C^\\top$
        invertible (`'condition_3_19'`);
    - the state on $\\mathcal{C}$: each $|\\phi_i| \\le \\text{tol} \\sum(\\text{its terms})$
        ($\\sum_j |A_{ij} v_j| + |\\phi_i - (Av)_i|$) and each
        $|h_i| \\le \\text{tol} \\sum_j |\\partial h_i/\\partial q_j\\, q_j|$, tol = `1e-8` in
        float64, `1e-4` in float32 (`'off_constraint'`).

    Every tolerance is relative to the problem's own scales: the verdict does not depend on the
    units of lengths, masses and time.

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
        system.check_shapes(state, t)
    except (TypeError, ValueError) as e:
        problems.append(Problem("shape", str(e).strip().splitlines()[0]))
        return report()

    conditions = {c.name: c for c in _checks.CONDITIONS}
    failed, blocked = set(), False
    for name, measured in _measure(system, state, t):
        c = conditions[name]
        if blocked and not c.blocking:  # everything below is evaluated at the state
            break
        if bool(c.holds(measured)):
            continue
        failed.add(name)
        if failed & set(c.after):  # follows from an earlier problem
            continue
        if c.kind == "finite":
            where = "; ".join(
                f"{key} is not finite: {_nonfinite(x)}"
                for key, x in measured.items()
                if _nonfinite(x) is not None
            )
            problems.append(Problem(c.code, f"{c.message} ({where}): {c.fix}."))
        else:
            value, tol = (float(x) for x in measured)
            needs = "needs > " if c.kind == "margin" else "needs <= "
            problems.append(
                Problem(
                    c.code, f"{c.text()} ({c.detail} = {value:.3g}, {needs}{tol:.3g}).", value, tol
                )
            )
        blocked |= c.blocking
    return report()
