"""States from logged traffic: the bank as it was before each ingest, QA judged by feedback."""

from __future__ import annotations

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk_training.env import log_states

SCOPE = {"user_id": "caroline"}


def test_log_states_rebuild_the_bank_before_each_ingest(tmp_path) -> None:
    with MemoryClient(data_dir=tmp_path, policies="heuristic", embedder=HashEmbedder(64)) as client:
        turns = [
            {"speaker": "Caroline", "text": "I adopted a dog named Buddy from the shelter", "turn_id": "D1:1"},
            {"speaker": "Caroline", "text": "I work as a counselor at a school in Boston", "turn_id": "D1:2"},
            {"speaker": "Caroline", "text": "My favourite food is sushi with lots of ginger", "turn_id": "D1:3"},
        ]
        results = client.ingest(turns, scope=SCOPE)
        client.update(results[0].ops[0].memory_id, "Caroline adopted Buddy, a beagle, from the shelter", scope=SCOPE)
        answer = client.answer("Where does Caroline work as a counselor?", scope=SCOPE)
        client.feedback(answer.trajectory_id, gold="a school in Boston")
        client.answer("What food does Caroline like?", scope=SCOPE)  # no feedback, so D1:3 yields no state

        states = list(log_states(client.log, client.bank))
        assert [s.turn.turn_id for s in states] == ["D1:2"]
        (state,) = states
        assert [q.answer for q in state.qa] == ["a school in Boston"]
        assert state.facts == tuple(results[1].facts)
        texts = [r.text for r in state.bank.records() if r.tier == "semantic"]
        assert texts == [results[0].facts[0]]  # only the earlier turn, as it was then (before the UPDATE)
        assert [r.text for r in state.bank.records() if r.tier == "episodic"] == [turns[0]["text"]]
        assert state.bank.violations() == []

        later = client.bank.as_of(SCOPE, client.bank.history(SCOPE)[-1].at, inclusive=False)
        assert len(later.records()) == 6 and later.violations() == []
