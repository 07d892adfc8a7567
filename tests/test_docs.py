"""The documentation site builds with `mkdocs build --strict`, and its Python examples run."""

import os
import pathlib
import re
import shutil
import subprocess
import sys

import material  # noqa: F401 - mkdocs-material, mkdocs and mkdocstrings are test dependencies:
import mkdocs  # noqa: F401   a missing one fails here instead of skipping
import mkdocstrings  # noqa: F401
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
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


# ```python blocks preceded by <!-- not-run: REASON --> are not executed; each such block is
# listed here, so that a new one is a deliberate decision
NOT_RUN = {"multi_device.md": 3}
BLOCK = re.compile(
    r"(?:<!--\s*not-run:(?P<why>[^>]*)-->\s*\n)?^```python[^\n]*\n(?P<code>.*?)^```",
    flags=re.S | re.M,
)
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def python_blocks(path):
    """`(code, reason)` of every ```python block of `path` (`reason` is None for a block to run)."""
    return [(m["code"], m["why"]) for m in BLOCK.finditer(path.read_text())]


def test_every_python_block_is_found_and_not_run_blocks_are_justified():
    for path in PAGES:
        text = path.read_text()
        blocks = python_blocks(path)
        assert len(blocks) == text.count("```python"), path.name  # the regex saw every block
        skipped = [why for _, why in blocks if why is not None]
        assert all(why.strip() for why in skipped), path.name
        assert len(skipped) == NOT_RUN.get(path.name, 0), path.name
    assert python_blocks(ROOT / "README.md")  # the README example


@pytest.mark.parametrize(
    "path", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name
)
def test_examples_run(path):
    """Every runnable block of the page, in order, in one namespace (blocks build on each other)."""
    namespace = {}
    for code, why in python_blocks(path):
        if why is None:
            exec(compile(code, str(path.relative_to(ROOT)), "exec"), namespace)  # noqa: S102 - our own docs
