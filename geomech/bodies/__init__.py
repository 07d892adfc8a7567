"""Bodies as building blocks (docs/lie_groups.md): rigid bodies and their Lagrangians on SO(3),
SO(3) × ℝ³ and SE(3), convex surfaces, and bodies rolling without slipping on a plane. The names
are also `geomech`'s own (`gm.RigidBody`, `gm.RollingBody`, ...)."""

from ._rigid_body import (
    AbstractBodyLagrangian as AbstractBodyLagrangian,
)
from ._rigid_body import (
    FreeBodyLagrangian as FreeBodyLagrangian,
)
from ._rigid_body import (
    PivotedBodyLagrangian as PivotedBodyLagrangian,
)
from ._rigid_body import (
    RigidBody as RigidBody,
)
from ._rigid_body import (
    SE3BodyLagrangian as SE3BodyLagrangian,
)
from ._rolling import PlaneContact as PlaneContact
from ._rolling import RollingBody as RollingBody
from ._rolling import rolling_constraint as rolling_constraint
from ._surfaces import (
    AbstractSurface as AbstractSurface,
)
from ._surfaces import (
    Ellipsoid as Ellipsoid,
)
from ._surfaces import (
    Sphere as Sphere,
)
from ._surfaces import (
    SupportFunction as SupportFunction,
)
from ._surfaces import (
    ThinDisk as ThinDisk,
)
