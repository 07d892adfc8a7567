from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp

from .._stages import Stages
from .._symmetry import (
    NOT_INVARIANT_MESSAGE,
    LieAlgebraAction,
    invariance_defect,
    momentum_components,
    row_space_projector,
)
from ._base import AbstractSolver
from ._kane import kane_rows


class NonholonomicMomentum(AbstractSolver):
    """The generalized nonholonomic momentum equation (Prop. 6, Prop. 6') as equations of motion.

    Along $\\xi \\in \\mathfrak{g}_{\\mathcal{W}}$ the equations are
    $\\tfrac{d}{dt} J^{nh}(\\xi) = D_vL(\\dot\\xi_Q) + F^e(\\xi_Q) + F^0(\\xi_Q)$ (4.11), (5.45);
    on an ($M$-orthogonal) complement of $\\{\\xi_Q : \\xi \\in \\mathfrak{g}_{\\mathcal{W}}\\}$ in
    $\\mathcal{W}$ they are Kane's equations (4.28), (5.47); plus the constraints $A a = b$. The
    dimension of $\\mathfrak{g}_{\\mathcal{W}}$ may vary with the state. The lifted action must
    leave $L$ invariant; this is checked at every state (an error is raised otherwise).

    **Arguments:**

    - `action`: a `LieAlgebraAction` (infinitesimal generators $q \\mapsto (n, r)$).
    """

    action: LieAlgebraAction

    supports_known_work: ClassVar[bool] = True

    def __check_init__(self):
        if not isinstance(self.action, LieAlgebraAction):
            raise TypeError(
                "NonholonomicMomentum(action) needs a gm.LieAlgebraAction(generators) or "
                "gm.LieAlgebraAction.from_group_action(phi, dim)."
            )

    def acceleration(self, stages: Stages):
        system, t, q, v = stages.system, stages.t, stages.state.q, stages.state.v
        action = self.action.on(stages.chart)  # on a Lie group: in the body frame at the point
        P = action.g_W_projector(stages)  # columns span g_W
        U = action(q) @ P  # ξ_Q for ξ in g_W: vectors of W
        # d/dt J^nh(ξ) along (1, v, a) at fixed ξ; the terms in dξ/dt cancel in (4.11):
        # ∂_t J + ∂_q J v + M ξ_Q · a = (F^e + F^0)(ξ_Q)
        J = lambda t_, q_: momentum_components(system, t_, q_, v, action) @ P
        _, dJ = jax.jvp(J, (t, q), (jnp.ones_like(t), v))
        Fe = system.external_force(t, q, v)
        R_mom, r_mom = U.T @ stages.M, U.T @ (Fe + stages.F0) - dJ
        # Kane's equations on the M-orthogonal complement of span U inside W
        E = stages.M_orthonormalize(stages.W_basis)
        Uc = E.T @ stages.M @ U  # coordinates of U in the M-orthonormal basis E
        scale = jnp.linalg.norm(E.T @ stages.M @ action(q))
        E_rest = E - E @ row_space_projector(Uc.T, scale)
        R_kane, r_kane = kane_rows(stages, E_rest)
        a = stages.solve_with_constraints(
            jnp.concatenate([R_mom, R_kane]), jnp.concatenate([r_mom, r_kane])
        )
        defect = invariance_defect(system, t, q, v, action)
        if stages.checked:
            return eqx.error_if(a, defect, NOT_INVARIANT_MESSAGE)
        return jnp.where(defect, jnp.nan, a)  # a failure of this trajectory, not of the batch
