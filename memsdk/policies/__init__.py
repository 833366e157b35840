"""The three memory policies (extractor, manager, answerer), LLM-driven or heuristic.

Every LLM policy is prompt (a versioned data file) + output schema (one pydantic model,
used for constrained decoding and for parsing) + backend + model name, and records each
call as a `PolicyCall` for the interaction log.
"""

from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.answerer import UNKNOWN, Answer, Answerer, LLMAnswerer
from memsdk.policies.base import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.extractor import ChunkExtractor, Extraction, Extractor, LLMExtractor
from memsdk.policies.heuristic import ExtractiveAnswerer, HeuristicExtractor, HeuristicManager
from memsdk.policies.manager import ChunkManager, Decision, LLMManager, Manager, OpGuard, to_ops
from memsdk.policies.prompts import PromptTemplate, load_prompt

__all__ = [
    "Answer",
    "Answerer",
    "ChunkExtractor",
    "ChunkManager",
    "Decision",
    "ExtractiveAnswerer",
    "Extraction",
    "Extractor",
    "HeuristicExtractor",
    "HeuristicManager",
    "LLMAnswerer",
    "LLMCaller",
    "LLMExtractor",
    "LLMManager",
    "Manager",
    "OpGuard",
    "PolicyCall",
    "PolicyConfig",
    "PolicyStats",
    "PromptTemplate",
    "UNKNOWN",
    "load_prompt",
    "memory_r2_policies",
    "to_ops",
]


def memory_r2_policies(backend: LLMBackend | AsyncLLMBackend, config: PolicyConfig = PolicyConfig()) -> tuple[ChunkExtractor, ChunkManager]:
    """Memory-R2: extractor and manager as two role prompts on one backbone (one model name)."""
    return ChunkExtractor(backend, config), ChunkManager(backend, config)
