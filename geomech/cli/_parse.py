"""The command line: argument parsing and every check that needs no JAX.

Everything here runs before JAX, diffrax or the models are imported, so `geomech --help`,
`geomech list` and mistakes in the arguments answer at once.
"""

import argparse
import difflib
import math
from collections.abc import Sequence

from .._cache import ENV, default_cache_dir

EXIT_USER_ERROR = 2
EXIT_FAILED = 1
EXIT_INTERRUPTED = 130

SOLVERS = (
    "projection",
    "gauss",
    "gibbs-appell",
    "gibbs-appell-d",
    "kane",
    "multipliers",
    "momentum",
)


class UsageError(Exception):
    """A mistake in the command line or the model's set-up; reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        raise UsageError(f"{message} (see `{self.prog} --help`)")


INT_MAX = 2**31 - 1  # counts the compiled program holds as (32-bit) integers


def _integer(raw: str) -> int:
    """An integer, also written as a float with an integer value (`1e6`)."""
    try:
        return int(raw)
    except ValueError:
        value = float(raw)  # a ValueError here: not a number
        if not value.is_integer():  # also inf and nan
            raise ValueError(raw) from None
        return int(value)


def _number(kind, low=None, *, strict=False, high=None, name="value"):
    """An argparse type: a finite `kind` (int or float) with `value >= low` (`> low` if strict) and
    `value <= high`."""

    def convert(raw: str):
        try:
            value = _integer(raw) if kind is int else kind(raw)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"needs {'an integer' if kind is int else 'a number'}, got {raw!r}"
            ) from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"needs a finite number, got {raw!r}")
        if low is not None and (value <= low if strict else value < low):
            raise argparse.ArgumentTypeError(
                f"must be {'>' if strict else '>='} {low:g}, got {raw}"
            )
        if high is not None and value > high:
            raise argparse.ArgumentTypeError(f"must be <= {high}, got {raw}")
        return value

    convert.__name__ = name
    return convert


def parser() -> argparse.ArgumentParser:
    cache = default_cache_dir()
    p = _Parser(
        prog="geomech",
        description="Constrained Lagrangian mechanics in JAX: simulate the library's models.",
        epilog=f"Compiled programs are kept in {cache} (JAX's persistent compilation cache; "
        f"${ENV} moves it, --no-cache skips it), so a second run starts at once. "
        "Exit status: 0 success, 1 failed trajectories, 2 bad input, 130 interrupted.",
    )
    no_cache = dict(
        action="store_true",
        help=f"do not keep or load compiled programs in {cache} (the persistent compilation "
        f"cache; ${ENV} moves it)",
    )
    p.add_argument("--float32", action="store_true", help="use float32 (default float64)")
    sub = p.add_subparsers(dest="command", required=True, parser_class=_Parser)

    sub.add_parser("list", help="the models, their coordinates, constraints and parameters")

    params = dict(
        action="append", default=[], metavar="k=v", help="set a model parameter (repeatable)"
    )
    r = sub.add_parser("run", help="simulate a model once, print a summary, write plots and data")
    r.add_argument("model")
    r.add_argument("--solver", default="projection", choices=SOLVERS)
    r.add_argument(
        "--batch",
        type=_number(int, 1, high=INT_MAX),
        default=1,
        help="trajectories (an ensemble): trajectory 0 starts at the model's initial state "
        "(q0, v0), trajectory b > 0 at (q0 + 0.02 xi_b, v0 + 0.02 eta_b; q0 ⊕ 0.02 xi_b on a "
        "Lie group) with standard normal "
        "xi_b, eta_b (drawn from --seed; 0.02 in the model's units), moved onto the constraints "
        "by gm.project_to_constraints",
    )
    r.add_argument(
        "--t1", type=_number(float), default=None, help="end time (default: the model's)"
    )
    r.add_argument("--param", **params)
    r.add_argument(
        "--out",
        default=None,
        help="directory for the data and plots, named after the model: MODEL.npz, MODEL.csv, "
        "MODEL_summary.json, MODEL_*.png (runs of different models can share one)",
    )
    r.add_argument(
        "--overwrite", action="store_true", help="replace an earlier run of MODEL in --out"
    )
    r.add_argument(
        "--animate",
        action="store_true",
        help="also write MODEL.html into --out: the body moving in 3-D, one self-contained page "
        "(rigid and rolling bodies, the rolling disk, the sleigh; see `geomech list`)",
    )
    r.add_argument(
        "--points", type=_number(int, 2, high=INT_MAX), default=201, help="saved time points (>= 2)"
    )
    r.add_argument("--rtol", type=_number(float, 0, strict=True), default=None, help="> 0")
    r.add_argument("--atol", type=_number(float, 0, strict=True), default=None, help="> 0")
    r.add_argument(
        "--max-steps",
        type=_number(int, 1, high=INT_MAX),
        default=100_000,
        help="per trajectory (default 100000)",
    )
    r.add_argument(
        "--max-output-mb",
        type=_number(float, 0, strict=True),
        default=2048.0,
        help="refuse a run whose saved output would exceed this (default 2048 MB)",
    )
    r.add_argument(
        "--seed", type=_number(int, 0, high=2**32 - 1), default=0, help="of the --batch states"
    )
    r.add_argument(
        "--repeat",
        type=_number(int, 0, high=INT_MAX),
        default=0,
        help="run the compiled simulation N more times for a steady-state rate",
    )
    r.add_argument("--progress", action="store_true", help="show a progress bar")
    r.add_argument("--no-cache", **no_cache)
    r.add_argument("--float32", action="store_true", dest="float32_sub", help=argparse.SUPPRESS)

    c = sub.add_parser("compare", help="every solver side by side, with the largest disagreement")
    c.add_argument("model")
    c.add_argument("--param", **params)
    c.add_argument(
        "--states", type=_number(int, 1, high=INT_MAX), default=32, help="random states on C (>= 1)"
    )
    c.add_argument("--seed", type=_number(int, 0, high=2**32 - 1), default=0)
    c.add_argument(
        "--tol",
        type=_number(float, 0, strict=True),
        default=1e-8,
        help="exit 1 if the disagreement exceeds this",
    )
    c.add_argument("--no-cache", **no_cache)
    c.add_argument("--float32", action="store_true", dest="float32_sub", help=argparse.SUPPRESS)

    d = sub.add_parser("demo", help="a short tour")
    d.add_argument("--no-cache", **no_cache)
    return p


def _parse_value(key: str, default, raw: str):
    """A parameter value of the default's type (a number, or a comma list where it is `None`; a
    comma list of the same length where it is a list)."""
    if isinstance(default, list):
        need = f"a comma list of {len(default)} numbers (e.g. {','.join(map(str, default))})"
    else:
        need = f"a {'number' if default is None else type(default).__name__} value"
    try:
        if isinstance(default, str):
            return raw
        if isinstance(default, bool):
            return {"true": True, "false": False}[raw.lower()]
        if isinstance(default, int):
            return int(raw)
        values = [float(x) for x in raw.split(",")]
        if isinstance(default, list):
            if len(values) != len(default):
                raise ValueError
            return tuple(_finite(key, values, raw))
        if default is not None and len(values) != 1:
            raise ValueError
    except (KeyError, ValueError):
        raise UsageError(f"parameter {key} needs {need}, got {raw!r}.") from None
    values = _finite(key, values, raw)
    return values[0] if len(values) == 1 else tuple(values)


def _finite(key: str, values: list[float], raw: str) -> list[float]:
    if not all(math.isfinite(x) for x in values):
        raise UsageError(f"parameter {key} needs finite values, got {raw!r}.")
    return values


def parse_params(name: str, info: dict, items: Sequence[str]) -> dict:
    """`--param k=v` items checked against the model's parameters (from the catalog)."""
    defaults = info["parameters"]
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--param takes key=value, got {item!r}.")
        if key in info.get("fixed_parameters", ()):
            raise UsageError(
                f"parameter {key!r} of model {name} is not a number and cannot be set from the "
                f"command line (use geomech.models in Python); settable: {', '.join(defaults)}."
            )
        if key not in defaults:
            valid = ", ".join(defaults) or "(none)"
            raise UsageError(f"model {name} has no parameter {key!r}; its parameters are: {valid}.")
        out[key] = _parse_value(key, defaults[key], raw)
    return out


def model_info(catalog: dict, name: str) -> dict:
    if name not in catalog:
        close = difflib.get_close_matches(name, catalog, n=1, cutoff=0.6)
        guess = f"did you mean {close[0]}? " if close else ""
        raise UsageError(
            f"unknown model {name!r}; {guess}the models are: {', '.join(catalog)} (`geomech list`)."
        )
    return catalog[name]
