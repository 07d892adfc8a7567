"""A bridge from SymPy: build a `LagrangianSystem` from symbolic $L$, constraints and forces.

Expressions are written either in plain SymPy symbols (`q`, `v` given explicitly) or in
`sympy.physics.mechanics` dynamicsymbols (`q(t)`, with $v = \\dot q$ by default). They are compiled
to JAX with `sympy.lambdify` and the `jax.numpy` printer, so the resulting system is jit-, vmap- and
grad-compatible like any hand-written one. SymPy is imported only when the bridge is used.
"""

import builtins
import dis
import math
import types
from collections.abc import Callable, Mapping, Sequence

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._constraint import AbstractConstraint, Constraint, HolonomicConstraint, Subspace
from ._geometry import AbstractManifold
from ._system import LagrangianSystem


def _sympy():
    try:
        import sympy
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("gm.from_sympy needs SymPy: pip install 'geomech[sympy]'.") from e
    return sympy


class SympyFunction(eqx.Module):
    """A SymPy expression (scalar, vector or matrix) compiled to a JAX function.

    Called with the arrays named by `arguments` (e.g. `(q, v)`, or `(t, q, v)` when time
    dependent); the parameters are an array field, so `eqx.filter_grad` differentiates through them.
    """

    fn: Callable = eqx.field(static=True)
    params: Float[Array, " p"]
    shape: tuple[int, ...] = eqx.field(static=True)
    source: str = eqx.field(static=True, repr=False)

    def __call__(self, *args):
        dtype = jnp.result_type(*(jnp.asarray(a) for a in args), float)
        scalars = []
        for a in args:
            a = jnp.asarray(a, dtype)
            scalars.extend([a] if a.ndim == 0 else list(a))
        out = self.fn(*scalars, *self.params)
        if self.shape == ():
            return jnp.asarray(out, dtype)
        flat = [jnp.asarray(o, dtype) for o in out]
        return jnp.stack(flat).reshape(self.shape)


def _check_symbols(coordinates, velocities, params, time):
    """Coordinates, velocities, parameters and time must be distinct symbols."""
    for what, xs in (("coordinates", coordinates), ("velocities", velocities)):
        repeated = sorted({str(x) for x in xs if xs.count(x) > 1})
        if repeated:
            raise ValueError(f"{what} contain {', '.join(repeated)} more than once.")
    both = [str(v) for v in velocities if v in coordinates]
    if both:
        raise ValueError(
            f"velocities {', '.join(both)} are also coordinates: give each velocity its own "
            "symbol (e.g. v_x for x), or dynamicsymbols whose velocities are their derivatives."
        )
    roles = {"a coordinate": coordinates, "a velocity": velocities, "the time": [time]}
    for p, value in params.items():
        for role, xs in roles.items():
            if any(p == x for x in xs):
                raise ValueError(f"parameter {p} is {role}: parameters are the other symbols.")
        try:
            finite = math.isfinite(float(value))
        except (TypeError, ValueError):
            finite = False
        if not finite:
            raise ValueError(f"parameter {p} must have a finite number as value, got {value!r}.")
    if time is not None and (time in coordinates or time in velocities):
        raise ValueError(f"the time {time} is also a coordinate or velocity.")


def _check_values(sp, name, exprs):
    """Real, finite expressions of defined functions only."""
    for e in exprs:
        if e.has(sp.I):
            raise ValueError(
                f"{name} contains the imaginary unit I: expressions must be real (e.g. write "
                "sp.sqrt of a non-negative quantity, or split into real and imaginary parts)."
            )
        if e.has(sp.zoo, sp.oo, sp.nan):
            raise ValueError(f"{name} contains an infinite or undefined constant (oo, zoo, nan).")
        undefined = sorted({str(f.func) for f in e.atoms(sp.core.function.AppliedUndef)})
        if undefined:
            raise ValueError(
                f"{name} contains the undefined function(s) {', '.join(undefined)}: replace them "
                "by expressions (or, for dynamicsymbols, list them as coordinates)."
            )


def _global_names(code) -> set[str]:
    """The global names a compiled function (and the code nested in it) looks up."""
    names = {
        i.argval for i in dis.get_instructions(code) if i.opname in ("LOAD_GLOBAL", "LOAD_NAME")
    }
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _global_names(const)
    return names


def _check_printed(fn, name):
    """Every function in the lambdified code must exist in the JAX namespace: a function the
    printer does not know (e.g. `besselj`) is printed by name and would fail at the first call."""
    missing = sorted(
        n
        for n in _global_names(fn.__code__)
        if n not in fn.__globals__ and not hasattr(builtins, n)
    )
    if missing:
        raise ValueError(
            f"{name} uses {', '.join(missing)}, which SymPy's JAX printer does not support: "
            "rewrite it in elementary functions (e.g. expr.rewrite(...) or a series), or "
            "implement it as a hand-written JAX function."
        )


def _is_function_of_time(sp, x):
    return isinstance(x, sp.core.function.AppliedUndef)


def _as_list(sp, exprs, name):
    if exprs is None:
        return None
    if isinstance(exprs, sp.MatrixBase):
        return list(exprs), exprs.shape
    if isinstance(exprs, sp.Basic) or isinstance(exprs, (int, float)):
        return [sp.sympify(exprs)], (1,)
    exprs = [sp.sympify(e) for e in exprs]
    if not exprs:
        raise ValueError(f"{name} is empty: pass None instead.")
    return exprs, (len(exprs),)


def from_sympy(
    lagrangian,
    coordinates: Sequence,
    velocities: Sequence | None = None,
    *,
    constraints=None,
    holonomic=None,
    force=None,
    work_annihilator=None,
    known_work=None,
    parameters: Mapping | None = None,
    time=None,
    manifold: AbstractManifold | None = None,
) -> LagrangianSystem:
    """Build a `LagrangianSystem` from SymPy expressions.

    **Arguments:**

    - `lagrangian`: $L$, a SymPy expression in the coordinates, velocities, parameters (and time).
    - `coordinates`: the $n$ coordinates $q^i$: SymPy symbols, or dynamicsymbols $q^i(t)$.
    - `velocities`: the symbols $v^i$; defaults to $\\dot q^i$ for dynamicsymbols (required for
        plain symbols).
    - `constraints`: $\\phi(q, v) = 0$ (3.6), a list or column `Matrix` of expressions, possibly
        nonlinear in the velocities.
    - `holonomic`: $h(q) = 0$, imposed as $Dh\\,v = 0$ (kept for position-level stabilization).
    - `force`: the external force $F^e(q, v)$, $n$ expressions (covector components).
    - `work_annihilator`: a $k \\times n$ `Matrix` $C(q, v)$ with $\\mathcal{W} = \\ker C$ (§3.2);
        `None` means $\\mathcal{W} = \\mathcal{D}$.
    - `known_work`: $F^0(q, v)$ of §5.2, $n$ expressions.
    - `parameters`: `{symbol: value}` for every other free symbol; values become a differentiable
        array field of the compiled functions.
    - `time`: the time symbol; defaults to `dynamicsymbols._t` for dynamicsymbols. If it appears
        in any expression the system is time dependent.
    - `manifold`: passed to `LagrangianSystem`.

    **Returns:** a `LagrangianSystem`.
    """
    sp = _sympy()
    from sympy.physics.mechanics import dynamicsymbols

    coordinates = list(coordinates)
    n = len(coordinates)
    if n == 0:
        raise ValueError("from_sympy needs at least one coordinate.")
    dynamic = [_is_function_of_time(sp, c) for c in coordinates]
    if any(dynamic) and not all(dynamic):
        raise ValueError("coordinates must be all plain symbols or all dynamicsymbols, not a mix.")
    if time is None and all(dynamic):
        time = dynamicsymbols._t
    if velocities is None:
        if not all(dynamic):
            raise ValueError(
                "with plain SymPy symbols as coordinates, pass the velocity symbols too: "
                "from_sympy(L, [x, y], [vx, vy], ...)."
            )
        velocities = [c.diff(time) for c in coordinates]
    velocities = list(velocities)
    if len(velocities) != n:
        raise ValueError(f"{n} coordinates but {len(velocities)} velocities.")
    params = dict(parameters or {})
    _check_symbols(coordinates, velocities, params, time)

    qs = [sp.Dummy(f"q{i}") for i in range(n)]
    vs = [sp.Dummy(f"v{i}") for i in range(n)]
    psyms = list(params)
    pvals = jnp.asarray([float(params[p]) for p in psyms]) if psyms else jnp.zeros((0,))
    tsym = sp.Dummy("t")
    # velocities first: they may be Derivative(q(t), t), which contains q(t)
    to_dummies = [*zip(velocities, vs, strict=True), *zip(coordinates, qs, strict=True)]
    if time is not None:
        to_dummies.append((time, tsym))

    def convert(exprs):
        out = []
        for e in exprs:
            for old, new in to_dummies:
                e = sp.sympify(e).subs(old, new)
            out.append(e)
        return out

    groups = {}
    for name, value in (
        ("lagrangian", lagrangian),
        ("constraints", constraints),
        ("holonomic", holonomic),
        ("force", force),
        ("work_annihilator", work_annihilator),
        ("known_work", known_work),
    ):
        got = _as_list(sp, value, name)
        if got is not None:
            groups[name] = (convert(got[0]), got[1])

    allowed = {*qs, *vs, *psyms, tsym}
    for name, (exprs, _) in groups.items():
        _check_values(sp, name, exprs)
        extra = set().union(*(e.free_symbols for e in exprs)) - allowed
        if extra:
            names = ", ".join(sorted(str(s) for s in extra))
            raise ValueError(
                f"{name} contains symbols that are neither coordinates, velocities nor parameters: "
                f"{names}. Give them values with parameters={{symbol: value}}."
            )
        if name == "holonomic" and any(e.has(*vs) for e in exprs):
            raise ValueError(
                "holonomic constraints h(q) must not contain velocities; use constraints=."
            )
    time_dependent = any(e.has(tsym) for exprs, _ in groups.values() for e in exprs)
    if groups["lagrangian"][1] != (1,):
        raise ValueError("lagrangian must be a single scalar expression.")

    def compile_(name, uses_v, shape):
        exprs = groups[name][0]
        args = ([tsym] if time_dependent else []) + qs + (vs if uses_v else []) + psyms
        body = exprs[0] if shape == () else exprs
        fn = sp.lambdify(args, body, modules=[{"ImmutableDenseMatrix": jnp.array}, "jax"], cse=True)
        _check_printed(fn, name)
        return SympyFunction(fn, pvals, shape, str(body))

    def shape_of(name):
        shape = groups[name][1]
        return shape if len(shape) == 2 and shape[1] != 1 else (shape[0],)

    L = compile_("lagrangian", True, ())
    parts: list[AbstractConstraint] = []
    if "holonomic" in groups:
        parts.append(HolonomicConstraint(compile_("holonomic", False, shape_of("holonomic"))))
    if "constraints" in groups:
        parts.append(Constraint(compile_("constraints", True, shape_of("constraints"))))
    constraint = (
        None if not parts else parts[0] if len(parts) == 1 else AbstractConstraint.stack(parts)
    )
    work_space = None
    if "work_annihilator" in groups:
        shape = groups["work_annihilator"][1]
        if len(shape) != 2 or shape[1] != n:
            raise ValueError(f"work_annihilator must be a k x {n} sympy Matrix, got shape {shape}.")
        work_space = Subspace(annihilator=compile_("work_annihilator", True, shape))
    vector = lambda name: compile_(name, True, (n,)) if name in groups else None
    for name in ("force", "known_work"):
        if name in groups and groups[name][1][0] != n:
            raise ValueError(f"{name} must have {n} components (one per coordinate).")
    return LagrangianSystem(
        L,
        force=vector("force"),
        constraint=constraint,
        work_space=work_space,
        known_work=vector("known_work"),
        manifold=manifold,
        time_dependent=time_dependent,
    )
