from typing import ClassVar

from .._stages import Stages
from ._base import AbstractSolver


class Projection(AbstractSolver):
    """D'Alembert's principle by the projection formula (Prop. 2, Cor. 2, (3.32)):
    $a_R = a_{\\bar U} - \\Pi_{\\mathcal{W}^\\perp}(a_{\\bar U} - a_0)$, with $a_{\\bar U}$ of (5.41)."""

    supports_known_work: ClassVar[bool] = True

    def acceleration(self, stages: Stages):
        a = stages.a_Ubar
        return a - stages.project_Wperp(a - stages.a_0)  # (3.32)
