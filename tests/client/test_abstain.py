"""An empty memory is no ground for an answer: the answerer is not asked, so it cannot invent one."""

from __future__ import annotations

from pathlib import Path

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder

from .conftest import ScriptedBackend


def test_an_empty_memory_is_answered_unknown_without_asking_the_model(tmp_path: Path) -> None:
    backend = ScriptedBackend('{"answer": "New York"}')
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), backend=backend, policies="llm") as client:
        answer = client.answer("Where does Bob live now?", scope={"user_id": "bob"})
        assert (answer.text, answer.evidence, answer.retrieved) == ("unknown", [], 0)
        assert backend.requests == []


async def test_the_async_twin_abstains_the_same_way(tmp_path: Path) -> None:
    from memsdk import AsyncMemoryClient
    from tests.policies.conftest import AsyncScripted

    backend = AsyncScripted('{"answer": "New York"}')
    async with AsyncMemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), backend=backend, policies="llm") as client:
        answer = await client.answer("Where does Bob live now?", scope={"user_id": "bob"})
        assert (answer.text, answer.retrieved) == ("unknown", 0) and backend.requests == []
