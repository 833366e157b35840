"""Clients for the LangChain adapter tests: one bank on a temporary dir, a sync client and
its async twin over it (an embedded store folder opens once per process, so both share the
bank), the hashing embedder and heuristic policies: fast, no model loaded."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest
import pytest_asyncio

pytest.importorskip("langchain_core", reason="the adapters need memsdk[langchain]")

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel  # noqa: E402
from langchain_core.messages import BaseMessage  # noqa: E402
from pydantic import Field  # noqa: E402

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder  # noqa: E402

ALICE = {"user_id": "alice"}
BOB = {"user_id": "bob"}


@contextmanager
def suite_clients(root: Path, facts: Sequence[str]) -> Iterator[dict]:
    """For langchain-tests' suites, which build the component from constructor params
    themselves: both clients over one bank holding ``facts`` for Alice, alive for a class."""
    with MemoryBank.open(root / "store", embedder=HashEmbedder(64)) as shared:
        sync = MemoryClient(bank=shared, data_dir=root / "data", policies="heuristic")
        aclient = AsyncMemoryClient(bank=shared, data_dir=root / "adata", policies="heuristic")
        for fact in facts:
            sync.add(fact, scope=ALICE)
        try:
            yield {"client": sync, "aclient": aclient, "scope": ALICE}
        finally:
            asyncio.run(aclient.aclose())
            sync.close()


@pytest.fixture
def bank(tmp_path: Path) -> Iterator[MemoryBank]:
    with MemoryBank.open(tmp_path / "store", embedder=HashEmbedder(64)) as opened:
        yield opened


@pytest.fixture
def client(bank: MemoryBank, tmp_path: Path) -> Iterator[MemoryClient]:
    with MemoryClient(bank=bank, data_dir=tmp_path / "data", policies="heuristic") as c:
        yield c


@pytest_asyncio.fixture
async def aclient(bank: MemoryBank, tmp_path: Path) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(bank=bank, data_dir=tmp_path / "adata", policies="heuristic") as c:
        yield c


class ScriptedChatModel(GenericFakeChatModel):
    """LangChain's fake chat model, replying from a script, that also accepts tools (as
    ``create_agent`` binds them) and keeps every message list it was sent."""

    seen: list[list[BaseMessage]] = Field(default_factory=list)

    def bind_tools(self, tools, **kwargs):  # type: ignore[no-untyped-def,override]
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):  # type: ignore[no-untyped-def,override]
        self.seen.append(list(messages))
        return super()._generate(messages, stop=stop, run_manager=run_manager, **kwargs)
