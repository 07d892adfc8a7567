from typing import ClassVar

from jaxtyping import Array, Float

from .._stages import Stages
from ._base import AbstractSolver


class Multipliers(AbstractSolver):
    """Classical Lagrange multipliers ([Zanella], [Goicolea]), for generalized and non-ideal constraints.

    Solves the augmented system $M a - C^\\top\\lambda = Q + F^0$, $A a = b$: the constraint force
    is $F^c = F^0 + C^\\top\\lambda \\in F^0 + \\mathcal{W}^0$
    ($C = A = \\partial\\phi/\\partial v$ when $\\mathcal{W} = \\mathcal{D}$).
    `acceleration_and_multipliers` also returns $\\lambda$.
    """

    supports_known_work: ClassVar[bool] = True

    def acceleration_and_multipliers(
        self, stages: Stages
    ) -> tuple[Float[Array, " n"], Float[Array, " k"]]:
        """$(a_R, \\lambda)$ at the state of `stages`."""
        return stages.solve_saddle(stages.M, stages.C, stages.Q + stages.F0)

    def acceleration(self, stages: Stages):
        return self.acceleration_and_multipliers(stages)[0]
