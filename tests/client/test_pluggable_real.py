"""A mixed configuration on real parts: the heuristic extractor, the manager on the real
vLLM server, the answerer on SmolLM2 in-process, MiniLM and the embedded Qdrant engine.

What a 135M model decides is not asserted; where each role ran, that nothing it did bypassed
the history, and that the turns are all kept, are."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsdk import AsyncMemoryClient, LLMSpec, MemoryClient
from memsdk.llm import AsyncOpenAICompatibleBackend, AsyncTransformersBackend, OpenAICompatibleBackend, TransformersBackend

from .test_client_real import CONVERSATION, SPEAKERS, assert_nothing_lost_without_history, speaker_scope

pytestmark = [pytest.mark.slow, pytest.mark.vllm]


def mixed(vllm_server) -> dict:
    return {"extractor": "heuristic", "manager": LLMSpec(base_url=vllm_server.base_url, model=vllm_server.served_model_name, fallback=False), "answerer": LLMSpec(in_process=True, fallback=False)}


def check_where_roles_ran(client, results, answer, vllm_server) -> None:
    info, stats = client.policies, client.policy_stats
    assert info["extractor"].served_by == "heuristic" and info["manager"].served_by == f"llm at {vllm_server.base_url}"
    assert info["answerer"].served_by == "llm at in-process"
    assert not any(r.fallback for r in results)
    assert stats["manager"]["calls"] >= 1 and stats["answerer"]["calls"] == 1  # each LLM role really asked its model
    assert not answer.fallback and answer.prompt_tokens > 0 and 0 < len(answer.text.split()) <= 12

def check_store(data_dir: Path) -> None:
    """Every turn kept, every change with its history, read back by a fresh client."""
    with MemoryClient(data_dir=data_dir, policies="heuristic") as client:
        assert len([m for s in SPEAKERS for m in client.list(scope=s, tier="episodic")]) == len(CONVERSATION)
        assert_nothing_lost_without_history(client)


def test_mixed_roles_sync(tmp_path: Path, vllm_server) -> None:
    with MemoryClient(data_dir=tmp_path, llm_base_url="http://127.0.0.1:9", policies=mixed(vllm_server)) as client:
        # the client's own server is dead: only the roles' own endpoints may be used
        assert isinstance(client._policies.backend("manager"), OpenAICompatibleBackend)
        assert isinstance(client._policies.backend("answerer"), TransformersBackend)
        results = client.ingest(CONVERSATION, scope=speaker_scope, progress=False)
        answer = client.answer("What does Caroline want to work in?", scope=SPEAKERS)
        check_where_roles_ran(client, results, answer, vllm_server)
        assert client._backend is None  # the default backend was never needed
    check_store(tmp_path)


async def test_mixed_roles_async(tmp_path: Path, vllm_server) -> None:
    async with AsyncMemoryClient(data_dir=tmp_path, llm_base_url="http://127.0.0.1:9", policies=mixed(vllm_server)) as client:
        assert isinstance(client._policies.backend("manager"), AsyncOpenAICompatibleBackend)
        assert isinstance(client._policies.backend("answerer"), AsyncTransformersBackend)
        results = await client.ingest(CONVERSATION, scope=speaker_scope, progress=False)
        answer = await client.answer("What does Caroline want to work in?", scope=SPEAKERS)
        check_where_roles_ran(client, results, answer, vllm_server)
    check_store(tmp_path)
