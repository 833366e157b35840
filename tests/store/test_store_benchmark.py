"""benchmarks/store.py at a tiny size: it runs, and its IDF corpus table times the corpora
it names (the figures in the README's *Store benchmark* come from it)."""

from __future__ import annotations

import re
import sys
from types import ModuleType

import pytest

from memsdk.store import Where
from memsdk.store.base import scope_tier_key
from tests.store.conftest import load_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("store.py")


def test_each_timed_corpus_is_the_one_its_row_names(bench: ModuleType) -> None:
    search = dict(scope_key="k", kind="memory", deleted=False, tier="semantic")
    corpora = {name: cls(**search).corpus for name, cls in bench.IDF_CORPORA.items()}
    assert corpora[bench.MEMSDK_CORPUS] == Where("k", None, scope_tier=scope_tier_key("k", "semantic"))  # what memsdk searches with
    assert corpora["scope, tier (two conditions)"] == Where("k", None, tier="semantic")
    assert corpora["whole filter"] == Where(**search)
    assert corpora["scope alone"] == Where("k", None)


def test_the_benchmark_prints_the_idf_table(bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["store.py", "--sizes", "300", "--queries", "5", "--edge-only"])
    bench.main()
    out = capsys.readouterr().out
    table = out.split("by BM25 IDF corpus")[1]
    assert f"| N | dense | {' | '.join(bench.IDF_CORPORA)} | memsdk - dense |" in table
    row = next(line for line in table.splitlines() if line.startswith("| 300 |"))
    cells = re.findall(r"(\d+\.\d+) / (\d+\.\d+)", row)
    assert len(cells) == 1 + len(bench.IDF_CORPORA)  # dense and each corpus, one scope / one user
    assert all(float(a) > 0 and float(b) > 0 for a, b in cells)
