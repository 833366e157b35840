"""A manager without an LLM: a trained pair classifier decides what each fact does to the
memories it is shown (`memsdk.policies.relations`). 0 LLM calls per turn.

Per fact, over the current memories among those shown (a superseded one is history, never
a target; the pipeline's guard refuses ops on anything not shown anyway):

    duplicates   P >= duplicate_at for some memory       -> no op: it is already stored
    forget       P(forget_target) >= forget_at            -> no op: a forget request is not a
                                                              fact; the forget rules act on it
    replaces     P(supersedes) + P(corrects) >= supersede_at, for up to max_supersedes memories
                                                           -> ADD the fact, superseding them
    otherwise                                              -> ADD the fact (a compatible fact,
                                                              "a second dog", supersedes nothing)

It never deletes, updates or merges: a replaced memory is retired by the ADD of its successor
(`Op.supersedes`), and stays as history.

Embeddings: the head was trained on one embedder's vectors (its manifest names it), so the
manager embeds the facts and the shown memories with that embedder, never with whatever the
bank uses (a client on the hashing embedder would otherwise feed the head noise). The
embedding is one `Call` effect of ``steps``: the sync client runs it, the async one in a
worker thread; the classification after it is a second `Call`: microseconds of numpy for a
pair head, a MiniLM forward pass over the pairs for a mixed model. A cache in front of
the embedder (`CachedEmbedder`) makes a memory shown again on a later turn free.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from memsdk.effects import Call, Steps, run
from memsdk.embedding import CachedEmbedder, Embedder, SentenceTransformerEmbedder
from memsdk.policies.calling.caller import PolicyStats
from memsdk.policies.cross_encoder import load_relations
from memsdk.policies.manager import Decision, valid_text
from memsdk.policies.relations import Relation, RelationModel, RELATIONS, relation_text
from memsdk.types import Op, ScoredMemory

__all__ = ["PairThresholds", "PairManager", "default_embedder"]

_SUP, _COR, _DUP, _FGT = (RELATIONS.index(r) for r in (Relation.SUPERSEDES, Relation.CORRECTS, Relation.DUPLICATES, Relation.FORGET_TARGET))


@dataclass(frozen=True)
class PairThresholds:
    """When a relation's probability acts (see the module docstring).

    A wrong retirement takes a true fact out of the current view, a missed one leaves an old
    fact beside the new: the defaults lean to precision. pairs-v4 on its val pairs (the
    benchmark's 663 and conv-30's 1,815 chat pairs), retiring at P(supersedes) + P(corrects)
    >= t: t .6 precision .62 / recall .85 (66 wrong retirements), .8 .76 / .82 (33), .9
    .82 / .80 (22). End to end at .8 / .9, 200 val scenarios had 95 / 94 of 115 superseded
    facts retired and LoCoMo val (conv-30, chat that rarely replaces anything) 34 / 22
    retirements at the same recall, so .9 (pairs-v2 was measured the same way: .8). One
    memory per fact: a fact that replaces one memory rarely replaces two, and a second
    candidate is more often a wrong one."""

    duplicate_at: float = 0.5
    supersede_at: float = 0.9
    forget_at: float = 0.5
    #: memories one fact may retire at most (the most likely first)
    max_supersedes: int = 1
    max_text_chars: int = 1000


@cache
def default_embedder() -> CachedEmbedder:
    """MiniLM behind a cache, one per process (loaded on first use): every pair manager that
    is not given an embedder shares it, so clients opened one after another (an evaluation
    opens one per conversation) load the model once."""
    return CachedEmbedder(SentenceTransformerEmbedder(), size=4096)


class PairManager:
    """Serves a `PairClassifier` (or any `RelationModel`) as the manager role."""

    role = "manager"
    fallback = None

    def __init__(self, classifier: RelationModel, embedder: Embedder | None = None, thresholds: PairThresholds | None = None) -> None:
        """``thresholds`` None: the defaults, with the retirement threshold the classifier
        was measured at where it carries one (a mixed model's ``supersede_at``)."""
        if embedder is None:
            embedder = default_embedder()
            if embedder.name != classifier.embedder:
                raise ValueError(f"the pair head {classifier.version} was trained on {classifier.embedder!r} vectors: pass that embedder")
        elif embedder.name != classifier.embedder:
            raise ValueError(f"the pair head {classifier.version} was trained on {classifier.embedder!r} vectors, not {embedder.name!r}")
        if thresholds is None:
            measured = getattr(classifier, "supersede_at", None)
            thresholds = PairThresholds() if measured is None else PairThresholds(supersede_at=float(measured))
        self.classifier, self.embedder, self.thresholds = classifier, embedder, thresholds
        self.version = classifier.version
        self.stats = PolicyStats()

    @classmethod
    def load(cls, folder: str | os.PathLike[str], embedder: Embedder | None = None, thresholds: PairThresholds | None = None) -> PairManager:
        """The manager over the model saved in ``folder``: a pair head or a mixed model
        (`cross_encoder.load_relations`)."""
        return cls(load_relations(Path(folder)), embedder, thresholds)

    def steps(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Steps[Decision]:
        texts = [t for f in facts if (t := valid_text(f, self.thresholds.max_text_chars)) is not None]
        shown = [m for m in related if m.record.current]
        if not texts or not shown:
            return self.decision(texts, shown, np.zeros((len(texts), 0, len(RELATIONS))), source_turn_ids)
        vectors: np.ndarray = yield Call(self.embedder.embed, ([relation_text(t) for t in [*texts, *(m.record.text for m in shown)]],))
        u, v = vectors[: len(texts)], vectors[len(texts) :]
        rows = [(i, j) for i in range(len(texts)) for j in range(len(shown))]
        # a Call too: a cross-encoder's forward pass is model time the async client runs off its loop
        probs: np.ndarray = yield Call(
            self.classifier.predict_pairs, ([texts[i] for i, _ in rows], [shown[j].record.text for _, j in rows], u[[i for i, _ in rows]], v[[j for _, j in rows]])
        )
        return self.decision(texts, shown, probs.reshape(len(texts), len(shown), len(RELATIONS)), source_turn_ids)

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        """`steps` with the embedding run in place (a script, a test); the clients drive `steps`."""
        return run(self.steps(facts, related, source_turn_ids=source_turn_ids))

    def decision(self, facts: Sequence[str], shown: Sequence[ScoredMemory], probs: np.ndarray, source_turn_ids: Sequence[str] = ()) -> Decision:
        """The ops for ``facts`` given ``probs`` [fact, memory, relation] over the ``shown``
        memories (`RELATIONS` order): the rule of the module docstring. A memory is retired
        by one fact at most (the guard allows one op per memory)."""
        t, turns = self.thresholds, tuple(source_turn_ids)
        ops: list[Op] = []
        retired: set[int] = set()
        for i, fact in enumerate(facts):
            p = probs[i]
            if len(shown) and p[:, _DUP].max() >= t.duplicate_at:
                self.stats.add("duplicates")
                continue
            if len(shown) and p[:, _FGT].max() >= t.forget_at:
                self.stats.add("forget_requests")
                continue
            replaced = p[:, _SUP] + p[:, _COR]
            order = [int(j) for j in np.argsort(-replaced, kind="stable") if replaced[j] >= t.supersede_at and int(j) not in retired]
            targets = order[: t.max_supersedes]
            retired.update(targets)
            self.stats.add("supersedes", len(targets))
            ops.append(Op.add(fact, source_turn_ids=turns, supersedes=tuple(shown[j].record.id for j in targets)))
        return Decision(ops)
