"""mkdocs hook: the rattleback animation embedded in docs/seeing_it.md.

After the site is built, the page's rattleback code block (the one that writes
"rattleback.html") is run in a temporary directory and its page moved to
site/seeing_it/rattleback.html, next to the page that embeds it: what the site shows is what that
code writes. It simulates 10 s of the rattleback (half a minute of compilation on a CPU); set
GEOMECH_DOCS_NO_ANIMATION=1 to leave it out while editing (`mkdocs serve` rebuilds often)."""

import contextlib
import os
import pathlib
import re
import shutil
import tempfile

PAGE = pathlib.Path(__file__).resolve().parents[1] / "seeing_it.md"


def rattleback_code() -> str:
    """The python block of docs/seeing_it.md that writes rattleback.html."""
    blocks = re.findall(r"^```python\n(.*?)^```", PAGE.read_text(encoding="utf-8"), re.S | re.M)
    (code,) = [b for b in blocks if '"rattleback.html"' in b]
    return code


def on_post_build(config, **kwargs):
    if os.environ.get("GEOMECH_DOCS_NO_ANIMATION"):
        return
    target = pathlib.Path(config["site_dir"]) / "seeing_it" / "rattleback.html"
    with tempfile.TemporaryDirectory(prefix="geomech-docs-") as tmp:
        with contextlib.chdir(tmp):
            exec(compile(rattleback_code(), str(PAGE), "exec"), {})  # noqa: S102 - our own docs
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(os.path.join(tmp, "rattleback.html"), target)
