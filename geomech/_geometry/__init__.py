"""The geometry wing: configuration manifolds and everything that depends on which one a system
lives on — the chart centred at a point, the system written in it, the integrator that steps on
the manifold (docs/architecture.md). Callers ask the manifold; nothing outside this package tests
what kind of manifold it has."""

from ._centred import CentredChart as CentredChart
from ._coordinates import (
    AbstractCoordinateManifold as AbstractCoordinateManifold,
    BodyFrame as BodyFrame,
    Circle as Circle,
    Euclidean as Euclidean,
    IdentityChart as IdentityChart,
)
from ._integrator import (
    DIFFRAX_SOLVER_STATE as DIFFRAX_SOLVER_STATE,
    AbstractStateParts as AbstractStateParts,
    MuntheKaas as MuntheKaas,
)
from ._lie import SE2 as SE2, SE3 as SE3, SO3 as SO3, AbstractLieGroup as AbstractLieGroup, hat as hat
from ._manifold import AbstractChart as AbstractChart, AbstractManifold as AbstractManifold
from ._points import (
    angular_velocity_indices as angular_velocity_indices,
    as_point as as_point,
    attitude as attitude,
    point_difference as point_difference,
    point_parameters as point_parameters,
    point_shape as point_shape,
)
from ._product import Product as Product
