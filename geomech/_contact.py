"""Unilateral contacts that a model holds as bilateral constraints (a body rolling on a plane).

Rolling without slipping keeps the body on the plane whatever the plane must do for it: the model
is valid only while the plane pushes, a normal force $N > 0$ (else the body lifts off), and while
the point of contact is defined (a thin disk lying flat touches along its whole face). A system
declares such a contact (`LagrangianSystem(contact=...)`; `gm.RollingBody.system()` does); then
`simulate` checks both at the initial state (`gm.Failure.lift_off`, `contact_undefined`, the
condition table in `_checks`) and watches them along the run, stopping a trajectory where one
fails, at the time it fails (docs/errors.md): the margin with a `diffrax.Event`, the normal force
at the end of each step (`ContactWatch.holds`: a step ending where the plane would pull is
refused and retried smaller, until the trajectory stops at the last time it still pushes).
"""

import abc

import diffrax
import equinox as eqx
import jax.numpy as jnp
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


class ContactWatch(eqx.Module):
    """How `simulate` watches a contact along a run. `field` is the right-hand side $(v, a_R)$
    (`ConstrainedField`).

    - `holds(t, y, args, rate)`: whether the plane pushes at `y` (relative normal force
        $> 0$), asked by the guarded solver at the end of every step (`_engine.GuardedSolver`):
        a step that ends where it would pull is refused and retried smaller, so the trajectory
        stops within $\\varepsilon^{3/4}(1 + |t|)$ (the margin event's tolerance) before the time
        $N$ falls through zero; a fixed-step integrator at the start of the step across it.
        Asked there, on the step's own state, the normal force needs $a_R$ at the step's end,
        which an FSAL Runge–Kutta method has already computed (its last stage, `rate`): then it
        costs no evaluation of the right-hand side; other integrators (and a projected state)
        evaluate it once more per step (`rate=None`), one more copy of it in the compiled
        program (an event function is compiled three times: at `t0`, after each step and in
        its root finder).
    - `event(dtype)`: the `diffrax.Event` of the margin less its tolerance (the contact point
        undefined), falling through zero, its time found by bisection on the dense output.
    """

    field: eqx.Module
    contact: AbstractContact

    def holds(self, t, y, args, rate=None) -> Bool[Array, ""]:
        a = (self.field(t, y, args) if rate is None else rate).v
        # NaN holds: a right-hand side not finite there is the solver's to refuse, not a lift-off
        return ~(relative_normal_force(self.contact, t, y, a) <= 0)

    def undefined(self, t, y, args, **kwargs):
        margin = self.contact.margin(t, y) - contact_tolerance(y.v.dtype)
        # in the dtype of a Python float: diffrax's root finder puts this value in a `lax.cond`
        # beside a literal `0.0`, and a float32 margin under x64 would not match its branch
        return margin.astype(jnp.result_type(float))

    def event(self, dtype) -> diffrax.Event:
        tol = float(np.finfo(dtype).eps) ** 0.75  # the root's time, to about 1e-12 in float64
        return diffrax.Event(
            self.undefined,
            root_finder=optx.Bisection(rtol=tol, atol=tol, flip=True),
            direction=False,
        )
