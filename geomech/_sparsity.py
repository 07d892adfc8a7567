"""Structural zeros of a traced function: which entries of its outputs are zero for every input.

`nonzero_pattern(fn, *args)` traces `fn` to a jaxpr and runs it on boolean masks instead of numbers
("may this entry be nonzero?"): every input entry and every traced parameter may be nonzero; a
value computed from constants alone (the basis vectors of `jax.jacfwd`, `jnp.eye`, literals) is
evaluated exactly; each primitive maps masks to masks by a rule that never claims a zero that
could be nonzero (a sum is nonzero where any term is, a product where all factors are, a
reshape moves the mask along with the values, ...). A primitive without a rule, a data-dependent
index or a control-flow primitive (`cond`, `while`, `scan`) makes all of its outputs "maybe
nonzero". The pattern is therefore sound (a `False` entry is exactly zero for every input and
every value of the parameters) but may report as nonzero an entry that happens to vanish.

The stages use it to recognize a diagonal mass matrix and sparse constraint Jacobians at trace
time (the structure is static; values stay traced and differentiable).
"""

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jax.extend import core as jex

# -- rules ---------------------------------------------------------------------------------------
# Two registries keyed by the JAX primitive's name (`tests/test_stages_fast_paths.py` pins every
# name to a primitive of the installed JAX):
# - `_MOVES[name](params, arrays)`: primitives that move entries without arithmetic, applied alike
#   to masks and to known values;
# - `_RULES[name](eqn, masks, values)`: everything else, on masks, where `values[i]` is the exact
#   numpy value of input i when it is known (computed from constants alone), else None.
# Both return the list of outputs. A primitive in neither makes all its outputs maybe nonzero.

_MOVES: dict[str, Callable] = {}
_RULES: dict[str, Callable] = {}


def _register(registry: dict, *names: str):
    def add(rule):
        for name in names:
            registry[name] = rule
        return rule

    return add


def _ones(eqn):
    return [np.ones(v.aval.shape, bool) for v in eqn.outvars]


@_register(_MOVES, "broadcast_in_dim")
def _broadcast_in_dim(p, arrays):
    x, shape = arrays[0], p["shape"]
    s = [1] * len(shape)
    for i, d in enumerate(p["broadcast_dimensions"]):
        s[d] = x.shape[i]
    return [np.broadcast_to(x.reshape(s), shape)]


@_register(_MOVES, "reshape")
def _reshape(p, arrays):
    x = arrays[0]
    if p.get("dimensions") is not None:
        x = np.transpose(x, p["dimensions"])
    return [np.reshape(x, p["new_sizes"])]


@_register(_MOVES, "slice")
def _slice(p, arrays):
    x = arrays[0]
    strides = p["strides"] or (1,) * x.ndim
    idx = zip(p["start_indices"], p["limit_indices"], strides, strict=True)
    return [x[tuple(slice(s, l, st) for s, l, st in idx)]]


_MOVES.update(
    squeeze=lambda p, a: [np.squeeze(a[0], axis=tuple(p["dimensions"]))],
    transpose=lambda p, a: [np.transpose(a[0], p["permutation"])],
    concatenate=lambda p, a: [np.concatenate(a, axis=p["dimension"])],
    split=lambda p, a: list(np.split(a[0], np.cumsum(p["sizes"])[:-1], axis=p["axis"])),
    stack=lambda p, a: [np.stack(a, axis=p["axis"])],
    unstack=lambda p, a: [np.take(a[0], i, axis=p["axis"]) for i in range(a[0].shape[p["axis"]])],
    rev=lambda p, a: [np.flip(a[0], tuple(p["dimensions"]))],
    copy=lambda p, a: [a[0]],
    sharding_constraint=lambda p, a: [a[0]],
    reduce_precision=lambda p, a: [a[0]],
    optimization_barrier=lambda p, a: list(a),
)

_register(_RULES, *_MOVES)(lambda eqn, masks, values: _MOVES[eqn.primitive.name](eqn.params, masks))

# f(0) = 0: an elementwise f keeps the zeros of its argument
_register(
    _RULES,
    *("neg", "sin", "tan", "tanh", "sinh", "asin", "atan", "asinh", "atanh", "sqrt", "cbrt"),
    *("expm1", "log1p", "abs", "sign", "erf", "erf_inv", "floor", "ceil", "round", "real"),
    *("imag", "conj", "square", "convert_element_type", "stop_gradient"),
)(lambda eqn, masks, values: [masks[0]])


@_register(_RULES, "mul", "and")
def _any_zero(eqn, masks, values):  # zero where any operand is zero
    return [np.logical_and.reduce(np.broadcast_arrays(*masks))]


@_register(_RULES, "add", "add_any", "sub", "max", "min", "or", "xor", "select_and_scatter_add")
def _all_zero(eqn, masks, values):  # zero where every operand is zero
    return [np.logical_or.reduce(np.broadcast_arrays(*masks))]


@_register(_RULES, "div", "rem")
def _div(eqn, masks, values):  # x / y is zero where x is, unless y is (then it is NaN or inf)
    return [masks[0] | ~masks[1]]


@_register(_RULES, "integer_pow")
def _integer_pow(eqn, masks, values):
    return [masks[0]] if eqn.params["y"] > 0 else _ones(eqn)


@_register(_RULES, "pow")
def _pow(eqn, masks, values):
    y = values[1]
    if y is not None and np.all(y > 0):
        return [np.broadcast_to(masks[0], eqn.outvars[0].aval.shape)]
    return _ones(eqn)


@_register(_RULES, "pad")
def _pad_rule(eqn, masks, values):
    padval = True if values[1] is None else bool(values[1] != 0)
    return [_pad(masks[0], padval, eqn.params["padding_config"])]


def _pad(x, padval, padding_config):
    for axis, (lo, hi, interior) in enumerate(padding_config):
        if interior:
            size = x.shape[axis] + (x.shape[axis] - 1) * interior if x.shape[axis] else 0
            shape = list(x.shape)
            shape[axis] = size
            y = np.full(shape, padval, x.dtype)
            idx = [slice(None)] * x.ndim
            idx[axis] = slice(None, None, interior + 1)
            y[tuple(idx)] = x
            x = y
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(max(-lo, 0), x.shape[axis] - max(-hi, 0))
        x = x[tuple(idx)]
        widths = [(0, 0)] * x.ndim
        widths[axis] = (max(lo, 0), max(hi, 0))
        x = np.pad(x, widths, constant_values=padval)
    return x


@_register(_RULES, "select_n")
def _select_n(eqn, masks, values):  # the case a known predicate picks, else any of them
    shape = eqn.outvars[0].aval.shape
    cases = [np.broadcast_to(m, shape) for m in masks[1:]]
    if values[0] is not None:
        return [np.choose(np.broadcast_to(np.asarray(values[0], int), shape), cases)]
    return [np.logical_or.reduce(cases)]


def _dot_general(x, y, dimension_numbers):
    """`lax.dot_general` in numpy (a sum of products; booleans: any over the contraction)."""
    (lc, rc), (lb, rb) = dimension_numbers
    lf = [i for i in range(x.ndim) if i not in lc and i not in lb]
    rf = [i for i in range(y.ndim) if i not in rc and i not in rb]
    xs = np.transpose(x, [*lb, *lf, *lc])
    ys = np.transpose(y, [*rb, *rc, *rf])
    nb = math.prod(x.shape[i] for i in lb)
    nc = math.prod(x.shape[i] for i in lc)
    xm = xs.reshape(nb, -1, nc)
    ym = ys.reshape(nb, nc, -1)
    if x.dtype == bool:
        out = np.matmul(xm.astype(np.float64), ym.astype(np.float64)) > 0
    else:
        out = np.matmul(xm, ym)
    shape = [x.shape[i] for i in lb] + [x.shape[i] for i in lf] + [y.shape[i] for i in rf]
    return out.reshape(shape)


_RULES["dot_general"] = lambda eqn, masks, values: [
    _dot_general(masks[0], masks[1], eqn.params["dimension_numbers"])
]
_register(_RULES, "reduce_sum", "reduce_max", "reduce_min")(
    lambda eqn, masks, values: [np.any(masks[0], axis=tuple(eqn.params["axes"]))]
)
_RULES["reduce_prod"] = lambda eqn, masks, values: [
    np.all(masks[0], axis=tuple(eqn.params["axes"]))
]


def _cumulative(combine):
    def rule(eqn, masks, values):
        x, axis, reverse = masks[0], eqn.params["axis"], eqn.params["reverse"]
        x = np.flip(x, axis) if reverse else x
        y = combine.accumulate(x, axis=axis)
        return [np.flip(y, axis) if reverse else y]

    return rule


_register(_RULES, "cumsum", "cummax", "cummin")(_cumulative(np.logical_or))
_RULES["cumprod"] = _cumulative(np.logical_and)


def _clamped_starts(operand, starts, sizes):
    return [
        int(np.clip(int(s), 0, d - n)) for s, d, n in zip(starts, operand.shape, sizes, strict=True)
    ]


@_register(_RULES, "dynamic_slice")
def _dynamic_slice(eqn, masks, values):
    if any(v is None for v in values[1:]):
        return None
    sizes = eqn.params["slice_sizes"]
    starts = _clamped_starts(masks[0], values[1:], sizes)
    return [masks[0][tuple(slice(s, s + n) for s, n in zip(starts, sizes, strict=True))]]


@_register(_RULES, "dynamic_update_slice")
def _dynamic_update_slice(eqn, masks, values):
    if any(v is None for v in values[2:]):
        return None
    upd = masks[1]
    starts = _clamped_starts(masks[0], values[2:], upd.shape)
    out = masks[0].copy()
    out[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape, strict=True))] = upd
    return [out]


@_register(_RULES, "gather", "scatter-add", "scatter")
def _indexed(eqn, masks, values):
    """The primitive itself on 0/1 masks with the known indices: entries move (or add up,
    without cancellation)."""
    index_pos = 1
    if values[index_pos] is None:
        return None
    args = [  # in the operands' own dtypes: a scatter's update computation is typed by them
        m.astype(x.aval.dtype) if v is None or i != index_pos else v
        for i, (m, v, x) in enumerate(zip(masks, values, eqn.invars, strict=True))
    ]
    with jax.ensure_compile_time_eval():
        outs = eqn.primitive.bind(*[jnp.asarray(a) for a in args], **eqn.params)
    outs = outs if eqn.primitive.multiple_results else [outs]
    return [np.asarray(o) != 0 for o in outs]


# Exact values of equations whose inputs are all known, in numpy where it is cheap (any other
# primitive is bound eagerly by JAX): `_VALUES[name](params, values)` returns the list of outputs.
def _elementwise(f):
    return lambda p, v: [f(*v)]


_VALUES: dict[str, Callable] = {
    name: _elementwise(f)
    for name, f in {
        "add": np.add,
        "add_any": np.add,
        "sub": np.subtract,
        "mul": np.multiply,
        "neg": np.negative,
        "max": np.maximum,
        "min": np.minimum,
        "eq": np.equal,
        "ne": np.not_equal,
        "lt": np.less,
        "le": np.less_equal,
        "gt": np.greater,
        "ge": np.greater_equal,
        "and": np.logical_and,
        "or": np.logical_or,
        "not": np.logical_not,
        "sin": np.sin,
        "cos": np.cos,
        "exp": np.exp,
        "sqrt": np.sqrt,
        "abs": np.abs,
        "sign": np.sign,
    }.items()
}
_VALUES.update(
    _MOVES,
    convert_element_type=lambda p, v: [v[0]],
    select_n=lambda p, v: [np.choose(np.asarray(v[0], int), np.broadcast_arrays(*v[1:]))],
    dot_general=lambda p, v: [_dot_general(v[0], v[1], p["dimension_numbers"])],
    reduce_sum=lambda p, v: [np.sum(v[0], axis=tuple(p["axes"]))],
    iota=lambda p, v: [
        np.broadcast_to(
            np.arange(p["shape"][p["dimension"]]).reshape(
                [-1 if i == p["dimension"] else 1 for i in range(len(p["shape"]))]
            ),
            p["shape"],
        )
    ],
)


def _evaluate(eqn, values):
    """The exact value of an equation whose inputs are all known."""
    rule = _VALUES.get(eqn.primitive.name)
    if rule is None:
        with jax.ensure_compile_time_eval():
            res = eqn.primitive.bind(*[jnp.asarray(v) for v in values], **eqn.params)
        out = res if eqn.primitive.multiple_results else [res]
    else:
        with np.errstate(all="ignore"):
            out = rule(eqn.params, values)
    dtypes = [np.dtype(v.aval.dtype) for v in eqn.outvars]
    return [np.asarray(o).astype(d) for o, d in zip(out, dtypes, strict=True)]


_CALL_PARAMS = ("jaxpr", "call_jaxpr", "fun_jaxpr")


def _sub_jaxpr(eqn):
    """The jaxpr a call-like primitive (`pjit`, `custom_jvp_call`, `closed_call`, `checkpoint`, ...)
    applies to its inputs, or None."""
    if eqn.primitive.name in ("cond", "while", "scan"):
        return None
    for key in _CALL_PARAMS:
        sub = eqn.params.get(key)
        if isinstance(sub, jex.ClosedJaxpr):
            jaxpr, consts = sub.jaxpr, sub.consts
        elif isinstance(sub, jex.Jaxpr):
            jaxpr, consts = sub, []
        else:
            continue
        if len(jaxpr.invars) == len(eqn.invars) and len(jaxpr.outvars) == len(eqn.outvars):
            return jaxpr, consts
    return None


def _known_const(c):
    if isinstance(c, jax.core.Tracer):
        return None
    try:
        return np.asarray(c)
    except Exception:  # e.g. an abstract or deleted array
        return None


def _step(eqn, ins):
    """(mask, value-or-None) of each output of one equation from those of its inputs."""
    masks = [m for m, _ in ins]
    values = [val for _, val in ins]
    if all(val is not None for val in values) and not eqn.effects:
        return [(o != 0, o) for o in _evaluate(eqn, values)]
    sub = _sub_jaxpr(eqn)
    if sub is not None:
        return _run(sub[0], sub[1], ins)
    rule = _RULES.get(eqn.primitive.name)
    out_masks = None if rule is None else rule(eqn, masks, values)
    return [(m, None) for m in (_ones(eqn) if out_masks is None else out_masks)]


def _run(jaxpr, consts, inputs):
    """`inputs`: list of (mask, value-or-None) for jaxpr.invars; returns those of the outputs."""
    env = {}

    def read(v):
        if isinstance(v, jex.Literal):
            val = np.asarray(v.val)
            return val != 0, val
        return env[v]

    def write(v, mask, value):
        if not isinstance(v, jex.DropVar):
            env[v] = (np.broadcast_to(np.asarray(mask, bool), v.aval.shape), value)

    for v, c in zip(jaxpr.constvars, consts, strict=True):
        val = _known_const(c)
        write(v, np.ones(v.aval.shape, bool) if val is None else val != 0, val)
    for v, (m, val) in zip(jaxpr.invars, inputs, strict=True):
        write(v, m, val)
    for eqn in jaxpr.eqns:
        results = _step(eqn, [read(v) for v in eqn.invars])
        for v, (m, val) in zip(eqn.outvars, results, strict=True):
            write(v, m, val)
    return [read(v) for v in jaxpr.outvars]


def jaxpr_nonzero_pattern(closed: jex.ClosedJaxpr) -> list[np.ndarray]:
    """The structural nonzero pattern of each output of `closed`, every input maybe nonzero."""
    inputs = [(np.ones(v.aval.shape, bool), None) for v in closed.jaxpr.invars]
    return [m for m, _ in _run(closed.jaxpr, closed.consts, inputs)]


def nonzero_pattern(fn: Callable, *args):
    """Boolean arrays shaped like the outputs of `fn(*args)`: `False` where the output is zero
    for every value of `args` and of the traced parameters `fn` closes over.

    **Arguments:**

    - `fn`: a JAX-traceable function.
    - `args`: arrays or `jax.ShapeDtypeStruct`s (only shapes and dtypes are used).

    **Returns:** the pytree of `fn`'s outputs with a boolean numpy array for each leaf.
    """
    closed, out_shape = jax.make_jaxpr(fn, return_shape=True)(*args)
    masks = jaxpr_nonzero_pattern(closed)
    return jax.tree_util.tree_unflatten(jax.tree_util.tree_structure(out_shape), masks)
