"""benchmarks/hybrid_cost.py at a tiny size: it runs and prints a timing per condition it
names, for each size (the README's *Store benchmark* decomposition comes from it)."""

from __future__ import annotations

import re
import sys
from types import ModuleType

import pytest

from tests.store.conftest import load_benchmark


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    return load_benchmark("hybrid_cost.py")


def test_the_benchmark_times_each_condition_at_each_size(bench: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(sys, "argv", ["hybrid_cost.py", "--sizes", "200", "400", "--queries", "5"])
    bench.main()
    out = capsys.readouterr().out
    assert "| condition | N = 200 | N = 400 |" in out
    rows = {line.split(" | ")[0].lstrip("| "): re.findall(r"\d+\.\d+", line) for line in out.splitlines() if line.startswith("| ") and "condition" not in line}
    assert {"dense", bench.GLOBAL_HYBRID, bench.MEMSDK_HYBRID} <= set(rows)
    assert {bench.ALONE_DENSE, bench.ALONE_HYBRID} <= set(rows)
    assert len(rows) == 9 and all(len(cells) == 2 and all(float(c) > 0 for c in cells) for cells in rows.values())
    assert re.search(r"N = 400: hybrid - dense p95 [+-]\d+\.\d+ ms \(memsdk\), [+-]\d+\.\d+ ms with global IDF, [+-]\d+\.\d+ ms in a store of the scope.s tier alone", out)
