"""What the store tests share: the benchmark scripts (under benchmarks/, not a package, so
loaded by path) and an embedder whose cosines never tie."""

from __future__ import annotations

import importlib.util
import sys
import zlib
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

import numpy as np

from memsdk.embedding import HashEmbedder
from memsdk.types import ScoredMemory

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def load_benchmark(script: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{Path(script).stem}_benchmark", BENCHMARKS / script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the class is built
    spec.loader.exec_module(module)
    return module


class Jittered(HashEmbedder):
    """`HashEmbedder` plus a small direction of each text's own, so no two cosines tie. Tests
    that compare two layouts' rankings need it: the engine orders a tie by its own point
    order, which a copy into another shard changes."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = super().embed(texts)
        for row, text in enumerate(texts):
            out[row] += 0.05 * np.random.default_rng(zlib.crc32(text.encode())).standard_normal(self.dim)
        return out / np.linalg.norm(out, axis=1, keepdims=True)


def ranked(hits: list[ScoredMemory]) -> list[tuple[float, frozenset[str]]]:
    """Hits as groups of texts by score, best first, the last group left empty. Reciprocal-rank
    fusion ties by construction (first in one half and second in the other, or the reverse),
    the engine orders a tie by its point order, and the limit may cut the last group."""
    groups: dict[float, set[str]] = {}
    for h in hits:
        groups.setdefault(round(h.score, 6), set()).add(h.record.text)
    return [(score, frozenset(texts)) for score, texts in groups.items()][:-1] + [(min(groups), frozenset())]
