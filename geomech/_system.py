"""The Lagrangian system: $L$, its mass matrix, energy, Legendre map, $\\omega_L$ and $X_U$."""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.extend
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._bundle import State, TangentVector, TwoForm
from ._checks import check_time
from ._constraint import AbstractConstraint, Subspace, TimeForm
from ._contact import AbstractContact
from ._custom_types import RealScalarLike
from ._geometry import AbstractChart, AbstractManifold, Euclidean


def _depends_on_arguments(jaxpr, live_in=None) -> bool:
    """Whether an output of `jaxpr` depends on its inputs (all of them, or those marked in
    `live_in`): a data-dependence closure over its equations, entering nested `jit` calls (the
    user functions are called through one); other higher-order primitives count as depending on
    all of their inputs."""
    return any(_live_outputs(jaxpr, live_in))


def _live_outputs(jaxpr, live_in=None) -> list[bool]:
    live = {v for v, on in zip(jaxpr.invars, live_in or [True] * len(jaxpr.invars), strict=True) if on}
    is_live = lambda x: not isinstance(x, jax.extend.core.Literal) and x in live
    for eqn in jaxpr.eqns:
        inner = eqn.params.get("jaxpr")
        if eqn.primitive.name == "jit" and inner is not None:
            outs = _live_outputs(inner.jaxpr, [is_live(x) for x in eqn.invars])
        else:
            outs = [any(map(is_live, eqn.invars))] * len(eqn.outvars)
        live.update(v for v, on in zip(eqn.outvars, outs, strict=True) if on)
    return [is_live(x) for x in jaxpr.outvars]


# The passed shape checks of `check_shapes`, keyed as `eqx.filter_jit` keys its programs: the
# system's structure and non-array leaves (functions, Python numbers) by value, its arrays and the
# state by shape and dtype only. A system called again with states of the same shapes is not
# traced again to check them (the trace costs more than a short compiled run: the heavy top's
# `simulate` of one trajectory, 146 steps, 12.1 -> 6.2 ms a call). The oldest entries go first;
# like JAX's own caches of jitted functions, a key holds the system's functions (and what they
# close over) until it goes.
_CHECKED_SHAPES: dict = {}
_CHECKED_SHAPES_MAX = 64


def _shapes_key(system, state):
    """The key of `_CHECKED_SHAPES`, or `None` when a leaf of `system` is neither an array nor
    hashable (then the checks run every time)."""

    def part(x):
        if isinstance(x, jax.Array | np.ndarray | np.generic):
            return ("array", x.shape, jnp.dtype(x.dtype))
        hash(x)
        return type(x), x

    try:
        leaves, treedef = jax.tree_util.tree_flatten(system)
        key = (treedef, tuple(map(part, leaves)), jax.tree_util.tree_structure(state))
        key += tuple(part(x) for x in jax.tree_util.tree_leaves(state))
        hash(key)
    except TypeError:
        return None
    return key


class AbstractBodiesLagrangian(eqx.Module):
    """A Lagrangian of rigid bodies, $L = \\sum_b \\tfrac12 m_b|u_b|^2 + \\tfrac12\\,\\omega_b^\\top
    I_b\\,\\omega_b - U(q)$, with $u_b$ the spatial velocity of body $b$'s centre of mass and
    $\\omega_b$ its angular velocity in its own axes, both linear in $v$ (`velocities`). Its
    equations of motion are Kane's [KaneLevinson1985] — the Newton–Euler equations projected on
    the partial velocities $\\partial u_b/\\partial v$, $\\partial\\omega_b/\\partial v$ — so $M$
    and $Q$ take first derivatives only (`BodiesForm`), in any velocity frame (body velocities
    on a group included). `gm.RigidBody.lagrangian(...)` and `gm.RollingBody` give such
    Lagrangians; any other callable $L$ is differentiated as it is (`AutodiffForm`)."""

    @abc.abstractmethod
    def masses(self) -> Float[Array, " b"]:
        """$m_b$."""

    @abc.abstractmethod
    def inertias(self) -> Float[Array, "b 3 3"]:
        """$I_b$ about each centre of mass, in the body's axes."""

    @abc.abstractmethod
    def velocities(self, q, v) -> tuple[Float[Array, "b 3"], Float[Array, "b 3"]]:
        """$(u_b, \\omega_b)$ at $(q, v)$, linear in $v$."""

    @abc.abstractmethod
    def potential(self, q) -> Float[Array, ""]:
        """$U(q)$."""

    def __call__(self, q, v) -> Float[Array, ""]:
        u, w = self.velocities(q, v)
        T = 0.5 * jnp.sum(self.masses() * jnp.sum(u * u, axis=-1))
        T = T + 0.5 * jnp.einsum("bi,bij,bj->", w, self.inertias(), w)
        return T - self.potential(q)


class _BodiesInChart(AbstractBodiesLagrangian):
    """A bodies Lagrangian written in a chart (`BodiesForm.pull`), read through the chart's point
    to second order (`AbstractChart.point_to_second_order`): it is differentiated at the chart's
    origin only, to first order by Kane's equations and at most to second (a Hessian of the
    energy), so no exponential map is evaluated or differentiated."""

    lagrangian: AbstractBodiesLagrangian
    chart: AbstractChart

    def masses(self):
        return self.lagrangian.masses()

    def inertias(self):
        return self.lagrangian.inertias()

    def velocities(self, q, v):
        return self.lagrangian.velocities(self.chart.point_to_second_order(q), v)

    def potential(self, q):
        return self.lagrangian.potential(self.chart.point_to_second_order(q))


class AbstractBodyFrameLagrangian(AbstractBodiesLagrangian):
    """A bodies Lagrangian on a group whose velocity $v$ is the body velocity, with each body's
    centre-of-mass velocity and angular velocity, in the body's own axes, a function of $v$ alone:
    $u_b = R_b\\,\\bar u_b(v)$ with $R_b$ turning at $\\omega_b(v)$ (`body_velocities`) — a
    left-invariant kinetic energy, as of one body on SO(3) or SE(3) (`gm.RigidBody.lagrangian`),
    in a uniform field of gravity, $U = -\\sum_b m_b\\, g\\cdot x_b$ with $x_b$ the centres of
    mass. Kane's equations then read in the body axes, the Newton–Euler equations with no
    derivative of the attitude (`BodyFrameForm`)."""

    @abc.abstractmethod
    def body_velocities(self, v) -> tuple[Float[Array, "b 3"], Float[Array, "b 3"]]:
        """$(\\bar u_b, \\omega_b)$, each in its body's axes, linear in $v$."""

    @abc.abstractmethod
    def body_gravity(self, q) -> Float[Array, "b 3"]:
        """The field $g$ in each body's axes, $R_b^\\top g$ (`potential` is its potential)."""


class _BodyFrameInChart(_BodiesInChart, AbstractBodyFrameLagrangian):
    """An `AbstractBodyFrameLagrangian` written in a chart (`BodyFrameForm.pull`): the chart's
    velocity is the body velocity, so the velocities in the body's axes are the Lagrangian's own."""

    def body_velocities(self, v):
        return self.lagrangian.body_velocities(v)

    def body_gravity(self, q):
        return self.lagrangian.body_gravity(self.chart.point_to_second_order(q))


class AbstractExplicitBodiesLagrangian(AbstractBodiesLagrangian):
    """A bodies Lagrangian that knows its partial velocities $B_b = \\partial u_b/\\partial v$,
    $W_b = \\partial\\omega_b/\\partial v$ (`partial_velocities`) and their rates along the motion
    at fixed $v$, $\\dot B_b v$, $\\dot W_b v$ (`velocity_rates`), in closed form, in a uniform field
    of gravity $g$ (`gravity`; `potential` must be its, $U = -\\sum_b m_b\\, g\\cdot x_b$): Kane's
    equations then take no derivative at all (`ExplicitBodiesForm`), e.g. a rolling body
    (`gm.RollingBody`), whose height couples its attitude into $u$."""

    @abc.abstractmethod
    def partial_velocities(self, q) -> tuple[Float[Array, "b 3 n"], Float[Array, "b 3 n"]]:
        """$(B_b, W_b)$ at `q`: $u_b = B_b v$, $\\omega_b = W_b v$."""

    @abc.abstractmethod
    def velocity_rates(self, q, v) -> tuple[Float[Array, "b 3"], Float[Array, "b 3"]]:
        """$(\\dot B_b v, \\dot W_b v)$: the rates of $u_b$, $\\omega_b$ along the motion through
        $(q, v)$ with $\\dot v = 0$."""

    @abc.abstractmethod
    def gravity(self) -> Float[Array, "3"]:
        """The uniform field $g$ in space (`potential` is its potential)."""


class _ExplicitInChart(_BodiesInChart, AbstractExplicitBodiesLagrangian):
    """An `AbstractExplicitBodiesLagrangian` written in a chart (`ExplicitBodiesForm.pull`) whose
    velocity is the manifold's (a centred chart): its closed forms, read at the chart's point."""

    def partial_velocities(self, q):
        return self.lagrangian.partial_velocities(self.chart.point_to_second_order(q))

    def velocity_rates(self, q, v):
        return self.lagrangian.velocity_rates(self.chart.point_to_second_order(q), v)

    def gravity(self):
        return self.lagrangian.gravity()


class AbstractForm(eqx.Module):
    """How $M$ and $Q$ of a Lagrangian are found: chosen once, by the Lagrangian's type, when
    the system is built (`LagrangianSystem.form`)."""

    @abc.abstractmethod
    def pull(self, lagrangian, chart: AbstractChart, time_dependent: bool):
        """`lagrangian` written in `chart` (`LagrangianSystem.in_chart`)."""

    @abc.abstractmethod
    def force(self, system: "LagrangianSystem", t, q, v) -> Float[Array, " n"]:
        """$Q$ with $M a_U = Q$, $F^e$ included."""

    @abc.abstractmethod
    def mass_times(self, system: "LagrangianSystem", t, q, v, seeds: Float[Array, "s n"] | None):
        """$M e$ for each row $e$ of `seeds`, `(s, n)`; $M$ itself for `None` (the identity)."""


class AutodiffForm(AbstractForm):
    """Any $L$: $M = \\partial^2 L/\\partial v^2$ by JVPs of $\\partial L/\\partial v$ and $Q$ by
    the coordinate form (2.10) with Hamel's term of the velocity frame (`coordinate_force`)."""

    def pull(self, lagrangian, chart, time_dependent):
        return chart.pull(lagrangian, time_dependent)

    def force(self, system, t, q, v):
        return coordinate_force(system, t, q, v)

    def mass_times(self, system, t, q, v, seeds):
        seeds = jnp.eye(v.shape[0], dtype=v.dtype) if seeds is None else seeds
        return mass_times(system, t, q, v, seeds)


class BodiesForm(AbstractForm):
    """An `AbstractBodiesLagrangian`: Kane's equations [KaneLevinson1985],
    $M = \\sum_b m_b B_b^\\top B_b + W_b^\\top I_b W_b$ and
    $Q = -\\sum_b m_b B_b^\\top \\dot B_b v + W_b^\\top(I_b \\dot W_b v + \\omega_b \\times I_b\\omega_b)
    - \\partial U/\\partial q + F^e$ with $u_b = B_b v$, $\\omega_b = W_b v$ and $\\dot B_b v$,
    $\\dot W_b v$ their rates along the motion at fixed $v$ (one JVP)."""

    def pull(self, lagrangian, chart, time_dependent):
        return _BodiesInChart(lagrangian, chart)

    @staticmethod
    def _partial_velocities(L, q, v):
        (u, w), (u_dot, w_dot) = jax.jvp(lambda x: L.velocities(x, v), (q,), (v,))
        B, W = jax.jacfwd(lambda v_: L.velocities(q, v_))(v)  # (b, 3, n): ∂u/∂v, ∂ω/∂v
        return u, w, u_dot, w_dot, B, W

    def force(self, system, t, q, v):
        L = system.lagrangian
        u, w, u_dot, w_dot, B, W = self._partial_velocities(L, q, v)
        m, I = L.masses(), L.inertias()
        Iw = jnp.einsum("bij,bj->bi", I, w)
        # the inertia forces -m u̇ and torques -(I ω̇ + ω × I ω) at a = 0, on the partial velocities
        linear = jnp.einsum("b,bin,bi->n", m, B, u_dot)
        angular = jnp.einsum("bin,bi->n", W, jnp.einsum("bij,bj->bi", I, w_dot) + jnp.cross(w, Iw))
        return -linear - angular - jax.grad(L.potential)(q) + system.external_force(t, q, v)

    def mass_times(self, system, t, q, v, seeds):
        L = system.lagrangian
        return _kane_mass(L, *jax.jacfwd(lambda v_: L.velocities(q, v_))(v), seeds)


class BodyFrameForm(AbstractForm):
    """An `AbstractBodyFrameLagrangian`: Kane's equations in the bodies' axes
    [KaneLevinson1985], with $\\bar u_b = \\bar B_b v$, $\\omega_b = W_b v$ (constant
    $\\bar B_b$, $W_b$): $M = \\sum_b m_b \\bar B_b^\\top \\bar B_b + W_b^\\top I_b W_b$ and
    $Q = -\\sum_b m_b \\bar B_b^\\top(\\omega_b\\times\\bar u_b) + W_b^\\top(\\omega_b \\times
    I_b\\omega_b) - \\partial U/\\partial q + F^e$: a body's centre of mass accelerates by
    $R_b(\\dot{\\bar u}_b + \\omega_b\\times\\bar u_b)$, and $\\dot{\\bar u}_b = 0$ at $a = 0$;
    gravity's part of $-\\partial U/\\partial q$ is its force on the partial velocities,
    $\\sum_b m_b \\bar B_b^\\top R_b^\\top g$ (Kane's generalized active force)."""

    def pull(self, lagrangian, chart, time_dependent):
        return _BodyFrameInChart(lagrangian, chart)

    def force(self, system, t, q, v):
        L = system.lagrangian
        (u, w), transpose = jax.vjp(L.body_velocities, v)  # the transpose of (B̄, W)
        m, I = L.masses(), L.inertias()
        Iw = jnp.einsum("bij,bj->bi", I, w)
        linear = m[:, None] * (jnp.cross(w, u) - L.body_gravity(q))
        (inertia,) = transpose((linear.astype(u.dtype), jnp.cross(w, Iw).astype(w.dtype)))
        return -inertia + system.external_force(t, q, v)

    def mass_times(self, system, t, q, v, seeds):
        L = system.lagrangian
        return _kane_mass(L, *jax.jacfwd(L.body_velocities)(v), seeds)


class ExplicitBodiesForm(AbstractForm):
    """An `AbstractExplicitBodiesLagrangian`: `BodiesForm`'s Kane equations [KaneLevinson1985]
    from the Lagrangian's closed forms, $M = \\sum_b m_b B_b^\\top B_b + W_b^\\top I_b W_b$ and
    $Q = -\\sum_b m_b B_b^\\top(\\dot B_b v - g) + W_b^\\top(I_b \\dot W_b v + \\omega_b\\times
    I_b\\omega_b) + F^e$, gravity's part of $-\\partial U/\\partial q$ being its force on the partial
    velocities (Kane's generalized active force)."""

    def pull(self, lagrangian, chart, time_dependent):
        return _ExplicitInChart(lagrangian, chart)

    def force(self, system, t, q, v):
        L = system.lagrangian
        B, W = L.partial_velocities(q)
        u_dot, w_dot = L.velocity_rates(q, v)
        m, I = L.masses(), L.inertias()
        w = W @ v
        Iw = jnp.einsum("bij,bj->bi", I, w)
        linear = m[:, None] * (u_dot - L.gravity()[None])
        angular = jnp.einsum("bij,bj->bi", I, w_dot) + jnp.cross(w, Iw)
        inertia = jnp.einsum("bin,bi->n", B, linear) + jnp.einsum("bin,bi->n", W, angular)
        return -inertia + system.external_force(t, q, v)

    def mass_times(self, system, t, q, v, seeds):
        L = system.lagrangian
        return _kane_mass(L, *L.partial_velocities(q), seeds)


def _kane_mass(L: AbstractBodiesLagrangian, B, W, seeds):
    """$M = \\sum_b m_b B_b^\\top B_b + W_b^\\top I_b W_b$ from the partial velocities `B`, `W`
    `(b, 3, n)` (times `seeds`, `BodiesForm.mass_times`)."""
    M = jnp.einsum("b,bin,bim->nm", L.masses(), B, B)
    M = M + jnp.einsum("bin,bij,bjm->nm", W, L.inertias(), W)
    return M if seeds is None else seeds @ M


def form_of(lagrangian) -> AbstractForm:
    """The form of `lagrangian` (chosen once, `LagrangianSystem`)."""
    if isinstance(lagrangian, AbstractBodyFrameLagrangian):
        return BodyFrameForm()
    if isinstance(lagrangian, AbstractExplicitBodiesLagrangian):
        return ExplicitBodiesForm()
    return BodiesForm() if isinstance(lagrangian, AbstractBodiesLagrangian) else AutodiffForm()


def check_system(system) -> None:
    """A `TypeError` unless `system` is a `LagrangianSystem` (before tracing)."""
    if not isinstance(system, LagrangianSystem):
        raise TypeError(
            f"system must be a gm.LagrangianSystem(lagrangian, ...), got {type(system).__name__}."
        )


class LagrangianSystem(eqx.Module):
    """A mechanical system $(Q, L, F^e, \\mathcal{C}, \\mathcal{W}, F^0)$ of thesis ch. 3 and §5.2.

    **Arguments:**

    - `lagrangian`: $L$ `(q, v) -> scalar` (or `(t, q, v)` with `time_dependent=True`); any
        JAX-traceable callable, e.g. an `eqx.Module` whose fields are parameters.
    - `force`: external force $F^e$ `(q, v) -> (n,)` covector, a horizontal 1-form; `None` for none.
    - `constraint`: a `Constraint`, `HolonomicConstraint`, `LinearConstraint` or a stack of them.
    - `work_space`: a `Subspace` $\\mathcal{W}$ on which the constraint force does no work;
        `None` means $\\mathcal{W} = \\mathcal{D}$ (ideal constraints, Četaev).
    - `known_work`: $F^0$ `(q, v) -> (n,)`, a covector with $F^c(u) = F^0(u)$ for $u \\in \\mathcal{W}$
        (non-ideal constraints with known work, (5.41)–(5.44)).
    - `manifold`: the configuration manifold (`gm.Euclidean(n)`, `gm.Circle()`, `gm.SO3()`,
        `gm.SE3()`, `gm.SE2()`, `gm.Product(...)`); `None` is `gm.Euclidean()`, $\\mathbb{R}^n$
        with $n$ from the state.
    - `time_dependent`: if `True`, every user function above takes `t` as its first argument.
    - `contact`: a unilateral contact that `constraint` holds as bilateral (`gm.RollingBody`'s
        plane): `simulate` stops a trajectory where its normal force changes sign or its contact
        point becomes undefined (`gm.Failure.lift_off`, `contact_undefined`); `None` for none.
    """

    lagrangian: Callable
    force: Callable | None
    constraint: AbstractConstraint | None
    work_space: Subspace | None
    known_work: Callable | None
    manifold: AbstractManifold
    time_dependent: bool = eqx.field(static=True)
    form: AbstractForm
    contact: AbstractContact | None

    def __init__(
        self,
        lagrangian: Callable,
        force: Callable | None = None,
        constraint: AbstractConstraint | None = None,
        work_space: Subspace | None = None,
        known_work: Callable | None = None,
        manifold: AbstractManifold | None = None,
        time_dependent: bool = False,
        contact: AbstractContact | None = None,
    ):
        if not isinstance(time_dependent, bool):
            raise TypeError(f"time_dependent must be True or False, got {time_dependent!r}.")
        self.lagrangian = lagrangian
        self.force = force
        # the user's constraint and work-space functions are read in the (t, q, v) form from here on
        if isinstance(constraint, AbstractConstraint):
            constraint = constraint.bind_time(time_dependent)
        if isinstance(work_space, Subspace):
            work_space = work_space.bind_time(time_dependent)
        self.constraint = constraint
        self.work_space = work_space
        self.known_work = known_work
        self.manifold = Euclidean() if manifold is None else manifold
        self.form = form_of(lagrangian)
        self.time_dependent = time_dependent
        self.contact = contact

    def __check_init__(self):
        if not callable(self.lagrangian):
            raise TypeError("lagrangian must be a callable L(q, v) (or L(t, q, v)).")
        if self.time_dependent and isinstance(self.lagrangian, AbstractBodiesLagrangian):
            raise TypeError(
                "a bodies Lagrangian (gm.RigidBody.lagrangian, gm.RollingBody) is L(q, v); with "
                "time_dependent=True every user function takes t first: give the time-dependent "
                "parts as functions of (t, q, v) in a Lagrangian of your own."
            )
        if self.constraint is not None and not isinstance(self.constraint, AbstractConstraint):
            raise TypeError(
                "constraint must be a gm.Constraint, gm.HolonomicConstraint, gm.LinearConstraint or "
                f"gm.Constraint.stack([...]); got {type(self.constraint).__name__}."
            )
        if self.work_space is not None:
            if not isinstance(self.work_space, Subspace):
                raise TypeError("work_space must be a gm.Subspace(basis=...) or gm.Subspace(annihilator=...).")
            if self.constraint is None:
                raise ValueError("work_space is given but there is no constraint: W only matters with constraints.")
        if self.known_work is not None and self.constraint is None:
            raise ValueError("known_work is given but there is no constraint to do that work.")
        for name in ("force", "known_work"):
            f = getattr(self, name)
            if f is not None and not callable(f):
                raise TypeError(f"{name} must be a callable returning an (n,) covector.")
        if not isinstance(self.manifold, AbstractManifold):
            raise TypeError(
                "manifold must be a gm.Euclidean(n), gm.Circle(), gm.SO3(), gm.SE3(), gm.SE2() or "
                "gm.Product(...)."
            )
        if self.contact is not None:
            if not isinstance(self.contact, AbstractContact):
                raise TypeError(
                    "contact must be a gm.AbstractContact (e.g. gm.RollingBody(...).system() "
                    f"builds its plane's), got {type(self.contact).__name__}."
                )
            if self.constraint is None:
                raise ValueError("contact is given but there is no constraint holding it.")
        for name in ("lagrangian", "force", "constraint", "work_space", "known_work", "contact"):
            # compiled programs are cached by the functions (their arrays aside): they must hash
            try:
                hash(eqx.filter(getattr(self, name), eqx.is_array, inverse=True))
            except TypeError as e:
                raise TypeError(
                    f"{name} must be hashable apart from its arrays (geomech caches compiled "
                    f"programs by it): {e}. Use a function, or an equinox.Module (a dataclass "
                    "with eq=True has no hash: add frozen=True or eq=False)."
                ) from None

    # -- the user's functions, called uniformly as f(t, q, v) ------------------------------------

    def in_tqv_form(self, fn: Callable) -> TimeForm:
        """A user function written in this system's convention, as `f(t, ...)`."""
        return TimeForm(fn, self.time_dependent)

    def L(self, t, q, v) -> Float[Array, ""]:
        """$L(t, q, v)$ (the `t` is ignored unless `time_dependent`)."""
        return self.in_tqv_form(self.lagrangian)(t, q, v)

    def external_force(self, t, q, v) -> Float[Array, " n"]:
        """$F^e(t, q, v)$, zero if no force was given."""
        if self.force is None:
            return jnp.zeros_like(v)
        return jnp.asarray(self.in_tqv_form(self.force)(t, q, v))

    def known_work_force(self, t, q, v) -> Float[Array, " n"]:
        """$F^0(t, q, v)$ of §5.2, zero for ideal constraints."""
        if self.known_work is None:
            return jnp.zeros_like(v)
        return jnp.asarray(self.in_tqv_form(self.known_work)(t, q, v))

    def localized(self, state: State) -> tuple["LagrangianSystem", State]:
        """This system in the chart centred at `state.q` and the state there (docs/lie_groups.md):
        itself on coordinate manifolds (ℝⁿ, S¹), where the chart is the identity; on a group the
        system in the body frame at $\\psi = 0$ (`in_chart`)."""
        chart = self.manifold.chart(state.q)
        return chart.system(self), State(chart.origin, state.v)

    def in_chart(self, chart: AbstractChart) -> "LagrangianSystem":
        """This system written in `chart` (`AbstractChart.system`): every user function read at
        the chart's point, $\\ell(x, v) = L(\\mathrm{point}(x), v)$ and alike, on the chart's
        `frame` (whose bracket gives the Hamel term of `coordinate_force`)."""
        td = self.time_dependent
        local = lambda f: None if f is None else chart.pull(f, td)
        return LagrangianSystem(
            self.form.pull(self.lagrangian, chart, td),
            force=local(self.force),
            constraint=None if self.constraint is None else self.constraint.localized(chart),
            work_space=None if self.work_space is None else self.work_space.localized(chart),
            known_work=local(self.known_work),
            manifold=chart.frame,
            time_dependent=td,
        )

    def dim(self, state: State) -> int:
        return state.v.shape[-1]

    def check_shapes(self, state: State, t: RealScalarLike = 0.0) -> int:
        """Check the point against the manifold and the shapes of $L$, $F^e$, $\\phi$,
        $\\mathcal{W}$, $F^0$ against `state` (in the chart centred at its point); return $k$.

        Raises `ValueError` (before any tracing) with a message naming the mismatch.
        """
        if not isinstance(state, State):
            raise TypeError(f"expected a gm.State(q, v), got {type(state).__name__}.")
        check_time(t, "t")
        self.manifold.check(state.q)
        if state.v.shape != (self.manifold.dim or state.v.shape[0],):
            raise ValueError(
                f"v has shape {state.v.shape} but the manifold {self.manifold} has dimension "
                f"{self.manifold.dim}: pass v of shape ({self.manifold.dim},)."
            )
        key = _shapes_key(self, state)
        if key is not None and key in _CHECKED_SHAPES:
            return _CHECKED_SHAPES[key]
        local, at = self.localized(state)
        k = local._function_shapes(at, t)
        if key is not None:
            if len(_CHECKED_SHAPES) >= _CHECKED_SHAPES_MAX:
                _CHECKED_SHAPES.pop(next(iter(_CHECKED_SHAPES), None), None)
            _CHECKED_SHAPES[key] = k
        return k

    def _function_shapes(self, state: State, t) -> int:
        """The shape checks of `check_shapes` in the chart (coordinates `state.q`)."""
        n = state.q.shape[0]
        sq = jax.ShapeDtypeStruct((n,), state.q.dtype)
        st = jax.ShapeDtypeStruct((), state.q.dtype)

        def shape_of(f, name, *, constant_allowed=True):
            """The shape of `f`'s values, after checking that they are real floating-point numbers
            (and, unless `constant_allowed`, depend on the arguments)."""
            try:
                closed, out = jax.make_jaxpr(f, return_shape=True)(st, sq, sq)
            except (TypeError, ValueError, IndexError) as e:
                raise ValueError(
                    f"{name} failed on a state with n = {n} coordinates: {e}{self._signature_hint(e)}"
                ) from e
            dtype = jnp.dtype(out.dtype)
            if not jnp.issubdtype(dtype, jnp.floating):
                raise TypeError(
                    f"{name} returns values of dtype {dtype}: it must return real floating-point "
                    "values (write 1.0, not 1; no complex numbers, no comparisons as values), "
                    "e.g. by computing from q and v, which are floating point."
                )
            if not constant_allowed and not _depends_on_arguments(closed.jaxpr):
                raise ValueError(
                    f"{name} returns a constant that does not depend on t, q or v: give a function "
                    "of the state (e.g. lambda q, v: 0.5 * v @ v for a Lagrangian)."
                )
            return out.shape

        if shape_of(self.L, "the Lagrangian", constant_allowed=False) != ():
            raise ValueError(f"the Lagrangian must return a scalar, got shape {shape_of(self.L, 'L')}.")
        for f, name in ((self.external_force, "force"), (self.known_work_force, "known_work")):
            s = shape_of(f, name)
            if s != (n,):
                raise ValueError(f"{name} must return a covector of shape ({n},), got {s}.")
        if self.constraint is None:
            return 0
        k_shape = shape_of(self.constraint.residual, "the constraint", constant_allowed=False)
        k = k_shape[0]
        if not 1 <= k <= n - 1:
            raise ValueError(
                f"{k} constraints on {n} coordinates: need 1 <= k <= n - 1 independent constraints."
            )
        if self.work_space is not None:
            ws = self.work_space
            if ws.annihilator is not None:
                s = shape_of(ws.annihilator_matrix, "work_space")
                want, what = (k, n), "annihilator"
            else:
                s = shape_of(ws.basis_matrix, "work_space")
                want, what = (n, n - k), "basis"
            if s != want:
                raise ValueError(
                    f"work_space {what} has shape {s} but with n = {n} coordinates and k = {k} "
                    f"constraints it must be {want} (dim W = dim D = n - k, condition (3.19))."
                )
        return k

    def _signature_hint(self, error: Exception) -> str:
        """For a user function called with the wrong number of arguments: which signature the
        system expects (`time_dependent`)."""
        if not isinstance(error, TypeError) or "argument" not in str(error):
            return ""
        if self.time_dependent:
            return (
                " (this system has time_dependent=True: every user function takes (t, q, v), "
                "a constraint's h or A_of_q (t, q))"
            )
        return (
            " (user functions take (q, v), a constraint's h or A_of_q (q); for functions of "
            "(t, q, v) pass time_dependent=True to gm.LagrangianSystem)"
        )

    def check_state(self, state: State, t: RealScalarLike = 0.0) -> bool:
        """`check_shapes` for one state or a batch with one leading axis `B`; returns whether it
        is batched."""
        if not isinstance(state, State):
            raise TypeError(f"expected a gm.State(q, v), got {type(state).__name__}.")
        if state.v.ndim not in (1, 2):
            what = f"q of shape {state.q.shape}" if hasattr(state.q, "shape") else "a point q"
            raise ValueError(
                f"the state has {what} and v of shape {state.v.shape}: give one state, q of shape "
                "(n,) (or one point of the manifold), or a batch with a single leading axis, (B, n)."
            )
        batched = state.v.ndim == 2
        if batched and state.v.shape[0] == 0:
            raise ValueError("the state is an empty batch (B = 0).")
        self.check_shapes(jax.tree_util.tree_map(lambda x: x[0], state) if batched else state, t)
        return batched

    # -- thesis objects -------------------------------------------------------------------------

    def mass_matrix(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, "n n"]:
        """$M = \\partial^2 L / \\partial v \\partial v$ (thesis §3.1)."""
        v = state.v
        return mass_times(self, t, state.q, v, jnp.eye(v.shape[0], dtype=v.dtype)).T

    def momentum(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, " n"]:
        """$\\partial L / \\partial v$, the fibre part of the Legendre map."""
        return jax.grad(self.L, argnums=2)(t, state.q, state.v)

    def legendre(self, state: State, t: RealScalarLike = 0.0) -> tuple[Float[Array, " n"], Float[Array, " n"]]:
        """The Legendre transform $FL(q, v) = (q, \\partial L/\\partial v)$ (2.3)."""
        return state.q, self.momentum(state, t)

    def energy(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, ""]:
        """$E_L = \\partial L/\\partial v \\cdot v - L$ (2.7), with $\\partial L/\\partial v \\cdot v$ the
        derivative of $L$ along the fibre direction $v$: one forward pass, no reverse pass (the
        diagnostics of every saved state of `simulate` compile 3x faster for a large $L$)."""
        L, dL_v = jax.jvp(lambda v: self.L(t, state.q, v), (state.v,), (state.v,))
        return dL_v - L

    def lagrangian_two_form(self, state: State, t: RealScalarLike = 0.0) -> TwoForm:
        """$\\omega_L$ in the chart of $TQ$ (2.5): $\\Omega = [[B - B^\\top, -M], [M, 0]]$."""
        dLdv = jax.grad(self.L, argnums=2)
        B = jax.jacfwd(dLdv, argnums=1)(t, state.q, state.v).T  # B_ij = ∂²L/∂q^i∂v^j
        M = self.mass_matrix(state, t)
        Z = jnp.zeros_like(M)
        return TwoForm(jnp.block([[B - B.T, -M], [M, Z]]))

    def generalized_force(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, " n"]:
        """$Q$ with $M a_U = Q$: $\\partial L/\\partial q - (\\partial^2 L/\\partial v \\partial q) v
        - \\partial_t \\partial L/\\partial v + F^e$ (the coordinate form (2.10) of (2.9))."""
        local, at = self.localized(state)  # on a group: Hamel's form in the body frame
        return coordinate_force(local, jnp.asarray(t, at.v.dtype), at.q, at.v)

    def energy_differential(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, " two_n"]:
        """$dE_L$ as a 1-form on $TQ$ ($2n$ components)."""
        return jnp.concatenate(jax.grad(lambda q, v: self.energy(State(q, v), t), argnums=(0, 1))(state.q, state.v))

    def unconstrained_field(self, state: State, t: RealScalarLike = 0.0, *, invariant: bool = False) -> TangentVector:
        """$X_U$ with $\\omega_L(X_U, \\cdot) = -dE_L + F^e$ (2.9), (3.4).

        `invariant=False` (default) solves $M a = Q$; `invariant=True` solves the $2n$ system with
        $\\omega_L$ itself. For a time-dependent $L$ the invariant route adds the horizontal
        1-form $-\\partial_t(\\partial L/\\partial v)$ to the right-hand side (Observation 1).
        """
        q, v = state.q, state.v
        if not invariant:
            a = jnp.linalg.solve(self.mass_matrix(state, t), self.generalized_force(state, t))
            return TangentVector(v, a)
        t = jnp.asarray(t, q.dtype)
        dLdv_t = jax.jacfwd(jax.grad(self.L, argnums=2), argnums=0)  # ∂_t (∂L/∂v)
        horizontal = self.external_force(t, q, v) - dLdv_t(t, q, v)
        alpha = -self.energy_differential(state, t) + jnp.concatenate([horizontal, jnp.zeros_like(v)])
        return self.lagrangian_two_form(state, t).sharp(alpha)

    def constraint_residual(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, " k"]:
        """$\\phi(t, q, v)$ (empty if unconstrained)."""
        if self.constraint is None:
            return jnp.zeros((0,), state.v.dtype)
        local, at = self.localized(state)
        return local.constraint.residual(t, at.q, at.v)

    def position_residual(self, state: State, t: RealScalarLike = 0.0) -> Float[Array, " m"]:
        """$h(t, q)$ of the holonomic constraints (empty if there are none)."""
        if self.constraint is None:
            return jnp.zeros((0,), state.v.dtype)
        local, at = self.localized(state)
        return local.constraint.position_residual(t, at.q)


# -- the coordinate form (2.10): the one derivation of M and Q, shared with `assemble` ------------


def mass_times(system: LagrangianSystem, t, q, v, seeds: Float[Array, "s n"]) -> Float[Array, "s n"]:
    """$M e$ for each row $e$ of `seeds`, $M = \\partial^2 L/\\partial v^2$ (thesis §3.1): JVPs of
    $\\partial L/\\partial v$ along fibre directions (the identity gives $M$, rows of colour seeds
    a compressed $M$)."""
    along = lambda e: jax.jvp(lambda v_: jax.grad(system.L, argnums=2)(t, q, v_), (v,), (e,))[1]
    return jax.vmap(along)(seeds)


def coordinate_force(system: LagrangianSystem, t, q, v) -> Float[Array, " n"]:
    """$Q = \\partial L/\\partial q - \\frac{d}{dt}\\big|_v \\partial L/\\partial v +
    \\mathrm{ad}_v^*\\,\\partial L/\\partial v + F^e$ with $M a_U = Q$: the coordinate form (2.10)
    of (2.9), plus Hamel's term of the velocity frame, zero for coordinate velocities and
    $\\mathrm{ad}_v^\\top p$ for the body velocities of a system written in the chart centred
    at a point of a group ([Bloch2003, §5.2], `_geometry._centred`)."""
    dL = jax.grad(system.L, argnums=(1, 2))
    # d/dt|_v ∂L/∂v along (t, q) -> (t + s, q + s v): the mixed and ∂_t terms of (2.10) at once, a
    # JVP in (t, q) at fixed v, so that a second v-derivative that is not finite (L not twice
    # differentiable in v) shows in M only, not in Q
    (Lq, p), (_, mixed) = jax.jvp(lambda t_, q_: dL(t_, q_, v), (t, q), (jnp.ones_like(t), v))
    hamel = jax.linear_transpose(lambda w: system.manifold.bracket(v, w), v)(p)[0]  # ad_vᵀ p
    return Lq - mixed + hamel + system.external_force(t, q, v)
