"""Helpers shared by the tests: the solver registry, the comparison of printed output and the
data inside an animation page."""

import base64
import json
import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import geomech as gm
from geomech._dynamics import check_solver, constrained_acceleration
from geomech._stages import assemble


# -- the solvers -----------------------------------------------------------------------------------
def solvers(*, basis=None, action=None, known_work=False) -> dict[str, gm.AbstractSolver]:
    """Every solver of geomech, by name, in every configuration the tests compare: Kane also with
    the bracket construction, and with a user basis of W (`basis`, a function of the stages' state),
    the momentum equation for a symmetry `action`. With `known_work=True` the solvers that refuse a
    known work $F^0$ (`supports_known_work = False`: Gauss, Gibbs–Appell with $G_D$) are left out.
    `tests/test_solvers.py` checks that every public solver class is here."""
    out = {
        "projection": gm.Projection(),
        "gauss": gm.Gauss(),
        "gibbs_appell_W": gm.GibbsAppell(metric="W"),
        "gibbs_appell_D": gm.GibbsAppell(metric="D"),
        "kane": gm.Kane(),
        "kane_bracket": gm.Kane(construction="bracket"),
        "multipliers": gm.Multipliers(),
    }
    if basis is not None:
        out["kane_user"] = gm.Kane(basis=basis)
    if action is not None:
        out["momentum"] = gm.NonholonomicMomentum(action)
    if known_work:
        out = {k: s for k, s in out.items() if s.supports_known_work}
    return out


@eqx.filter_jit
def _every_acceleration(system, named, states, t):
    def at(state):
        stages = assemble(system, state, t)
        return {name: constrained_acceleration(stages, solver) for name, solver in named.items()}

    return jax.vmap(at)(states)


def accelerations(system, states, named: dict[str, gm.AbstractSolver], t=0.0) -> dict:
    """`{name: a}` with each named solver's `gm.acceleration` at `states` (a list of `State`s,
    stacked, or one batched `State`), `a` of shape `(B, n)`: what `gm.acceleration` computes
    (`check_solver`, then the solver on the assembled stages), with the stages assembled once per
    state for every solver, in one compiled program (CI time)."""
    for solver in named.values():
        check_solver(system, solver)
    if isinstance(states, list):
        states = jax.tree.map(lambda *x: jnp.stack(x), *states)
    return _every_acceleration(system, named, states, jnp.asarray(t, float))


# -- bodies -----------------------------------------------------------------------------------------
class GeneralBodies(gm.AbstractBodiesLagrangian):
    """A bodies Lagrangian read through its spatial velocities and potential only: Kane's
    equations from their first derivatives (`BodiesForm`, $-\\partial U/\\partial q$ by autodiff),
    whatever faster form the Lagrangian itself takes."""

    lagrangian: gm.AbstractBodiesLagrangian

    def masses(self):
        return self.lagrangian.masses()

    def inertias(self):
        return self.lagrangian.inertias()

    def velocities(self, q, v):
        return self.lagrangian.velocities(q, v)

    def potential(self, q):
        return self.lagrangian.potential(q)


# -- states and assertions -------------------------------------------------------------------------
def pendulum_state(theta, omega, l=1.0) -> gm.State:
    """The Cartesian pendulum's bob at `theta` from the downward x axis, turning at `omega` (on C);
    arrays of angles give a batch."""
    theta, omega = jnp.asarray(theta, float), jnp.asarray(omega, float)
    e_r = jnp.stack([jnp.cos(theta), jnp.sin(theta)], -1)
    e_t = jnp.stack([-jnp.sin(theta), jnp.cos(theta)], -1)
    return gm.State(l * e_r, (l * omega)[..., None] * e_t)


def rel_close(x, ref, tol=1e-10) -> bool:
    r"""$|x - x_{ref}| \le tol\,|x_{ref}|$ in the 2-norm: agreement relative to the quantity's size."""
    return float(jnp.linalg.norm(x - ref)) <= tol * float(jnp.linalg.norm(ref))


def assert_rel_close(x, ref, tol=1e-10, msg=""):
    """`rel_close` as an assertion that reports the error and the size of `ref`."""
    err, size = float(jnp.linalg.norm(x - ref)), float(jnp.linalg.norm(ref))
    assert err <= tol * size, (msg, err, size)


# -- printed output, as shown in the docs and saved in the notebooks -------------------------------
NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
ROUND_OFF = 1e-12  # printed values below this are round-off: they only have to stay below it
SMALL = 1e-6  # errors at the integrator's tolerance: the same order of magnitude (within 10x)
RTOL = 1e-2  # printed values of the problem's own scale agree to 1 % across machines


def output_mismatches(got: str, shown: str) -> list[str]:
    """What differs between the output a snippet printed (`got`) and the output shown for it
    (`shown`): the same words and punctuation (whitespace aside, as NumPy pads arrays) and the
    same numbers, where numbers agree to `RTOL` relative, or are both round-off
    (`|x| < ROUND_OFF`), or are both small errors (`|x| < SMALL`) of the same sign within a factor
    of 10 (an integration error moves with the machine's rounding). Empty when they agree."""
    words_got, words_shown = (re.sub(r"\s+", "", NUMBER.sub("#", s)) for s in (got, shown))
    if words_got != words_shown:
        return [f"text differs:\n  printed: {got.strip()!r}\n  shown:   {shown.strip()!r}"]
    out = []
    for a, b in zip(NUMBER.findall(got), NUMBER.findall(shown), strict=True):
        x, y = float(a), float(b)
        if a == b or (abs(x) < ROUND_OFF and abs(y) < ROUND_OFF):
            continue
        if abs(x) < SMALL and abs(y) < SMALL and x * y > 0 and max(x / y, y / x) <= 10:
            continue
        if abs(x - y) > RTOL * max(abs(x), abs(y)):
            out.append(f"printed {a}, shown {b}")
    return out


# -- animation pages (geomech.plot.animate) --------------------------------------------------------
def page_data(html: str) -> dict:
    """The viewer's data inside a page written by `geomech.plot.animate`."""
    m = re.search(r'<script type="application/json" id="geomech-data">(.*?)</script>', html, re.S)
    return json.loads(m.group(1).replace("<\\/", "</"))


def decoded(text: str, dtype, width: int) -> np.ndarray:
    """A base64 array of the page, as `(-1, width)`."""
    return np.frombuffer(base64.b64decode(text), dtype=dtype).reshape(-1, width)
