"""The geometry wing: configuration manifolds and everything that depends on which one a system
lives on — the chart centred at a point, the system written in it, the integrator that steps on
the manifold (docs/architecture.md). Callers ask the manifold; nothing outside this package tests
what kind of manifold it has."""

from ._centred import CentredChart as CentredChart
from ._coordinates import (
    AbstractCoordinateManifold as AbstractCoordinateManifold,
)
from ._coordinates import (
    BodyFrame as BodyFrame,
)
from ._coordinates import (
    Circle as Circle,
)
from ._coordinates import (
    Euclidean as Euclidean,
)
from ._coordinates import (
    IdentityChart as IdentityChart,
)
from ._integrator import (
    DIFFRAX_SOLVER_STATE as DIFFRAX_SOLVER_STATE,
)
from ._integrator import (
    AbstractStateParts as AbstractStateParts,
)
from ._integrator import (
    MuntheKaas as MuntheKaas,
)
from ._integrator import end_rate as end_rate
from ._lie import SE2 as SE2
from ._lie import SE3 as SE3
from ._lie import SO3 as SO3
from ._lie import AbstractLieGroup as AbstractLieGroup
from ._lie import LieGroup as LieGroup
from ._lie import hat as hat
from ._lie import rotate as rotate
from ._lie import rotation_matrix as rotation_matrix
from ._manifold import AbstractChart as AbstractChart
from ._manifold import AbstractManifold as AbstractManifold
from ._points import (
    angular_velocity_indices as angular_velocity_indices,
)
from ._points import (
    as_point as as_point,
)
from ._points import (
    attitude as attitude,
)
from ._points import (
    point_difference as point_difference,
)
from ._points import (
    point_parameters as point_parameters,
)
from ._points import (
    point_shape as point_shape,
)
from ._product import Product as Product
