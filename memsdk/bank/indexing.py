"""How the bank indexes a record: a dense vector of the record as shown, its words and its
"Speaker (on date)" header embedded apart and mixed, an episodic turn's mixed with the turn it
follows; and a BM25 vector of its words, after that turn's words. Every write and every
search goes through the same `Indexer`, so what a search embeds matches what was stored."""

from __future__ import annotations

import re
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from memsdk.bank import codec
from memsdk.embedding.base import Embedder
from memsdk.embedding.bm25 import Bm25Encoder
from memsdk.errors import EmbedderError
from memsdk.store.base import Point
from memsdk.types import MemoryRecord, Op

__all__ = ["CONTEXT_WEIGHT", "HEADER_WEIGHT", "Context", "Indexer"]


#: an episodic turn's vector is unit(own + CONTEXT_WEIGHT x its previous turn's): LoCoMo's
#: questions often quote what a reply answers, so a reply is found by its question's words.
#: Embedding "<previous turn>\n<turn>" as one text did that at one more MiniLM pass per turn
#: (the previous turn's own vector is already made); heuristic ingest, recall@10/@30/@60:
#: train .766/.836/.939 -> .772/.843/.946, val .787/.886/.951 -> .787/.886/.955 (.3: within .01)
CONTEXT_WEIGHT = 0.5
#: A memory is embedded as its words and its "Speaker (on day)" header apart, the header
#: mixed in at this weight: a header is embedded once per speaker and day (the client's cache
#: answers the rest), so an ingest is one embedding of the turn's words, which the fact that
#: copies it and the pair manager (which reads the words alone) reuse. Heuristic ingest,
#: LoCoMo recall@10/@30/@60 against "header: words" as one text (train .772/.839/.946, val
#: .775/.886/.957), with the clock time still in the header: .5 train .774/.861/.933, val
#: .780/.878/.961; .8 .783/.858/.940, .791/.880/.955; 1.0 .783/.864/.948, .787/.899/.955; 1.5
#: .783/.867/.964, .787/.899/.955; without it (`_CLOCK`), 1.0: .780/.871/.965, .803/.893/.951.
#: 1.0 rather than more: weight on who spoke serves LoCoMo, whose questions name the speaker,
#: more than it would serve an app.
HEADER_WEIGHT = 1.0


#: the clock time in a header ("Caroline (on 1:56 pm on 8 May, 2023)"), left out of what is
#: embedded: a header per speaker and day is embedded once a day, one per minute would cost
#: an app that stamps each turn a second text per turn, and no question asks for the minute
_CLOCK = re.compile(r"\(on \d{1,2}[:.]\d{2}\s*(?:[ap]\.?m\.?)?\s+on\s+", re.I)


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


@dataclass(frozen=True, slots=True)
class Context:
    """What an episodic turn follows (`Op.context`): its words, for BM25 and the hash that
    links the two turns, and with its header, for the dense vector."""

    words: str
    header: str

    @property
    def parts(self) -> tuple[str, str]:
        """As `MemoryRecord.shown_parts` splits a turn: the previous turn's own vector."""
        return self.header, self.words

    @classmethod
    def of(cls, op: Op) -> Context:
        return cls(op.context or "", op.context_header or "")


class Indexer:
    """The vectors of records and queries, from one embedder and one BM25 encoder."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder
        self._bm25: Bm25Encoder | None = None

    @property
    def bm25(self) -> Bm25Encoder:
        """The BM25 encoder of the sparse vectors (hybrid search), built on first use."""
        if self._bm25 is None:  # built on first use: `import memsdk` must not load the engine
            self._bm25 = Bm25Encoder()
        return self._bm25

    def record_points(
        self, records: Sequence[MemoryRecord], vectors: dict[str, np.ndarray | None] | None = None, contexts: dict[uuid.UUID, Context] | None = None
    ) -> list[Point]:
        """``records`` as store points, indexed the way every search expects. BM25 reads the
        record's `index_text` (rendered without resolved dates, after its context's words, if
        it has one in ``contexts``). The dense vector is of the record as shown, header and
        words apart (`dense_vectors`). A record whose id is in ``vectors`` keeps that vector
        instead of being embedded again."""
        vectors, contexts = dict(vectors or {}), contexts or {}
        fresh = [r for r in records if str(r.id) not in vectors]
        vectors |= {str(r.id): v for r, v in zip(fresh, self.dense_vectors(fresh, contexts))}
        # BM25 costs microseconds, so every written record gets its sparse vector afresh
        return [codec.record_point(r, vectors[str(r.id)], self.bm25.document(r.index_text(c.words if (c := contexts.get(r.id)) else None))) for r in records]

    def dense_vectors(self, records: Sequence[MemoryRecord], contexts: dict[uuid.UUID, Context] | None = None) -> np.ndarray:
        """The dense vectors of ``records``: each as shown (`shown_vectors` of its header and
        words, without resolved dates), and for one with a context, unit(own + `CONTEXT_WEIGHT`
        x the context's turn as shown). One embedder call for all of them; texts repeat, so a
        cached embedder answers the context (the previous turn, embedded when it was ingested),
        the headers, and a fact that copies its turn: one embedding per ingested turn."""
        contexts = contexts or {}
        context_parts = {r.id: c.parts for r in records if (c := contexts.get(r.id))}
        # records and ops were validated when made: no second check on the write path
        vectors = self.shown_vectors([*(r.shown_parts() for r in records), *context_parts.values()])
        out, after = vectors[: len(records)], dict(zip(context_parts, vectors[len(records) :]))
        for i, r in enumerate(records):
            if r.id in after:
                out[i] = _unit(out[i] + CONTEXT_WEIGHT * after[r.id])
        return out

    def shown_vectors(self, shown: Sequence[tuple[str, str]], embedder: Embedder | None = None) -> np.ndarray:
        """`MemoryBank.shown_vectors` of pairs already checked."""
        shown = [(_CLOCK.sub("(on ", head), words) for head, words in shown]
        texts = list(dict.fromkeys(t for parts in shown for t in parts if t))
        embedded, row = self.embed(texts, embedder), {text: i for i, text in enumerate(texts)}
        out = embedded[[row[words] for _, words in shown]] if shown else embedded
        for i, (head, _) in enumerate(shown):
            if head:
                out[i] = _unit(out[i] + HEADER_WEIGHT * embedded[row[head]])
        return out

    def embed(self, texts: Sequence[str], embedder: Embedder | None = None) -> np.ndarray:
        """``texts`` embedded by ``embedder`` (default: the bank's), each a finite vector of the
        store's size, else `EmbedderError`."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        vectors = (embedder or self.embedder).embed(texts)
        if vectors.shape != (len(texts), self.embedder.dim) or not np.isfinite(vectors).all():
            raise EmbedderError(f"embedder returned {vectors.shape} (or non-finite values) for {len(texts)} texts")
        return vectors
