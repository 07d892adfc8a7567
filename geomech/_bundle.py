"""Points and vectors of the tangent bundle $TQ$, forms on it, the vertical lift $\\tau$.

In the chart $(q, v)$ of $TQ$ a tangent vector $X \\in T_{(q,v)}TQ$ has a horizontal part `dq`
($\\pi_* X$) and a vertical part `dv`. Thesis §2.1 and §3.1.
"""

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Float

from ._geometry import as_point, point_shape


def _as_inexact(x):
    try:
        if isinstance(x, (str, bytes)):  # before JAX, which reads "a" or "f" as a dtype's name
            raise TypeError
        x = jnp.asarray(x)
    except (TypeError, ValueError):
        raise TypeError(
            f"State(q, v) takes real arrays of coordinates and velocities, got {type(x).__name__} "
            f"{x!r:.60}."
        ) from None
    if jnp.issubdtype(x.dtype, jnp.complexfloating) or not jnp.issubdtype(x.dtype, jnp.number):
        raise TypeError(
            f"State(q, v) takes real arrays of coordinates and velocities, got dtype {x.dtype}: "
            "a point of TQ has real coordinates."
        )
    return x if jnp.issubdtype(x.dtype, jnp.inexact) else x.astype(float)


def _as_point(q):
    """Coordinates as an inexact array; a Lie-group element or a tuple of points leaf by leaf."""
    return as_point(q, _as_inexact)


class State(eqx.Module):
    """A point $(q, v)$ of $TQ$.

    **Arguments:**

    - `q`: configuration coordinates, shape `(n,)` (or `(..., n)` for a batch); on a Lie group
        a `jaxlie` element, on a product with one the tuple of the factors' points.
    - `v`: velocity coordinates, the same shape as `q`; on a group the left-trivialized
        (body) velocity, `(..., dim)`, flat for products (docs/lie_groups.md).

    Batch with `jax.vmap`, or give leading axes to both `q` and `v`.
    """

    q: Float[Array, "... n"] = eqx.field(converter=_as_point)
    v: Float[Array, "... n"] = eqx.field(converter=_as_inexact)

    def __check_init__(self):
        batch, n = point_shape(self.q)
        if n == 0 or self.v.shape != (*batch, n):
            if isinstance(self.q, jax.Array):
                hint = (
                    "on a Lie group q is the group element, not its parameters: e.g. "
                    "jaxlie.SO3(wxyz) for a unit quaternion, with v of the tangent dimension"
                )
                q = self.q.shape
            else:
                hint = f"on a group: v of shape {(*batch, n)}, q's batch axes and the tangent dimension"
                q = f"with batch axes {batch}, dim {n}"
            raise ValueError(
                f"State(q, v) needs q and v of the same shape (..., n); got q {q} and v "
                f"{self.v.shape} ({hint}; docs/lie_groups.md)."
            )
        dtypes = {jnp.result_type(x) for x in jax.tree_util.tree_leaves(self.q)}
        if dtypes != {self.v.dtype}:
            raise TypeError(
                f"State(q, v) needs q and v of one dtype, got q {', '.join(sorted(map(str, dtypes)))} "
                f"and v {self.v.dtype}: convert both, e.g. to jnp.float64 (on a group, build the "
                "element from parameters of v's dtype)."
            )


class TangentVector(eqx.Module):
    """A vector $X = (\\delta q, \\delta v) \\in T_{(q,v)}TQ$ in the chart of $TQ$."""

    dq: Float[Array, " n"]
    dv: Float[Array, " n"]

    def flat(self) -> Float[Array, " two_n"]:
        """The $2n$ components $(\\delta q, \\delta v)$."""
        return jnp.concatenate([self.dq, self.dv])

    @classmethod
    def from_flat(cls, x: Float[Array, " two_n"]) -> "TangentVector":
        n = x.shape[-1] // 2
        return cls(x[:n], x[n:])

    def is_special_at(self, state: State) -> Bool[Array, ""]:
        """Whether $\\pi_* X = v$ (the vector of a second-order equation), to round-off."""
        return jnp.allclose(self.dq, state.v)

    def __add__(self, other):
        return TangentVector(self.dq + other.dq, self.dv + other.dv)

    def __sub__(self, other):
        return TangentVector(self.dq - other.dq, self.dv - other.dv)


def vertical_lift(u: Float[Array, " n"]) -> TangentVector:
    """The vertical lift $\\tau(u) = (0, u)$ of $u \\in T_qQ$ (thesis §2.1)."""
    u = jnp.asarray(u)
    return TangentVector(jnp.zeros_like(u), u)


def vertical_lift_inverse(X: TangentVector) -> Float[Array, " n"]:
    """$\\tau^{-1}$: the vertical part of a vertical vector $X = (0, u) \\mapsto u$."""
    return X.dv


class SpecialVectorField(eqx.Module):
    """A special (second-order) vector field $X(q, v) = (v, Z(q, v))$ on $TQ$ (thesis (3.9)).

    **Arguments:**

    - `acceleration`: $Z$, a function `(state) -> (n,)`.
    """

    acceleration: Callable

    def __call__(self, state: State) -> TangentVector:
        return TangentVector(state.v, self.acceleration(state))


class HorizontalForm(eqx.Module):
    """A horizontal 1-form on $TQ$ (a force): $F(w) = F(\\pi_* w)$, thesis §2.1.

    **Arguments:**

    - `covector`: a function `(q, v) -> (n,)` giving the components $F_i$ with $F = F_i\\,dq^i$.
    """

    covector: Callable

    def __call__(self, state: State, w: TangentVector | Float[Array, " n"]) -> Float[Array, ""]:
        """The work $F(w)$; `w` may be a vector of $TQ$ or of $T_qQ$."""
        u = w.dq if isinstance(w, TangentVector) else w
        return jnp.dot(self.covector(state.q, state.v), u)

    def on_tq(self, state: State) -> Float[Array, " two_n"]:
        """The $2n$ components of $F$ as a 1-form on $TQ$ (zero $dv$ part)."""
        f = self.covector(state.q, state.v)
        return jnp.concatenate([f, jnp.zeros_like(f)])


class TwoForm(eqx.Module):
    """A 2-form on $T_{(q,v)}TQ$ given by its matrix: $\\omega(X, Y) = X^\\top \\Omega Y$.

    For $\\omega_L$ (thesis (2.5)), $\\Omega = [[B - B^\\top, -M], [M, 0]]$ with
    $B_{ij} = \\partial^2 L / \\partial q^i \\partial v^j$ and $M$ the mass matrix.
    """

    matrix: Float[Array, "two_n two_n"]

    def __call__(self, X: TangentVector, Y: TangentVector) -> Float[Array, ""]:
        return X.flat() @ self.matrix @ Y.flat()

    def flat(self, X: TangentVector) -> Float[Array, " two_n"]:
        """$X \\mapsto \\omega(X, \\cdot)$, a 1-form given by its $2n$ components."""
        return self.matrix.T @ X.flat()

    def sharp(self, alpha: Float[Array, " two_n"]) -> TangentVector:
        """The inverse of `flat`: the unique $X_\\alpha$ with $\\omega(X_\\alpha, \\cdot) = \\alpha$ (3.1)."""
        return TangentVector.from_flat(jnp.linalg.solve(self.matrix.T, alpha))
