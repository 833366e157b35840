"""A scripted backend: pure-logic tests of the policies decide exactly what the model 'says'."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from memsdk.errors import PolicyUnavailable
from memsdk.llm.base import Choice, Completion, SamplingParams
from memsdk.types import MemoryRecord, Scope, ScoredMemory, content_hash


class ScriptedBackend:
    """Replies with the queued texts in order; records what it was asked."""

    model = "scripted"

    def __init__(self, *replies: str, supports_schema: bool = False, down: bool = False) -> None:
        self.replies = list(replies)
        self.supports_schema = supports_schema
        self.down = down
        self.requests: list[dict] = []

    def chat(self, messages: Sequence[dict], *, params: SamplingParams, model: str | None = None, schema: dict | None = None) -> Completion:
        self.requests.append({"messages": list(messages), "model": model, "schema": schema})
        if self.down:
            raise PolicyUnavailable("connection refused (scripted)")
        text, finish = self.replies.pop(0), "stop"
        if isinstance(text, tuple):  # (text, finish_reason), e.g. a reply cut by max_tokens
            text, finish = text
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        if prefix and text.startswith(prefix):  # a model continues its response prefix
            text = text[len(prefix) :]
        return Completion(model=model or self.model, choices=[Choice(text=text, finish_reason=finish)], prompt_tokens=100, completion_tokens=len(text) // 4)

    async def achat(self, *a, **kw) -> Completion:  # pragma: no cover - alias used below
        return self.chat(*a, **kw)


class AsyncScripted(ScriptedBackend):
    async def chat(self, *a, **kw) -> Completion:  # type: ignore[override]
        return ScriptedBackend.chat(self, *a, **kw)


def memory(text: str, score: float = 0.9) -> ScoredMemory:
    now = datetime.now(UTC)
    rec = MemoryRecord(id=uuid.uuid4(), text=text, scope=Scope(user_id="u"), created_at=now, updated_at=now, version=1, content_hash=content_hash(text))
    return ScoredMemory(record=rec, score=score)


@pytest.fixture
def memories() -> list[ScoredMemory]:
    return [memory("Has a dog named Buddy", 0.82), memory("Lives in Paris", 0.41), memory("Works as a nurse", 0.30)]
