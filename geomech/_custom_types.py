"""Type aliases for annotations, in the style of diffrax's `_custom_types.py`.

They are checked at run time in the test suite (jaxtyping + beartype, see `tests/conftest.py`).
"""

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np
from jaxtyping import Array, ArrayLike, Bool, Float, Int, PyTree, Real

if TYPE_CHECKING:
    BoolScalarLike = bool | Array | np.ndarray
    FloatScalarLike = float | Array | np.ndarray
    IntScalarLike = int | Array | np.ndarray
    RealScalarLike = int | float | Array | np.ndarray
else:
    BoolScalarLike = Bool[ArrayLike, ""]
    FloatScalarLike = Float[ArrayLike, ""]
    IntScalarLike = Int[ArrayLike, ""]
    RealScalarLike = Real[ArrayLike, ""]

Args = PyTree[Any]
# a vector field `f(t, y, args) -> dy/dt` on a PyTree state, as diffrax's `ODETerm` takes it
VectorField = Callable[[RealScalarLike, PyTree, Args], PyTree]
