"""geomech: constrained Lagrangian mechanics in the invariant (Vershik–Faddeev) form, in JAX."""

import lazy_loader as _lazy

# The public names are the imports listed in `__init__.pyi` (read by type checkers and the docs);
# each is imported on first use, so that `geomech --help` and `geomech list` start without JAX.
__getattr__, __dir__, __all__ = _lazy.attach_stub(__name__, __file__)

__version__ = "0.1.0"
