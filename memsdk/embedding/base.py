"""The embedder contract, and a deterministic hashing embedder for tests of pure logic."""

from __future__ import annotations

import hashlib
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from memsdk.docstrings import documented_as

__all__ = ["Embedder", "HashEmbedder", "EmbedderWrapper", "CachedEmbedder"]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into L2-normalised float32 vectors of a fixed size."""

    @property
    def dim(self) -> int:
        """The length of every vector."""
        ...

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


documented_as(HashEmbedder, Embedder)


class EmbedderWrapper:
    """Base of embedders that add behaviour around another one; size and name are the inner's."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def name(self) -> str:
        return self.inner.name


class CachedEmbedder(EmbedderWrapper):
    """Remembers the vectors of the last ``size`` texts.

    Ingest embeds each fact twice otherwise: once to find related memories, once when the
    manager ADDs or UPDATEs it with the same text. Vectors are deterministic per text, so a
    hit is exact.
    """

    def __init__(self, inner: Embedder, size: int = 1024) -> None:
        super().__init__(inner)
        self.size = size
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = list(dict.fromkeys(t for t in texts if t not in self._cache))
        if missing:
            fresh = self.inner.embed(missing)
            with self._lock:
                for text, vector in zip(missing, fresh):
                    self._cache[text] = vector
                    self._cache.move_to_end(text)
                while len(self._cache) > self.size:
                    self._cache.popitem(last=False)
                found = {t: self._cache.get(t) for t in texts}
        else:
            with self._lock:
                found = {t: self._cache.get(t) for t in texts}
        # an entry another thread evicted between the two locked sections: embed it again
        gone = [t for t, v in found.items() if v is None]
        found.update(zip(gone, self.inner.embed(gone)) if gone else ())
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            out[row] = found[text]
        return out
