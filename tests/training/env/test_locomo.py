"""LoCoMo builders: per-turn states from earlier turns only, the QA their turn is evidence for, the split."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from memsdk.embedding import HashEmbedder
from memsdk_training.env import conversation, locomo_episode, locomo_qa, locomo_sessions, locomo_states, sample_ids, session_date, split_of

pytestmark = pytest.mark.locomo


def locomo_turns(sample_id: str):
    return [turn for _, turns in locomo_sessions(conversation(sample_id)) for turn in turns]


class CountingEmbedder(HashEmbedder):
    def __init__(self) -> None:
        super().__init__(64)
        self.texts = 0

    def embed(self, texts):  # type: ignore[override]
        self.texts += len(texts)
        return super().embed(texts)


def test_split_of_follows_memory_r1() -> None:
    assert (split_of("conv-26"), split_of("conv-30"), split_of("conv-41"), split_of("conv-50")) == ("train", "val", "test", "test")
    assert sample_ids("train") == ["conv-26"] and sample_ids("val") == ["conv-30"]
    assert len(sample_ids("test")) == 8 and not {"conv-26", "conv-30"} & set(sample_ids("test"))


def test_turns_carry_the_sessions_day_without_the_time() -> None:
    assert session_date("1:56 pm on 8 May, 2023") == "8 May, 2023" and session_date(None) is None
    first = locomo_turns("conv-26")[0]
    assert (first.turn_id, first.speaker, first.timestamp) == ("D1:1", "Caroline", "8 May, 2023")


def test_qa_excludes_adversarial_questions() -> None:
    qa = locomo_qa(conversation("conv-26"))
    assert qa and all(q.category != 5 for q in qa) and all(isinstance(q.answer, str) for q in qa)


def test_states_hold_only_earlier_turns_and_the_qa_their_turn_is_evidence_for() -> None:
    order = {t.turn_id: i for i, t in enumerate(locomo_turns("conv-26"))}

    states = list(itertools.islice(locomo_states(HashEmbedder(64), split="train"), 40))

    assert len(states) == 40 and len({s.key for s in states}) == 40
    for state in states:
        here = order[state.turn.turn_id]
        records = state.bank.records()
        # every earlier turn is one memory, and nothing from this turn or later is
        assert sorted(order[r.source_turn_ids[0]] for r in records) == list(range(here))
        assert state.qa and all(state.turn.turn_id in q.evidence and q.category != 5 for q in state.qa)
        assert state.source_turn_ids == (state.turn.turn_id,)
        assert state.facts[0].startswith(f"{state.turn.speaker} (on ") and state.turn.text in state.facts[0]
        assert state.bank.violations() == []
    assert states[0].key == "conv-26/D1:3"
    assert sorted(r.text[:37] for r in states[0].bank.records()) == ["Caroline (on 8 May, 2023): Hey Mel! G", "Melanie (on 8 May, 2023): Hey Carolin"]


def test_states_are_built_lazily_and_embed_each_turn_once() -> None:
    embedder = CountingEmbedder()

    third = next(itertools.islice(locomo_states(embedder, ids=["conv-26"]), 2, None))

    # the turns before the 3rd state, not the conversation; and the session's two headers once
    assert embedder.texts == len(third.bank.records()) + 2 < 12
    vectors = [p.vector for p in third.bank.points if p.vector is not None]
    assert len(vectors) == len(third.bank.records()) and all(np.isfinite(v).all() for v in vectors)


def test_every_linked_qa_of_conv26_has_a_state() -> None:
    states = list(locomo_states(HashEmbedder(64), ids=["conv-26"]))
    linked = {q.question for s in states for q in s.qa}
    answerable = {q.question for q in locomo_qa(conversation("conv-26")) if set(q.evidence) & {t.turn_id for t in locomo_turns("conv-26")}}
    assert linked == answerable


def test_episode_asks_each_question_after_its_latest_evidence_session() -> None:
    episode = locomo_episode("conv-26", max_sessions=3)

    assert len(episode.sessions) == 3 and episode.scope.run_id == "conv-26"
    for t, session in enumerate(episode.sessions):
        ids = {turn.turn_id for turn in session.turns}
        assert all(turn.timestamp for turn in session.turns)
        for q in session.qa:
            sessions = [int(e[1:].split(":")[0]) for e in q.evidence if e.startswith("D")]
            assert max(sessions) == t + 1 and ids & set(q.evidence)
    full = locomo_episode("conv-26")
    assert sum(len(s.qa) for s in full.sessions) > sum(len(s.qa) for s in episode.sessions)
