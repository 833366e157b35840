"""`ClientConfig.llm_max_concurrency`: the cap on one server backend's requests in flight,
which is what many scopes ingesting at once meet first (benchmarks/load.py)."""

from __future__ import annotations

import asyncio

import pytest

from memsdk import AsyncMemoryClient, InvalidInput, MemoryClient
from memsdk.embedding import HashEmbedder
from tests.llm._stub_server import Reply, StubServer, chat_body

POLICIES = {"extractor": "llm", "manager": "heuristic", "answerer": "heuristic"}


@pytest.mark.parametrize("cap", [1, 3])
def test_concurrent_scopes_never_have_more_requests_in_flight_than_the_cap(tmp_path, cap: int) -> None:
    async def main(url: str) -> None:
        async with AsyncMemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(64), llm_base_url=url, policies=POLICIES, llm_max_concurrency=cap) as client:
            turns = [client.ingest({"speaker": "Sam", "text": f"I have {i} bikes"}, scope={"user_id": f"user-{i}"}) for i in range(10)]
            results = await asyncio.gather(*turns)
        assert all(r.episodic_id is not None for r in results)  # every turn kept, whatever the replies

    with StubServer([Reply(body=chat_body('{"facts": []}'), delay_s=0.05)]) as stub:
        asyncio.run(main(stub.url))
        assert len(stub.requests) >= 10 and 1 <= stub.max_in_flight <= cap


def test_the_cap_is_validated(tmp_path) -> None:
    with pytest.raises(InvalidInput, match="llm_max_concurrency"):
        MemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(64), llm_max_concurrency=0)


def test_the_cap_comes_from_the_environment_too(monkeypatch) -> None:
    from memsdk import ClientConfig

    monkeypatch.setenv("MEMSDK_LLM_MAX_CONCURRENCY", "32")
    assert ClientConfig.from_env().llm_max_concurrency == 32
    monkeypatch.setenv("MEMSDK_LLM_MAX_CONCURRENCY", "many")
    with pytest.raises(ValueError, match="llm_max_concurrency"):
        ClientConfig.from_env()
