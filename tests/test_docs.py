"""The documentation site builds with `mkdocs build --strict`, and its Python examples run."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    pytest.importorskip("material")
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert (
        "Integrate the constrained dynamics" in api
    )  # mkdocstrings rendered gm.simulate's docstring
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in (
        "getting_started.md",
        "theory.md",
        "solvers.md",
        "models.md",
        "analysis.md",
        "api.md",
        "sharp_bits.md",
        "multi_device.md",
        "rotating_bodies.md",
    ):
        assert page in nav and (ROOT / "docs" / page).exists()
    shutil.rmtree(tmp_path / "site")


def python_blocks(page):
    text = (ROOT / "docs" / page).read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("page", ["index.md", "getting_started.md", "rotating_bodies.md"])
def test_examples_run(page):
    blocks = python_blocks(page)
    assert blocks
    if any("sympy" in b for b in blocks):
        pytest.importorskip("sympy")
    namespace = {}
    for block in blocks:
        if "pip install" in block:
            continue
        exec(compile(block, f"docs/{page}", "exec"), namespace)  # noqa: S102 - our own docs
