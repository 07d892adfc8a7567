"""The interface every ready-made model shares."""

import abc
from typing import ClassVar

import equinox as eqx
from jaxtyping import Array, Float

from .._bundle import State
from .._scene import Scene
from .._symmetry import LieAlgebraAction
from .._system import LagrangianSystem


class AbstractModel(eqx.Module):
    """A ready-made system whose fields are its parameters.

    `model.system()` (or `model()`) is the `LagrangianSystem`, `model.initial_state()` a state on
    $\\mathcal{C}$ at `model.t0`. These attributes describe the model for the command line and plots
    (class variables, except where a property derives them from the instance):

    - `description`: one line.
    - `coordinates`: the names of the $n$ coordinates $q^i$. On a Lie group (docs/lie_groups.md)
        the point is a `jaxlie` element, not coordinates: there `coordinates` and `units` name the
        $\\dim Q$ components of the velocity $v$ (the body angular velocity `omega1`, `omega2`,
        `omega3` in rad/s on SO(3)), and `point_parameters` the stored parameters of $q$.
    - `point_parameters`: on a group, the names of the point's parameters as stored (the
        quaternion `q_w, q_x, q_y, q_z` of a `jaxlie.SO3`, then the ℝⁿ factors' coordinates);
        `None` (the default) where $q$ is coordinates.
    - `units`: the unit of each coordinate, for the axes of plots and `geomech list` (SI for the
        default parameters, e.g. `"m"`, `"rad"`; `"1"` for a dimensionless coordinate; never
        empty); `time_unit` likewise for $t$. `coordinates` and `units` are instance attributes
        (`eqx.AbstractVar`): a class variable, or a property where they depend on the instance
        (the number of links of `PlanarChain`).
    - `path_coordinates`: the indices `(i, j)` of the coordinate pair drawn as the path in
        configuration space (e.g. the contact point $(x, y)$ of a rolling disk), or `None`.
    - `time_span`: the default interval `(t0, t1)` of a simulation.
    - `independent_coordinates`, `independent_speeds`: the indices of the coordinates ($n - m$
        of them, $m$ holonomic constraints) and speeds ($n - k$) that determine a state on
        $\\mathcal{C}$, the others being solved from the constraints (`gm.consistent_state`):
        what an ensemble of `geomech run --batch` perturbs and keeps, so they are the quantities
        the model is started with (a rolling body's angular velocity). `None` (the default):
        chosen by QR with column pivoting of the constraints' Jacobians at the initial state.
    """

    description: eqx.AbstractClassVar[str]
    coordinates: eqx.AbstractVar[tuple[str, ...]]
    units: eqx.AbstractVar[tuple[str, ...]]
    time_unit: eqx.AbstractClassVar[str]
    path_coordinates: eqx.AbstractClassVar[tuple[int, int] | None]
    point_parameters: ClassVar[tuple[str, ...] | None] = None
    time_span: eqx.AbstractClassVar[tuple[float, float]]
    independent_coordinates: ClassVar[tuple[int, ...] | None] = None
    independent_speeds: ClassVar[tuple[int, ...] | None] = None

    @abc.abstractmethod
    def system(self) -> LagrangianSystem:
        """The `LagrangianSystem` with this model's parameters."""

    @abc.abstractmethod
    def initial_state(self) -> State:
        """A state on the constraint manifold $\\mathcal{C}$ at `t0` (keyword arguments, where a
        model takes them, choose it)."""

    def __call__(self) -> LagrangianSystem:
        return self.system()

    @property
    def t0(self) -> float:
        return self.time_span[0]

    @property
    def t1(self) -> float:
        return self.time_span[1]


class AbstractRollingModel(AbstractModel):
    """A body rolling on the horizontal plane: `contact_point(q)` is where it touches it, drawn
    by `geomech.plot.contact_path` and by `geomech run` (`MODEL_contact.png`), in `length_unit`."""

    length_unit: ClassVar[str] = "m"

    @abc.abstractmethod
    def contact_point(self, q) -> Float[Array, "2"]:
        """The horizontal position $(x, y)$ of the contact point at the configuration `q`."""


class AbstractSymmetricModel(AbstractModel):
    """A model with a Lie algebra action leaving $L$ (and the constraints) invariant, for the
    nonholonomic momentum (thesis §4.3) and `gm.NonholonomicMomentum`."""

    @abc.abstractmethod
    def action(self) -> LieAlgebraAction:
        """The infinitesimal generators $\\xi_Q$ of the symmetry."""


class AbstractSceneModel(AbstractModel):
    """A model whose configuration places a body in space: `scene()` is what
    `geomech.plot.animate` draws (the body's mesh, its pose for each $q$, the traced points;
    docs/seeing_it.md) and what `geomech run MODEL --animate` writes."""

    @abc.abstractmethod
    def scene(self) -> Scene:
        """The default `geomech.plot.Scene` of this model, with its parameters."""
