"""`fuse`: reciprocal-rank fusion of the tiers, checked against hand-computed scores."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest

from memsdk.pipeline.retrieval import SUPERSEDED_WEIGHT, fuse
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Tier, content_hash

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def hit(text: str, tier: Tier, turns: tuple[str, ...] = ()) -> ScoredMemory:
    r = MemoryRecord(id=uuid.uuid4(), text=text, scope=Scope(user_id="u"), created_at=NOW, updated_at=NOW, version=1, content_hash=content_hash(text), tier=tier, source_turn_ids=turns)
    return ScoredMemory(record=r, score=0.5)


def test_weighted_reciprocal_rank_by_hand() -> None:
    f0, f1 = hit("fact a", Tier.SEMANTIC), hit("fact b", Tier.SEMANTIC)
    t0, t1 = hit("turn a", Tier.EPISODIC), hit("turn b", Tier.EPISODIC)
    out = fuse([[f0, f1], [t0, t1]], limit=4, k=60, weights=(0.8, 1.0))
    # t0: 1/60 = .01667, f0: .8/60 = .01333, t1: 1/61 = .01639, f1: .8/61 = .01311
    assert [m.record.text for m in out] == ["turn a", "turn b", "fact a", "fact b"]
    assert [round(m.score, 5) for m in out] == [round(1 / 60, 5), round(1 / 61, 5), round(0.8 / 60, 5), round(0.8 / 61, 5)]
    assert [m.record.text for m in fuse([[f0, f1], [t0, t1]], limit=2, k=60)] == ["fact a", "turn a"]  # equal weights alternate


def test_a_memory_in_both_lists_adds_up_and_a_copy_of_a_candidate_turn_is_dropped() -> None:
    turn = hit("I adopted a dog", Tier.EPISODIC, ("D1:1",))
    copy = hit("Sam (on 8 May 2023): I adopted a dog", Tier.SEMANTIC, ("D1:1",))
    merged = hit("Sam: I moved; Sam: I adopted a dog", Tier.SEMANTIC, ("D1:1",))  # several turns: kept
    out = fuse([[copy, merged], [turn]], limit=10, k=60)
    assert [m.record.text for m in out] == ["I adopted a dog", "Sam: I moved; Sam: I adopted a dog"]
    twice = fuse([[turn], [turn]], limit=1, k=2)
    assert twice[0].score == pytest.approx(1.0)  # 1/2 + 1/2


def test_a_superseded_memory_goes_after_a_current_one_at_its_weighted_fused_score() -> None:
    boston = hit("Maya lives in Boston", Tier.SEMANTIC)
    boston = ScoredMemory(record=boston.record.model_copy(update={"invalid_at": NOW}), score=0.5)
    austin = hit("Maya lives in Austin", Tier.SEMANTIC)
    out = fuse([[boston, austin]], limit=2, k=60)
    # boston: .8 * 1/60 = .01333 < austin: 1/61 = .01639
    assert [m.record.text for m in out] == ["Maya lives in Austin", "Maya lives in Boston"]
    assert out[1].score == pytest.approx(SUPERSEDED_WEIGHT / 60)


def test_a_superseded_copy_of_a_turn_is_shown_instead_of_the_turn_with_both_ranks() -> None:
    turn = hit("I live in Boston", Tier.EPISODIC, ("D1:1",))
    copy = hit("Sam (on 8 May 2023): I live in Boston", Tier.SEMANTIC, ("D1:1",))
    copy = ScoredMemory(record=copy.record.model_copy(update={"invalid_at": NOW}), score=0.5)
    (shown,) = fuse([[copy], [turn]], limit=10, k=60, weights=(0.8, 1.0))
    # the turn does not say it is no longer true; the fact does, so the fact stands for both
    assert shown.record.id == copy.record.id
    assert shown.score == pytest.approx(SUPERSEDED_WEIGHT * (0.8 / 60 + 1 / 60))
