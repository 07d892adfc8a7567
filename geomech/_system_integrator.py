"""Integrators built from a system's own structure (its Lagrangian, not only the field $X_R$).

`simulate` runs every integrator through diffrax; an `AbstractSystemIntegrator` is given the
`LagrangianSystem` first and answers with the diffrax solver that `diffeqsolve` then steps.
"""

import abc

import diffrax
import equinox as eqx

from ._custom_types import RealScalarLike
from ._stabilization import AbstractStabilization
from ._system import LagrangianSystem


class AbstractSystemIntegrator(eqx.Module):
    """An integrator that needs the `LagrangianSystem` itself (e.g. its discrete Lagrangian), passed
    as `integrator=` to `gm.simulate`.

    `simulate` calls `bind` once, before tracing, with the options that it must validate; the
    returned diffrax solver is then run like any other (guarded, batched, differentiated).
    """

    @abc.abstractmethod
    def bind(
        self,
        system: LagrangianSystem,
        *,
        dt0: RealScalarLike | None,
        stepsize_controller: diffrax.AbstractStepSizeController | None,
        stabilization: AbstractStabilization | str | None,
    ) -> diffrax.AbstractSolver:
        """Check the system and the options of `simulate` (raising `ValueError`/`TypeError` before
        tracing) and return the diffrax solver that integrates `system` (state `gm.State(q, v)`).

        **Arguments:**

        - `system`: the `LagrangianSystem` to integrate.
        - `dt0`, `stepsize_controller`, `stabilization`: as given to `simulate`.

        **Returns:** a `diffrax.AbstractSolver` carrying the system.
        """
