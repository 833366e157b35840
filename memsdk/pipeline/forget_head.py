"""The trained half of forget: is a turn a forget request, and which memories is it about.

The rules of `memsdk.pipeline.forget` catch the phrasings they were written for. People ask
in their own words ("can you drop everything about my divorce?", "scrap the bit about my
knee"), and name topics no lexicon lists. Two small trained heads, shipped as data
(``memsdk/data/forget-*/``: weights, thresholds, where the training text came from and what
the thresholds were chosen on), cover what the rules miss:

    intent      a linear softmax over the turn's MiniLM vector: other / forget / refuse
                ("forget everything about every user" is a wish the memory must not act on).
                Asked only of turns whose words can be about keeping or removing something
                (the head's ``look_for`` pattern, a data-file list of verbs), so chat costs
                no extra embedding.
    relevance   a logistic regression over features of (description, memory): their cosine,
                whether the description names a kind of personal data the memory holds a
                value of (`personal_data.kinds_named` / `detect`), whether it names a
                sensitive topic the memory states (`topic_terms` / `states_topic`), the
                content words they share. P >= ``relevance_at`` says the memory is about
                what the request wants forgotten.

Both decide through `Call` effects (the embedding, then numpy), so the sync client runs
them in place and the async one off its loop. The rules still act; a memory either
matches is forgotten, capped per request (`forget.MAX_SUPERSEDED`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from memsdk.effects import Call, Steps
from memsdk.embedding import Embedder
from memsdk.pipeline.personal_data import detect, kinds_named, states_topic, topic_terms
from memsdk.policies.words import STOPWORDS, split_words, word_key
from memsdk.types import MemoryRecord, split_header

__all__ = ["ForgetReading", "ForgetHead", "ForgetReader", "packaged_head", "INTENTS", "FEATURES", "intent_named", "relevance_features", "DEFAULT_HEAD_DIR"]

#: the intent head's classes, in the order of its weight columns
INTENTS = ("other", "forget", "refuse")
#: the relevance head's features, in the order of its weights
FEATURES = ("cosine", "kind_match", "topic_match", "shared_words", "holds_personal_data")

DEFAULT_HEAD_DIR = Path(__file__).resolve().parent.parent / "data" / "forget-v1"
_SHARED_CAP = 3


def _content(text: str) -> set[str]:
    return {word_key(w) for w in split_words(text) if w not in STOPWORDS and len(w) > 2}


def relevance_features(description: str, memory: str, cosine: float) -> list[float]:
    """`FEATURES` of one (description, memory) pair; ``memory`` without its speaker header."""
    kinds = kinds_named(description)
    topic = topic_terms(description)
    shared = len(_content(description) & _content(memory))
    return [
        cosine,
        float(bool(kinds & detect(memory))),
        float(bool(topic) and states_topic(topic, memory)),
        min(shared, _SHARED_CAP) / _SHARED_CAP,
        float(bool(detect(memory))),
    ]


def intent_named(probs: np.ndarray, forget_at: float) -> str:
    """The most likely of `INTENTS` for one turn's probabilities; a forget less likely than
    ``forget_at`` is "other" (a false forget can cost a user's data)."""
    best = int(probs.argmax())
    return "other" if INTENTS[best] == "forget" and probs[best] < forget_at else INTENTS[best]


def _softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=-1, keepdims=True))
    return np.asarray(e / e.sum(axis=-1, keepdims=True))


class ForgetReading(Protocol):
    """What the forget pipeline asks a trained reader (this module's `ForgetReader`, or the
    cross-encoder of `memsdk.pipeline.forget_cross`), each answer as effects."""

    def wants(self, text: str) -> Steps[str]:
        """The intent of ``text``: an `INTENTS` name."""
        ...

    def about(self, description: str, records: Sequence[MemoryRecord]) -> Steps[dict[Any, float]]:
        """P(about) for each of ``records`` the reader takes to be about ``description``, by id."""
        ...


@dataclass(frozen=True)
class ForgetHead:
    """The two heads of one trained version, and the embedder they read."""

    version: str
    embedder_name: str
    look_for: re.Pattern[str]
    intent_weights: np.ndarray  # [dim + 1, len(INTENTS)]: the last row is the bias
    intent_at: float
    relevance_weights: np.ndarray  # [len(FEATURES) + 1]: the last entry is the bias
    relevance_at: float

    @classmethod
    def load(cls, folder: str | Path = DEFAULT_HEAD_DIR) -> ForgetHead:
        folder = Path(folder)
        manifest: dict[str, Any] = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
        weights = np.load(folder / "head.npz")
        if tuple(manifest["intents"]) != INTENTS or tuple(manifest["features"]) != FEATURES:
            raise ValueError(f"{folder}: the head's classes or features are not this code's ({INTENTS}, {FEATURES})")
        return cls(
            version=manifest["version"], embedder_name=manifest["embedder"], look_for=re.compile(manifest["look_for"], re.I),
            intent_weights=weights["intent"], intent_at=float(manifest["intent_at"]),
            relevance_weights=weights["relevance"], relevance_at=float(manifest["relevance_at"]),
        )

    # -- pure numpy, given vectors ------------------------------------------------------------

    def intent_probs(self, vectors: np.ndarray) -> np.ndarray:
        """[n, len(INTENTS)] for n turn vectors [n, dim]."""
        w = self.intent_weights
        return _softmax(vectors @ w[:-1] + w[-1])

    def relevance_probs(self, features: np.ndarray) -> np.ndarray:
        """[n] P(about) for n feature rows [n, len(FEATURES)]."""
        w = self.relevance_weights
        return np.asarray(1.0 / (1.0 + np.exp(-(features @ w[:-1] + w[-1]))))



@dataclass(frozen=True)
class ForgetReader:
    """A head with the embedder it reads (the one it was trained on), as effects."""

    head: ForgetHead
    embedder: Embedder

    @classmethod
    def over(cls, embedder: Embedder | None, head: ForgetHead | None = None) -> ForgetReader | None:
        """The packaged head (or ``head``) over ``embedder``; None when there is no head or the
        embedder is not the one it was trained on (its vectors would be noise to it)."""
        head = head or packaged_head()
        if head is None or embedder is None or getattr(embedder, "name", None) != head.embedder_name:
            return None
        return cls(head, embedder)

    def wants(self, text: str) -> Steps[str]:
        """The intent of ``text`` (an `INTENTS` name); "other" without an embedding when no
        word of it can be about keeping or removing something."""
        head = self.head
        if not head.look_for.search(text):
            return "other"
        vector: np.ndarray = yield Call(self.embedder.embed, ([text],), stage="embedding")
        return intent_named(head.intent_probs(np.asarray(vector, dtype=np.float32))[0], head.intent_at)

    def about(self, description: str, records: Sequence[MemoryRecord]) -> Steps[dict[Any, float]]:
        """P(about) for each record at or above ``relevance_at``, by id."""
        if not records:
            return {}
        bodies = [split_header(r.text)[1] for r in records]
        vectors: np.ndarray = yield Call(self.embedder.embed, ([description, *bodies],), stage="embedding")
        vectors = np.asarray(vectors, dtype=np.float32)
        cosines = vectors[1:] @ vectors[0]
        features = np.array([relevance_features(description, body, float(c)) for body, c in zip(bodies, cosines)], dtype=np.float32)
        probs = self.head.relevance_probs(features)
        return {r.id: float(p) for r, p in zip(records, probs) if p >= self.head.relevance_at}


@cache
def packaged_head() -> ForgetHead | None:
    """The shipped head, loaded once per process; None where it is not installed."""
    return ForgetHead.load() if (DEFAULT_HEAD_DIR / "manifest.json").exists() else None
