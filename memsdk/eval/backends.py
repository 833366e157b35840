"""The LLM the harness hands to the client, counted, so cost is measured per turn and question.

`IngestResult` and `AnswerResult` report tokens but not how many requests a call made (a
re-ask or a manager call per fact adds some); counting at the backend sees every request
whatever the policy does. Counts are per thread, so questions answered concurrently each
read their own.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from memsdk.eval.config import EvalConfig
from memsdk.llm.base import Completion, LLMBackend, LoRABackend, Message, SamplingParams

__all__ = ["CountingBackend", "open_backend", "open_embedder"]


B = TypeVar("B", bound=LLMBackend)
L = TypeVar("L", bound=LoRABackend)


class CountingBackend(Generic[B]):
    """An `LLMBackend` that forwards to ``inner`` and counts requests in the calling thread."""

    def __init__(self, inner: B) -> None:
        self.inner = inner
        self._local = threading.local()

    @property
    def calls(self) -> int:
        """Requests made so far by the current thread."""
        return getattr(self._local, "calls", 0)

    def _count(self, n: int = 1) -> None:
        self._local.calls = self.calls + n

    @property
    def model(self) -> str:
        return self.inner.model

    @property
    def supports_schema(self) -> bool:
        return self.inner.supports_schema

    def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        self._count()
        return self.inner.chat(messages, params=params, model=model, schema=schema)

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        self._count()
        return self.inner.complete(prompt, params=params, model=model, schema=schema)

    def chat_batch(self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> list[Completion]:
        self._count(len(conversations))
        return self.inner.chat_batch(conversations, params=params, model=model, schema=schema)

    # only where ``inner`` loads adapters (a `LoRABackend`): a test's fake need not
    def load_lora_adapter(self: CountingBackend[L], name: str, path: str, **kwargs: Any) -> None:
        self.inner.load_lora_adapter(name, path, **kwargs)

    def close(self) -> None:
        self.inner.close()


def open_backend(config: EvalConfig) -> LoRABackend:
    """The answer/policy model: the configured server, else SmolLM2 in-process."""
    # from the modules, not memsdk.llm's lazy names: those are typed `object`
    if config.llm_base_url:
        from memsdk.llm.openai_compat import OpenAICompatibleBackend

        return OpenAICompatibleBackend(config.llm_base_url, model=config.model)
    from memsdk.llm.transformers_backend import TransformersBackend

    return TransformersBackend(served_model_name=config.model, num_threads=config.llm_threads)


def open_embedder(config: EvalConfig) -> Any:
    """One embedder for the whole run: every conversation's client shares the loaded model."""
    if config.embedder == "hash":
        from memsdk.embedding import HashEmbedder

        return HashEmbedder(256)
    from memsdk.embedding import SentenceTransformerEmbedder

    return SentenceTransformerEmbedder()
