"""Ready-made systems from the source texts ([Zanella], [Goicolea], [Balseiro]). Each model is a
`gm.models.AbstractModel` (an `eqx.Module`) whose fields are its parameters; `model.system()` (or
`model()`) returns the `LagrangianSystem` and `model.initial_state()` a consistent `State` on the
constraint manifold at `model.t0`. `MODELS` maps registry names to the classes."""

from ._appell import AppellHamel as AppellHamel
from ._base import AbstractModel as AbstractModel
from ._base import AbstractRollingModel as AbstractRollingModel
from ._base import AbstractSceneModel as AbstractSceneModel
from ._base import AbstractSymmetricModel as AbstractSymmetricModel
from ._pendulum import (
    CartesianPendulum as CartesianPendulum,
)
from ._pendulum import (
    DoublePendulum as DoublePendulum,
)
from ._pendulum import (
    PlanarChain as PlanarChain,
)
from ._pendulum import (
    PolarPendulum as PolarPendulum,
)
from ._pendulum import (
    SphericalPendulum as SphericalPendulum,
)
from ._rheonomic import BeadOnRotatingWire as BeadOnRotatingWire
from ._rheonomic import Pursuit as Pursuit
from ._rigid import FreeRigidBody as FreeRigidBody
from ._rigid import HeavyTop as HeavyTop
from ._rigid import PivotedTop as PivotedTop
from ._rigid import Suslov as Suslov
from ._rigid import Veselova as Veselova
from ._rolling import (
    ChaplyginSleigh as ChaplyginSleigh,
)
from ._rolling import (
    RollingDisk as RollingDisk,
)
from ._rolling import (
    RollingHoop as RollingHoop,
)
from ._rolling_bodies import ChaplyginSphere as ChaplyginSphere
from ._rolling_bodies import Rattleback as Rattleback
from ._rolling_bodies import RollingDiskSO3 as RollingDiskSO3
from ._rolling_bodies import RouthSphere as RouthSphere
from ._rolling_bodies import TurntableBall as TurntableBall
from ._thesis import ThesisExample2 as ThesisExample2

MODELS: dict[str, type] = {
    "pendulum": CartesianPendulum,
    "pendulum_polar": PolarPendulum,
    "double_pendulum": DoublePendulum,
    "chain": PlanarChain,
    "spherical_pendulum": SphericalPendulum,
    "bead_on_wire": BeadOnRotatingWire,
    "pursuit": Pursuit,
    "sleigh": ChaplyginSleigh,
    "rolling_disk": RollingDisk,
    "rolling_hoop": RollingHoop,
    "thesis_example2": ThesisExample2,
    "appell_hamel": AppellHamel,
    "chaplygin_sphere": ChaplyginSphere,
    "routh_sphere": RouthSphere,
    "turntable_ball": TurntableBall,
    "rattleback": Rattleback,
    "rolling_disk_so3": RollingDiskSO3,
    "free_rigid_body": FreeRigidBody,
    "heavy_top": HeavyTop,
    "pivoted_top": PivotedTop,
    "suslov": Suslov,
    "veselova": Veselova,
}
