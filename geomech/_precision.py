"""The precision guard: tolerances that the floating-point type cannot deliver."""

import warnings

import jax
import jax.numpy as jnp


class PrecisionWarning(UserWarning):
    """The requested tolerances are below what the floating-point precision can deliver."""


def precision_floor(dtype) -> float:
    """The smallest useful `rtol`/`atol` in `dtype`: ten units of round-off, $10\\varepsilon$
    (about `1.2e-6` in float32, `2.2e-15` in float64)."""
    return 10 * float(jnp.finfo(dtype).eps)


def warn_if_imprecise(dtype, rtol, atol) -> None:
    """Warn (once per setting, a `gm.PrecisionWarning`) when `rtol` and `atol` are both below
    `precision_floor(dtype)`: the step-size controller then asks for an error that round-off
    alone exceeds, so steps are rejected until the step size collapses. Traced tolerances are
    not checked (call it before `jit`)."""
    if any(isinstance(x, jax.core.Tracer) for x in (rtol, atol)):
        return
    floor = precision_floor(dtype)
    rtol, atol = float(rtol), float(atol)
    if rtol < floor and atol < floor:
        name = jnp.dtype(dtype).name
        fix = (
            'enable float64 with jax.config.update("jax_enable_x64", True) before creating arrays'
            if name == "float32"
            else "loosen them"
        )
        warnings.warn(
            f"rtol = {rtol:g} and atol = {atol:g} are below what {name} can deliver "
            f"(about {floor:.1e}): {fix}, or use rtol, atol >= {10 * floor:.0e}.",
            PrecisionWarning,
            stacklevel=3,
        )
