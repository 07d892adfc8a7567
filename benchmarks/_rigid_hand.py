"""Hand-written right-hand sides of geomech's rigid-body models, the reference of
`benchmarks/rigid_bodies.py` ("rigid bodies at the speed of hand-written code").

Every model is written the way one would by hand, with no geomech inside: Newton–Euler equations,
the orientation as a unit quaternion $q = (w, x, y, z)$ (Hamilton product, jaxlie's `wxyz`
convention: $R(q)$ maps body to space) with the body angular velocity $\\omega$
($\\dot R = R\\hat\\omega$), so $\\dot q = \\tfrac12\\, q \\otimes (0, \\omega)$ [Sola2017], and the
constraint force eliminated in closed form. The flat states map one to one onto geomech's:

- `HandRolling` (`gm.models.Rattleback`, `gm.models.ChaplyginSphere`): $y = (q, x, \\omega)$, 9
  entries, $x$ the horizontal position of the body frame's origin (the ellipsoid's or the ball's
  centre); geomech's $\\dot x$ is not a state here but the rolling constraint's value;
- `HandTop` (`gm.models.HeavyTop`) and `HandSuslov` (`gm.models.Suslov`): $y = (q, \\omega)$.

The parameters are read from the models' public fields (the same numbers geomech integrates);
everything else is derived here. `to_hand(state)` and `from_hand(y)` convert one state (vmap them
for a batch); `rhs(t, y, args)` is a `diffrax.ODETerm` vector field; `acceleration(y)` returns
$\\dot\\omega$ (and `xdot(y)` the rolling velocity) for the comparison with `gm.acceleration` in
`tests/test_benchmarks.py`.
"""

import abc
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import jaxlie

import geomech as gm

# -- quaternions (Hamilton product, w first) ----------------------------------------------------


def quat_times_omega(q, w):
    """$\\tfrac12\\, q\\otimes(0, \\omega)$ [Sola2017]: the derivative of the unit quaternion of
    $R$ when $\\dot R = R\\hat\\omega$ (body angular velocity)."""
    s, v = q[0], q[1:]
    return 0.5 * jnp.concatenate([-(v @ w)[None], s * w + jnp.cross(v, w)])


def rotation_matrix(q):
    """$R(q)$ of a unit quaternion $(w, x, y, z)$, body to space [Sola2017]."""
    w, x, y, z = q
    return jnp.stack(
        [
            jnp.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)]),
            jnp.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)]),
            jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]),
        ]
    )


def vertical(q):
    """$\\gamma = R^\\top e_3$, the upward vertical in the body frame: the third row of $R(q)$."""
    w, x, y, z = q
    return jnp.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)])


def solve3_cramer(K, b):
    """$K^{-1}b$ for a 3 × 3 $K$ by Cramer's rule: the rows of $K^{-1}$ are the cross products of
    $K$'s columns over $\\det K$ (elementwise operations only, so a vmap vectorizes)."""
    c0, c1, c2 = K[:, 0], K[:, 1], K[:, 2]
    adj = jnp.stack([jnp.cross(c1, c2), jnp.cross(c2, c0), jnp.cross(c0, c1)])
    return adj @ b / (c0 @ adj[0])


def solve3_lapack(K, b):
    return jnp.linalg.solve(K, b)


SOLVES: dict[str, Callable] = {"cramer": solve3_cramer, "linalg_solve": solve3_lapack}


# the parts of a flat state after the quaternion, by its length: the rolling bodies (x, ω), the
# bodies with a fixed point (ω), and the SO(3) disk of benchmarks/rigid_bodies.py (x, v = (ω, ẋ))
_PARTS = {9: {"x": (4, 6), "omega": (6, 9)}, 7: {"omega": (4, 7)}, 11: {"x": (4, 6), "v": (6, 11)}}


def state_differences(a, b) -> dict:
    """max |a - b| over flat states `(q, ...)` (leading batch axes allowed) by part: the
    quaternion `q` (sign-aligned: $q$ and $-q$ are the same rotation), then `x`, `omega` (or `v`);
    `all` the largest of them. Plain floats."""
    qa, qb = a[..., :4], b[..., :4]
    qa = jnp.where(jnp.sum(qa * qb, -1, keepdims=True) < 0, -qa, qa)
    out = {"q": float(jnp.max(jnp.abs(qa - qb)))}
    for name, (i, j) in _PARTS[a.shape[-1]].items():
        out[name] = float(jnp.max(jnp.abs(a[..., i:j] - b[..., i:j])))
    out["all"] = max(out.values())
    return out


# -- contact geometry of the rolling bodies ----------------------------------------------------


def ellipsoid_contact(semi_axes):
    """The ellipsoid $\\sum p_i^2/a_i^2 = 1$ touches the plane below at
    $s(\\gamma) = -D^2\\gamma/\\sqrt{\\gamma^\\top D^2\\gamma}$, $D = \\mathrm{diag}(a)$
    [BorisovMamaev2002]; returns `(s, ṡ)` for $\\dot\\gamma$ given, with
    $\\dot s = -D^2\\dot\\gamma/n + D^2\\gamma\\,(\\gamma^\\top D^2\\dot\\gamma)/n^3$."""
    d2 = semi_axes**2

    def contact(gamma, gamma_dot):
        dg, ddg = d2 * gamma, d2 * gamma_dot
        n2 = gamma @ dg
        n = jnp.sqrt(n2)
        s = -dg / n
        return s, -ddg / n + dg * (gamma @ ddg) / (n2 * n)

    return contact


def sphere_contact(radius):
    """A ball of radius $a$ about the origin touches at $s = -a\\gamma$, $\\dot s = -a\\dot\\gamma$."""

    def contact(gamma, gamma_dot):
        return -radius * gamma, -radius * gamma_dot

    return contact


# -- the models --------------------------------------------------------------------------------


class HandRolling(eqx.Module):
    """A rigid body rolling without slipping on the plane $z = 0$ (gravity $-g e_3$), Newton–Euler
    about its centre of mass $G$ in the body frame [BorisovMamaev2002; Goldstein2002 §5.5]:

    $$m(\\dot v + \\omega\\times v) = F - m g\\gamma,\\qquad
      I\\dot\\omega + \\omega\\times I\\omega = r\\times F,$$

    $r = s(\\gamma) - c$ the contact point seen from $G$ ($c$ the centre of mass, $s$ the contact
    point, from the body frame's origin), $F$ the contact force. Rolling: the material contact point
    is at rest, $v = -\\omega\\times r = r\\times\\omega$, so $\\dot v = \\dot r\\times\\omega +
    r\\times\\dot\\omega$ with $\\dot r = \\dot s$ along $\\dot\\gamma = \\gamma\\times\\omega$.
    Eliminating $F$ leaves the 3 × 3 system

    $$\\bigl(I + m(|r|^2 1 - r r^\\top)\\bigr)\\dot\\omega = I\\omega\\times\\omega
      + m\\, r\\times\\bigl(\\dot r\\times\\omega + \\omega\\times(r\\times\\omega)\\bigr)
      + m g\\, r\\times\\gamma ,$$

    solved by `solve` (Cramer's rule or `jnp.linalg.solve`). The origin moves with
    $\\dot X = R(s\\times\\omega)$ (its body velocity $v + \\omega\\times(-c)$), whose horizontal
    part is $\\dot x$."""

    mass: jax.Array
    inertia: jax.Array
    centre_of_mass: jax.Array
    g: jax.Array
    contact: Callable = eqx.field(static=True)
    solve: Callable = eqx.field(static=True)

    def derivatives(self, y):
        """$(\\dot q, \\dot x, \\dot\\omega)$ at the hand state `y` (one evaluation of the
        contact geometry for all three)."""
        q, w = y[:4], y[6:9]
        gamma = vertical(q)
        s, s_dot = self.contact(gamma, jnp.cross(gamma, w))
        m, I = self.mass, self.inertia
        r = s - self.centre_of_mass
        rhs = (
            jnp.cross(I @ w, w)
            + m * jnp.cross(r, jnp.cross(s_dot, w) + jnp.cross(w, jnp.cross(r, w)))
            + m * self.g * jnp.cross(r, gamma)
        )
        K = I + m * ((r @ r) * jnp.eye(3, dtype=r.dtype) - jnp.outer(r, r))
        x_dot = (rotation_matrix(q)[:2] @ jnp.cross(s, w))
        return quat_times_omega(q, w), x_dot, self.solve(K, rhs)

    def acceleration(self, y):
        """$\\dot\\omega$ at the hand state `y`."""
        return self.derivatives(y)[2]

    def xdot(self, y):
        """$\\dot x = [R(s\\times\\omega)]_{xy}$, the rolling constraint's velocity of the origin."""
        return self.derivatives(y)[1]

    def rhs(self, t, y, args):
        return jnp.concatenate(self.derivatives(y))

    @staticmethod
    def to_hand(state: gm.State):
        R, x = state.q
        return jnp.concatenate([R.wxyz, x, state.v[:3]])

    def from_hand(self, y) -> gm.State:
        q = jaxlie.SO3(y[:4] / jnp.linalg.norm(y[:4]))
        return gm.State((q, y[4:6]), jnp.concatenate([y[6:9], self.xdot(y)]))


def rattleback(model, solve=solve3_cramer) -> HandRolling:
    """`gm.models.Rattleback`'s parameters: inertia $\\begin{pmatrix}A & -D & 0\\\\ -D & B & 0\\\\
    0 & 0 & C\\end{pmatrix}$ about $G$ (the model's frame, $e_3$ up), $G$ at $-h e_3$ from the
    ellipsoid's centre, the body frame's origin [KaneLevinson1982]."""
    z = 0.0 * model.D
    inertia = jnp.array([[model.A, -model.D, z], [-model.D, model.B, z], [z, z, model.C]])
    c = jnp.stack([z, z, -model.h])
    return HandRolling(
        model.m, inertia, c, model.g, contact=ellipsoid_contact(model.semi_axes), solve=solve
    )


def chaplygin_sphere(model, solve=solve3_cramer) -> HandRolling:
    """`gm.models.ChaplyginSphere`: principal moments `inertia` about the centre, which is the
    centre of mass [Chaplygin1903]."""
    return HandRolling(
        model.m, jnp.diag(model.inertia), jnp.zeros(3, model.m.dtype), model.g,
        contact=sphere_contact(model.a), solve=solve,
    )


class _AbstractHandOnSO3(eqx.Module):
    """A body with a fixed point on SO(3): $y = (q, \\omega)$, $\\dot q = \\tfrac12 q\\otimes
    (0, \\omega)$ and $\\dot\\omega$ from `acceleration`."""

    @abc.abstractmethod
    def acceleration(self, y):
        """$\\dot\\omega$ at the hand state `y`."""

    def rhs(self, t, y, args):
        q, w = y[:4], y[4:7]
        return jnp.concatenate([quat_times_omega(q, w), self.acceleration(y)])

    @staticmethod
    def to_hand(state: gm.State):
        return jnp.concatenate([state.q.wxyz, state.v])

    @staticmethod
    def from_hand(y) -> gm.State:
        return gm.State(jaxlie.SO3(y[:4] / jnp.linalg.norm(y[:4])), y[4:7])


class HandTop(_AbstractHandOnSO3):
    """The heavy top about its fixed pivot (Euler's equations with the gravity torque
    [Goldstein2002, §5.7]): $I_O\\dot\\omega = I_O\\omega\\times\\omega + m g\\ell\\,\\gamma\\times e_3$,
    $I_O = I_c + m\\ell^2(1 - e_3e_3^\\top)$ (parallel axes, §5.3) for the centre of mass at
    $\\ell e_3$; $I_O^{-1}$ is computed once."""

    inertia: jax.Array
    inverse: jax.Array
    mgl: jax.Array

    def __init__(self, model):
        body, ell = model.body, model.ell
        e3 = jnp.array([0.0, 0.0, 1.0], ell.dtype)
        eye = jnp.eye(3, dtype=ell.dtype)
        self.inertia = body.inertia + body.mass * ell**2 * (eye - jnp.outer(e3, e3))
        self.inverse = jnp.linalg.inv(self.inertia)
        self.mgl = body.mass * model.g * ell

    def acceleration(self, y):
        q, w = y[:4], y[4:7]
        gamma = vertical(q)
        torque = self.mgl * jnp.stack([gamma[1], -gamma[0], 0.0 * gamma[2]])  # γ × e3
        return self.inverse @ (jnp.cross(self.inertia @ w, w) + torque)


class HandSuslov(_AbstractHandOnSO3):
    """Suslov's problem [BorisovKilinMamaev2011]: $I\\dot\\omega = I\\omega\\times\\omega +
    \\lambda e_3$ with $\\omega_3 = 0$. Keeping $\\dot\\omega_3 = 0$, the first two rows are
    $K(\\dot\\omega_1, \\dot\\omega_2) = (I\\omega\\times\\omega)_{1,2}$ with $K$ the upper-left
    2 × 2 block of $I$ ($K^{-1}$ computed once), and the third row gives the multiplier
    $\\lambda = I_{13}\\dot\\omega_1 + I_{23}\\dot\\omega_2 - (I\\omega\\times\\omega)_3$."""

    inertia: jax.Array
    inverse: jax.Array

    def __init__(self, model):
        self.inertia = model.body.inertia
        self.inverse = jnp.linalg.inv(self.inertia[:2, :2])

    def acceleration(self, y):
        w = y[4:7]
        gyro = jnp.cross(self.inertia @ w, w)
        return jnp.concatenate([self.inverse @ gyro[:2], jnp.zeros(1, w.dtype)])

    def multiplier(self, y):
        """$\\lambda$, the constraint's reaction torque along $e_3$."""
        w = y[4:7]
        return self.inertia[2, :2] @ self.acceleration(y)[:2] - jnp.cross(self.inertia @ w, w)[2]


# -- the cases of benchmarks/rigid_bodies.py ---------------------------------------------------

CASES = ("rattleback", "chaplygin_sphere", "heavy_top", "suslov")


def case(name: str):
    """`(model, {variant: hand})` for a case name of `CASES`: the geomech model with its default
    parameters and its hand-written right-hand sides (the rolling bodies have two, one per 3 × 3
    solve)."""
    import geomech.models as gmm

    if name == "rattleback":
        model = gmm.Rattleback()
        return model, {k: rattleback(model, solve) for k, solve in SOLVES.items()}
    if name == "chaplygin_sphere":
        model = gmm.ChaplyginSphere()
        return model, {k: chaplygin_sphere(model, solve) for k, solve in SOLVES.items()}
    if name == "heavy_top":
        model = gmm.HeavyTop()
        return model, {"closed_form": HandTop(model)}
    if name == "suslov":
        model = gmm.Suslov()
        return model, {"closed_form": HandSuslov(model)}
    raise ValueError(f"unknown case {name!r}; choose from {CASES}")


# the models' default initial states (docstrings of geomech.models), perturbed for an ensemble
_NOMINAL = {
    "rattleback": ((0.0, 0.0, 5.0), (0.0087, 0.0087, 0.0)),
    "chaplygin_sphere": ((1.0, -0.5, 2.0), (0.3, -0.2, 0.1)),
    "heavy_top": ((0.3, 0.0, 6.0), (0.0, 0.0, 0.0)),
    "suslov": ((1.0, -0.5), (0.0, 0.0, 0.0)),
}


def state(name: str, model, omega, attitude) -> gm.State:
    """A state of the case `name` on its constraint manifold, by the model's own `initial_state`:
    body angular velocity `omega` (Suslov: its two free components), attitude $\\exp$(`attitude`)
    (rolling bodies: $\\dot x$ from the rolling constraint)."""
    if name in ("rattleback", "chaplygin_sphere"):
        return model.initial_state(omega=omega, attitude=attitude)
    return model.initial_state(omega, jaxlie.SO3.exp(attitude))


def initial_states(name: str, model, key, batch: int | None, spread: float = 0.02) -> gm.State:
    """The model's default initial state (`batch=None`), or `batch` nearby states on the
    constraint manifold (`state` under `jax.vmap`): the angular velocity and the attitude (its
    exponential coordinates) perturbed by `spread` × N(0, 1) (relative for ω, absolute in
    radians / 10 for the attitude)."""
    omega, attitude = (jnp.asarray(x, float) for x in _NOMINAL[name])
    if batch is None:
        return state(name, model, omega, attitude)
    k1, k2 = jax.random.split(key)
    scale = jnp.maximum(jnp.abs(omega), 0.1 * jnp.max(jnp.abs(omega)))
    w = omega[None] + spread * scale[None] * jax.random.normal(k1, (batch, *omega.shape))
    a = attitude[None] + 0.1 * spread * jax.random.normal(k2, (batch, 3))
    return jax.vmap(lambda w, a: state(name, model, w, a))(w, a)
