"""`warm_up`: one turn and one question through the client's own pipelines, on an empty bank
held in memory, so what the first call would load is loaded, and nothing is stored or
logged. Sync and async."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memsdk import AsyncMemoryClient
from memsdk.client._base import WARM_UP_QUESTION, WARM_UP_TURN
from memsdk.embedding import HashEmbedder


class _Seen(HashEmbedder):
    """The hashing embedder, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts += texts
        return super().embed(texts)


def _went_through_both_pipelines(texts: list[str]) -> bool:
    return any(WARM_UP_TURN.text in t for t in texts) and WARM_UP_QUESTION in texts


def test_warm_up_runs_a_turn_and_a_question_through_the_pipelines_and_writes_nothing(make_client) -> None:
    embedder = _Seen()
    client = make_client(embedder=embedder)
    client.warm_up()
    assert _went_through_both_pipelines(embedder.texts)
    assert client.bank.scopes() == [] and client.log.count() == 0


def test_the_async_twin_warms_up_the_same_way(tmp_path: Path) -> None:
    embedder = _Seen()

    async def main() -> tuple[list, int]:
        async with AsyncMemoryClient(data_dir=tmp_path, policies="heuristic", embedder=embedder) as client:
            await client.warm_up()
            return client.bank.scopes(), client.log.count()

    assert asyncio.run(main()) == ([], 0)
    assert _went_through_both_pipelines(embedder.texts)
