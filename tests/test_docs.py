"""The documentation site builds with `mkdocs build --strict`, and its Python examples run."""

import contextlib
import io
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
from helpers import output_mismatches

ROOT = pathlib.Path(__file__).resolve().parents[1]


def test_mkdocs_build_strict(tmp_path):
    env = {
        **os.environ,
        "NO_MKDOCS_2_WARNING": "1",
        "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
    }
    env.pop("GEOMECH_DOCS_NO_ANIMATION", None)  # the build writes the page's animation
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
        "seeing_it.md",
    ):
        assert page in nav and (ROOT / "docs" / page).exists()
    # the site works without network access: every script and stylesheet is the site's own, and
    # the mathematics renderer is among them
    external = []
    for html in (tmp_path / "site").rglob("*.html"):
        for url in LOADED.findall(html.read_text()):
            if re.match(r"(?:[a-z][a-z0-9+.-]*:)?//", url, flags=re.I):
                external.append(f"{html.relative_to(tmp_path / 'site')}: {url}")
    assert not external, "the built site loads from other hosts:\n" + "\n".join(sorted(set(external)))
    assert "javascripts/mathjax/tex-svg-full.js" in api
    assert (tmp_path / "site" / "javascripts" / "mathjax" / "tex-svg-full.js").stat().st_size > 10**6
    # "Seeing it" embeds the rattleback's animation, written by its own code when the site is built
    seeing = (tmp_path / "site" / "seeing_it" / "index.html").read_text()
    assert '<iframe src="rattleback.html"' in seeing
    animation = tmp_path / "site" / "seeing_it" / "rattleback.html"
    assert 5 * 10**5 < animation.stat().st_size < 2 * 2**20
    assert "rattleback, spun at +5 rad/s" in animation.read_text()
    assert not (tmp_path / "site" / "hooks").exists()  # the hook is not published
    shutil.rmtree(tmp_path / "site")


# what a page loads: <script src=...>, <link href=...> (stylesheets, icons, preconnects), <img src=...>
LOADED = re.compile(r"<(?:script|link|img|iframe)\b[^>]*?\b(?:src|href)=[\"']?([^\"' >]+)", flags=re.I)


def test_external_hosts_are_found():
    page = '<script src="https://unpkg.com/m.js"></script><link href=//fonts.x/y rel=stylesheet><a href="https://x">'
    assert LOADED.findall(page) == ["https://unpkg.com/m.js", "//fonts.x/y"]


# ```python blocks preceded by <!-- not-run: REASON --> are not executed; each such block is
# listed here, so that a new one is a deliberate decision. A block that prints is followed by a
# ```text block with what it prints (compared by `helpers.output_mismatches`: the same text, the
# same numbers to 1 %, round-off as round-off).
NOT_RUN = {"multi_device.md": 3, "seeing_it.md": 3}
BLOCK = re.compile(
    r"(?:<!--\s*not-run:(?P<why>[^>]*)-->\s*\n)?^```python[^\n]*\n(?P<code>.*?)^```[ \t]*\n"
    r"(?:\s*^```text[^\n]*\n(?P<out>.*?)^```)?",
    flags=re.S | re.M,
)
PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]


def python_blocks(path):
    """`(code, reason, shown)` of every ```python block of `path`: `reason` is None for a block to
    run, `shown` the output shown after it (None if none is)."""
    return [(m["code"], m["why"], m["out"]) for m in BLOCK.finditer(path.read_text())]


def test_every_python_block_is_found_and_not_run_blocks_are_justified():
    for path in PAGES:
        text = path.read_text()
        blocks = python_blocks(path)
        assert len(blocks) == text.count("```python"), path.name  # the regex saw every block
        skipped = [why for _, why, _ in blocks if why is not None]
        assert all(why.strip() for why in skipped), path.name
        assert len(skipped) == NOT_RUN.get(path.name, 0), path.name
    assert python_blocks(ROOT / "README.md")  # the README example


def test_shown_outputs_are_compared():
    assert output_mismatches("3 problems:\n  off C 0.5", "3 problems:\n    off C 0.5") == []
    assert output_mismatches("ran 100000 steps, t = 0.05", "ran 4096 steps, t = 0.14")
    assert output_mismatches("2 problems", "1 problem")
    assert output_mismatches("|h| = 5.1e-16", "|h| = 4.7e-16") == []  # both round-off


@pytest.mark.parametrize(
    "path", [p for p in PAGES if python_blocks(p)], ids=lambda p: p.name
)
def test_examples_run_and_print_what_the_page_shows(path):
    """Every runnable block of the page, in order, in one namespace (blocks build on each other);
    what a block prints is the ```text block shown after it."""
    namespace = {}
    for i, (code, why, shown) in enumerate(python_blocks(path)):
        if why is not None:
            assert shown is None, f"{path.name}: block {i} is not run but shows an output"
            continue
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, str(path.relative_to(ROOT)), "exec"), namespace)  # noqa: S102 - our own docs
        where = f"{path.name}, block {i} ({code.strip().splitlines()[0][:60]!r})"
        if shown is None:
            assert not printed.getvalue(), f"{where} prints\n{printed.getvalue()}\nbut the page shows no output"
        else:
            assert not output_mismatches(printed.getvalue(), shown), (
                where + "\n" + "\n".join(output_mismatches(printed.getvalue(), shown))
            )


# -- citations -------------------------------------------------------------------------------------
# Sources are cited by a key of docs/references.md (e.g. [Zanella] (91)); never by a file or a
# tracker that is not in the repository (working notes, the design file, issue numbers, the
# numbered source texts the library was written from).
OUT_OF_REPO = re.compile(
    r"\b[Ss]eeds? 0\d\d\b"  # "seed 001": a source text by its number
    r"|\b[Nn]otes? §"  # "note §7.4": working notes
    r"|\bnotes?/"  # "notes/seed-002-methods.md"
    r"|\bDESIGN\b"  # the design file
    r"|\b[Ii]ssues? #?\d+\b"  # "issue 15": the tracker
    r"|/work/"  # a path on the machine the library was written on
)
# a key: [Balseiro], [MW], [UdwadiaKalaba2001]; not a link [text](...), an index a[N], or [None]
KEY = re.compile(r"(?<![\w\]\[!])\[([A-Z][A-Za-z]+(?:[0-9]{4}[a-z]?)?)\](?![\(\[:])")
NOT_KEYS = {"None", "True", "False"}
SOURCES = [
    *[p for d in ("geomech", "tests", "benchmarks", "notebooks", "docs") for p in (ROOT / d).rglob("*")],
    ROOT / "README.md",
    ROOT / "mkdocs.yml",
    ROOT / "pyproject.toml",
]
TEXT_SUFFIXES = {".py", ".pyi", ".md", ".ipynb", ".json", ".yml", ".toml", ".txt"}


def _source_files():
    return [
        p
        for p in SOURCES
        if p.is_file()
        and p.suffix in TEXT_SUFFIXES
        and "__pycache__" not in p.parts
        and p != pathlib.Path(__file__).resolve()  # this file spells the patterns out
    ]


def _reference_keys():
    text = (ROOT / "docs" / "references.md").read_text()
    return set(re.findall(r"^- \*\*\[([^\]]+)\]\*\*", text, flags=re.M))


def test_sources_are_cited_by_keys_in_the_repository():
    found = []
    for path in _source_files():
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if OUT_OF_REPO.search(line):
                found.append(f"{path.relative_to(ROOT)}:{n}: {line.strip()[:120]}")
    assert not found, "cite by a key of docs/references.md:\n" + "\n".join(found)


def test_every_cited_key_is_in_the_references():
    keys = _reference_keys()
    assert {"Balseiro", "Talamucci", "Zanella", "Goicolea", "IdealConstraintsQA"} <= keys
    missing = []
    for path in _source_files():
        for key in KEY.findall(path.read_text(errors="replace")):
            if key not in keys and key not in NOT_KEYS:
                missing.append(f"{path.relative_to(ROOT)}: [{key}]")
    assert not missing, "keys missing from docs/references.md:\n" + "\n".join(sorted(set(missing)))


def test_the_checks_can_fail():
    assert OUT_OF_REPO.search("the tension of seed 001 (72)")
    assert OUT_OF_REPO.search("see notes/seed-002-methods.md") and OUT_OF_REPO.search("note §7.4")
    assert OUT_OF_REPO.search("(issue 15)") and OUT_OF_REPO.search("DESIGN.md §3")
    assert not OUT_OF_REPO.search("random seed 0, issued by the user")
    assert KEY.findall("[Zanella] (91), [MW] §3.5, [UdwadiaKalaba2001]; a[N], [x](y.md)") == [
        "Zanella",
        "MW",
        "UdwadiaKalaba2001",
    ]


def test_getting_started_lists_every_notebook():
    text = (ROOT / "docs" / "getting_started.md").read_text()
    missing = [p.name for p in sorted((ROOT / "notebooks").glob("*.ipynb")) if p.name not in text]
    assert not missing, f"docs/getting_started.md does not list {missing}"
