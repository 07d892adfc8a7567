"""The public names of geomech (docs/api.md), imported lazily by `__init__.py`."""

from . import bodies as bodies
from . import models as models
from . import plot as plot
from ._bundle import (
    HorizontalForm as HorizontalForm,
)
from ._bundle import (
    SpecialVectorField as SpecialVectorField,
)
from ._bundle import (
    State as State,
)
from ._bundle import (
    TangentVector as TangentVector,
)
from ._bundle import (
    TwoForm as TwoForm,
)
from ._bundle import (
    vertical_lift as vertical_lift,
)
from ._bundle import (
    vertical_lift_inverse as vertical_lift_inverse,
)
from ._cache import enable_compilation_cache as enable_compilation_cache
from ._checks import Failure as Failure
from ._consistent import consistent_state as consistent_state
from ._constraint import (
    AbstractConstraint as AbstractConstraint,
)
from ._constraint import (
    AbstractRatedField as AbstractRatedField,
)
from ._constraint import (
    Constraint as Constraint,
)
from ._constraint import (
    HolonomicConstraint as HolonomicConstraint,
)
from ._constraint import (
    LinearConstraint as LinearConstraint,
)
from ._constraint import (
    Subspace as Subspace,
)
from ._contact import AbstractContact as AbstractContact
from ._control._interior_point import ControlResult as ControlResult
from ._control._interior_point import InteriorPoint as InteriorPoint
from ._control._problem import FreeHorizon as FreeHorizon
from ._control._problem import OptimalControlProblem as OptimalControlProblem
from ._control._solve import OptimalControlSolution as OptimalControlSolution
from ._control._solve import solve_optimal_control as solve_optimal_control
from ._dynamics import (
    acceleration as acceleration,
)
from ._dynamics import (
    check_on_constraint as check_on_constraint,
)
from ._dynamics import (
    constrained_field as constrained_field,
)
from ._dynamics import (
    constraint_force as constraint_force,
)
from ._dynamics import (
    multipliers as multipliers,
)
from ._dynamics import (
    on_constraint as on_constraint,
)
from ._dynamics import (
    unconstrained_acceleration as unconstrained_acceleration,
)
from ._frontend import RecompilationWarning as RecompilationWarning
from ._geometry import SE2 as SE2
from ._geometry import SE3 as SE3
from ._geometry import SO3 as SO3
from ._geometry import AbstractChart as AbstractChart
from ._geometry import AbstractCoordinateManifold as AbstractCoordinateManifold
from ._geometry import AbstractLieGroup as AbstractLieGroup
from ._geometry import AbstractManifold as AbstractManifold
from ._geometry import Circle as Circle
from ._geometry import Euclidean as Euclidean
from ._geometry import LieGroup as LieGroup
from ._geometry import Product as Product
from ._integrate import simulate as simulate
from ._linearize import Linearization as Linearization
from ._linearize import linearize as linearize
from ._precision import PrecisionWarning as PrecisionWarning
from ._solution import Solution as Solution
from ._solver._base import AbstractSolver as AbstractSolver
from ._solver._gauss import Gauss as Gauss
from ._solver._gibbs_appell import (
    GibbsAppell as GibbsAppell,
)
from ._solver._gibbs_appell import (
    gibbs_appell_function as gibbs_appell_function,
)
from ._solver._kane import Kane as Kane
from ._solver._kane import bracket_basis as bracket_basis
from ._solver._kane import orthonormal_basis as orthonormal_basis
from ._solver._momentum import NonholonomicMomentum as NonholonomicMomentum
from ._solver._multipliers import Multipliers as Multipliers
from ._solver._projection import Projection as Projection
from ._stability import stability_boundary as stability_boundary
from ._stabilization import (
    AbstractStabilization as AbstractStabilization,
)
from ._stabilization import (
    Baumgarte as Baumgarte,
)
from ._stabilization import (
    ManifoldProjection as ManifoldProjection,
)
from ._stabilization import (
    project_to_constraints as project_to_constraints,
)
from ._stages import Stages as Stages
from ._stages import assemble as assemble
from ._symmetry import (
    LieAlgebraAction as LieAlgebraAction,
)
from ._symmetry import (
    check_invariance as check_invariance,
)
from ._symmetry import (
    nonholonomic_momentum as nonholonomic_momentum,
)
from ._sympy import SympyFunction as SympyFunction
from ._sympy import from_sympy as from_sympy
from ._system import AbstractBodiesLagrangian as AbstractBodiesLagrangian
from ._system import AbstractBodyFrameLagrangian as AbstractBodyFrameLagrangian
from ._system import AbstractExplicitBodiesLagrangian as AbstractExplicitBodiesLagrangian
from ._system import LagrangianSystem as LagrangianSystem
from ._system_integrator import AbstractSystemIntegrator as AbstractSystemIntegrator
from ._udwadia_kalaba import udwadia_kalaba as udwadia_kalaba
from ._udwadia_kalaba import udwadia_kalaba_split as udwadia_kalaba_split
from ._vakonomic._conditions import (
    condition_57 as condition_57,
)
from ._vakonomic._conditions import (
    lambda_from_mu as lambda_from_mu,
)
from ._vakonomic._conditions import (
    mu_dot_from_lambda as mu_dot_from_lambda,
)
from ._vakonomic._conditions import (
    transpositional_relation as transpositional_relation,
)
from ._vakonomic._dynamics import (
    impasse_margin as impasse_margin,
)
from ._vakonomic._dynamics import (
    vakonomic_acceleration as vakonomic_acceleration,
)
from ._vakonomic._dynamics import (
    vakonomic_energy as vakonomic_energy,
)
from ._vakonomic._simulate import (
    DynamicsComparison as DynamicsComparison,
)
from ._vakonomic._simulate import (
    VakonomicSolution as VakonomicSolution,
)
from ._vakonomic._simulate import (
    compare_cetaev_vakonomic as compare_cetaev_vakonomic,
)
from ._vakonomic._simulate import (
    simulate_vakonomic as simulate_vakonomic,
)
from ._validate import Problem as Problem
from ._validate import ValidationReport as ValidationReport
from ._validate import validate as validate
from ._variational import VariationalIntegrator as VariationalIntegrator
from .bodies import AbstractSurface as AbstractSurface
from .bodies import Ellipsoid as Ellipsoid
from .bodies import PlaneContact as PlaneContact
from .bodies import RigidBody as RigidBody
from .bodies import RollingBody as RollingBody
from .bodies import Sphere as Sphere
from .bodies import SupportFunction as SupportFunction
from .bodies import ThinDisk as ThinDisk
from .bodies import rolling_constraint as rolling_constraint

__version__: str
