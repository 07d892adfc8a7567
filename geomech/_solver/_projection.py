from typing import ClassVar

from .._stages import Stages
from ._base import AbstractSolver


class Projection(AbstractSolver):
    """D'Alembert's principle by the projection formula (Prop. 2, Cor. 2, (3.32)):
    $a_R = a_{\\bar U} - \\Pi_{\\mathcal{W}^\\perp}(a_{\\bar U} - a_0)$, with $a_{\\bar U}$ of (5.41).

    Since $\\Pi_{\\mathcal{W}^\\perp} = M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}A$ (3.20) and $A a_0 = b$
    (Lemma 1), $X_0$ drops out: $a_R = a_{\\bar U} - M^{-1}C^\\top(AM^{-1}C^\\top)^{-1}(A a_{\\bar U} - b)$.
    """

    supports_known_work: ClassVar[bool] = True

    def acceleration(self, stages: Stages):
        a = stages.a_Ubar
        return a - stages.project_Wperp_residual(a)  # (3.32) with A a_0 = b
