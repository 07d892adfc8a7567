"""The public names of geomech (DESIGN.md §3), imported lazily by `__init__.py`."""

from . import models as models, plot as plot
from ._analysis import (
    Linearization as Linearization,
    consistent_state as consistent_state,
    linearize as linearize,
    stability_boundary as stability_boundary,
)
from ._bundle import (
    HorizontalForm as HorizontalForm,
    SpecialVectorField as SpecialVectorField,
    State as State,
    TangentVector as TangentVector,
    TwoForm as TwoForm,
    vertical_lift as vertical_lift,
    vertical_lift_inverse as vertical_lift_inverse,
)
from ._checks import Failure as Failure
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
    on_constraint as on_constraint,
    constrained_field as constrained_field,
    constraint_force as constraint_force,
    multipliers as multipliers,
    unconstrained_acceleration as unconstrained_acceleration,
)
from ._integrate import Solution as Solution, simulate as simulate
from ._stabilization import (
    AbstractStabilization as AbstractStabilization,
    Baumgarte as Baumgarte,
    ManifoldProjection as ManifoldProjection,
    project_to_constraints as project_to_constraints,
)
from ._precision import PrecisionWarning as PrecisionWarning
from ._manifold import (
    AbstractManifold as AbstractManifold,
    Circle as Circle,
    Euclidean as Euclidean,
    Product as Product,
)
from ._solver._base import AbstractSolver as AbstractSolver
from ._solver._projection import Projection as Projection
from ._solver._gauss import Gauss as Gauss
from ._solver._gibbs_appell import (
    AbstractGibbsAppell as AbstractGibbsAppell,
    GibbsAppell as GibbsAppell,
    GibbsAppellD as GibbsAppellD,
    GibbsAppellW as GibbsAppellW,
    gibbs_appell_function as gibbs_appell_function,
)
from ._solver._kane import Kane as Kane, bracket_basis as bracket_basis, orthonormal_basis as orthonormal_basis
from ._solver._momentum import NonholonomicMomentum as NonholonomicMomentum
from ._solver._multipliers import Multipliers as Multipliers
from ._symmetry import (
    LieAlgebraAction as LieAlgebraAction,
    check_invariance as check_invariance,
    nonholonomic_momentum as nonholonomic_momentum,
)
from ._udwadia_kalaba import udwadia_kalaba as udwadia_kalaba, udwadia_kalaba_split as udwadia_kalaba_split
from ._stages import Stages as Stages, assemble as assemble
from ._system import LagrangianSystem as LagrangianSystem
from ._system_integrator import AbstractSystemIntegrator as AbstractSystemIntegrator
from ._variational import VariationalIntegrator as VariationalIntegrator
from ._validate import Problem as Problem, ValidationReport as ValidationReport, validate as validate
from ._sympy import SympyFunction as SympyFunction, from_sympy as from_sympy
from ._vakonomic._conditions import (
    condition_57 as condition_57,
    lambda_from_mu as lambda_from_mu,
    mu_dot_from_lambda as mu_dot_from_lambda,
    transpositional_relation as transpositional_relation,
)
from ._vakonomic._dynamics import (
    impasse_margin as impasse_margin,
    vakonomic_acceleration as vakonomic_acceleration,
    vakonomic_energy as vakonomic_energy,
)
from ._vakonomic._simulate import (
    DynamicsComparison as DynamicsComparison,
    VakonomicSolution as VakonomicSolution,
    compare_cetaev_vakonomic as compare_cetaev_vakonomic,
    simulate_vakonomic as simulate_vakonomic,
)

__version__: str
