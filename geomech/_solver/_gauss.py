from typing import ClassVar

from .._stages import Stages
from ._base import AbstractSolver


class Gauss(AbstractSolver):
    """The generalized Gauss principle of least constraint (Prop. 4).

    $a_R$ minimizes $\\|a - a_U\\|^2_{[,]}$ over the accelerations allowed by the constraints,
    $A a = b$ (that is, over $\\mathcal{S}(\\mathcal{C})$), with the inner product $[,]$ of
    (4.1) that makes $\\mathcal{D}$ and $\\mathcal{W}^\\perp$ orthogonal. Solved as the KKT system
    $G a + A^\\top\\mu = G a_U$, $A a = b$.

    It does not generalize to non-ideal constraints with known work (thesis §5.2).
    """

    supports_known_work: ClassVar[bool] = False

    def acceleration(self, stages: Stages):
        G = stages.bracket  # Gram matrix of [,] (4.1)
        a, _ = stages.solve_saddle(G, stages.A, G @ stages.a_U)  # stationarity of (4.2) on S(C)
        return a
