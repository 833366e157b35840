"""`MemsdkRetriever`: a LangChain retriever over ``client.search``, sync and async."""

from __future__ import annotations

from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, Field, field_validator

from memsdk import AsyncMemoryClient, MemoryClient, Scope, ScoredMemory, Tier
from memsdk.bank import as_scope

__all__ = ["MemsdkRetriever", "memory_document"]


def memory_document(hit: ScoredMemory) -> Document:
    """A search hit as a `Document`: the text as the answerer sees it (an episodic turn with
    its speaker and date), and everything a caller may filter or cite on in the metadata."""
    record = hit.record
    return Document(
        id=str(record.id),
        page_content=record.render(),
        metadata={
            "id": str(record.id),
            "scope": record.scope.model_dump(exclude_none=True),
            "tier": record.tier.value,
            "score": hit.score,
            "created_at": record.created_at.isoformat(),
            "updated_at": record.updated_at.isoformat(),
            "occurred_at": record.occurred_at.isoformat() if record.occurred_at else None,
            "speaker": record.speaker,
            "version": record.version,
            "source_turn_ids": list(record.source_turn_ids),
            "metadata": dict(record.metadata),
        },
    )


class MemsdkRetriever(BaseRetriever):
    """The scope's memories nearest to a query, as `Document`s.

    ``MemsdkRetriever(client=client, scope={"user_id": "alice"}, k=4)``; ``k`` can also be
    given per call (``retriever.invoke(query, k=10)``). ``ainvoke`` awaits ``aclient`` (an
    `AsyncMemoryClient`); it never runs the blocking client in a thread on the caller's
    event loop, so a retriever built without ``aclient`` refuses ``ainvoke`` with a clear
    error instead. The scope is fixed at construction: a retriever is built per user (or per
    request) in code, never chosen by a model.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    client: MemoryClient | None = None
    aclient: AsyncMemoryClient | None = None
    scope: Scope
    k: int = Field(default=4, ge=1, le=1000)
    #: one tier only (``"semantic"``, ``"episodic"``, ``"core"``), or every tier
    tier: Tier | None = None
    #: dense + BM25 fused by rank inside Qdrant (memsdk's default retrieval); False: dense only
    hybrid: bool = True

    @field_validator("scope", mode="before")
    @classmethod
    def _scope(cls, value: Any) -> Scope:
        return as_scope(dict(value) if isinstance(value, dict) else value)

    def model_post_init(self, context: Any) -> None:
        if self.client is None and self.aclient is None:
            raise ValueError("MemsdkRetriever needs client= (a MemoryClient), aclient= (an AsyncMemoryClient), or both")

    def _limit(self, k: int | None) -> int:
        limit = self.k if k is None else k
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
            raise ValueError(f"k: expected a positive int, got {limit!r}")
        return limit

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun, k: int | None = None) -> list[Document]:
        if self.client is None:
            raise TypeError("this MemsdkRetriever was built with aclient only: use ainvoke, or pass client=MemoryClient(...)")
        hits = self.client.search(query, scope=self.scope, limit=self._limit(k), tier=self.tier, hybrid=self.hybrid)
        return [memory_document(h) for h in hits]

    async def _aget_relevant_documents(self, query: str, *, run_manager: AsyncCallbackManagerForRetrieverRun, k: int | None = None) -> list[Document]:
        if self.aclient is None:
            # memsdk's sync client blocks; running it in a thread would hide that cost on the
            # caller's loop (the mem0 #2892 complaint), so say what to pass instead
            raise TypeError("this MemsdkRetriever has no aclient: pass aclient=AsyncMemoryClient(...) to use ainvoke")
        hits = await self.aclient.search(query, scope=self.scope, limit=self._limit(k), tier=self.tier, hybrid=self.hybrid)
        return [memory_document(h) for h in hits]
