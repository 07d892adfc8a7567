"""Every notebook in notebooks/ executes top to bottom, with prose and at least one plot."""

import os
import pathlib

import ipykernel  # noqa: F401 - the kernel the notebooks run in (a test dependency)
import matplotlib  # noqa: F401
import nbclient
import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def test_there_are_notebooks():
    assert len(NOTEBOOKS) >= 6


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_notebook_executes(path, monkeypatch):
    # the kernel imports this checkout's geomech even when it is not installed
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    nb = nbformat.read(path, as_version=4)
    nbclient.NotebookClient(
        nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(path.parent)}}
    ).execute()  # raises CellExecutionError on the first failing cell
    kinds = {cell.cell_type for cell in nb.cells}
    assert {"markdown", "code"} <= kinds
    images = [
        o
        for c in nb.cells
        if c.cell_type == "code"
        for o in c.outputs
        if "image/png" in o.get("data", {})
    ]
    assert images, f"{path.name} draws no plot"
