"""`geomech compare`: every applicable solver at the same states, with the largest disagreement."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomech as gm

from .._dynamics import check_solver, constrained_acceleration
from .._stages import assemble
from ..plot import point_array
from . import _run, _setup
from ._parse import EXIT_FAILED


@eqx.filter_jit
def _accelerations(system, solvers, states, ts):
    """`gm.acceleration` of every solver at each state, from one assembly of the stages per state
    (they do not depend on the solver): one compiled program for all solvers."""

    def at(state, t):
        stages = assemble(system, state, t)
        return {name: constrained_acceleration(stages, s) for name, s in solvers.items()}

    return jax.vmap(at)(states, ts)


def solver_agreement(setup: _setup.Setup, count: int = 32, seed: int = 0, points: int = 50):
    """Every applicable solver at `count` random states on $\\mathcal{C}$ and `points` states along
    one trajectory from the model's initial state.

    **Returns:** `(random, along, t_end)`: per solver, the largest relative disagreement
    $\\max|a - a_{ref}| / (1 + \\max|a_{ref}|)$ with the first solver (Projection) at the random
    states and along the trajectory, and the time the trajectory reached.
    """
    solvers = _setup.solvers(setup)
    random_states = _setup.ensemble(setup, count, seed, scale=0.1)
    sol = _run.simulate_once(
        setup,
        setup.y0,
        gm.Projection(),
        setup.model.t1,
        points=points,
        rtol=1e-8,
        atol=1e-8,
        max_steps=100_000,
    ).sol
    # a failed trajectory is padded with inf: keep the shape (one compilation), reached states only
    q = point_array(sol.states.q)
    reached = np.isfinite(np.asarray(sol.ts)) & np.all(np.isfinite(q), -1)
    idx = np.where(reached, np.arange(points), 0)
    states = jax.tree.map(lambda a, b: jnp.concatenate([a, b[idx]]), random_states, sol.states)
    ts = jnp.concatenate([jnp.full((count,), setup.t0, setup.dtype), sol.ts[idx]])
    for solver in solvers.values():
        check_solver(setup.system, solver)
    out = _accelerations(setup.system, solvers, states, ts)
    acc = {name: np.asarray(out[name]) for name in solvers}  # in the solvers' order
    ref = acc[next(iter(solvers))]
    disagreement = lambda a, r: float(np.max(np.abs(a - r)) / (1.0 + np.max(np.abs(r))))
    random = {k: disagreement(a[:count], ref[:count]) for k, a in acc.items()}
    along = {k: disagreement(a[count:], ref[count:]) for k, a in acc.items()}
    return random, along, float(np.asarray(sol.ts)[reached][-1])


def cmd_compare(args, argv) -> int:
    setup = _setup.build(args.model, args.params)
    if setup.k == 0:
        print(f"{setup.name} has no constraints: every solver is the unconstrained dynamics.")
    random, along, t_end = solver_agreement(setup, args.states, args.seed)
    ref = next(iter(random))
    print(
        f"{setup.name}: max |a - a_{ref}| / (1 + max |a_{ref}|) "
        f"at {args.states} random states on C "
        f"and along one trajectory (t in [{setup.t0:g}, {t_end:g}]), "
        f"{_run.precision_name(setup.dtype)}"
    )
    width = max(len(s) for s in random)
    print(f"  {'solver'.ljust(width)}  {'random states':>14}  {'trajectory':>12}")
    for name in random:
        print(f"  {name.ljust(width)}  {random[name]:14.3e}  {along[name]:12.3e}")
    worst = max(random, key=lambda s: max(random[s], along[s]))
    largest = max(random[worst], along[worst])
    print(f"  largest disagreement: {largest:.3e} ({worst})")
    return 0 if largest <= args.tol else EXIT_FAILED
