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
# A rule gets (masks, values, eqn) where masks[i] is the boolean mask of input i and values[i] is
# its exact numpy value if it is known (computed from constants only), else None; it returns the
# masks of the outputs (a list).

_ZERO_AT_ZERO = {  # f(0) = 0: an elementwise f keeps the zeros of its argument
    "neg",
    "sin",
    "tan",
    "tanh",
    "sinh",
    "asin",
    "atan",
    "asinh",
    "atanh",
    "sqrt",
    "cbrt",
    "expm1",
    "log1p",
    "abs",
    "sign",
    "erf",
    "erf_inv",
    "floor",
    "ceil",
    "round",
    "real",
    "imag",
    "conj",
    "square",
    "convert_element_type",
    "copy",
    "copy_p",
    "reduce_precision",
    "sharding_constraint",
    "mesh_cast",
    "stop_gradient",
    "optimization_barrier",
}
_ANY_ZERO = {"mul", "and"}  # zero where any operand is zero
_ALL_ZERO = {"add", "add_any", "sub", "max", "min", "or", "xor", "select_and_scatter_add"}


def _ones(eqn):
    return [np.ones(v.aval.shape, bool) for v in eqn.outvars]


def _broadcast_in_dim(x, shape, broadcast_dimensions, **_):
    s = [1] * len(shape)
    for i, d in enumerate(broadcast_dimensions):
        s[d] = x.shape[i]
    return np.broadcast_to(x.reshape(s), shape)


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


def _cumulative(x, axis, reverse, op):
    if reverse:
        x = np.flip(x, axis)
    y = op.accumulate(x, axis=axis)
    return np.flip(y, axis) if reverse else y


def _clamped_starts(operand, starts, sizes):
    return [
        int(np.clip(int(s), 0, d - n)) for s, d, n in zip(starts, operand.shape, sizes, strict=True)
    ]


def _structural(name, params, arrays):
    """Primitives that move entries around without arithmetic, applied to numpy arrays (values
    or masks alike). Returns a list of outputs, or None if `name` is not one of them."""
    p = params
    x = arrays[0] if arrays else None
    if name == "broadcast_in_dim":
        return [_broadcast_in_dim(x, p["shape"], p["broadcast_dimensions"])]
    if name == "reshape":
        if p.get("dimensions") is not None:
            x = np.transpose(x, p["dimensions"])
        return [np.reshape(x, p["new_sizes"])]
    if name == "squeeze":
        return [np.squeeze(x, axis=tuple(p["dimensions"]))]
    if name == "expand_dims":
        return [np.expand_dims(x, tuple(p["dimensions"]))]
    if name == "transpose":
        return [np.transpose(x, p["permutation"])]
    if name == "slice":
        strides = p["strides"] or (1,) * x.ndim
        idx = tuple(
            slice(s, l, st)
            for s, l, st in zip(p["start_indices"], p["limit_indices"], strides, strict=True)
        )
        return [x[idx]]
    if name == "concatenate":
        return [np.concatenate(arrays, axis=p["dimension"])]
    if name == "split":
        return list(np.split(x, np.cumsum(p["sizes"])[:-1], axis=p["axis"]))
    if name == "stack":
        return [np.stack(arrays, axis=p["axis"])]
    if name == "unstack":
        return [np.take(x, i, axis=p["axis"]) for i in range(x.shape[p["axis"]])]
    if name == "rev":
        return [np.flip(x, tuple(p["dimensions"]))]
    if name in ("copy", "copy_p", "sharding_constraint", "mesh_cast", "reduce_precision"):
        return [x]
    if name == "optimization_barrier":
        return list(arrays)
    return None


def _mask_rule(eqn, masks, values):
    name, p = eqn.primitive.name, eqn.params
    out = _structural(name, p, masks)
    if out is not None:
        return out
    if name == "pad":
        padval = values[1]
        return [_pad(masks[0], True if padval is None else bool(padval != 0), p["padding_config"])]
    if name in _ZERO_AT_ZERO:
        return [masks[0]]
    if name in _ANY_ZERO:
        return [
            np.logical_and(*masks)
            if len(masks) == 2
            else np.logical_and.reduce(np.broadcast_arrays(*masks))
        ]
    if name in _ALL_ZERO:
        return [np.logical_or.reduce(np.broadcast_arrays(*masks))]
    if name in ("div", "rem"):  # x / y is zero where x is, unless y is (then it is NaN or inf)
        return [masks[0] | ~masks[1]]
    if name == "integer_pow":
        return [masks[0]] if p["y"] > 0 else _ones(eqn)
    if name == "pow":
        y = values[1]
        return (
            [np.broadcast_to(masks[0], eqn.outvars[0].aval.shape)]
            if y is not None and np.all(y > 0)
            else _ones(eqn)
        )
    if name == "select_n":  # the case a known predicate picks, else any of them
        shape = eqn.outvars[0].aval.shape
        cases = [np.broadcast_to(m, shape) for m in masks[1:]]
        if values[0] is not None:
            return [np.choose(np.broadcast_to(np.asarray(values[0], int), shape), cases)]
        return [np.logical_or.reduce(cases)]
    if name == "dot_general":
        return [_dot_general(masks[0], masks[1], p["dimension_numbers"])]
    if name in ("reduce_sum", "reduce_max", "reduce_min"):
        return [np.any(masks[0], axis=tuple(p["axes"]))]
    if name == "reduce_prod":
        return [np.all(masks[0], axis=tuple(p["axes"]))]
    if name in ("cumsum", "cummax", "cummin"):
        return [_cumulative(masks[0], p["axis"], p["reverse"], np.logical_or)]
    if name == "cumprod":
        return [_cumulative(masks[0], p["axis"], p["reverse"], np.logical_and)]
    if name == "dynamic_slice" and all(v is not None for v in values[1:]):
        starts = _clamped_starts(masks[0], values[1:], p["slice_sizes"])
        return [
            masks[0][tuple(slice(s, s + n) for s, n in zip(starts, p["slice_sizes"], strict=True))]
        ]
    if name == "dynamic_update_slice" and all(v is not None for v in values[2:]):
        upd = masks[1]
        starts = _clamped_starts(masks[0], values[2:], upd.shape)
        out = masks[0].copy()
        out[tuple(slice(s, s + n) for s, n in zip(starts, upd.shape, strict=True))] = upd
        return [out]
    if name in ("gather", "scatter-add", "scatter_add", "scatter"):
        index_pos = 1
        if values[index_pos] is None:
            return _ones(eqn)
        # the primitive itself on 0/1 masks: entries move (or add up, without cancellation)
        # (in the operands' own dtypes: a scatter's update computation is typed by them)
        args = [
            m.astype(x.aval.dtype) if v is None or i != index_pos else v
            for i, (m, v, x) in enumerate(zip(masks, values, eqn.invars, strict=True))
        ]
        with jax.ensure_compile_time_eval():
            outs = eqn.primitive.bind(*[jnp.asarray(a) for a in args], **p)
        outs = outs if eqn.primitive.multiple_results else [outs]
        return [np.asarray(o) != 0 for o in outs]
    return None


_NUMPY_ELEMENTWISE = {
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
}


def _evaluate(eqn, values):
    """The exact value of an equation whose inputs are all known (numpy where it is cheap, else
    JAX eagerly)."""
    name, p = eqn.primitive.name, eqn.params
    dtypes = [np.dtype(v.aval.dtype) for v in eqn.outvars]
    out = None
    if name == "iota":
        out = [
            np.broadcast_to(
                np.arange(p["shape"][p["dimension"]]).reshape(
                    [-1 if i == p["dimension"] else 1 for i in range(len(p["shape"]))]
                ),
                p["shape"],
            )
        ]
    elif name == "convert_element_type":
        out = [values[0]]
    elif name in _NUMPY_ELEMENTWISE and not (name == "div"):
        with np.errstate(all="ignore"):
            out = [_NUMPY_ELEMENTWISE[name](*values)]
    elif name == "select_n":
        out = [np.choose(np.asarray(values[0], int), np.broadcast_arrays(*values[1:]))]
    elif name == "dot_general":
        out = [_dot_general(values[0], values[1], p["dimension_numbers"])]
    elif name == "reduce_sum":
        out = [np.sum(values[0], axis=tuple(p["axes"]))]
    else:
        out = _structural(name, p, values)
    if out is None:
        with jax.ensure_compile_time_eval():
            res = eqn.primitive.bind(*[jnp.asarray(v) for v in values], **p)
        out = res if eqn.primitive.multiple_results else [res]
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
            env[v] = (np.asarray(mask, bool), value)

    for v, c in zip(jaxpr.constvars, consts, strict=True):
        val = _known_const(c)
        write(v, np.ones(v.aval.shape, bool) if val is None else val != 0, val)
    for v, (m, val) in zip(jaxpr.invars, inputs, strict=True):
        write(v, m, val)
    for eqn in jaxpr.eqns:
        ins = [read(v) for v in eqn.invars]
        masks = [m for m, _ in ins]
        values = [val for _, val in ins]
        if all(val is not None for val in values) and not eqn.effects:
            outs = _evaluate(eqn, values)
            for v, o in zip(eqn.outvars, outs, strict=True):
                write(v, o != 0, o)
            continue
        sub = _sub_jaxpr(eqn)
        if sub is not None:
            results = _run(sub[0], sub[1], ins)
        else:
            out_masks = _mask_rule(eqn, masks, values)
            if out_masks is None:
                out_masks = _ones(eqn)
            results = [(m, None) for m in out_masks]
        for v, (m, val) in zip(eqn.outvars, results, strict=True):
            write(v, np.broadcast_to(m, v.aval.shape), val)
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
