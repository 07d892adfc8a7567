"""The one interface every principle implements: the acceleration of $X_R$ from the shared stages."""

import abc

import equinox as eqx
from jaxtyping import Array, Float

from .._stages import Stages


class AbstractSolver(eqx.Module):
    """A principle that determines the constrained dynamics $X_R = (v, a_R)$.

    Subclasses implement `acceleration(stages)`, given the shared `Stages` at one state with at
    least one constraint, and declare `supports_known_work` (a class variable, a field or a
    property): whether the principle generalizes to non-ideal constraints with known work
    (thesis §5.2).
    """

    supports_known_work: eqx.AbstractVar[bool]

    @abc.abstractmethod
    def acceleration(self, stages: Stages) -> Float[Array, " n"]:
        """The acceleration $a_R$ of $X_R$ at the state of `stages`."""
