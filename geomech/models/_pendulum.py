import equinox as eqx
import jax.numpy as jnp

from .._constraint import HolonomicConstraint, LinearConstraint
from .._system import LagrangianSystem


class CartesianPendulum(eqx.Module):
    """Seed 001 §1.1: a point mass $m$ on a massless rod of length $l$, in Cartesian $(x, y)$.

    Axes as in seed 001: $x$ points **down**, gravity is $+g\\hat x$, so $L = \\tfrac12 m|v|^2 + m g x$.
    `form="holonomic"` imposes $h = x^2 + y^2 - l^2 = 0$; `form="linear"` the row $x\\dot x + y\\dot y = 0$
    of seed 001 (half the gradient of $h$, so its multiplier is twice the holonomic one).
    The tension is $m(|v|^2/l + g x/l)$ along $-\\hat r$.
    """

    m: float = 1.0
    l: float = 1.0
    g: float = 9.81
    form: str = eqx.field(default="holonomic", static=True)

    def lagrangian(self, q, v):
        return 0.5 * self.m * (v @ v) + self.m * self.g * q[0]

    def h(self, q):
        return q @ q - self.l**2

    def row(self, q):
        return q[None, :]

    def system(self) -> LagrangianSystem:
        if self.form == "holonomic":
            c = HolonomicConstraint(self.h)
        elif self.form == "linear":
            c = LinearConstraint(self.row)
        else:
            raise ValueError(f"form must be 'holonomic' or 'linear', got {self.form!r}.")
        return LagrangianSystem(self.lagrangian, constraint=c)

    def __call__(self) -> LagrangianSystem:
        return self.system()
