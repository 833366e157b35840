"""The README stays a newcomer's page: at most 120 lines, none over 120 characters, every
```python block runs as written (or an HTML comment right above it says why it cannot:
``<!-- not run: needs a memsdk serve -->``), every relative link and anchor resolves, and
the install lines name extras and make targets that exist."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MAX_LINES = 120
MAX_WIDTH = 120

FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```[ \t]*$", re.DOTALL | re.MULTILINE)
NOT_RUN = re.compile(r"<!-- not run: \S.*? -->\s*\Z", re.DOTALL)
INLINE_LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
REFERENCE_DEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(\S+)", re.MULTILINE)


def _text() -> str:
    return README.read_text(encoding="utf-8")


def _python_blocks() -> list[tuple[int, str, bool]]:
    """(line number, code, whether a ``<!-- not run: reason -->`` comment stands right above)."""
    text, blocks = _text(), []
    for m in FENCE.finditer(text):
        if m.group(1).strip().split(" ")[0] in ("python", "py", "python3"):
            line = text.count("\n", 0, m.start()) + 1
            blocks.append((line, m.group(2), bool(NOT_RUN.search(text[: m.start()]))))
    return blocks


def _runnable() -> list[tuple[int, str]]:
    return [(line, code) for line, code, skipped in _python_blocks() if not skipped]


def _links() -> list[str]:
    text = FENCE.sub("", _text())  # a link inside a code block is code
    return [m.group(1) for m in INLINE_LINK.finditer(text)] + [m.group(1) for m in REFERENCE_DEF.finditer(text)]


def _slug(heading: str) -> str:
    """The anchor mkdocs (Python-Markdown's toc) gives a heading."""
    heading = re.sub(r"[^\w\s-]", "", heading).strip().lower()
    return re.sub(r"[-\s]+", "-", heading)


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {_slug(m.group(1)) for m in re.finditer(r"^#{1,6} +(.+?) *#*$", text, re.MULTILINE)}


def test_readme_is_at_most_120_lines() -> None:
    lines = len(_text().splitlines())
    assert lines <= MAX_LINES, f"README.md has {lines} lines (at most {MAX_LINES}); move detail into docs/"


def test_no_readme_line_is_over_120_characters() -> None:
    wide = [(i, len(line)) for i, line in enumerate(_text().splitlines(), 1) if len(line) > MAX_WIDTH]
    assert not wide, f"README.md lines over {MAX_WIDTH} characters (line, length): {wide}"


def test_every_python_block_runs_or_says_why_not() -> None:
    blocks = _python_blocks()
    # a block without its `<!-- not run: reason -->` is run by test_readme_python_block_runs
    assert blocks, "README.md has no ```python block: where did the quickstarts go?"
    assert _runnable(), "every README example is marked not run: at least the quickstart must run"


@pytest.mark.slow
@pytest.mark.parametrize("line,code", _runnable(), ids=lambda v: f"line-{v}" if isinstance(v, int) else "code")
def test_readme_python_block_runs(line: int, code: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("MEMSDK_DATA_DIR", None)  # the block's own data_dir, in the temporary folder
    (tmp_path / "readme_example.py").write_text(code)
    done = subprocess.run(
        [sys.executable, "readme_example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"README.md line {line} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    assert done.stdout.strip(), f"README.md line {line} printed nothing"


def test_every_relative_link_points_at_a_file_that_exists() -> None:
    links = _links()
    assert links, "README.md links to nothing"
    broken = []
    for target in links:
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # a URL (https:, mailto:)
        path, _, anchor = target.partition("#")
        file = README.parent / path if path else README
        if not file.is_file():
            broken.append(target)
        elif anchor and file.suffix == ".md" and anchor not in _anchors(file):
            broken.append(target)
    assert not broken, f"README.md links to missing files or headings: {broken}"


def test_install_lines_name_extras_and_make_targets_that_exist() -> None:
    text = _text()
    extras = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"])
    named = {e.strip() for group in re.findall(r"pip install [\"']?\.\[([^\]]+)\]", text) for e in group.split(",")}
    assert named, "README.md has no `pip install \".[extra]\"` line"
    assert named <= extras, f"extras the README names that pyproject.toml lacks: {named - extras}"
    targets = set(re.findall(r"^([A-Za-z][\w-]*):", (ROOT / "Makefile").read_text(), re.MULTILINE))
    made = set(re.findall(r"^make ([\w-]+)", text, re.MULTILINE))
    assert {"demo", "test"} <= made, made
    assert made <= targets, f"make targets the README names that the Makefile lacks: {made - targets}"
