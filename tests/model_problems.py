"""The models of `geomech.models` as `reference.Problem`s: each model's own user functions (its
Lagrangian, constraint functions and work space), written out as explicit `(t, q, v)` callables
for the independent reference of `reference.py`. A model without an entry here makes
`problem(name, model)` fail, so a new model cannot skip the comparison."""

import jax.numpy as jnp
import reference as ref


def _autonomous(f):
    return lambda t, q, v: f(q, v)


def _rows(A):
    """$\\phi = A(q) v$ from the function $A(q)$ given to `gm.LinearConstraint`."""
    return ref.Velocity(lambda t, q, v: jnp.atleast_2d(A(q)) @ v)


def _holonomic(h):
    return ref.Position(lambda t, q: h(q))


def _pendulum(m):
    row = _holonomic(m.h) if m.form == "holonomic" else _rows(m.row)
    return ref.Problem(_autonomous(m.lagrangian), (row,))


def _chain(m):
    return ref.Problem(_autonomous(m.lagrangian), (_holonomic(m.h),))


_PROBLEMS = {
    "pendulum": _pendulum,
    "pendulum_polar": _chain,  # L(q, v) and one holonomic h(q), like the chain
    "double_pendulum": lambda m: _chain(m.chain()),
    "chain": _chain,
    "spherical_pendulum": _chain,
    "bead_on_wire": lambda m: ref.Problem(m.lagrangian, (ref.Position(m.h),)),  # (t, q, v), (t, q)
    "pursuit": lambda m: ref.Problem(
        m.lagrangian, (ref.Velocity(lambda t, q, v: m.row(t, q) @ v),)
    ),
    "sleigh": lambda m: ref.Problem(_autonomous(m.lagrangian), (_rows(m.row),)),
    "rolling_disk": lambda m: ref.Problem(_autonomous(m.lagrangian), (_rows(m.rows),)),
    "rolling_hoop": lambda m: ref.Problem(_autonomous(m.lagrangian), (_rows(m.row),)),
    "thesis_example2": lambda m: ref.Problem(
        _autonomous(m.lagrangian),
        (_rows(m.constraint_row),),
        annihilator=_autonomous(m.W_annihilator),
    ),
    "appell_hamel": lambda m: ref.Problem(
        _autonomous(m.lagrangian), (ref.Velocity(_autonomous(m.phi)),)
    ),
}

# models with a symmetry of L (a `model.action()`), for gm.NonholonomicMomentum
WITH_ACTION = ("spherical_pendulum", "sleigh", "rolling_disk", "appell_hamel")

# models on Lie groups (a `jaxlie` point, not coordinates): the coordinate reference of
# `reference.py` does not apply; tests/test_rigid_models.py checks each against its own reference
# (and that this list is every model with `point_parameters`)
ON_GROUPS = (
    "free_rigid_body", "heavy_top", "pivoted_top", "suslov", "veselova",
    "chaplygin_sphere", "routh_sphere", "turntable_ball", "rattleback", "rolling_disk_so3",
)  # fmt: skip


def problem(name, model) -> ref.Problem:
    """The reference problem of the registry entry `name` for the instance `model`."""
    if name not in _PROBLEMS:
        raise KeyError(f"model {name!r} has no reference problem in tests/model_problems.py")
    return _PROBLEMS[name](model)
