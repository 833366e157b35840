"""The one LLM backend protocol, its request parameters and its result types.

Every backend (OpenAI-compatible HTTP, in-process transformers, test fakes) implements
``LLMBackend`` or its async twin ``AsyncLLMBackend``; policies depend on nothing else::

    backend.chat([{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=16))
    -> Completion(model="smollm2", choices=[Choice(text=..., token_ids=[...], logprobs=[...])], ...)

A final ``assistant`` message is a *response prefix*: the reply continues it (and its text
does not repeat it). Policies use it to start a small model's reply inside the JSON they
expect. ``model=None`` means the backend's default model; any other name selects a served model or
a LoRA adapter loaded under that name (vLLM routes by ``model``; the in-process backend
mirrors it). ``schema`` is a JSON schema for constrained decoding; a backend whose
``supports_schema`` is False raises ``InvalidInput("schema", ...)`` instead of ignoring it.

A backend that also serves LoRA adapters by name (vLLM's admin routes; peft in-process) is a
``LoRABackend`` / ``AsyncLoRABackend``: the client switches policy versions through them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

__all__ = [
    "Message",
    "SamplingParams",
    "TokenLogprob",
    "Choice",
    "Completion",
    "LLMBackend",
    "AsyncLLMBackend",
    "LoRABackend",
    "AsyncLoRABackend",
    "FinishReason",
]

Message = Mapping[str, str]
"""A chat message: ``{"role": "system" | "user" | "assistant", "content": str}``."""

FinishReason = Literal["stop", "length"]


class SamplingParams(BaseModel):
    """How to sample. The defaults are greedy decoding of at most 64 tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    temperature: float = Field(0.0, ge=0.0, description="0 means greedy decoding.")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.")
    max_tokens: int = Field(64, ge=1, description="Upper bound on generated tokens per choice.")
    n: int = Field(1, ge=1, description="Choices per prompt (a GRPO group).")
    seed: int | None = Field(None, description="Makes sampling at temperature > 0 repeatable.")
    stop: tuple[str, ...] = Field((), description="Strings that end generation; not part of the text.")
    logprobs: bool = Field(False, description="Return the log-probability of every generated token.")
    repetition_penalty: float = Field(
        1.0, gt=0.0,
        description="CTRL's multiplicative penalty on tokens already in the prompt or reply (vLLM and "
        "transformers share its meaning); 1.0 is off. Sent to a server only with vLLM extensions on.",
    )  # fmt: skip

    @field_validator("stop", mode="before")
    @classmethod
    def _one_stop_string(cls, value: Any) -> Any:
        return (value,) if isinstance(value, str) else value


class TokenLogprob(BaseModel):
    """One generated token and its log-probability under the model (before sampling tweaks)."""

    model_config = ConfigDict(frozen=True)

    token_id: int | None = Field(None, description="Vocabulary id, when the backend reports it.")
    token: str = Field("", description="The token's text.")
    logprob: float = Field(description="Natural-log probability of this token.")


class Choice(BaseModel):
    """One generated continuation."""

    index: int = 0
    text: str = Field(description="Generated text, stop string excluded.")
    token_ids: list[int] | None = Field(None, description="Generated token ids, when available.")
    logprobs: list[TokenLogprob] | None = Field(None, description="Per generated token, when asked for.")
    finish_reason: str = Field("stop", description="'stop' (end token or stop string) or 'length'.")


class Completion(BaseModel):
    """The answer to one prompt: ``n`` choices plus accounting."""

    model: str = Field(description="The model or adapter name that produced it.")
    choices: list[Choice]
    prompt_tokens: int = 0
    completion_tokens: int = Field(0, description="Summed over all choices.")
    latency_s: float = Field(0.0, description="Wall time of the call, retries included.")

    @property
    def text(self) -> str:
        """The first choice's text."""
        return self.choices[0].text


@runtime_checkable
class LLMBackend(Protocol):
    """A synchronous text-generation backend. Implementations are thread-safe."""

    @property
    def model(self) -> str:
        """The default model name (used when a call passes ``model=None``)."""
        ...

    @property
    def supports_schema(self) -> bool:
        """Whether ``schema=`` constrains decoding."""
        ...

    def chat(
        self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None
    ) -> Completion: ...

    def complete(
        self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None
    ) -> Completion: ...

    def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]: ...  # fmt: skip

    def close(self) -> None: ...


@runtime_checkable
class AsyncLLMBackend(Protocol):
    """The async twin of ``LLMBackend``: the same methods, awaited."""

    @property
    def model(self) -> str: ...

    @property
    def supports_schema(self) -> bool: ...

    async def chat(
        self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None
    ) -> Completion: ...

    async def complete(
        self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None
    ) -> Completion: ...

    async def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]: ...  # fmt: skip

    async def aclose(self) -> None: ...


@runtime_checkable
class LoRABackend(LLMBackend, Protocol):
    """An ``LLMBackend`` that loads LoRA adapters at run time, each then served as a model
    named ``name`` (vLLM's ``/v1/load_lora_adapter`` routes; peft in-process)."""

    def list_models(self) -> list[str]:
        """The base model's name and the loaded adapters' names."""
        ...

    def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        """Serve the adapter saved at ``path`` as ``name``; an existing ``name`` is `Conflict`
        unless ``replace`` (which reloads it in place)."""
        ...

    def unload_lora_adapter(self, name: str) -> None: ...


@runtime_checkable
class AsyncLoRABackend(AsyncLLMBackend, Protocol):
    """The async twin of ``LoRABackend``."""

    async def list_models(self) -> list[str]: ...

    async def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None: ...

    async def unload_lora_adapter(self, name: str) -> None: ...
