"""geomech: constrained Lagrangian mechanics in the invariant (Vershik–Faddeev) form, in JAX."""

from ._bundle import (
    HorizontalForm as HorizontalForm,
    SpecialVectorField as SpecialVectorField,
    State as State,
    TangentVector as TangentVector,
    TwoForm as TwoForm,
    vertical_lift as vertical_lift,
    vertical_lift_inverse as vertical_lift_inverse,
)
from ._constraint import (
    AbstractConstraint as AbstractConstraint,
    Constraint as Constraint,
    HolonomicConstraint as HolonomicConstraint,
    LinearConstraint as LinearConstraint,
    Subspace as Subspace,
)
from ._dynamics import (
    acceleration as acceleration,
    check_on_constraint as check_on_constraint,
    constrained_field as constrained_field,
    constraint_force as constraint_force,
    multipliers as multipliers,
    unconstrained_acceleration as unconstrained_acceleration,
)
from ._manifold import (
    AbstractManifold as AbstractManifold,
    Circle as Circle,
    Euclidean as Euclidean,
    Product as Product,
)
from ._solver._base import AbstractSolver as AbstractSolver
from ._solver._projection import Projection as Projection
from ._stages import Stages as Stages, assemble as assemble
from ._system import LagrangianSystem as LagrangianSystem

__version__ = "0.1.0"
