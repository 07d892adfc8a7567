"""A model built from the command line and checked at its initial state with `gm.validate`."""

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomech as gm
import geomech.models as gmm

from ._parse import UsageError

_GREEK = {"alpha", "beta", "theta", "phi", "psi", "rho", "omega", "varphi", "chi", "eta"}


def pretty(name: str) -> str:
    """A coordinate name for plots: Greek letters and trailing indices in mathtext."""
    stem = name.rstrip("0123456789")
    index = name[len(stem) :]
    base = f"\\{stem}" if stem in _GREEK else stem
    return f"${base}_{{{index}}}$" if index else f"${base}$"


def fmt_params(params: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in params.items()) or "the default parameters"


def first_line(e: BaseException) -> str:
    for line in str(e).strip().splitlines():
        line = line.strip()
        if line and not line.startswith(("Traceback", "File ")):
            return line
    return type(e).__name__


@dataclasses.dataclass
class Setup:
    """A model with its parameters, system, initial state and what the outputs need to know."""

    name: str
    params: dict
    model: gmm.AbstractModel
    system: gm.LagrangianSystem
    y0: gm.State
    k: int

    @property
    def t0(self) -> float:
        return float(self.model.t0)

    @property
    def n(self) -> int:
        """$\\dim Q$: the components of $v$ (and of $q$ where $q$ is coordinates)."""
        return self.y0.v.shape[-1]

    @property
    def dtype(self):
        return self.y0.v.dtype

    @property
    def body_velocity(self) -> bool:
        """Whether $v$ is a body velocity rather than the rates $\\dot q$ of coordinates."""
        return not isinstance(self.system.manifold, gm.AbstractCoordinateManifold)

    @property
    def labels(self) -> list[str]:
        """The names of the columns of $q$: coordinates, or a point's stored parameters."""
        return list(self.model.point_parameters or self.model.coordinates)

    @property
    def velocity_labels(self) -> list[str]:
        """The names of the columns of $v$: `x_dot` for a coordinate `x`; on a group the
        model's names of $v$'s components (`omega1`, ...)."""
        names = self.model.coordinates
        return list(names) if self.body_velocity else [f"{c}_dot" for c in names]


def build(name: str, params: dict) -> Setup:
    """Build model `name` with `params` and validate it at its initial state; a problem is a
    `UsageError` listing every problem `gm.validate` found."""
    what = f"{name} with {fmt_params(params)}"
    try:
        model = gmm.MODELS[name](**params)
        system, y0 = model.system(), model.initial_state()
    except (TypeError, ValueError) as e:
        raise UsageError(f"cannot build {what}: {first_line(e)}") from None
    report = gm.validate(system, y0, model.t0)
    if not report.ok:
        raise UsageError(f"{what}: " + "; ".join(p.message for p in report.problems))
    return Setup(name, params, model, system, y0, system.check_shapes(y0, model.t0))


def solvers(setup: Setup) -> dict[str, gm.AbstractSolver]:
    """Every solver applicable to the model, by command-line name (`_parse.SOLVERS`)."""
    candidates = {
        "projection": gm.Projection(),
        "gauss": gm.Gauss(),
        "gibbs-appell": gm.GibbsAppell(metric="W"),
        "gibbs-appell-d": gm.GibbsAppell(metric="D"),
        "kane": gm.Kane(),
        "multipliers": gm.Multipliers(),
    }
    if isinstance(setup.model, gmm.AbstractSymmetricModel):
        candidates["momentum"] = gm.NonholonomicMomentum(setup.model.action())
    known_work = setup.system.known_work is not None
    return {k: s for k, s in candidates.items() if not known_work or s.supports_known_work}


def solver(setup: Setup, name: str) -> gm.AbstractSolver:
    available = solvers(setup)
    if name not in available:
        raise UsageError(
            f"solver {name} does not apply to {setup.name}; available: {', '.join(available)}."
        )
    return available[name]


@eqx.filter_jit
def _constraint_jacobians(system, state, t):
    """$\\partial h/\\partial q$ and $\\partial\\phi/\\partial v$ at `state`, in the chart centred at
    its point on a Lie group (where `gm.consistent_state` solves)."""
    system, state = system.localized(state)  # the identity chart on coordinates
    q, v = state.q, state.v
    Dh = jax.jacfwd(lambda q_: system.position_residual(gm.State(q_, v), t))(q)
    A = jax.jacfwd(lambda v_: system.constraint_residual(gm.State(q, v_), t))(v)
    return Dh, A


def _pivots(J: np.ndarray, count: int) -> list[int]:
    """`count` columns of `J` chosen by QR with column pivoting (largest remaining norm first):
    the block of `J` they form is as well conditioned as the greedy choice makes it."""
    J, chosen = np.array(J, dtype=float), []
    for _ in range(count):
        norms = np.linalg.norm(J, axis=0)
        norms[chosen] = -1.0
        j = int(np.argmax(norms))
        chosen.append(j)
        u = J[:, j] / np.linalg.norm(J[:, j])
        J = J - np.outer(u, u @ J)
    return chosen


def held(setup: Setup) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """`(fixed_q, fixed_v)`: the coordinates and speeds an ensemble keeps as drawn, the others
    solved from the constraints (`gm.consistent_state`): the model's `independent_coordinates`
    and `independent_speeds` where it declares them, else those left over when the dependent ones
    (as many as the constraints: $m$ holonomic, $k$ in all) are chosen by QR with column
    pivoting of $\\partial h/\\partial q$ and $\\partial\\phi/\\partial v$ at the initial state."""
    model, n = setup.model, setup.n
    declared_q, declared_v = model.independent_coordinates, model.independent_speeds
    if declared_q is not None and declared_v is not None:
        return tuple(declared_q), tuple(declared_v)
    Dh, A = (np.asarray(x) for x in _constraint_jacobians(setup.system, setup.y0, setup.t0))
    complement = lambda dependent: tuple(i for i in range(n) if i not in dependent)
    fixed_q = complement(_pivots(Dh, Dh.shape[0])) if declared_q is None else tuple(declared_q)
    fixed_v = complement(_pivots(A, A.shape[0])) if declared_v is None else tuple(declared_v)
    return fixed_q, fixed_v


@eqx.filter_jit
def _consistent(system, y, t, fixed_q, fixed_v):
    solve = lambda s: gm.consistent_state(system, s, fixed_q=fixed_q, fixed_v=fixed_v, t=t)
    return jax.vmap(solve)(y)


def ensemble(setup: Setup, batch: int, seed: int, scale: float = 0.02) -> gm.State:
    """`batch` states near the model's: state 0 is the model's initial state; state $b > 0$ has
    every coordinate and speed moved by `scale` times a standard normal draw (on a Lie group the
    point is $q_0 \\oplus \\delta_b$), then the dependent ones solved from the constraints with
    the independent ones kept exactly (`held`, `gm.consistent_state`). So the quantities the
    model is started with (a rolling body's angular velocity $\\omega$) stay within `scale`
    noise of their nominal values; the contact velocity follows from them."""
    if batch == 1:
        return setup.y0
    kq, kv = jax.random.split(jax.random.PRNGKey(seed))
    noise = lambda key: scale * jax.random.normal(key, (batch, setup.n), setup.dtype).at[0].set(0.0)
    # q ⊕ δ: a step along the tangent directions of the chart centred at q (q + δ on coordinates)
    q = jax.vmap(setup.system.manifold.oplus, in_axes=(None, 0))(setup.y0.q, noise(kq))
    y = gm.State(q, setup.y0.v[None] + noise(kv))
    if not setup.k:
        return y
    fixed_q, fixed_v = held(setup)
    y = _consistent(setup.system, y, jnp.asarray(setup.t0, setup.dtype), fixed_q, fixed_v)
    # the first trajectory at the model's state bit for bit
    return jax.tree_util.tree_map(lambda ys, y0: ys.at[0].set(y0), y, setup.y0)


@eqx.filter_jit
def _power_terms(system, state, t):
    st = gm.assemble(system, state, t, checks=False)
    dLdt = jax.grad(lambda t_: system.L(t_, state.q, state.v))(st.t)
    return st.C @ state.v, st.C, dLdt


def conserves_energy(setup: Setup) -> bool:
    """Whether $E_L$ is a conserved quantity, so that its change is numerical drift.

    $dE_L/dt = F^c(v) + F^e(v) - \\partial_t L$ (from (2.9)) with $F^c = C^\\top\\lambda$, so
    $E_L$ is conserved when there is no force or known work, $L$ does not depend on $t$, and
    $C v = 0$ on $\\mathcal{C}$ (checked at the initial state). Moving constraints (rheonomic,
    $\\partial_t h \\ne 0$, or affine, $A v + c = 0$) and $\\mathcal{W} \\ne \\mathcal{D}$ make
    $C v \\ne 0$: the energy changes."""
    system = setup.system
    if system.force is not None or system.known_work is not None:
        return False
    Cv, C, dLdt = (np.asarray(x) for x in _power_terms(system, setup.y0, setup.t0))
    scale = 1.0 + np.max(np.abs(C), initial=0.0) * np.max(np.abs(np.asarray(setup.y0.v)))
    tol = 100 * np.finfo(setup.dtype).eps * scale
    return bool(np.all(np.abs(Cv) <= tol) and abs(float(dLdt)) <= tol)
