from typing import ClassVar

import jax.numpy as jnp

from .._bundle import State
from .._constraint import LinearConstraint, Subspace
from .._custom_types import RealScalarLike
from .._system import LagrangianSystem
from ._base import AbstractModel


def _default_A(q):
    return 0.3 + 0.2 * jnp.sin(q[0]) + 0.1 * jnp.cos(q[1])


class ThesisExample2(AbstractModel):
    """Thesis Example 2 (§3.2): two equal charges $e$ on a line joined by a spring, with the
    generalized nonholonomic constraint $A(q)\\,\\dot q^1 = \\dot q^2$ imposed by a uniform field $E(t)$.

    Coordinates $q = (q^1, q^2)$, $q^1 < q^2$. $U = \\tfrac12\\kappa(q^2 - q^1 - a)^2 + k e^2/(q^2 - q^1)$.
    Two errata of the printed formula: the spring term lacks its square, and the Coulomb term is
    printed with a minus sign, which would make equal charges attract (and collapse onto each
    other in a simulation); the repulsive $+k e^2/r$ is used. The constraint
    force $F^c = eE(dq^1 + dq^2)$ does no work on $\\mathcal{W} = \\mathrm{span}\\{(1, -1)\\}$, so
    $\\mathcal{W} \\ne \\mathcal{D} = \\mathrm{span}\\{(1, A)\\}$; (3.19) holds iff $m_1/m_2 \\ne A$.
    `A` is a function of $q$; the default $A(q) = 0.3 + 0.2\\sin q^1 + 0.1\\cos q^2$ stays in
    $[0, 0.6]$, clear of $m_1/m_2 = 2$ for the default masses.
    """

    m1: RealScalarLike = 2.0
    m2: RealScalarLike = 1.0
    kappa: RealScalarLike = 3.0
    a: RealScalarLike = 1.0
    coulomb: RealScalarLike = 0.5  # k e^2
    A: object = _default_A

    description: ClassVar[str] = (
        "thesis Example 2: charges on a line, generalized constraint with W != D"
    )
    coordinates: ClassVar[tuple[str, ...]] = ("q1", "q2")
    units: ClassVar[tuple[str, ...]] = ("m", "m")  # SI: masses in kg, kappa in N/m, k e² in N m²
    time_unit: ClassVar[str] = "s"
    path_coordinates: ClassVar[tuple[int, int] | None] = None
    time_span: ClassVar[tuple[float, float]] = (0.0, 5.0)

    def lagrangian(self, q, v):
        r = q[1] - q[0]
        U = 0.5 * self.kappa * (r - self.a) ** 2 + self.coulomb / r  # repulsive: equal charges
        return 0.5 * (self.m1 * v[0] ** 2 + self.m2 * v[1] ** 2) - U

    def constraint_row(self, q):
        """$\\phi = A(q) v^1 - v^2$ as the row $(A(q), -1)$."""
        return jnp.stack([self.A(q), -jnp.ones_like(q[0])])[None, :]

    def W_annihilator(self, q, v):
        """$C = (1, 1)$: $F^c = eE(dq^1 + dq^2)$ vanishes on $\\mathcal{W} = \\ker C$."""
        return jnp.ones((1, 2), q.dtype)

    def system(self) -> LagrangianSystem:
        return LagrangianSystem(
            self.lagrangian,
            constraint=LinearConstraint(self.constraint_row),
            work_space=Subspace(annihilator=self.W_annihilator),
        )

    def initial_state(self, q=(0.0, 1.2), v1=0.5) -> State:
        """Charges at `q` with $\\dot q^1 = $ `v1` and $\\dot q^2 = A(q)\\dot q^1$ (on $\\mathcal C$)."""
        q = jnp.asarray(q, float)
        return State(q, jnp.stack([jnp.asarray(v1, float), self.A(q) * v1]))
