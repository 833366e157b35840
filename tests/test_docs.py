"""The README and the docs site cannot rot: the README stays short, every relative link in it
and in docs/ points at a file that exists, the README's quickstarts run as written, and the
site builds with `mkdocs build --strict` (broken links, anchors and docstrings fail it) from
result pages that scripts/render_results.py keeps up to date."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.DOTALL | re.MULTILINE)


def _links(path: Path) -> list[str]:
    text = FENCE.sub("", path.read_text())  # links inside code blocks are code
    return [m.group(1) for m in LINK.finditer(text)]


def _markdown_files() -> list[Path]:
    return [README, ROOT / "CHANGELOG.md", *sorted(DOCS.rglob("*.md"))]


def _quickstarts() -> list[tuple[str, str]]:
    """The ```python blocks under the README's headings that start with 'Quickstart'."""
    blocks, heading = [], ""
    text = README.read_text()
    for m in re.finditer(r"^(#+ [^\n]*)$|^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE):
        if m.group(1):
            heading = m.group(1).lstrip("#").strip()
        elif heading.lower().startswith("quickstart"):
            blocks.append((heading, m.group(2)))
    return blocks


def test_readme_is_at_most_200_lines() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= 200, f"README.md has {lines} lines; move detail into docs/"


@pytest.mark.parametrize("path", _markdown_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(path: Path) -> None:
    broken = []
    for target in _links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL (http:, mailto:) or an anchor on the same page
        file = target.split("#", 1)[0]
        if not (path.parent / file).exists():
            broken.append(target)
    assert not broken, f"{path.relative_to(ROOT)}: links to missing files: {broken}"


def test_the_readme_has_a_sync_and_an_async_quickstart() -> None:
    blocks = _quickstarts()
    assert len(blocks) == 2, [h for h, _ in blocks]
    assert any("AsyncMemoryClient" in code for _, code in blocks)
    assert any("MemoryClient(" in code and "Async" not in code for _, code in blocks)


@pytest.mark.slow
@pytest.mark.parametrize("heading,code", _quickstarts(), ids=lambda v: v if len(v) < 40 else "code")
def test_readme_quickstart_runs_as_written(heading: str, code: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("MEMSDK_DATA_DIR", None)
    (tmp_path / "quickstart.py").write_text(code)
    done = subprocess.run([sys.executable, "quickstart.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{heading} failed:\n{done.stdout}\n{done.stderr[-4000:]}"
    assert done.stdout.strip(), f"{heading} printed nothing"


NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*\n```python", re.MULTILINE)


def _docs_examples() -> list[tuple[str, str]]:
    """Every ```python block of docs/*.md, unless an HTML comment right above it says why it
    is not run (``<!-- not run: needs a memsdk serve -->``)."""
    out = []
    for page in sorted(DOCS.glob("*.md")):
        text = page.read_text()
        skipped = {m.end() for m in NOT_RUN.finditer(text)}
        for i, m in enumerate(re.finditer(r"^```python\n(.*?)^```", text, re.DOTALL | re.MULTILINE)):
            if m.start() + len("```python") not in skipped:
                out.append((f"{page.name}#{i + 1}", m.group(1)))
    return out


def test_every_docs_example_is_run_or_says_why_not() -> None:
    pages = {name.split("#")[0] for name, _ in _docs_examples()}
    assert {"client.md", "getting-started.md", "storage.md", "policies.md"} <= pages, pages
    every = sum(text.count("```python") for text in (p.read_text() for p in DOCS.glob("*.md")))
    assert len(_docs_examples()) + sum(len(NOT_RUN.findall(p.read_text())) for p in DOCS.glob("*.md")) == every


@pytest.mark.slow
@pytest.mark.parametrize("where,code", _docs_examples(), ids=lambda v: v if "#" in v and len(v) < 40 else "code")
def test_docs_example_runs_as_written(where: str, code: str, tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false", "MEMSDK_DATA_DIR": str(tmp_path / "data")}
    (tmp_path / "example.py").write_text(code)
    done = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{where} failed:\n{done.stdout}\n{done.stderr[-4000:]}"


def test_results_pages_are_rendered_from_the_result_files() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "render_results.py"), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, f"docs/results is stale; run `python scripts/render_results.py`:\n{done.stderr}"


def test_every_results_page_is_in_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    pages = sorted(p.relative_to(DOCS).as_posix() for p in (DOCS / "results").glob("*.md"))
    assert pages
    missing = [p for p in pages if p not in nav]
    assert not missing, f"add to mkdocs.yml's nav: {missing}"


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings_handlers.python")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "api" / "index.html").exists()
    api = (tmp_path / "site" / "api" / "index.html").read_text()
    assert "memsdk.MemoryClient.answer" in api
    # the async client's methods show the docstrings they take from the sync client at import
    from memsdk import MemoryClient

    first_line = (MemoryClient.answer.__doc__ or "").strip().splitlines()[0]
    after = api[api.index('id="memsdk.AsyncMemoryClient.answer"') :]
    assert first_line and first_line in after[: after.index('id="memsdk.AsyncMemoryClient.', 10)]
