"""AsyncMemoryClient: the same surface as MemoryClient, awaited, with scopes ingested concurrently."""

from __future__ import annotations

import asyncio
import inspect

import pytest

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.errors import ClientClosed
from memsdk.embedding import HashEmbedder

from .conftest import CAROLINE, MELANIE


def public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_the_twins_have_the_same_methods() -> None:
    sync, aio = public(MemoryClient), public(AsyncMemoryClient)
    assert sync - {"close"} == aio - {"aclose", "start"}
    for name in sync - {"close", "watch_policies"}:
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryClient, name)), name
        assert inspect.signature(getattr(MemoryClient, name)).parameters.keys() == inspect.signature(getattr(AsyncMemoryClient, name)).parameters.keys(), name


def test_async_client_end_to_end(tmp_path) -> None:
    async def scenario() -> None:
        async with AsyncMemoryClient(data_dir=tmp_path, policies="heuristic", embedder=HashEmbedder(64)) as client:
            topics = ["painting sunsets", "adopted kittens", "studies counseling", "visited Sweden", "plays violin"]
            caroline = [{"speaker": "Caroline", "text": f"Caroline {t} recently"} for t in topics]
            melanie = [{"speaker": "Melanie", "text": f"Melanie {t}"} for t in ["runs marathons", "bakes bread", "teaches yoga", "drives trucks", "grows tomatoes"]]
            a, b = await asyncio.gather(client.ingest(caroline, scope=CAROLINE, progress=False), client.ingest(melanie, scope=MELANIE, progress=False))
            assert len(a) == len(b) == 5
            assert len(await client.list(scope=CAROLINE, tier="semantic")) == 5 and len(await client.list(scope=MELANIE, tier="episodic")) == 5
            answer = await client.answer("Who is painting sunsets?", scope=[CAROLINE, MELANIE])
            assert answer.retrieved == 10 and answer.evidence[0].scope.user_id == "caroline"
            await client.feedback(answer.trajectory_id, correct=True)
            rec = await client.add("Likes tea", scope=CAROLINE)
            await client.delete(rec.id, scope=CAROLINE)
            await client.restore(rec.id, scope=CAROLINE)
            assert [e.event for e in await client.history(rec.id, scope=CAROLINE)] == ["ADD", "DELETE", "RESTORE"]
            assert await client.erase(scope=MELANIE) == 10  # five turns, each kept verbatim and as a fact
        with pytest.raises(ClientClosed):
            await client.search("x", scope=CAROLINE)

    asyncio.run(scenario())
