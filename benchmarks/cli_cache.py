"""A second `geomech run` against the first: JAX's persistent compilation cache, used by default.

    python benchmarks/cli_cache.py                      # rolling_disk, default end time
    python benchmarks/cli_cache.py --model pendulum --t1 1

Runs `geomech run MODEL --out DIR` three times, each in a fresh process, with a new, empty cache
directory (`GEOMECH_CACHE_DIR`): `first` fills the cache, `second` reads it, `no_cache` passes
`--no-cache`. For each: the wall time of the process (start-up, imports, validation, compilation,
the run, writing the files), the compile time `geomech run` reports (trace, lower, compile of the
simulation) and the compilation cache's count from the run's summary (`programs`, `from_cache`).
Prints one JSON document with the machine and its load at start and end.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from _common import finish, machine_info  # noqa: E402


def _run(model: str, t1, cache: pathlib.Path, out: pathlib.Path, *extra) -> dict:
    argv = [sys.executable, "-m", "geomech", "run", model, "--out", str(out), *extra]
    if t1 is not None:
        argv += ["--t1", str(t1)]
    start = time.perf_counter()
    done = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        env={**os.environ, "GEOMECH_CACHE_DIR": str(cache)},
        timeout=1800,
    )
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed:\n{done.stderr[-3000:]}")
    summary = json.loads((out / f"{model}_summary.json").read_text())
    return {
        "wall_s": wall,
        "compile_s": summary["compile_s"],
        "run_s": summary["run_s"],
        "compilation_cache": summary["compilation_cache"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="rolling_disk")
    parser.add_argument("--t1", type=float, default=None, help="default: the model's")
    args = parser.parse_args()
    out = {"model": args.model, "t1": args.t1, "machine": machine_info()}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = pathlib.Path(tmp)
        cache = tmp / "cache"
        for name, extra in (("first", ()), ("second", ()), ("no_cache", ("--no-cache",))):
            out[name] = _run(args.model, args.t1, cache, tmp / name, *extra)
            print(f"[bench] {name}: {out[name]}", file=sys.stderr, flush=True)
        out["cache_bytes"] = sum(f.stat().st_size for f in cache.iterdir())
    out["second_over_first_wall"] = out["second"]["wall_s"] / out["first"]["wall_s"]
    out["second_over_first_compile"] = out["second"]["compile_s"] / out["first"]["compile_s"]
    finish(out)


if __name__ == "__main__":
    main()
