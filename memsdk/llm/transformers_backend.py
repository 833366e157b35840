"""In-process generation with transformers (+ optional peft LoRA adapters).

``TransformersBackend`` serves the same contract as the HTTP backend from a model folder
(default: the converted SmolLM2, ``memsdk.llm.models.ensure_smollm2``):

- the model loads on first use; torch, transformers and peft are imported only then;
- ``torch.set_flush_denormal(True)`` before anything runs: without it SmolLM2 decodes at
  ~0.8 tok/s on these CPUs instead of ~20 (docs/platform-notes.md);
- prompts in a batch are left-padded and generated together; ``n`` > 1 samples per prompt;
- every choice carries its token ids and, when asked, each token's raw log-probability
  (log-softmax of the unprocessed logits, which is what vLLM reports and what a policy
  gradient needs); like vLLM, a final end-of-turn token is part of ``token_ids``;
- LoRA adapters are loaded under a name and routed by ``model=`` exactly like vLLM's
  runtime adapters; ``model=None`` uses ``set_adapter``'s choice (the base model at first);
- one lock serialises generation and adapter changes, so a backend is safe to share;
- ``from_model`` serves a model someone else loaded and still owns: the trainer samples
  its rollouts this way, with the live LoRA weights, through the very code that serves.

Rendering, prompt encoding and stop strings are `memsdk.llm.inprocess`'s, the functions the
trainer scores with.

JSON-schema constrained decoding is not implemented in-process (``supports_schema`` is
False); policies fall back to prompting + parsing + repair there.
"""

from __future__ import annotations

import asyncio
import os
import threading
import warnings
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from memsdk.errors import ClientClosed, Conflict, ContextTooLong, InvalidInput, ModelNotFound
from memsdk.llm import inprocess
from memsdk.llm.base import Choice, Completion, Message, SamplingParams, TokenLogprob

__all__ = ["TransformersBackend", "AsyncTransformersBackend"]


class TransformersBackend:
    """Synchronous in-process backend. Thread-safe (one generation at a time)."""

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        served_model_name: str = "smollm2",
        dtype: str = "float32",  # on CPU fp32 decodes a little faster than bf16 and gives exact logprobs
        num_threads: int | None = None,
        max_batch_size: int = 8,
    ) -> None:
        self._path: Path | str | None = Path(model_path) if model_path is not None else None
        self._name = served_model_name
        self._dtype = dtype
        self._num_threads = num_threads
        self._max_batch = max_batch_size
        self._lock = threading.RLock()
        self._model: Any = None
        self._tokenizer: Any = None
        self._adapters: dict[str, str] = {}  # served name -> the peft adapter's own name
        self._default_adapter: str | None = None
        self._borrowed: frozenset[str] | None = None  # from_model: the served names of the owner's adapters

    @classmethod
    def from_model(
        cls, model: Any, tokenizer: Any, *, served_model_name: str = "base", adapter_name: str | None = None, max_batch_size: int = 8
    ) -> "TransformersBackend":
        """Serve a model that is already loaded (and stays its owner's), e.g. a trainer's peft model.

        ``adapter_name`` serves the peft model's active adapter under that name and makes it the
        default; ``served_model_name`` is the model with adapters off. The owner's adapter cannot
        be replaced or unloaded through the backend, and ``close`` only lets go of the model.
        The tokenizer is switched to left padding (`inprocess.prepare_tokenizer`).
        """
        backend = cls(served_model_name=served_model_name, max_batch_size=max_batch_size)
        backend._model, backend._tokenizer = model, inprocess.prepare_tokenizer(tokenizer)
        if adapter_name is not None:
            if adapter_name == served_model_name:
                raise InvalidInput("adapter_name", f"{adapter_name!r} is the base model's name")
            backend._adapters[adapter_name] = model.active_adapter
            backend._default_adapter = adapter_name
        backend._borrowed = frozenset(backend._adapters)
        return backend

    # -- protocol properties -------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._default_adapter or self._name

    @property
    def supports_schema(self) -> bool:
        return False

    @property
    def tokenizer(self) -> Any:
        self.load()
        return self._tokenizer

    # -- loading -------------------------------------------------------------------------------
    def load(self) -> "TransformersBackend":
        """Load the model now (otherwise the first call does). Idempotent."""
        with self._lock:
            if self._model is not None:
                return self
            if self._borrowed is not None:  # nothing to reload from: the model was its owner's
                raise ClientClosed("this backend served an injected model and was closed")
            if self._path is None:
                from memsdk.llm.models import smollm2_source

                self._path = smollm2_source()
            self._model, self._tokenizer = inprocess.load_pretrained(str(self._path), dtype=self._dtype, num_threads=self._num_threads)
            return self

    # -- adapters (names route like vLLM's runtime LoRA) -----------------------------------------
    def list_models(self) -> list[str]:
        """The base model's name followed by the loaded adapters."""
        return [self._name, *self._adapters]

    def load_adapter(self, name: str, path: str | os.PathLike[str], *, replace: bool = False) -> None:
        """Load a peft adapter folder under ``name``; loading a name twice needs ``replace=True``."""
        if name == self._name:
            raise InvalidInput("name", f"{name!r} is the base model's name")
        with self._lock:
            self.load()
            from peft import PeftModel

            if name in self._adapters:
                if not replace:
                    raise Conflict("lora_name", f"adapter {name!r} is already loaded")
                self._check_ours(name)
                self._model.delete_adapter(name)
            try:
                with warnings.catch_warnings():
                    # peft asks the model for transformers' deprecated `is_gradient_checkpointing`;
                    # the FutureWarning is theirs to fix, and an app that loads an adapter cannot act on it
                    warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
                    if isinstance(self._model, PeftModel):
                        self._model.load_adapter(str(path), adapter_name=name)
                    else:
                        self._model = PeftModel.from_pretrained(self._model, str(path), adapter_name=name)
            except (OSError, ValueError) as exc:
                raise ModelNotFound(name, f"cannot load adapter {name!r} from {path}: {exc}") from exc
            self._model.eval()
            self._adapters[name] = name

    # The HTTP backend's names, so a registry can hot-swap adapters on either backend alike.
    def load_lora_adapter(self, name: str, path: str | os.PathLike[str], *, replace: bool = False) -> None:
        """Same as ``load_adapter`` (vLLM's route name)."""
        self.load_adapter(name, path, replace=replace)

    def unload_lora_adapter(self, name: str) -> None:
        """Same as ``unload_adapter`` (vLLM's route name)."""
        self.unload_adapter(name)

    def set_adapter(self, name: str | None) -> None:
        """The adapter ``model=None`` uses from now on; ``None`` (or the base name) = base model."""
        with self._lock:
            if name is not None and name != self._name and name not in self._adapters:
                raise ModelNotFound(name)
            self._default_adapter = None if name == self._name else name

    def unload_adapter(self, name: str) -> None:
        """Remove an adapter; the last one removed restores the plain base model."""
        with self._lock:
            if name not in self._adapters:
                raise ModelNotFound(name)
            self._check_ours(name)
            del self._adapters[name]
            if self._default_adapter == name:
                self._default_adapter = None
            if self._adapters:
                self._model.delete_adapter(name)
            else:
                self._model = self._model.unload()  # strips the LoRA layers, weights untouched

    def _check_ours(self, name: str) -> None:
        if self._borrowed and name in self._borrowed:
            raise Conflict("lora_name", f"adapter {name!r} came with the injected model; its owner manages it")

    def _resolve(self, model: str | None) -> str | None:
        """Adapter name to activate, or None for the base model."""
        if model is None:
            return self._default_adapter
        if model == self._name:
            return None
        if model in self._adapters:
            return model
        raise ModelNotFound(model, f"model {model!r} not found; loaded: {self.list_models()}")

    # -- generation ----------------------------------------------------------------------------
    def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self.chat_batch([messages], params=params, model=model, schema=schema)[0]

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self.complete_batch([prompt], params=params, model=model, schema=schema)[0]

    def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:  # fmt: skip
        self.load()
        for i, messages in enumerate(conversations):
            if not messages:
                raise InvalidInput(f"conversations[{i}]", "at least one message is required")
        prompts = [self.render(msgs) for msgs in conversations]
        return self.complete_batch(prompts, params=params, model=model, schema=schema)

    def render(self, messages: Sequence[Message]) -> str:
        """The exact prompt text generation starts from (`inprocess.render`)."""
        self.load()
        return inprocess.render(self._tokenizer, messages)

    def complete_batch(
        self, prompts: Sequence[str], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None
    ) -> list[Completion]:
        """Raw-text prompts (no chat template), generated ``max_batch_size`` at a time."""
        if schema is not None:
            raise InvalidInput("schema", "TransformersBackend has no constrained decoding (supports_schema is False)")
        self.load()
        import torch

        out: list[Completion] = []
        with self._lock:
            adapter = self._resolve(model)
            # seeded once per call: re-seeding every chunk would replay one random stream in each
            if params.seed is not None:
                torch.manual_seed(params.seed)
            for start in range(0, len(prompts), self._max_batch):
                out += self._generate(list(prompts[start : start + self._max_batch]), params, adapter)
        return out

    def _generate(self, prompts: list[str], params: SamplingParams, adapter: str | None) -> list[Completion]:
        import torch
        from transformers import StoppingCriteriaList

        tok = self._tokenizer
        enc = inprocess.encode(tok, prompts, self._model.device)
        width = enc["input_ids"].shape[1]
        prompt_lens = enc["attention_mask"].sum(dim=1).tolist()
        limit = getattr(self._model.config, "max_position_embeddings", None)
        if limit is not None and max(prompt_lens) + params.max_tokens > limit:
            raise ContextTooLong(f"prompt of {max(prompt_lens)} tokens + max_tokens {params.max_tokens} > context {limit}")
        sampling = params.temperature > 0
        gen_kwargs: dict[str, Any] = {
            "max_new_tokens": params.max_tokens,
            "do_sample": sampling,
            "num_return_sequences": params.n,
            "return_dict_in_generate": True,
            "output_logits": params.logprobs,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": tok.eos_token_id,
            "top_k": None,
            "repetition_penalty": None if params.repetition_penalty == 1.0 else params.repetition_penalty,
        }
        if sampling:
            gen_kwargs.update(temperature=params.temperature, top_p=params.top_p)
        else:
            gen_kwargs.update(temperature=None, top_p=None)
        if params.stop:
            gen_kwargs.update(stopping_criteria=StoppingCriteriaList([inprocess.StopOnText(tok, width, params.stop)]))

        name = adapter or self._name
        started = time.perf_counter()
        with torch.inference_mode(), self._adapter_context(adapter):
            result = self._model.generate(**enc, **gen_kwargs)
        latency = time.perf_counter() - started

        generated = result.sequences[:, width:]  # [B x n, T]
        logprobs = None
        if params.logprobs:
            # raw logits per step -> log-softmax -> the chosen token's logprob   # [B x n, T]
            steps = torch.stack(result.logits, dim=1).float().log_softmax(dim=-1)
            logprobs = steps.gather(-1, generated[:, : steps.shape[1], None]).squeeze(-1)

        completions = []
        for b, prompt_len in enumerate(prompt_lens):
            choices = [
                self._choice(j, generated[b * params.n + j], None if logprobs is None else logprobs[b * params.n + j], params)
                for j in range(params.n)
            ]
            completions.append(
                Completion(
                    model=name,
                    choices=choices,
                    prompt_tokens=int(prompt_len),
                    completion_tokens=sum(len(c.token_ids or []) for c in choices),
                    latency_s=latency,
                )
            )
        return completions

    def _adapter_context(self, adapter: str | None) -> Any:
        from contextlib import nullcontext

        if not self._adapters:
            return nullcontext()
        if adapter is None:
            return self._model.disable_adapter()
        # only on a change: set_adapter also sets requires_grad, which an injected model's owner manages
        if self._model.active_adapter != self._adapters[adapter]:
            self._model.set_adapter(self._adapters[adapter])
        return nullcontext()

    def _choice(self, index: int, ids: Any, logprobs: Any, params: SamplingParams) -> Choice:
        tok = self._tokenizer
        row = inprocess.finish(tok, ids.tolist(), params.stop)
        token_logprobs = None
        if logprobs is not None:
            values = logprobs[: len(row.token_ids)].tolist()
            token_logprobs = [
                TokenLogprob(token_id=i, token=tok.convert_ids_to_tokens(i), logprob=v) for i, v in zip(row.token_ids, values)
            ]
        return Choice(index=index, text=row.text, token_ids=row.token_ids, logprobs=token_logprobs, finish_reason=row.finish_reason)

    def close(self) -> None:
        """Drop the model (memory is freed once nothing else references it).

        A backend loaded from a folder loads it again on its next call; one over an injected
        model (`from_model`) has nothing to reload and raises `ClientClosed` from then on.
        """
        with self._lock:
            self._model = self._tokenizer = None
            self._adapters.clear()
            self._default_adapter = None

    def __enter__(self) -> "TransformersBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncTransformersBackend:
    """The async twin: runs a ``TransformersBackend``'s calls in a worker thread.

    Generation holds the wrapped backend's lock, so concurrent awaits queue rather than
    oversubscribe the CPU; use ``chat_batch`` for real batching.
    """

    def __init__(self, backend: TransformersBackend | None = None, **kwargs: Any) -> None:
        self.sync = backend if backend is not None else TransformersBackend(**kwargs)

    @property
    def model(self) -> str:
        return self.sync.model

    @property
    def supports_schema(self) -> bool:
        return self.sync.supports_schema

    async def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return await asyncio.to_thread(self.sync.chat, messages, params=params, model=model, schema=schema)

    async def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return await asyncio.to_thread(self.sync.complete, prompt, params=params, model=model, schema=schema)

    async def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:  # fmt: skip
        return await asyncio.to_thread(self.sync.chat_batch, conversations, params=params, model=model, schema=schema)

    async def list_models(self) -> list[str]:
        return self.sync.list_models()

    async def load_adapter(self, name: str, path: str | os.PathLike[str], *, replace: bool = False) -> None:
        await asyncio.to_thread(self.sync.load_adapter, name, path, replace=replace)

    async def unload_adapter(self, name: str) -> None:
        await asyncio.to_thread(self.sync.unload_adapter, name)

    async def load_lora_adapter(self, name: str, path: str | os.PathLike[str], *, replace: bool = False) -> None:
        await self.load_adapter(name, path, replace=replace)

    async def unload_lora_adapter(self, name: str) -> None:
        await self.unload_adapter(name)

    def set_adapter(self, name: str | None) -> None:
        self.sync.set_adapter(name)

    async def aclose(self) -> None:
        self.sync.close()
