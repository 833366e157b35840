"""No ground for an answer: an empty memory (the answerer is not asked, so it cannot invent one), or an\nanswerer that says memory does not hold it. Either way the app is told so (`AnswerResult.abstained`)."""

from __future__ import annotations

from pathlib import Path

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.policies.answerer import ABSTAIN_TEXT, abstains

from .conftest import ScriptedBackend


def test_an_empty_memory_abstains_without_asking_the_model(tmp_path: Path) -> None:
    backend = ScriptedBackend('{"answer": "New York"}')
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), backend=backend, policies="llm") as client:
        answer = client.answer("Where does Bob live now?", scope={"user_id": "bob"})
        assert (answer.abstained, answer.text, answer.evidence, answer.retrieved) == (True, ABSTAIN_TEXT, [], 0)
        assert backend.requests == []


def test_an_answerer_that_says_it_does_not_know_abstains(tmp_path: Path) -> None:
    backend = ScriptedBackend('{"answer": "Not mentioned."}', '{"answer": "Oslo"}')
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), backend=backend, policies="llm") as client:
        client.add("Bob's sister Hanna lives in Oslo", scope={"user_id": "bob"})
        unknown = client.answer("What is Bob's favourite film?", scope={"user_id": "bob"})
        known = client.answer("Where does Hanna live?", scope={"user_id": "bob"})
    assert (unknown.abstained, unknown.text) == (True, ABSTAIN_TEXT) and unknown.retrieved == 1
    assert (known.abstained, known.text) == (False, "Oslo")


def test_abstentions_are_read_however_they_are_written() -> None:
    assert all(abstains(t) for t in ("unknown", "Unknown.", "not mentioned", "I don't know", "  No information! "))
    assert not any(abstains(t) for t in ("Oslo", "none of them", "unknown soldier", "not in Oslo"))


async def test_the_async_twin_abstains_the_same_way(tmp_path: Path) -> None:
    from memsdk import AsyncMemoryClient
    from tests.policies.conftest import AsyncScripted

    backend = AsyncScripted('{"answer": "New York"}')
    async with AsyncMemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), backend=backend, policies="llm") as client:
        answer = await client.answer("Where does Bob live now?", scope={"user_id": "bob"})
        assert (answer.abstained, answer.text, answer.retrieved) == (True, ABSTAIN_TEXT, 0) and backend.requests == []
