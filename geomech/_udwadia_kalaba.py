"""The Udwadia–Kalaba decomposition of a constraint force, $F^c = F^c_{id} + F^c_{ni}$
(thesis §5.1)."""

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._bundle import State
from ._custom_types import RealScalarLike
from ._dynamics import check_solver, constrained_acceleration
from ._operators import weighted_solve
from ._solver._base import AbstractSolver
from ._solver._projection import Projection
from ._stages import Stages, assemble
from ._system import LagrangianSystem


def udwadia_kalaba_split(
    stages: Stages, F: Float[Array, " n"]
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    """$(F_{id}, F_{ni})$ of a covector $F$ at the state of `stages`, (5.28)–(5.29).

    $F_{id} = M A^{+M} A M^{-1} F = A^\\top (A M^{-1} A^\\top)^{-1} A M^{-1} F$, with the
    $M$-pseudo-inverse $A^{+M} = M^{-1}A^\\top(AM^{-1}A^\\top)^{-1}$ of (5.30); it equals (5.10).
    $F_{ni} = F - F_{id}$ (5.11) is $P_{\\beta^{-1}\\mathcal{D}}(F)$, the
    $\\langle,\\rangle_{M^{-1}}$-orthogonal projection onto $M\\mathcal{D}$ (5.36), so it depends
    only on the work of $F$ on $\\mathcal{D}$ (Observation 14).
    """
    A = stages.A_rows
    lam, _ = weighted_solve(stages.mass, A, A, A.mv(stages.solve_M(F)))
    F_id = A.rmv(lam)  # (5.28)
    return F_id, F - F_id  # (5.8)


@eqx.filter_jit
def udwadia_kalaba(
    system: LagrangianSystem,
    state: State,
    force: Float[Array, " n"] | None = None,
    *,
    solver: AbstractSolver = Projection(),
    t: RealScalarLike = 0.0,
) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
    """The Udwadia–Kalaba decomposition $F^c = F^c_{id} + F^c_{ni}$ (5.8)–(5.11).

    $F^c_{id}$ does no work on the virtual displacements $\\mathcal{D}$ and
    $M^{-1}F^c_{ni} \\in \\mathcal{D}$ (P1); they are $\\langle,\\rangle_{M^{-1}}$-orthogonal (P2);
    $X_R = X_R^{id} + X_{F^c_{ni}}$ (Property 1).

    **Arguments:**

    - `system`, `state`, `solver`, `t`: as in `gm.constraint_force`.
    - `force`: the covector to decompose; `None` (default) decomposes the constraint force $F^c$
        of `system`. Any $\\tilde F$ with $\\tilde F = F^c$ on $\\mathcal{D}$ gives the same
        $F_{ni}$ (Property 2).

    **Returns:** `(F_id, F_ni)`, two `(n,)` covectors.
    """
    check_solver(system, solver)
    stages = assemble(system, state, t)
    if force is None:
        force = stages.M @ (constrained_acceleration(stages, solver) - stages.a_U)
    return udwadia_kalaba_split(stages, jnp.asarray(force))
