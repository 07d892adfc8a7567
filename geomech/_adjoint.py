"""How `simulate` is differentiated: the adjoint chosen from the transformation that traces it.

diffrax's default adjoint, `RecursiveCheckpointAdjoint`, is a `jax.custom_vjp`: reverse mode
only. `diffrax.ForwardMode` is a plain `while_loop`: forward mode only. Which one a call needs is
read from JAX's trace state when `simulate` is traced (`automatic_adjoint`,
`enclosing_differentiation`):

- under `jax.jvp` or `jax.jacfwd` (and `jax.vmap`) only: `ForwardMode`;
- under `jax.grad`, `jax.vjp` or `jax.jacrev` (and `jax.vmap`) only, or under no transformation:
  the given `RecursiveCheckpointAdjoint`;
- inside a staged program (`jax.jit`, `eqx.filter_jit`, a function that another library traces
  first and differentiates later — optimistix traces the residual function once,
  `eqx.filter_closure_convert`, then linearizes it, `jac="fwd"`, or transposes it, `jac="bwd"`),
  under `jax.linearize`, whose result may be evaluated or transposed, or under both modes:
  `ForwardOrReverse`, which serves both. (A jitted function's program is reused by JAX under
  whatever transformation calls it next, so inside `jax.jit` the mode is not known; a
  differentiation *inside* the jit, `jax.jit(jax.grad(loss))`, is.)

`ForwardOrReverse` is a `jax.custom_jvp` around the solve whose tangent is a primitive that is
linear in the input tangents: evaluated, it is the forward-mode derivative (`ForwardMode`);
transposed, it is the reverse-mode derivative (`RecursiveCheckpointAdjoint`). Its primal is the
reverse-mode solve itself, so values are those of the default; a reverse-mode derivative costs one
solve more than the default's (the primal, then the checkpointed solve and its backward sweep),
a forward one one solve more than `ForwardMode`'s. The forward-mode solve is traced only when a
forward-mode derivative is taken (`_Deferred`), unless the solve closes over a tracer of the
enclosing trace: then both are traced together, so that both take it as an input (`simulate`
hands the solve its traced values, a parameter in a closure of the user's Lagrangian included,
as inputs).
"""

import functools
from collections.abc import Callable

import diffrax
import equinox as eqx
import equinox.internal as eqxi
import jax
import jax.numpy as jnp
import jax.tree_util as jtu
from jax._src import core as jax_core
from jax._src.interpreters import ad as jax_ad
from jax._src.interpreters import batching as jax_batching
from jax.interpreters.ad import UndefinedPrimal

# -- reading the trace state ----------------------------------------------------------------------


def enclosing_differentiation() -> tuple[bool, bool]:
    """`(forward, reverse)`: whether the values traced now will be differentiated in forward mode
    (`jax.jvp`, `jax.jacfwd`; also `jax.linearize`, whose linear map may be evaluated) and
    whether in reverse mode (`jax.vjp`, `jax.grad`, `jax.jacrev`; also `jax.linearize`, whose
    map may be transposed), and `(True, True)` where that is not known.

    Read from JAX's current trace and its parents up to the nearest one that stages a program
    (`jax.jit`, `eqx.filter_jit`, control flow, `jax.make_jaxpr`, `eqx.filter_closure_convert`):
    a differentiation inside the staged program decides (`jax.jit(jax.grad(loss))`); without
    one, the program may be kept and differentiated later in either mode (JAX reuses a jitted
    function's program under another transformation, and optimistix traces a residual function
    once, then linearizes or transposes it), so nothing is known. `jax.vmap` is looked
    through."""
    forward = reverse = False
    trace = jax_core.trace_ctx.trace
    while trace is not None and not isinstance(trace, jax_core.EvalTrace):
        if isinstance(trace, jax_ad.JVPTrace):
            forward = True
        elif isinstance(trace, jax_ad.LinearizeTrace):
            reverse = True
            forward = forward or not trace.is_vjp  # jax.linearize: evaluated or transposed
        elif not isinstance(trace, jax_batching.BatchTrace):
            break  # a staged program
        trace = getattr(trace, "parent_trace", None)
    else:
        return forward, reverse
    # inside a staged program: a differentiation within it decides; without one, its later use
    # (its program kept and reused under another transformation) is not known here
    return (forward, reverse) if forward or reverse else (True, True)


def automatic_adjoint(adjoint: diffrax.AbstractAdjoint) -> diffrax.AbstractAdjoint:
    """The adjoint `simulate` uses for the default `adjoint` (any `RecursiveCheckpointAdjoint`)
    at the current trace state (see the module's docstring); any other adjoint as given."""
    if not isinstance(adjoint, diffrax.RecursiveCheckpointAdjoint):
        return adjoint
    forward, reverse = enclosing_differentiation()
    if forward and not reverse:
        return diffrax.ForwardMode()
    if forward and reverse:
        return ForwardOrReverse(adjoint)
    return adjoint  # reverse mode, or none (outside every transformation, or under jax.vmap)


# -- a solve differentiable in both modes ---------------------------------------------------------


class _Converted(eqx.Module):
    """A closure-converted solve, `fn(consts, dynamic)`, whose constants are taken by position
    from a list shared with the other mode's solve (`index`): the same closed-over tracer is one
    input of both."""

    converted: eqx.Module  # an `eqx.filter_closure_convert` of `dynamic -> loop(...)`, no consts
    index: tuple[int, ...] = eqx.field(static=True)

    def __call__(self, consts, dynamic):
        conv = eqx.tree_at(
            lambda c: c.consts, self.converted, [consts[i] for i in self.index], is_leaf=_is_none
        )
        # JAX hands a primitive's rules a constant input as a Python scalar or a NumPy value:
        # the arrays (of the dtypes) the solve was converted with
        (expected,), _ = eqx.filter(conv.in_struct, _is_struct)
        dynamic = jtu.tree_map(_as_expected, dynamic, expected, is_leaf=_is_none)
        return conv(dynamic)


class _Once:
    """A slot filled once (compared and hashed by identity, as a static field must be hashable)."""

    value = None


class _Deferred(eqx.Module):
    """The forward-mode solve of a `ForwardOrReverse` that closes over no tracer: traced when a
    forward-mode derivative is first taken, not with the solve (most solves inside `jax.jit` are
    never differentiated, and tracing the second loop cost a quarter of the program's trace),
    then kept as `_Converted` keeps it. `fn(consts, dynamic)` like `_Converted`; the constants
    (concrete arrays the solve closes over) are the solve's own."""

    solve: Callable = eqx.field(static=True)  # dynamic -> the ForwardMode loop
    expected: object = eqx.field(static=True)  # the structs of `dynamic` (`_Converted`)
    converted: _Once = eqx.field(static=True, default_factory=_Once)

    def __call__(self, consts, dynamic):
        del consts
        dynamic = jtu.tree_map(_as_expected, dynamic, self.expected, is_leaf=_is_none)
        if self.converted.value is None:  # its constants are concrete: reusable in any trace
            self.converted.value = eqx.filter_closure_convert(self.solve, dynamic)
        return self.converted.value(dynamic)


def _is_none(x):
    return x is None


def _is_struct(x):
    return isinstance(x, jax.ShapeDtypeStruct)


def _as_expected(x, struct):
    return x if x is None else jnp.asarray(x, struct.dtype)


def _tangent(forward: eqx.Module, consts, dynamic, t_consts, t_dynamic):
    """The forward-mode derivative of the solve along `(t_consts, t_dynamic)`."""
    return eqx.filter_jvp(forward, (consts, dynamic), (t_consts, t_dynamic))[1]


def _struct(x):
    return jax.ShapeDtypeStruct(x.shape, x.dtype) if isinstance(x, jax.core.ShapedArray) else x


def _shaped(x):
    return jax.core.ShapedArray(x.shape, x.dtype) if isinstance(x, jax.ShapeDtypeStruct) else x


def _impl(forward, reverse, consts, dynamic, t_consts, t_dynamic):
    del reverse
    return _tangent(forward, consts, dynamic, t_consts, t_dynamic)


def _abstract_eval(forward, reverse, consts, dynamic, t_consts, t_dynamic):
    del reverse
    args = jtu.tree_map(_struct, (consts, dynamic, t_consts, t_dynamic))
    out = eqx.filter_eval_shape(functools.partial(_tangent, forward), *args)
    return jtu.tree_map(_shaped, out)


def _jvp(primals, tangents):
    # the tangent of the tangent (forward over forward, e.g. jax.jacfwd(jax.jacfwd(...))): the
    # forward-mode derivative differentiated once more
    forward, _, consts, dynamic, t_consts, t_dynamic = primals
    _, _, tt_consts, tt_dynamic, tt_t_consts, tt_t_dynamic = tangents
    return eqx.filter_jvp(
        functools.partial(_tangent, forward),
        (consts, dynamic, t_consts, t_dynamic),
        (tt_consts, tt_dynamic, tt_t_consts, tt_t_dynamic),
    )


def _is_undefined_or_none(x):
    return x is None or isinstance(x, UndefinedPrimal)


def _transpose(inputs, cts_out):
    # the transpose of the tangent map: the reverse-mode derivative of the checkpointed solve
    forward, reverse, consts, dynamic, t_consts, t_dynamic = inputs
    out, vjp = eqx.filter_vjp(reverse, consts, dynamic)
    fill = lambda o, c: (jnp.zeros_like(o) if c is None else c) if eqx.is_inexact_array(o) else None
    cts_out = jtu.tree_map(fill, out, cts_out, is_leaf=_is_none)
    ct_consts, ct_dynamic = vjp(cts_out)
    keep = lambda t, ct: ct if isinstance(t, UndefinedPrimal) else None
    nones = lambda tree: jtu.tree_map(lambda _: None, tree)
    return (
        nones(forward), nones(reverse), nones(consts), nones(dynamic),
        jtu.tree_map(keep, t_consts, ct_consts, is_leaf=_is_undefined_or_none),
        jtu.tree_map(keep, t_dynamic, ct_dynamic, is_leaf=_is_undefined_or_none),
    )


_filtered_transpose = eqxi.filter_primitive_transpose(materialise_zeros=True)(_transpose)


def _transpose_rule(cts, *dynamic, **params):
    # JAX may pass a residual that is a constant as a Python scalar; equinox's flattening counts
    # arrays only
    dynamic = [
        x if isinstance(x, UndefinedPrimal) or eqx.is_array(x) else jnp.asarray(x) for x in dynamic
    ]
    return _filtered_transpose(cts, *dynamic, **params)


_tangent_p = eqxi.create_vprim(
    "geomech_solve_tangent",
    eqxi.filter_primitive_def(_impl),
    eqxi.filter_primitive_def(_abstract_eval),
    eqxi.filter_primitive_jvp(_jvp),
    _transpose_rule,
)
_vprim_batch = jax_batching.fancy_primitive_batchers[_tangent_p]  # equinox's (`create_vprim`)


def _batch_every_input(axis_data, inputs, batch_axes, **params):
    """Under `jax.vmap` (a batched `simulate`), every input of the tangent primitive is given the
    batch axis: equinox's batched transpose returns each input's cotangent with the input's own
    batch axis, so an input shared by the members (a parameter the Lagrangian closes over,
    whose cotangent is per member) must be broadcast here, where JAX transposes the broadcast
    into the sum over the members."""
    if any(b is not None for b in batch_axes):
        inputs = tuple(
            x if b is not None else jnp.broadcast_to(x, (axis_data.size, *jnp.shape(x)))
            for x, b in zip(inputs, batch_axes, strict=True)
        )
        batch_axes = tuple(0 if b is None else b for b in batch_axes)
    return _vprim_batch(axis_data, inputs, batch_axes, **params)


jax_batching.fancy_primitive_batchers[_tangent_p] = _batch_every_input


@eqx.filter_custom_jvp
def _solve(consts, dynamic, *, forward, reverse):
    return reverse(consts, dynamic)


@_solve.def_jvp
def _solve_jvp(primals, tangents, *, forward, reverse):
    (consts, dynamic), (t_consts, t_dynamic) = primals, tangents
    out = _solve(consts, dynamic, forward=forward, reverse=reverse)
    t_out = eqxi.filter_primitive_bind(
        _tangent_p, forward, reverse, consts, dynamic, t_consts, t_dynamic
    )
    return out, t_out


def _is_runge_kutta(x):
    return isinstance(x, diffrax.AbstractRungeKutta)


def _lax_stages(solver):
    """`solver` with the stage loop of every Runge–Kutta method in it (also inside wrappers) a
    `lax` loop, as `diffrax.ForwardMode` makes it for an unwrapped one: the default, a
    checkpointed loop, is a `custom_vjp` (reverse mode only)."""

    def lax_stages(x):
        if not _is_runge_kutta(x) or x.scan_kind is not None:
            return x
        return eqx.tree_at(lambda s: s.scan_kind, x, "lax", is_leaf=lambda y: y is None)

    return jtu.tree_map(lax_stages, solver, is_leaf=_is_runge_kutta)


class ForwardOrReverse(diffrax.AbstractAdjoint):
    """A diffrax adjoint for a solve that may be differentiated in either mode: its values are
    those of `reverse` (a `diffrax.RecursiveCheckpointAdjoint`), its forward-mode derivatives
    those of `diffrax.ForwardMode()`, its reverse-mode derivatives those of `reverse` (see the
    module's docstring)."""

    reverse: diffrax.RecursiveCheckpointAdjoint = diffrax.RecursiveCheckpointAdjoint()  # noqa: B008

    def loop(self, **kwargs):
        dynamic, static = eqx.partition(kwargs, eqx.is_array)

        def run(adjoint, dynamic_):
            kwargs_ = eqx.combine(dynamic_, static)
            if isinstance(adjoint, diffrax.ForwardMode):  # what ForwardMode does to the stages
                kwargs_["solver"] = _lax_stages(kwargs_["solver"])
            return adjoint.loop(**kwargs_)

        # closed-over tracers become explicit inputs, matched by identity between the two modes'
        # programs, so that both differentiate with respect to them
        reverse = eqx.filter_closure_convert(functools.partial(run, self.reverse), dynamic)
        if any(isinstance(c, jax.core.Tracer) for c in reverse.consts):
            forward = eqx.filter_closure_convert(
                functools.partial(run, diffrax.ForwardMode()), dynamic
            )
        else:  # traced only if a forward-mode derivative is taken (`_Deferred`)
            (expected,), _ = eqx.filter(reverse.in_struct, _is_struct)
            forward = _Deferred(functools.partial(run, diffrax.ForwardMode()), expected)
        consts, position = [], {}
        for c in (*reverse.consts, *getattr(forward, "consts", ())):
            if id(c) not in position:
                position[id(c)] = len(consts)
                consts.append(c)

        def shared(conv):
            if isinstance(conv, _Deferred):
                return conv
            index = tuple(position[id(c)] for c in conv.consts)
            bare = eqx.tree_at(lambda c: c.consts, conv, None, is_leaf=_is_none)
            return _Converted(bare, index)

        return _solve(consts, dynamic, forward=shared(forward), reverse=shared(reverse))
