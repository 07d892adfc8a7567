"""Bodies as building blocks (docs/lie_groups.md): rigid bodies and their Lagrangians on SO(3),
SO(3) × ℝ³ and SE(3), convex surfaces, and bodies rolling without slipping on a plane. The names
are also `geomech`'s own (`gm.RigidBody`, `gm.RollingBody`, ...)."""

from ._rigid_body import (
    AbstractBodyLagrangian as AbstractBodyLagrangian,
    FreeBodyLagrangian as FreeBodyLagrangian,
    PivotedBodyLagrangian as PivotedBodyLagrangian,
    RigidBody as RigidBody,
    SE3BodyLagrangian as SE3BodyLagrangian,
)
from ._rolling import RollingBody as RollingBody, rolling_constraint as rolling_constraint
from ._surfaces import (
    AbstractSurface as AbstractSurface,
    Ellipsoid as Ellipsoid,
    Sphere as Sphere,
    SupportFunction as SupportFunction,
    ThinDisk as ThinDisk,
)
