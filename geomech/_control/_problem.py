"""The optimal control problem: a `LagrangianSystem` driven by controls that enter as forces,
a horizon, boundary conditions, costs and bounds (docs/optimal_control.md)."""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, ArrayLike, Float, PyTree

from .._bundle import State
from .._geometry import AbstractCoordinateManifold, point_shape
from .._system import LagrangianSystem, check_system
from .._variational import VariationalIntegrator


class FreeHorizon(eqx.Module):
    """A horizon $T$ chosen by the optimization, $T_{min} \\le T \\le T_{max}$.

    **Arguments:**

    - `lower`, `upper`: the bounds on $T$ ($0 < T_{min} < T_{max}$).
    - `guess`: the initial value of $T$ (default: the midpoint of the bounds).
    """

    lower: Float[ArrayLike, ""]
    upper: Float[ArrayLike, ""]
    guess: Float[ArrayLike, ""] | None = None

    def __check_init__(self):
        lo, hi = _concrete(self.lower), _concrete(self.upper)
        if lo is not None and hi is not None and not 0 < lo < hi:
            raise ValueError(f"FreeHorizon needs 0 < lower < upper, got lower={lo}, upper={hi}.")

    def initial(self):
        return (self.lower + self.upper) / 2 if self.guess is None else self.guess


def _concrete_array(x):
    """`x` as a NumPy array, or `None` when it is traced."""
    try:
        return np.asarray(x)
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


def _concrete(x):
    try:
        return float(x)
    except (TypeError, jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


class ControlledForce(eqx.Module):
    """$F^e + F^u$: the system's own force plus the control force `control(..., u)` for the
    control value `u`, in the system's calling convention."""

    force: Callable | None
    control: Callable
    u: Array

    def __call__(self, *args):
        out = jnp.asarray(self.control(*args, self.u))
        if self.force is not None:
            out = out + jnp.asarray(self.force(*args))
        return out


def controlled(system: LagrangianSystem, control: Callable, u) -> LagrangianSystem:
    """`system` with the control force of the control value `u` added to its force."""
    return LagrangianSystem(
        system.lagrangian,
        force=ControlledForce(system.force, control, u),
        constraint=system.constraint,
        work_space=system.work_space,
        known_work=system.known_work,
        manifold=system.manifold,
        time_dependent=system.time_dependent,
    )


class OptimalControlProblem(eqx.Module):
    """An optimal control problem for a `LagrangianSystem`, to be solved by
    `gm.solve_optimal_control` (docs/optimal_control.md).

    Minimize $\\int_{t_0}^{t_0+T}\\ell(t, q, v, u)\\,dt + \\Phi(t_0 + T, q(t_0 + T))$ over the
    controls $u(t) \\in \\mathbb{R}^m$, subject to the constrained dynamics of `system` with the
    control force $F^u(q, v, u)$ added to its force, the boundary conditions and the bounds
    $u_{min} \\le u \\le u_{max}$, $q_{min} \\le q \\le q_{max}$.

    **Arguments:**

    - `system`: a `gm.LagrangianSystem` (ℝⁿ, S¹ or a Lie group), with constraints
        `gm.LinearConstraint` and/or `gm.HolonomicConstraint` (ideal, $\\mathcal{W} = \\mathcal{D}$),
        the constraints of its discrete Lagrange–d'Alembert form.
    - `control`: $F^u$, `(q, v, u) -> (n,)` covector (`(t, q, v, u)` for a `time_dependent`
        system); on a Lie group a covector on the body velocity (a body force or torque).
    - `num_controls`: $m$.
    - `q0`: the initial configuration (fixed).
    - `horizon`: $T$, a number, or a `gm.FreeHorizon` for a horizon the optimization chooses.
    - `num_nodes`: $N$, the number of nodes (time points) of the transcription, $N \\ge 3$.
    - `v0`: the initial velocity (on $\\mathcal{C}$); `None` leaves it free.
    - `qf`: the final configuration (fixed); `None` leaves it free (use `terminal_cost`).
    - `vf`: the final velocity (on $\\mathcal{C}$ at `qf`); `None` leaves it free.
    - `running_cost`: $\\ell$ `(t, q, v, u) -> scalar`; default $|u|^2$.
    - `terminal_cost`: $\\Phi$ `(t, q) -> scalar`; default none. On a group, write distances
        to a target with `gm.local_coordinates`-style $\\ominus$ (e.g. `jaxlie`'s
        `(target.inverse() @ q).log()`).
    - `control_bounds`: `(lower, upper)`, arrays of shape `(m,)` (`±jnp.inf` for no bound).
    - `state_bounds`: `(lower, upper)` on the coordinates of $q$, shape `(n,)` (coordinate
        manifolds only).
    - `t0`: the initial time.
    """

    system: LagrangianSystem
    control: Callable
    num_controls: int = eqx.field(static=True)
    q0: PyTree
    horizon: Float[ArrayLike, ""] | FreeHorizon
    num_nodes: int = eqx.field(static=True)
    v0: Float[Array, " n"] | None = None
    qf: PyTree | None = None
    vf: Float[Array, " n"] | None = None
    running_cost: Callable | None = None
    terminal_cost: Callable | None = None
    control_bounds: tuple[Float[ArrayLike, " m"], Float[ArrayLike, " m"]] | None = None
    state_bounds: tuple[Float[ArrayLike, " n"], Float[ArrayLike, " n"]] | None = None
    t0: Float[ArrayLike, ""] = 0.0

    def __check_init__(self):
        check_system(self.system)
        if not callable(self.control):
            raise TypeError("control must be a callable F(q, v, u) -> (n,) covector.")
        if not (isinstance(self.num_controls, int) and self.num_controls >= 1):
            raise ValueError(f"num_controls must be a positive int, got {self.num_controls!r}.")
        if not (isinstance(self.num_nodes, int) and self.num_nodes >= 3):
            raise ValueError(f"num_nodes must be an int >= 3, got {self.num_nodes!r}.")
        for name in ("running_cost", "terminal_cost"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be a callable, got {type(f).__name__}.")
        if self.qf is None and self.vf is not None:
            raise ValueError(
                "vf is given but qf is not: a final velocity needs a final configuration."
            )
        h = self.horizon
        if not isinstance(h, FreeHorizon):
            value = _concrete(h)
            if value is not None and not value > 0:
                raise ValueError(f"horizon must be positive, got {value}.")

    # -- dimensions and checks before tracing ------------------------------------------------

    @property
    def free_time(self) -> bool:
        return isinstance(self.horizon, FreeHorizon)

    @property
    def has_coordinates(self) -> bool:
        """Whether $Q$ has coordinates (ℝⁿ, S¹) that `state_bounds` can bound (asked once)."""
        return isinstance(self.system.manifold, AbstractCoordinateManifold)

    def dim(self) -> int:
        """$n = \\dim Q$."""
        return point_shape(self.q0)[1]

    def check(self) -> tuple[int, int]:
        """Check shapes and configuration (before tracing); return $(n, k)$."""
        system = self.system
        try:
            system.manifold.check(self.q0)
        except ValueError as e:
            raise ValueError(
                f"q0 must be one configuration (batch problems with jax.vmap): {e}"
            ) from None
        n = self.dim()
        state = State(self.q0, jnp.zeros(n, problem_dtype(self)))
        k = system.check_shapes(state, self.t0)
        # the discrete Lagrange-d'Alembert form exists for these systems only: the same checks as
        # gm.VariationalIntegrator's, raised before tracing
        VariationalIntegrator().bind(system, dt0=1.0, stepsize_controller=None, stabilization=None)
        for name in ("v0", "vf"):
            v = getattr(self, name)
            if v is not None and jnp.shape(v) != (n,):
                raise ValueError(f"{name} must have shape ({n},), got {jnp.shape(v)}.")
        if self.qf is not None:
            system.manifold.check(self.qf)
            if point_shape(self.qf)[1] != n:
                raise ValueError(f"qf must be a point of dimension {n}, as q0.")
        m = self.num_controls
        u = jnp.zeros(m, problem_dtype(self))
        try:
            out = jax.eval_shape(self._control_in_convention, self.t0, self.q0, state.v, u)
        except (TypeError, ValueError, IndexError) as e:
            raise ValueError(f"control failed with num_controls = {m}: {e}") from e
        if out.shape != (n,):
            raise ValueError(f"control must return a covector of shape ({n},), got {out.shape}.")
        for name, cost, args in (
            ("running_cost", self.running_cost, (self.t0, self.q0, state.v, u)),
            ("terminal_cost", self.terminal_cost, (self.t0, self.q0)),
        ):
            if cost is not None:
                shape = jax.eval_shape(cost, *args).shape
                if shape != ():
                    raise ValueError(f"{name} must return a scalar, got shape {shape}.")
        for name, bounds, size in (
            ("control_bounds", self.control_bounds, m),
            ("state_bounds", self.state_bounds, n),
        ):
            if bounds is None:
                continue
            if not (isinstance(bounds, tuple) and len(bounds) == 2):
                raise TypeError(f"{name} must be a tuple (lower, upper).")
            for b in bounds:
                if jnp.shape(b) != (size,):
                    raise ValueError(
                        f"{name} must be two arrays of shape ({size},), got {jnp.shape(b)}."
                    )
            lo, hi = (_concrete_array(b) for b in bounds)
            if lo is not None and hi is not None and not np.all(lo < hi):
                raise ValueError(f"{name}: every lower bound must be below its upper bound.")
        if self.state_bounds is not None and not self.has_coordinates:
            raise ValueError(
                "state_bounds bound the coordinates of q and exist on coordinate manifolds "
                "(ℝⁿ, S¹) only; on a Lie group put a bound into the costs or the constraints."
            )
        return n, k

    def _control_in_convention(self, t, q, v, u):
        if self.system.time_dependent:
            return self.control(t, q, v, u)
        return self.control(q, v, u)

    def controlled_system(self, u) -> LagrangianSystem:
        """The system with the control force of the value `u` added."""
        return controlled(self.system, self.control, u)

    def cost_rate(self, t, q, v, u):
        """$\\ell(t, q, v, u)$ ($|u|^2$ by default)."""
        if self.running_cost is None:
            return u @ u
        return self.running_cost(t, q, v, u)


def problem_dtype(problem: OptimalControlProblem):
    leaves = jax.tree_util.tree_leaves(problem.q0)
    return jnp.result_type(*leaves, float)
