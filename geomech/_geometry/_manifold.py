"""Configuration manifolds: what the rest of geomech asks of a configuration space
(docs/lie_groups.md, docs/architecture.md).

Every manifold answers the same questions, so no caller asks *which* manifold it has: the chart
centred at a point $q$, $\\psi \\mapsto q \\oplus \\psi$, and its inverse $\\ominus$; the velocity
$v$ of $q \\oplus \\psi(t)$, $v = \\mathrm{dexp}(\\psi, \\dot\\psi)$; the bracket of the velocity
frame; the chart a system is localized in (`chart`), and the integrator that steps on the
manifold (`integrator`).

On a *coordinate* manifold (ℝⁿ, S¹, their products) a point is an array of `dim` coordinates and
$v = \\dot q$: `AbstractCoordinateManifold` implements the identity chart once, and the stages run
on $q$ itself at no cost. Lie groups (`_lie.py`) keep the group element and the left-trivialized
velocity.
"""

import abc
from collections.abc import Callable

import diffrax
import equinox as eqx
from jaxtyping import Array, Float, PyTree

Point = PyTree  # an array of coordinates, a jaxlie element, or a tuple of points (products)


class AbstractManifold(eqx.Module):
    """A configuration manifold $Q$ with the chart centred at each point (all methods abstract).

    A point `q` is what the user stores in `gm.State(q, v)`; a tangent vector (`psi`, `v`) is a
    flat array of `dim` numbers in the manifold's velocity convention.
    """

    @property
    @abc.abstractmethod
    def dim(self) -> int | None:
        """The dimension $n$ of $Q$ (`None` for `Euclidean()`, whose points give it)."""

    @abc.abstractmethod
    def check(self, q: Point) -> None:
        """Raise `ValueError` unless `q` has the structure and shape of one point (before tracing;
        the values are measured by `point_defect`)."""

    @abc.abstractmethod
    def point_defect(self, q: Point) -> Float[Array, ""]:
        """How far the stored parameters of `q` are from a point of $Q$, relative and unit-free
        (e.g. $\\big||q| - 1\\big|$ of a unit quaternion); $0$ on coordinate manifolds."""

    @abc.abstractmethod
    def normalize(self, q: Point) -> Point:
        """The point of $Q$ nearest to the parameters `q` (a unit quaternion from a nearly unit
        one); coordinates wrapped into the chart's domain."""

    @abc.abstractmethod
    def batch_shape(self, q: Point) -> tuple[int, ...]:
        """The leading (batch) axes of a point `q` (or of a batch of points)."""

    @abc.abstractmethod
    def oplus(self, q: Point, psi: Float[Array, " n"]) -> Point:
        """$q \\oplus \\psi$, the chart centred at `q` ($q + \\psi$; $q\\exp(\\psi)$ on a group)."""

    @abc.abstractmethod
    def retract(self, q: Point, psi: Float[Array, " n"]) -> Point:
        """$q \\oplus \\psi$ to second order in $\\psi$ (a second-order retraction
        [AbsilMahonySepulchre2008]): equal to `oplus` with its first and second derivatives
        at $\\psi = 0$, without its transcendental functions. The systems written in the chart
        centred at a point are read through it where they are differentiated at the centre only,
        never beyond second order (`AbstractChart.point_to_second_order`)."""

    @abc.abstractmethod
    def ominus(self, p: Point, q: Point) -> Float[Array, " n"]:
        """$p \\ominus q$: the $\\psi$ with $p = q \\oplus \\psi$, for `p` near `q`."""

    @abc.abstractmethod
    def dexp(self, psi: Float[Array, " n"], psi_dot: Float[Array, " n"]) -> Float[Array, " n"]:
        """The velocity $v$ of $q \\oplus \\psi(t)$ for $\\dot\\psi$ = `psi_dot`."""

    @abc.abstractmethod
    def dexp_inverse(self, psi: Float[Array, " n"], v: Float[Array, " n"]) -> Float[Array, " n"]:
        """The inverse of `dexp` in its second argument: $\\dot\\psi$ from $v$."""

    @abc.abstractmethod
    def bracket(self, v: Float[Array, " n"], w: Float[Array, " n"]) -> Float[Array, " n"]:
        """$[v, w]$ of the velocity frame: the Lie bracket $\\mathrm{ad}_v w$ of left-trivialized
        velocities on a group, zero for coordinate velocities $v = \\dot q$."""

    @abc.abstractmethod
    def velocity_of_point(self, q: Point, v: Float[Array, " n"]) -> Point:
        """$\\dot q$ of the stored point (its parameters) for the velocity `v`."""

    @abc.abstractmethod
    def point_scale(self, q: Point) -> Float[Array, " n"]:
        """The size of each coordinate of the chart centred at `q`, `(dim,)`: what the holonomic
        residual is measured against (the coordinates themselves on ℝⁿ and S¹)."""

    @abc.abstractmethod
    def point_error(self, q: Point, psi: Float[Array, " n"], psi_error: Float[Array, " n"]) -> Point:
        """The difference of the stored points $q \\oplus \\psi$ and $q \\oplus (\\psi - e)$ for an
        error estimate $e$ = `psi_error` in the chart (the step-size controller's measure)."""

    @abc.abstractmethod
    def parameters(self, q: Point) -> Float[Array, "... p"]:
        """The stored parameters of `q` as one flat array (its coordinates; a quaternion's
        $w, x, y, z$; the factors' parameters in order), for plots and files."""

    @abc.abstractmethod
    def chart(self, q: Point) -> "AbstractChart":
        """The chart centred at `q` in which a system's stages are computed."""

    @abc.abstractmethod
    def integrator(
        self,
        solver: diffrax.AbstractSolver,
        *,
        adjoint: diffrax.AbstractAdjoint,
        parts: eqx.Module,  # an `AbstractStateParts` (`_integrator.py`, which imports this module)
        name: str,
    ) -> diffrax.AbstractSolver:
        """The diffrax solver that steps on this manifold for the diffrax `solver` (itself on
        coordinates; Runge–Kutta–Munthe-Kaas on a group), for a state split by `parts`; errors
        before tracing name `name` (`simulate`, `simulate_vakonomic`)."""


class AbstractChart(eqx.Module):
    """The chart of a manifold centred at a point (`AbstractManifold.chart`), in which the
    stages of a system are computed: its coordinates `x`, the point they name (`point`), and the
    system written in it (`system`)."""

    @property
    @abc.abstractmethod
    def origin(self) -> Float[Array, " n"]:
        """The chart coordinates of the centre ($q$ itself in the identity chart, $0$ in the
        chart centred at a point of a group)."""

    @property
    @abc.abstractmethod
    def frame(self) -> AbstractManifold:
        """The manifold of the chart coordinates, with the velocity frame of the system written
        in the chart (`system`)."""

    @abc.abstractmethod
    def point(self, x: Float[Array, " n"]) -> Point:
        """The point with chart coordinates `x`."""

    @abc.abstractmethod
    def point_to_second_order(self, x: Float[Array, " n"]) -> Point:
        """`point(x)` to second order about the origin (`AbstractManifold.retract`): equal to it
        with its first and second derivatives there, for functions read at the origin only."""

    @abc.abstractmethod
    def coordinates(self, p: Point) -> Float[Array, " n"]:
        """The chart coordinates of a point `p` near the centre."""

    @abc.abstractmethod
    def moved(self, x: Float[Array, " n"], v: Float[Array, " n"]) -> Point:
        """The point $\\mathrm{point}(x) \\oplus v$: moved from the one with coordinates `x` by
        the manifold's own increment `v` (along its velocity frame, `velocity_of_point`)."""

    @abc.abstractmethod
    def centre_defect(self) -> Float[Array, ""]:
        """`point_defect` of the centre: how far the point the chart was built at is off the
        manifold (0 on coordinate manifolds)."""

    @abc.abstractmethod
    def system(self, system: eqx.Module) -> eqx.Module:
        """The `LagrangianSystem` `system` written in this chart: every user function
        $f(q, \\ldots)$ read as $f(\\mathrm{point}(x), \\ldots)$ (`pull`)."""

    def pull(self, fn: Callable, time_dependent: bool = False) -> "Pulled":
        """`fn(q, ...)` (or `fn(t, q, ...)` if `time_dependent`) as the same function of the
        chart coordinates, `fn(x, ...)` (or `fn(t, x, ...)`)."""
        return Pulled(fn, self, time_dependent)


class Pulled(eqx.Module):
    """A user function of the point read in the chart coordinates `x` (`AbstractChart.pull`),
    with `t` first if `time_dependent`."""

    fn: Callable
    chart: AbstractChart
    time_dependent: bool = eqx.field(static=True)

    def __call__(self, *args: PyTree) -> PyTree:
        t, (x, *rest) = (args[:1], args[1:]) if self.time_dependent else ((), args)
        return self.fn(*t, self.chart.point(x), *rest)
