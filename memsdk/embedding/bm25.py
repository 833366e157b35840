"""BM25 sparse vectors: the lexical half of hybrid retrieval.

Qdrant's own BM25 (qdrant-edge's `Bm25`, the same tokenizer, stopwords, stemmer and
k / b / avg_len as a Qdrant server's ``qdrant/bm25`` model) turns a text into term
frequencies; the store's IDF modifier supplies the document frequencies at query time,
over the caller's scope. The bank computes the vectors and hands them to every transport,
so a memory is scored the same on the embedded engine, qdrant-client and a server.
Dense MiniLM misses names, numbers and rare words that BM25 matches exactly (docs/platform-notes.md:
on LoCoMo raw turns, recall@10 .451 dense, .624 BM25, .647 fused).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memsdk.store.base import Sparse

if TYPE_CHECKING:
    import qdrant_edge as qe

__all__ = ["Bm25Encoder"]


class Bm25Encoder:
    """``document(text)`` for stored memories (term-frequency weights), ``query(text)`` for
    queries (weight 1 per unique term). Costs microseconds: no model is loaded."""

    def __init__(self, config: "qe.Bm25Config | None" = None) -> None:
        import qdrant_edge  # the engine's tokenizer; imported on first use, like the engine itself

        self._model = qdrant_edge.Bm25(config)

    def document(self, text: str) -> Sparse:
        return Sparse.of(self._model.embed_document(text))

    def query(self, text: str) -> Sparse:
        return Sparse.of(self._model.embed_query(text))

