"""What an answer is shown: the tiers searched, fused by rank, and the turns around the best hits.

An answer is shown the scopes' core memories, then the semantic and episodic hits fused by
reciprocal rank (`fuse`), then the turns said around its best episodic hits
(`with_neighbours`). Every constant here was tuned on LoCoMo's train and validation
conversations; each says what it moved.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Generator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from memsdk.effects import Adjacent, Effect, Search
from memsdk.pipeline.decisions import ActivePolicies, decide_with_fallback
from memsdk.pipeline.answers import apply_correction, complete_date, holders, second_look, whole_value
from memsdk.policies import UNKNOWN, Answer
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Tier

__all__ = [
    "TIER_RRF_K", "FACT_WEIGHT", "NAMED_SHARE", "NAMED_OTHERS_WEIGHT", "SUPERSEDED_WEIGHT", "NEIGHBOUR_SHARE", "NEIGHBOURS_OF", "NEIGHBOUR_SPAN",
    "AnswerOutcome", "answer_steps", "retrieve_steps", "fuse", "copied_turn", "with_neighbours", "next_turn", "previous_turn", "named_scope",
]  # fmt: skip

#: reciprocal-rank constant of the tier fusion (`fuse`): score = sum over lists of w / (TIER_RRF_K + rank);
#: not the store's `HYBRID_RRF_K`, which fuses a dense and a BM25 ranking inside one search
TIER_RRF_K = 60

#: the semantic list's weight in that fusion (the episodic list's is 1): a fact must rank a
#: little higher than a turn to go before it, so the turns a plain RAG shows keep their place
#: and a weak policy's facts cannot push them out of the top (tuned on LoCoMo val: 1.0 cost
#: recall@10 against raw turns, .8 did not; see the README's tier figures)
FACT_WEIGHT = 0.8

#: a question that names one scope's owner gets that scope's best NAMED_SHARE of the hits; the
#: other scopes' join it at NAMED_OTHERS_WEIGHT in the fusion: a question about Caroline is
#: mostly answered by what Caroline said (LoCoMo, heuristic tiers, turns indexed after their
#: context with its speaker header, as first measured: train / val recall@30 .841 -> .851 and
#: .877 -> .892, @60 .903 -> .939 and .917 -> .927)
NAMED_SHARE = 2 / 3

NAMED_OTHERS_WEIGHT = 0.5

#: a superseded memory's fused score is multiplied by this: what is true now goes first, and
#: what was true before stays in reach for "where did she live before?" (marked with its end
#: by `MemoryRecord.render`). LoCoMo val with the pair manager (27 memories retired), recall
#: @10/30/60: .5 .732 / .818 / .906, .8 .787 / .886 / .951, 1 .783 / .886 / .951: most
#: LoCoMo questions are about what was said when, and a wrong retirement at .5 costs its turn
#: the top of the list
SUPERSEDED_WEIGHT = 0.8

#: the last NEIGHBOUR_SHARE of the answer's k go to the turns said around its best
#: NEIGHBOURS_OF episodic hits, NEIGHBOUR_SPAN turns each way, in conversation order (the
#: next turn, the one before, then the second next, ...): the answer to "what did Caroline
#: say about the support group?" is often the reply after the turn that matches (LoCoMo,
#: heuristic tiers + hybrid, recall@60 train / val .926 -> .939 and .908 -> .945, @10 and
#: @30 unchanged; at k 30, @30 .884 -> .882 and .847 -> .894; spans of 1 and other shares
#: measured lower)
NEIGHBOUR_SHARE = 1 / 3

NEIGHBOURS_OF = 10

NEIGHBOUR_SPAN = 2


@dataclass
class AnswerOutcome:
    answer: Answer
    shown: list[ScoredMemory]


def answer_steps(question: str, scopes: Sequence[Scope], policies: ActivePolicies, answer_k: int, *, tiers: bool = True, hybrid: bool = True) -> Generator[Effect, Any, AnswerOutcome]:
    """`retrieve_steps`, then the answerer, its answer checked against what it was shown
    (`memsdk.pipeline.answers`: the whole value, a correction, the date). An
    answer from the wrong side of a change is asked for again of the other side
    (`second_look`): one more call, on those answers only, whose answer is kept when that
    side holds it (else the first answer stands: a second look must not invent). A scope
    with no memory at all is answered "unknown" without asking the answerer."""
    shown = yield from retrieve_steps(question, scopes, answer_k, tiers=tiers, hybrid=hybrid)
    if not shown:  # an empty memory: no model is asked, so none can invent an answer
        return AnswerOutcome(Answer(UNKNOWN, []), shown)
    answer: Answer = yield from decide_with_fallback(policies.answerer, "answer", question, shown)
    seen = shown
    if (other := second_look(question, answer, shown)) is not None:
        again: Answer = yield from decide_with_fallback(policies.answerer, "answer", question, other)
        calls = [*answer.calls, *again.calls]  # both are logged and counted
        kept = holders(again, other)
        answer, seen = replace(again if kept else answer, calls=calls), other if kept else shown
    answer = whole_value(answer, seen, question)
    answer = apply_correction(question, answer, seen)
    return AnswerOutcome(complete_date(answer, seen), shown)


def retrieve_steps(question: str, scopes: Sequence[Scope], k: int, *, tiers: bool = True, hybrid: bool = True) -> Generator[Effect, Any, list[ScoredMemory]]:
    """What an answer is shown: each scope's core memory, then the best ``k`` of the semantic
    and episodic hits, the two tiers fused by rank (`FACT_WEIGHT`). Each tier's hits are
    ``k / len(scopes)`` per scope merged by score, as Memory-R1 takes 30 per speaker, unless
    the question names exactly one scope's owner (`named_scope`): that scope then gets
    `NAMED_SHARE` of ``k`` and the others the rest. Without tiers: the top ``k / len(scopes)``
    per scope by score. ``hybrid``: each tier's search is dense + BM25 (`MemoryBank.search`)."""
    each = max(1, k // len(scopes))
    if not tiers:
        hits: list[ScoredMemory] = yield Search(scopes, question, each, hybrid=hybrid)
        return sorted(hits, key=lambda h: -h.score)
    named = named_scope(question, scopes)
    core: list[ScoredMemory] = yield Search(scopes, question, 1, Tier.CORE)
    lists = []
    for tier in (Tier.SEMANTIC, Tier.EPISODIC):
        if named is None:
            found: list[ScoredMemory] = yield Search(scopes, question, each, tier, hybrid=hybrid)
            # scopes merged by score within a tier: one list per tier per scope would give the
            # speaker the question is not about half of the top (LoCoMo val recall@10 .47 vs .57)
            lists.append(sorted(found, key=lambda h: -h.score))
            continue
        share = max(1, round(k * NAMED_SHARE))
        found = yield Search(scopes, question, share, tier, hybrid=hybrid)
        own = sorted((h for h in found if h.record.scope == named), key=lambda h: -h.score)
        rest = max(1, (k - share) // max(1, len(scopes) - 1))
        others = sorted((h for h in found if h.record.scope != named), key=lambda h: -h.score)
        others = [h for s in scopes if s != named for h in [o for o in others if o.record.scope == s][:rest]]
        lists.append(fuse([own, sorted(others, key=lambda h: -h.score)], k, weights=(1.0, NAMED_OTHERS_WEIGHT)))
    ranked = fuse(lists, k, weights=(FACT_WEIGHT, 1.0))
    return core + (yield from with_neighbours(ranked, scopes, k))


def fuse(lists: Sequence[Sequence[ScoredMemory]], limit: int, k: int = TIER_RRF_K, weights: Sequence[float] | None = None) -> list[ScoredMemory]:
    """Reciprocal-rank fusion: score(m) = sum over the lists m is in of w_list / (k + rank),
    rank 0-based, w 1 unless ``weights`` says, times `SUPERSEDED_WEIGHT` for a memory no longer
    true; the best ``limit``, with the fused score. A semantic fact that is only a copy of
    one candidate turn (the heuristic extractor's "Speaker (on date): <turn>") is one item
    with it: the turn is shown, unless the fact is superseded, which the turn does not say;
    then the fact is shown (`MemoryRecord.render` marks its end) and takes the turn's ranks."""
    turns: dict[tuple[str, tuple[str, ...]], list[MemoryRecord]] = {}
    for hits in lists:
        for m in hits:
            if m.record.tier is Tier.EPISODIC:
                turns.setdefault((m.record.scope.key, m.record.source_turn_ids), []).append(m.record)
    dropped: set[uuid.UUID] = set()  # facts shown as the turn they copy
    into: dict[uuid.UUID, ScoredMemory] = {}  # turns shown as the superseded fact that copies them
    for hits in lists:
        for m in hits:
            if m.record.tier is Tier.SEMANTIC and (copied := copied_turn(m.record.text, turns.get((m.record.scope.key, m.record.source_turn_ids), ()))):
                if m.record.superseded:
                    into[copied.id] = m
                else:
                    dropped.add(m.record.id)
    scores: dict[uuid.UUID, float] = {}
    found: dict[uuid.UUID, ScoredMemory] = {}
    for hits, weight in zip(lists, weights or [1.0] * len(lists)):
        for rank, m in enumerate(hits):
            if m.record.id in dropped:
                continue
            m = into.get(m.record.id, m)
            scores[m.record.id] = scores.get(m.record.id, 0.0) + weight / (k + rank)
            found[m.record.id] = m
    for i in scores:
        scores[i] *= SUPERSEDED_WEIGHT if found[i].record.superseded else 1.0
    best = sorted(scores, key=lambda i: -scores[i])[:limit]
    return [ScoredMemory(record=found[i].record, score=scores[i]) for i in best]


def copied_turn(fact: str, turns: Sequence[MemoryRecord]) -> MemoryRecord | None:
    """The one of ``turns`` that ``fact`` is behind a header, not a merge of several ("a; b")."""
    return next((t for t in turns if fact.endswith(t.text) and ";" not in fact[: len(fact) - len(t.text)]), None)


def with_neighbours(ranked: Sequence[ScoredMemory], scopes: Sequence[Scope], k: int) -> Generator[Effect, Any, list[ScoredMemory]]:
    """``ranked``'s first k - `NEIGHBOUR_SHARE` of ``k``, then the turns said around its best
    `NEIGHBOURS_OF` episodic hits (`next_turn`, `previous_turn`; each with the score of the hit it sits by),
    then the rest of ``ranked``: the best ``k``, each memory once (a turn also once with the
    fact that copies it)."""
    anchors = [h for h in ranked[:NEIGHBOURS_OF] if h.record.tier is Tier.EPISODIC]
    keep = k - int(k * NEIGHBOUR_SHARE)
    if not anchors or keep >= k:
        return list(ranked[:k])
    # the n-th turn after and before each anchor; one effect per hop
    ends: dict[uuid.UUID, tuple[MemoryRecord | None, MemoryRecord | None]] = {h.record.id: (h.record, h.record) for h in anchors}
    around: dict[uuid.UUID, list[MemoryRecord]] = {a: [] for a in ends}
    for _ in range(NEIGHBOUR_SPAN):
        if not (asked := [r for pair in ends.values() for r in pair if r is not None]):
            break
        turns: list[MemoryRecord] = yield Adjacent(scopes, asked)
        for anchor, (after, before) in ends.items():
            ends[anchor] = (None if after is None else next_turn(after, turns), None if before is None else previous_turn(before, turns))
            around[anchor] += [r for r in ends[anchor] if r is not None]
    score = {h.record.id: h.score for h in anchors}
    # a turn shown already as the superseded fact that copies it (`fuse`) is not shown twice
    copies = {(h.record.scope.key, h.record.source_turn_ids): h.record for h in ranked if h.record.tier is Tier.SEMANTIC}
    near = [
        ScoredMemory(record=r, score=score[a]) for a in around for r in around[a]
        if not ((copy := copies.get((r.scope.key, r.source_turn_ids))) is not None and copied_turn(copy.text, [r]))
    ]
    shown: dict[uuid.UUID, ScoredMemory] = {}
    for hit in [*ranked[:keep], *near, *ranked[keep:]]:
        shown.setdefault(hit.record.id, hit)
    return list(shown.values())[:k]


def next_turn(record: MemoryRecord, turns: Sequence[MemoryRecord]) -> MemoryRecord | None:
    """The turn of ``turns`` said right after ``record``: indexed after its text
    (`MemoryRecord.context_hash`), the first stored after it when the text repeats."""
    later = [t for t in turns if t.context_hash == record.content_hash and t.id != record.id and t.created_at >= record.created_at]
    return min(later, key=lambda t: t.created_at, default=None)


def previous_turn(record: MemoryRecord, turns: Sequence[MemoryRecord]) -> MemoryRecord | None:
    """The turn of ``turns`` that ``record`` was indexed after, the last stored before it
    when its text repeats."""
    if record.context_hash is None:
        return None
    earlier = [t for t in turns if t.content_hash == record.context_hash and t.id != record.id and t.created_at <= record.created_at]
    return max(earlier, key=lambda t: t.created_at, default=None)


def named_scope(question: str, scopes: Sequence[Scope]) -> Scope | None:
    """The one scope among several whose ``user_id`` or ``agent_id`` the question names as a
    word ("What did Caroline research?" of the scopes Caroline and Melanie), else None (no
    scope named, or more than one)."""
    if len(scopes) < 2:
        return None
    words = set(re.findall(r"\w+", question.casefold()))
    named = [s for s in scopes if any(i and len(i) > 1 and i.casefold() in words for i in (s.user_id, s.agent_id))]
    return named[0] if len(named) == 1 else None
