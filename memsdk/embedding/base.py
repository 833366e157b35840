"""The embedder contract, and a deterministic hashing embedder for tests of pure logic."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

__all__ = ["Embedder", "HashEmbedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed size."""

    @property
    def dim(self) -> int: ...

    @property
    def name(self) -> str:
        """Identifies the model, so a store built with one embedder is not read with another."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """[len(texts), dim] float32, each row of unit length; one batched call."""
        ...


_TOKEN = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Bag of lower-cased words hashed into ``dim`` signed buckets.

    Not a language model: texts that share words are similar, others are not. It loads in
    no time and is identical on every machine, which is what unit tests of the bank need.
    """

    def __init__(self, dim: int = 64) -> None:
        self._dim = dim

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return f"hash-{self._dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        out = np.zeros((len(texts), self._dim), dtype=np.float32)
        for row, text in enumerate(texts):
            for token in _TOKEN.findall(text.lower()):
                h = int.from_bytes(hashlib.blake2b(token.encode(), digest_size=8).digest(), "little")
                out[row, h % self._dim] += 1.0 if (h >> 32) & 1 else -1.0
            norm = np.linalg.norm(out[row])
            out[row] = out[row] / norm if norm else _unit(self._dim)
        return out


def _unit(dim: int) -> np.ndarray:
    # A text with no word characters still needs a valid direction (Qdrant rejects zero
    # vectors for cosine); all such texts share it.
    v = np.zeros(dim, dtype=np.float32)
    v[0] = 1.0
    return v
