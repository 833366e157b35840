"""The embedding cache: exact hits, bounded size, one inner call for repeated texts."""

from __future__ import annotations

import numpy as np

from memsdk.embedding import CachedEmbedder, HashEmbedder


class Counting(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(32)
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        return super().embed(texts)


def test_repeated_texts_are_embedded_once_and_identically() -> None:
    inner = Counting()
    cached = CachedEmbedder(inner, size=2)
    first = cached.embed(["a dog named Buddy", "lives in Paris", "a dog named Buddy"])
    again = cached.embed(["lives in Paris", "a dog named Buddy"])
    assert inner.calls == [["a dog named Buddy", "lives in Paris"]]
    assert np.array_equal(again, first[[1, 0]]) and np.array_equal(first[0], first[2])
    cached.embed(["third text"])  # evicts the oldest of two entries
    cached.embed(["a dog named Buddy"])
    assert inner.calls[-1] == ["a dog named Buddy"]
    assert np.array_equal(cached.embed(["x y"]), HashEmbedder(32).embed(["x y"]))
