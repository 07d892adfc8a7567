import equinox as eqx
import jax
import jax.numpy as jnp

from .._stages import Stages
from ._base import AbstractSolver

_METRICS = ("W", "D")


def _check_metric(metric):
    if metric not in _METRICS:
        raise ValueError(
            f"GibbsAppell metric must be 'W' (G_W of (4.6)) or 'D' (G_D of (4.7)), got {metric!r}."
        )


def gibbs_appell_function(stages: Stages, metric: str = "W"):
    """The Gibbs–Appell function $a \\mapsto G(a)$ at the state of `stages`.

    `metric="W"`: $G_{\\mathcal{W}}(a) = \\tfrac12\\|a - a_U\\|_M^2$ (4.6);
    `metric="D"`: $G_{\\mathcal{D}}(a) = \\tfrac12\\|a - a_U\\|_{[,]}^2$ (4.7).
    """
    _check_metric(metric)
    H = stages.M if metric == "W" else stages.bracket
    a_U = stages.a_U

    def G(a):
        d = a - a_U
        return 0.5 * d @ H @ d

    return G


class GibbsAppell(AbstractSolver):
    """The Gibbs–Appell equations for generalized nonholonomic systems (Prop. 5, Prop. 5').

    $X_R$ is the field in $\\mathcal{S}(\\mathcal{C})$ with
    $D_a G_{\\mathcal{W}}(a_R)(u) = F^0(u)$ for $u \\in \\mathcal{W}$ (4.8) (with known work $F^0$,
    Prop. 5'), or equivalently $D_a G_{\\mathcal{D}}(a_R)(u) = 0$ for $u \\in \\mathcal{D}$ (4.9).
    The gradient and Hessian of the function $G$ are taken by automatic differentiation; $G$ is
    quadratic, so one Newton step from $a = 0$ solves the stationarity equations exactly.

    **Arguments:**

    - `metric`: `"W"` for $G_{\\mathcal{W}}$ (4.6), `"D"` for $G_{\\mathcal{D}}$ (4.7). Only `"W"`
        generalizes to non-ideal constraints with known work (thesis §5.2).
    """

    metric: str = eqx.field(static=True, default="W")

    def __check_init__(self):
        _check_metric(self.metric)

    @property
    def supports_known_work(self) -> bool:
        return self.metric == "W"

    def acceleration(self, stages: Stages):
        G = gibbs_appell_function(stages, self.metric)
        a0 = jnp.zeros_like(stages.a_U)
        grad0, H = jax.grad(G)(a0), jax.hessian(G)(a0)
        E = stages.W_basis if self.metric == "W" else stages.D_basis
        # the known work W(u) = F^0(u) on W (Prop. 5'); G_D needs zero work on D
        work = stages.F0 if self.metric == "W" else jnp.zeros_like(grad0)
        # D_a G(a) u = (grad0 + H a) · u = W(u) for u in span E: (4.8) / (4.9)
        return stages.solve_with_constraints(E.T @ H, E.T @ (work - grad0))
