"""Unilateral contacts that a model holds as bilateral constraints (a body rolling on a plane).

Rolling without slipping keeps the body on the plane whatever the plane must do for it: the model
is valid only while the plane pushes, a normal force $N > 0$ (else the body lifts off), and while
the point of contact is defined (a thin disk lying flat touches along its whole face). A system
declares such a contact (`LagrangianSystem(contact=...)`; `gm.RollingBody.system()` does); then
`simulate` checks both at the initial state (`gm.Failure.lift_off`, `contact_undefined`, the
condition table in `_checks`) and watches them along the run with a `diffrax.Event`, which stops
a trajectory where one fails, at the time it fails (docs/errors.md).
"""

import abc

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
import numpy as np
import optimistix as optx
from jaxtyping import Array, Bool, Float


class AbstractContact(eqx.Module):
    """A unilateral contact of a system that its constraint holds as bilateral: where it is
    valid, along a run, is for `simulate` to watch (module docstring)."""

    @abc.abstractmethod
    def normal_force(self, t, state, acceleration) -> tuple[Float[Array, ""], Float[Array, ""]]:
        """`(N, scale)`: the normal force the plane exerts at `state` when the body accelerates
        with `acceleration` (positive: the plane pushes) and a force of the problem's own size
        (the same in any units) against which $N$ is compared."""

    @abc.abstractmethod
    def margin(self, t, state) -> Float[Array, ""]:
        """A unit-free measure of how well the contact point is defined, at most 1: it is
        defined where the margin exceeds `contact_tolerance` (it may change sign, as the lean of
        a disk in Euler angles does when it passes flat)."""

    @abc.abstractmethod
    def same_contact(self, y0, y1) -> Bool[Array, ""]:
        """Whether a step from `y0` to `y1` keeps touching near the same point of the body (a
        step across which the contact point jumps, a disk passing through flat, is refused and
        retried smaller, so that the `margin` event finds the time it lies flat)."""


def contact_tolerance(dtype) -> float:
    """The margin below which the contact point is undefined: $\\sqrt{\\varepsilon}$ of `dtype`
    (1.5e-8 in float64, 3.5e-4 in float32; a disk within that angle of flat)."""
    return float(np.sqrt(np.finfo(dtype).eps))


def relative_normal_force(contact: AbstractContact, t, state, acceleration) -> Float[Array, ""]:
    """$N$ / scale (0 where both are zero: a body at rest without gravity)."""
    N, scale = contact.normal_force(t, state, acceleration)
    return jnp.where(scale > 0, N / jnp.where(scale > 0, scale, 1.0), N)


class ContactEvents(eqx.Module):
    """The two event functions of `simulate` for a system with a contact (`diffrax.Event`, both
    falling through zero, times found by Newton's method on the dense output): the relative
    normal force (lift-off) and the margin less its tolerance (the contact point undefined).
    `field` is the right-hand side $(v, a_R)$ (`ConstrainedField`)."""

    field: eqx.Module
    contact: AbstractContact

    def lift_off(self, t, y, args, **kwargs):
        a = self.field(t, y, args).v
        return relative_normal_force(self.contact, t, y, a)

    def undefined(self, t, y, args, **kwargs):
        return self.contact.margin(t, y) - contact_tolerance(y.v.dtype)

    def event(self, dtype) -> diffrax.Event:
        tol = float(np.finfo(dtype).eps) ** 0.75  # the root's time, to about 1e-12 in float64
        return diffrax.Event(
            (self.lift_off, self.undefined),
            root_finder=_TriggeredBisection(optx.Bisection(rtol=tol, atol=tol, flip=True)),
            direction=(False, False),
        )


def _triggered(fn):
    """diffrax's root function of a tuple of events (each value zeroed but the triggered one's)
    as a scalar: their sum."""
    return lambda y, args: (lambda f, aux: (sum(jtu.tree_leaves(f)), aux))(*fn(y, args))


class _TriggeredBisection(optx.AbstractRootFinder):
    """`optx.Bisection` on the event that fired, for a tuple of events (`optx.Bisection` takes a
    scalar function; Newton's method would differentiate the right-hand side, doubling the
    compile time of a rolling body)."""

    bisection: optx.Bisection
    norm = jnp.abs

    @property
    def rtol(self):
        return self.bisection.rtol

    @property
    def atol(self):
        return self.bisection.atol

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        f_struct = jax.ShapeDtypeStruct((), jtu.tree_leaves(f_struct)[0].dtype)
        return self.bisection.init(_triggered(fn), y, args, options, f_struct, aux_struct, tags)

    def step(self, fn, y, args, options, state, tags):
        return self.bisection.step(_triggered(fn), y, args, options, state, tags)

    def terminate(self, fn, y, args, options, state, tags):
        return self.bisection.terminate(_triggered(fn), y, args, options, state, tags)

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return self.bisection.postprocess(
            _triggered(fn), y, aux, args, options, state, tags, result
        )
