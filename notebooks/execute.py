"""Execute notebooks top to bottom and save them with their outputs (plots and printed numbers).

    python notebooks/execute.py                    # every notebook in this folder
    python notebooks/execute.py 03_nonholonomic    # some of them

The saved outputs are what the documentation shows; `tests/test_notebooks.py` executes each
notebook again and checks that it prints the same numbers."""

import os
import pathlib
import sys

import nbclient
import nbformat

HERE = pathlib.Path(__file__).resolve().parent


def execute(path: pathlib.Path, timeout: int = 600) -> nbformat.NotebookNode:
    """`path`'s notebook executed in a fresh kernel that imports this checkout's geomech."""
    os.environ["PYTHONPATH"] = os.pathsep.join([str(HERE.parent), os.environ.get("PYTHONPATH", "")])
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb,
        timeout=timeout,
        kernel_name="python3",
        record_timing=False,  # no wall-clock metadata in the saved file
        resources={"metadata": {"path": str(path.parent)}},
    ).execute()
    return nb


def main(names: list[str]) -> None:
    paths = [HERE / f"{n.removesuffix('.ipynb')}.ipynb" for n in names] or sorted(
        HERE.glob("*.ipynb")
    )
    for path in paths:
        print(f"executing {path.name} ...", flush=True)
        nbformat.write(execute(path), path)


if __name__ == "__main__":
    main(sys.argv[1:])
