"""``client.forget(description, dry_run=...)``: a preview that matches what the forget then
does, in every tier, soft and restorable; refusals; the async twin. On MiniLM (the embedder
the trained relevance head reads) and on the hashing embedder (the rules alone)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memsdk import AsyncMemoryClient, ForgetResult, InvalidInput, MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.pipeline.forget import MAX_SUPERSEDED

SCOPE = {"user_id": "rita"}
TURNS = [
    {"speaker": "Rita", "text": "You can reach me at 555-0142 if the order is late.", "timestamp": "2024-03-01"},
    {"speaker": "Rita", "text": "I mostly shop for running gear.", "timestamp": "2024-03-02"},
]


def texts(client: MemoryClient) -> list[str]:
    return sorted(r.text for r in client.list(scope=SCOPE))


@pytest.fixture(scope="module")
def minilm():
    from memsdk.embedding import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()


@pytest.mark.parametrize("embedder_name", ["minilm", "hash"])
def test_a_dry_run_shows_what_the_forget_then_deletes_everywhere(tmp_path: Path, embedder_name: str, request: pytest.FixtureRequest) -> None:
    embedder = request.getfixturevalue("minilm") if embedder_name == "minilm" else HashEmbedder(64)
    with MemoryClient(data_dir=tmp_path, embedder=embedder, policies="heuristic") as client:
        client.ingest(TURNS, scope=SCOPE)
        before = texts(client)
        preview = client.forget("my phone number", scope=SCOPE, dry_run=True)
        assert isinstance(preview, ForgetResult) and not preview.applied and preview.refused is None
        assert preview.memories and all("555-0142" in m.text for m in preview.memories)
        assert {m.tier for m in preview.memories} >= {"episodic"}
        assert texts(client) == before  # a preview changes nothing
        done = client.forget("my phone number", scope=SCOPE)
        assert done.applied and {m.id for m in done.memories} == {m.id for m in preview.memories}
        assert not any("555-0142" in t for t in texts(client)) and any("running gear" in t for t in texts(client))
        # soft, in the audit history, and restorable
        restored = client.restore(done.memories[0].id, scope=SCOPE)
        assert "555-0142" in restored.text
        assert any(e.event == "DELETE" for e in client.history(done.memories[0].id, scope=SCOPE))


def test_a_vague_description_is_refused_and_a_broad_one_changes_nothing(tmp_path: Path) -> None:
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies="heuristic") as client:
        client.ingest([{"speaker": "Rita", "text": f"I ran {i} km with my running club today."} for i in range(MAX_SUPERSEDED + 1)], scope=SCOPE)
        before = texts(client)
        for vague in ("everything", "all memories", "it"):
            with pytest.raises(InvalidInput, match="description"):
                client.forget(vague, scope=SCOPE)
        broad = client.forget("my running club", scope=SCOPE)
        assert not broad.applied and broad.refused and "too broad" in broad.refused
        assert texts(client) == before
        assert client.forget("my passport number", scope=SCOPE) == ForgetResult(description="my passport number", memories=[], applied=False)


def test_a_forget_never_reaches_another_scope(tmp_path: Path) -> None:
    with MemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies="heuristic") as client:
        client.ingest(TURNS[0], scope=SCOPE)
        client.ingest({**TURNS[0], "speaker": "Sam"}, scope={"user_id": "sam"})
        assert client.forget("my phone number", scope=SCOPE).applied
        assert any("555-0142" in r.text for r in client.list(scope={"user_id": "sam"}))


async def test_the_async_twin_previews_and_forgets(tmp_path: Path) -> None:
    async with AsyncMemoryClient(data_dir=tmp_path, embedder=HashEmbedder(64), policies="heuristic") as client:
        await client.ingest(TURNS, scope=SCOPE)
        preview = await client.forget("my phone number", scope=SCOPE, dry_run=True)
        done = await client.forget("my phone number", scope=SCOPE)
        assert preview.memories and {m.id for m in done.memories} == {m.id for m in preview.memories} and done.applied
        assert not any("555-0142" in r.text for r in await client.list(scope=SCOPE))

