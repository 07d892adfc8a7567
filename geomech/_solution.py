"""`Solution`, the result of `simulate` (and the `solution` of `simulate_vakonomic`): the saved
states of an engine result (`_engine.py`) with per-trajectory results, failures and diagnostics.
"""

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._bundle import State
from ._checks import Failure
from ._engine import RawSolution, at_saves, results_where
from ._geometry import AbstractManifold, Euclidean
from ._system import LagrangianSystem


class Diagnostics(eqx.Module):
    """$E_L$, $|\\phi|$ and $|h|$ at one saved state."""

    system: LagrangianSystem

    def __call__(self, t, state: State):
        E = self.system.energy(state, t)
        phi = jnp.linalg.norm(self.system.constraint_residual(state, t))
        h = jnp.linalg.norm(self.system.position_residual(state, t))
        return E, phi, h

    def along(self, ts, states, *, batched: bool):
        """The diagnostics at every saved state (`(T,)` each, `(B, T)` with a batch; NaN where
        the state is not finite, with a zero derivative there: `at_saves`)."""
        return at_saves(self, ts, states, batched=batched)


class Solution(eqx.Module):
    """The result of `simulate`.

    With a batched `y0` (leading axis `B`) every field has the leading axis `B`.

    **Fields:**

    - `ts`: the saved times, `(T,)` (or `(B, T)`).
    - `states`: a `State` with a time axis: `states.q`, `states.v` of shape `(T, n)`
        (or `(B, T, n)`).
    - `result`: `diffrax.RESULTS`, one code per trajectory
        (`sol.result == diffrax.RESULTS.successful`). A trajectory that runs into a
        singularity (a singular configuration, a finite-time blow-up) stops as soon as its
        step size falls to the resolution of $t$, $16\\varepsilon|t|$, instead of spending
        `max_steps`: with `diffrax.RESULTS.nonfinite` if only NaN/inf could be computed there,
        else `diffrax.RESULTS.dt_min_reached`; a fixed-step integrator stops at its first
        non-finite step with `nonfinite`. Saved states after the stop are `inf` (diffrax's
        convention) and `SaveAt(t1=True)` holds the last state reached. Other failures keep
        diffrax's codes (`max_steps_reached`, ...). A trajectory whose initial state fails a
        precondition is not integrated: `diffrax.RESULTS.singular`, and `failure` says which.
    - `failure`: a `gm.Failure` per trajectory, `gm.Failure.successful` unless the initial state
        failed a precondition (`nonfinite_state`, `off_constraint`, `mass_matrix`,
        `admissibility`, `work_space`, `condition_3_19`, `nonfinite_acceleration`, and for
        `simulate_vakonomic` `nonfinite_multipliers`); such a
        trajectory keeps its `y0` at `t0` and `inf` at the later saved times, and `t_final == t0`.
        For a system with a `contact` (a rolling body) also `lift_off` and `contact_undefined`,
        at the start (not integrated, as above) or during the run: then the trajectory stopped
        at `t_final`, the time its normal force fell through zero or its contact point became
        undefined (`result` is `diffrax.RESULTS.event_occurred`; an error if `throw`).
    - `outcome` (a property): both in one `gm.Failure` (which extends `diffrax.RESULTS`):
        `failure` where it is not `successful`, else `result`.
    - `t_final`: the time each trajectory reached, `()` (or `(B,)`): `t1`, or, where it stopped
        early, the time of the last state kept (a failed step does not count; later saved times
        are `inf`); NaN for a trajectory stopped early under `diffrax.BacksolveAdjoint`.
    - `energy`: $E_L$ (2.7) at the saved states, `(T,)`.
    - `constraint_residual`: $|\\phi(t, q, v)|$ (Euclidean norm over the $k$ rows), `(T,)`.
    - `position_residual`: $|h(t, q)|$ of the holonomic parts (zero without them), `(T,)`.
    - `stats`: diffrax's step counts per trajectory (`num_steps`, `num_accepted_steps`,
        `num_rejected_steps`).
    - `manifold`: the system's configuration manifold (what the points `states.q` are points of:
        `manifold.parameters(states.q)` gives their stored parameters).

    With `SaveAt(steps=True)` unused slots are `inf` (diffrax's convention).
    """

    ts: Float[Array, "*B T"]
    states: State
    result: diffrax.RESULTS
    failure: Failure
    t_final: Float[Array, "*B"]
    energy: Float[Array, "*B T"]
    constraint_residual: Float[Array, "*B T"]
    position_residual: Float[Array, "*B T"]
    stats: dict
    manifold: AbstractManifold = Euclidean()

    @property
    def outcome(self) -> Failure:
        """How each trajectory ended, in one enumeration (`gm.Failure` extends
        `diffrax.RESULTS`): `failure` where it is not `successful` (a failed precondition, the end
        of a contact's model), else `result` (`gm.Failure.promote(sol.result)`)."""
        ok = self.failure == Failure.successful  # one per trajectory (`Failure.where` is scalar)
        return jax.tree_util.tree_map(
            lambda a, b: jnp.where(ok, a, b), Failure.promote(self.result), self.failure
        )

    @classmethod
    def from_raw(
        cls,
        system: LagrangianSystem,
        raw: RawSolution,
        *,
        batched: bool,
        throw: bool,
        failure: Failure | None = None,
        skip=None,
    ) -> "Solution":
        """The `Solution` of an engine result whose saved values are `State`s. A trajectory whose
        energy is non-finite at a saved state is not successful (`nonfinite`; an error if
        `throw`); one with a `failure` (not integrated) is `singular`."""
        if failure is None:
            shape = raw.t_final.shape  # Failure.successful for every trajectory
            failure = jax.tree_util.tree_map(
                lambda x: jnp.broadcast_to(x, shape), Failure.successful
            )
        failed = failure != Failure.successful
        if skip is not None:  # the others failed along the run: stopped where they failed
            stopped, failed = failed & ~skip, skip
            if throw:  # on every output a caller may read (an unused check is dropped)
                read = lambda r: (r.ts, r.ys, r.result, r.t_final)
                raw = eqx.tree_at(read, raw, eqx.error_if(read(raw), stopped, STOPPED_MESSAGE))
        raw = eqx.tree_at(
            lambda r: r.result, raw, results_where(failed, diffrax.RESULTS.singular, raw.result)
        )
        E, phi, h = Diagnostics(system).along(raw.ts, raw.ys, batched=batched)
        bad = diffrax.is_okay(raw.result) & jnp.any(
            ~jnp.isfinite(E) & jnp.isfinite(raw.ts), axis=-1
        )
        result = results_where(bad, diffrax.RESULTS.nonfinite, raw.result)
        if throw:  # threaded onto the energy too (a check whose value is unused is dropped)
            result, E = eqx.error_if((result, E), bad, NONFINITE_ENERGY_MESSAGE)
        return cls(
            ts=raw.ts, states=raw.ys, result=result, failure=failure, t_final=raw.t_final, energy=E,
            constraint_residual=phi, position_residual=h, stats=raw.stats,
            manifold=system.manifold,
        )


STOPPED_MESSAGE = (
    "a trajectory of a rolling body was stopped where its model ends: the plane would have to pull "
    "the body down (gm.Failure.lift_off) or the contact point is no longer defined, a disk lying "
    "flat (gm.Failure.contact_undefined). Pass throw=False: sol.failure says which, sol.t_final "
    "when, and the other trajectories run on."
)


NONFINITE_ENERGY_MESSAGE = (
    "the energy E_L = dL/dv . v - L is NaN or inf at a saved state although the state is finite: "
    "the Lagrangian (or its derivative in v) is not finite there. Check L's domain (e.g. sqrt or "
    "log of a negative number, division by zero); with throw=False the trajectory is flagged "
    "result == diffrax.RESULTS.nonfinite."
)
