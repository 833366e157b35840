"""DeltaMem's manager through the ingest pipeline: it searches before it writes (bounded), its
searches and their results are part of the trace, and what it found counts as shown."""

from __future__ import annotations

import json
import re

import pytest

from memsdk import AsyncMemoryClient, LLMSpec, MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.policies import DeltaMemManager
from memsdk.effects import run

from tests.policies.conftest import ScriptedBackend, memory

ANN = {"user_id": "ann"}
NO_LLM = {"extractor": "heuristic", "answerer": "heuristic"}
BUDDY = "Has a dog named Buddy"


class Looker(ScriptedBackend):
    """Searches for "dog" first; then updates the memory the search found, by its number."""

    def chat(self, messages, **kw):  # type: ignore[override]
        found = re.search(r"\[(\d+)\] " + re.escape(BUDDY), messages[-2]["content"]) if "Found for" in messages[-2]["content"] else None
        reply = {"search": "dog"} if found is None else {"ops": [{"op": "UPDATE", "id": int(found.group(1)), "text": "Has two dogs, Buddy and Scout"}]}
        self.replies = [json.dumps(reply)]
        return super().chat(messages, **kw)


class AsyncLooker(Looker):
    async def chat(self, messages, **kw):  # type: ignore[override]
        return Looker.chat(self, messages, **kw)


def seed(add) -> None:
    add("Ann's puppy Scout is from the shelter", scope=ANN)
    add(BUDDY, scope=ANN)


def check_looked_up(result, backend, texts) -> None:
    assert [o.op for o in result.ops] == ["UPDATE"] and result.ops[0].after == "Has two dogs, Buddy and Scout"
    assert "Has two dogs, Buddy and Scout" in texts and "Ann's puppy Scout is from the shelter" in texts
    first, second = backend.requests
    assert BUDDY not in first["messages"][1]["content"]  # not among the memories shown at first
    assert "Found for <<<dog>>>" in second["messages"][-2]["content"] and BUDDY in second["messages"][-2]["content"]


def test_it_searches_then_updates_a_memory_it_found(tmp_path) -> None:
    backend = Looker()
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), related_k=1, policies={**NO_LLM, "manager": LLMSpec(backend=backend, prompt="deltamem/v1")}) as c:
        seed(c.add)
        result = c.ingest({"speaker": "Ann", "text": "Scout came home today"}, scope=ANN)
        texts = [m.text for m in c.list(scope=ANN, tier="semantic")]
        logged = list(c.log.read(kind="ingest"))[-1]
        stats = c.policy_stats["manager"]
    check_looked_up(result, backend, texts)
    assert [call["role"] for call in logged.calls] == ["deltamem", "deltamem"] and stats["lookups"] == 1
    assert "Found for <<<dog>>>" in logged.calls[1]["messages"][-2]["content"]  # the search and its result are in the trace


async def test_the_async_client_runs_the_same_searches(tmp_path) -> None:
    backend = AsyncLooker()
    async with AsyncMemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), related_k=1, policies={**NO_LLM, "manager": LLMSpec(backend=backend, prompt="deltamem/v1")}) as c:
        await c.add("Ann's puppy Scout is from the shelter", scope=ANN)
        await c.add(BUDDY, scope=ANN)
        result = await c.ingest({"speaker": "Ann", "text": "Scout came home today"}, scope=ANN)
        texts = [m.text for m in await c.list(scope=ANN, tier="semantic")]
    check_looked_up(result, backend, texts)


def test_searches_are_bounded_and_an_unshown_memory_is_refused(tmp_path) -> None:
    searching = ScriptedBackend(*[json.dumps({"search": f"dog {i}"}) for i in range(3)])
    wild = ScriptedBackend(json.dumps({"ops": [{"op": "DELETE", "id": 7}]}))
    for backend, said in ((searching, "no lookup left"), (wild, "unknown memory [7]")):
        with MemoryClient(data_dir=tmp_path / str(id(backend)), embedder=HashEmbedder(64), policies={**NO_LLM, "manager": LLMSpec(backend=backend, prompt="deltamem/v1")}) as c:
            seed(c.add)
            result = c.ingest({"speaker": "Ann", "text": "Scout came home today"}, scope=ANN)
            assert result.ops == [] and any(said in f for f in result.failures), result.failures
            assert len(c.list(scope=ANN, tier="semantic")) == 2
    assert len(searching.requests) == 3  # max_lookups (2) searches, then the ops were due


def test_it_is_served_by_name_and_needs_the_pipeline_to_search(tmp_path) -> None:
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies={**NO_LLM, "manager": "deltamem"}, backend=ScriptedBackend()) as c:
        assert c.policies["manager"].prompt == "deltamem/v1"
    alone = DeltaMemManager(ScriptedBackend(json.dumps({"search": "dog"})))
    with pytest.raises(TypeError, match="needs the ingest pipeline"):
        run(alone.steps(["Adopted Scout"], [memory("Lives in Paris")]))


@pytest.mark.slow
def test_smollm2_deltamem_loses_nothing(tmp_path, transformers_backend) -> None:
    turns = [{"speaker": "Ann", "text": t} for t in ("I adopted a dog named Buddy last May", "I adopted a second dog, Scout, this week")]
    with MemoryClient(data_dir=tmp_path, policies={**NO_LLM, "manager": LLMSpec(backend=transformers_backend, prompt="deltamem/v1", fallback=False)}) as c:
        results = c.ingest(turns, scope=ANN, progress=False)
        assert len(c.list(scope=ANN, tier="episodic")) == 2  # every turn kept, whatever the model did
        records = {r.id: r for r in c.list(scope=ANN, include_deleted=True)}
        assert {e.memory_id for e in c.history(scope=ANN)} == set(records)
        # the first fact has no related memory (no call); the second at most max_lookups + 1 calls
        assert len(results) == 2 and c.policy_stats["manager"].get("calls", 0) <= 3
