"""Every notebook in notebooks/ executes top to bottom, with prose and at least one plot, and is
saved with its outputs: executing it again prints what the saved file shows (the same text and
numbers, compared by `helpers.output_mismatches`). Refresh the saved outputs with
`python notebooks/execute.py`."""

import pathlib
import re
import sys

import ipykernel  # noqa: F401 - the kernel the notebooks run in (a test dependency)
import matplotlib  # noqa: F401
import nbformat
import pytest
from helpers import output_mismatches

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
sys.path.insert(0, str(ROOT / "notebooks"))
from execute import execute  # noqa: E402 - notebooks/execute.py, the script that saves them

# printed measurements of this machine's speed, not results: left out of the comparison
TIMING = re.compile(r"[\d.,]+ ms after compilation: [\d.,]+ trajectories/s")


def printed(nb) -> list[tuple[int, str]]:
    """`(cell index, text)` of the code cells that print or display a value: everything they
    print, in order (one print may arrive as several stream outputs, or two as one)."""
    out = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        texts = []
        for o in cell.outputs:
            if o.output_type == "stream":
                texts.append(o.text)
            elif o.output_type == "error":
                texts.append(f"{o.ename}: {o.evalue}\n")
            elif "text/plain" in o.get("data", {}) and "text/html" not in o.data:
                texts.append(o.data["text/plain"] + "\n")
        if texts:
            out.append((i, TIMING.sub("<timing>", "".join(texts))))
    return out


def images(nb) -> int:
    return sum(
        "image/png" in o.get("data", {})
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
    )


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_saved_notebook_carries_its_outputs(path):
    nb = nbformat.read(path, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert all(c.execution_count is not None for c in code), f"{path.name} is saved unexecuted"
    assert not any(o.output_type == "error" for c in code for o in c.outputs), path.name
    assert printed(nb) and images(nb), f"{path.name} is saved without its numbers or plots"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes_and_prints_what_it_shows(path):
    saved = nbformat.read(path, as_version=4)
    nb = execute(path, timeout=300)  # raises CellExecutionError on the first failing cell
    kinds = {cell.cell_type for cell in nb.cells}
    assert {"markdown", "code"} <= kinds
    assert images(nb), f"{path.name} draws no plot"
    assert images(nb) == images(saved), f"{path.name}: other plots than saved; re-save it"
    got, shown = printed(nb), printed(saved)
    assert [i for i, _ in got] == [i for i, _ in shown], (
        f"{path.name}: other cells print; re-save it"
    )
    problems = [
        f"cell {i}: {m}"
        for (i, a), (_, b) in zip(got, shown, strict=True)
        for m in output_mismatches(a, b)
    ]
    assert not problems, f"{path.name} prints other numbers than it shows:\n" + "\n".join(problems)
