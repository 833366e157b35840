"""MemsdkRetriever: LangChain's own retriever suite, plus what the suite cannot know."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from langchain_core.documents import Document
from langchain_tests.integration_tests import RetrieversIntegrationTests

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk_adapters.langchain import MemsdkRetriever

from tests.adapters.conftest import ALICE, BOB, suite_clients

FACTS = [
    "Alice adopted a dog named Buddy",
    "Alice works as a nurse in Boston",
    "Alice is training for a marathon in May",
    "Alice's sister is called Hanna",
    "Alice prefers tea over coffee",
]


class TestStandardSuite(RetrieversIntegrationTests):
    """langchain-tests' RetrieversIntegrationTests: k at construction and per call, sync and
    async, Documents out. The suite builds the retriever from ``retriever_constructor_params``
    itself, so the clients live for the class."""

    @pytest.fixture(autouse=True, scope="class")
    @classmethod
    def _clients(cls, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
        with suite_clients(tmp_path_factory.mktemp("retriever-suite"), FACTS) as params:
            cls._params = params
            yield

    @property
    def retriever_constructor(self) -> type[MemsdkRetriever]:
        return MemsdkRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        return dict(self._params)

    @property
    def retriever_query_example(self) -> str:
        return "What is the name of Alice's dog?"


def test_documents_carry_id_scope_tier_timestamps_and_score(client: MemoryClient) -> None:
    record = client.add("Alice adopted a dog named Buddy", scope=ALICE)
    [doc] = MemsdkRetriever(client=client, scope=ALICE, k=1).invoke("dog")
    assert isinstance(doc, Document)
    assert doc.id == str(record.id) and doc.page_content == record.text
    meta = doc.metadata
    assert meta["id"] == str(record.id)
    assert meta["scope"] == ALICE and meta["tier"] == "semantic"
    assert meta["created_at"] == record.created_at.isoformat() and meta["updated_at"] == record.updated_at.isoformat()
    assert isinstance(meta["score"], float)


def test_an_episodic_turn_comes_with_its_speaker_and_date(client: MemoryClient) -> None:
    client.ingest({"speaker": "Alice", "text": "I ran my first marathon today!", "timestamp": "1:56 pm on 8 May, 2023"}, scope=ALICE)
    [doc] = MemsdkRetriever(client=client, scope=ALICE, k=1, tier="episodic").invoke("marathon")
    assert doc.metadata["tier"] == "episodic" and doc.metadata["speaker"] == "Alice"
    assert doc.page_content.startswith("Alice (on 1:56 pm on 8 May, 2023): I ran my first marathon today")
    assert doc.metadata["occurred_at"].startswith("2023-05-08")


def test_it_reads_only_its_own_scope(client: MemoryClient) -> None:
    client.add("Bob's password hint is his cat's name", scope=BOB)
    client.add("Alice likes cats", scope=ALICE)
    docs = MemsdkRetriever(client=client, scope=ALICE, k=10).invoke("cat password hint")
    assert [d.page_content for d in docs] == ["Alice likes cats"]


async def test_ainvoke_awaits_the_async_client_and_refuses_without_one(client: MemoryClient, aclient: AsyncMemoryClient) -> None:
    client.add("Alice's sister is called Hanna", scope=ALICE)
    docs = await MemsdkRetriever(aclient=aclient, scope=ALICE, k=1).ainvoke("sister")
    assert [d.page_content for d in docs] == ["Alice's sister is called Hanna"]
    with pytest.raises(TypeError, match="aclient"):
        await MemsdkRetriever(client=client, scope=ALICE).ainvoke("sister")
    with pytest.raises(TypeError, match="ainvoke"):
        MemsdkRetriever(aclient=aclient, scope=ALICE).invoke("sister")


def test_bad_construction_and_bad_k_are_clear_errors(client: MemoryClient) -> None:
    with pytest.raises(ValueError, match="client="):
        MemsdkRetriever(scope=ALICE)
    with pytest.raises(ValueError, match="scope"):
        MemsdkRetriever(client=client, scope={})
    with pytest.raises(ValueError, match="k"):
        MemsdkRetriever(client=client, scope=ALICE, k=0)
    with pytest.raises(ValueError, match="k: expected a positive int"):
        MemsdkRetriever(client=client, scope=ALICE).invoke("x", k=-1)
