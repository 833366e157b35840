"""examples/langgraph_store.py end to end, in-process through main(), on the embedded
default (the real MiniLM; no LLM is called)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytest.importorskip("langmem", reason="the example runs LangMem's tools")

pytestmark = pytest.mark.slow

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "langgraph_store.py"


def test_the_langgraph_store_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("langgraph_store_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    example.DATA_DIR = tmp_path / "demo"  # not build/: a test leaves the checkout alone
    example.main()  # it asserts its own story: ranking, LangMem's search, the namespaces
    out = capsys.readouterr().out
    assert "UPDATE  by api: 'Maya works as a nurse' -> 'Maya works as a pilot since May'" in out
    assert "after client.restore: {'content': 'Maya lives in Lyon'}" in out
