"""The memory policies (extractor, manager, answerer; Mem-alpha's writer), LLM-driven or heuristic.

Every LLM policy is prompt (a versioned data file) + output schema (one pydantic model,
used for constrained decoding and for parsing) + backend + model name, and records each
call as a `PolicyCall` for the interaction log.
"""

from typing import Any

from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.answerer import UNKNOWN, Answer, Answerer, LLMAnswerer
from memsdk.policies.calling.caller import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.extractor import ChunkExtractor, Extraction, Extractor, LLMExtractor
from memsdk.policies.answerer import ExtractiveAnswerer
from memsdk.policies.extractor import HeuristicExtractor
from memsdk.policies.manager import HeuristicManager
from memsdk.policies.manager import ChunkManager, Decision, LLMManager, Manager, OpGuard, to_ops
from memsdk.policies.calling.prompts import PromptTemplate, load_prompt, split_prompt_id
from memsdk.policies.writer import LLMWriter, Writer, Written, writer_ops
from memsdk.policies.deltamem import DeltaMemManager
from memsdk.policies.pair_manager import PairManager, PairThresholds
from memsdk.policies.relations import PairClassifier, Relation
from memsdk.policies.plugged import Plugged
from memsdk.policies.extractor import ExtractorRules, PluggedExtractor
from memsdk.policies.manager import ManagerRules, PluggedManager
from memsdk.policies.answerer import AnswererRules, PluggedAnswerer

LLMPolicy = LLMExtractor | LLMManager | LLMAnswerer

__all__ = [
    "Answer",
    "Answerer",
    "AnswererRules",
    "ChunkExtractor",
    "ChunkManager",
    "Decision",
    "DeltaMemManager",
    "ExtractiveAnswerer",
    "Extraction",
    "Extractor",
    "ExtractorRules",
    "HeuristicExtractor",
    "HeuristicManager",
    "LLMAnswerer",
    "LLMCaller",
    "LLMExtractor",
    "LLMManager",
    "LLMWriter",
    "NAMED",
    "LLMPolicy",
    "Manager",
    "ManagerRules",
    "OpGuard",
    "PairClassifier",
    "PairManager",
    "PairThresholds",
    "PolicyCall",
    "PolicyConfig",
    "PluggedAnswerer",
    "PluggedExtractor",
    "PluggedManager",
    "PolicyStats",
    "PromptTemplate",
    "Relation",
    "UNKNOWN",
    "llm_policy_class",
    "plug",
    "load_prompt",
    "memory_r2_policies",
    "split_prompt_id",
    "to_ops",
    "Writer",
    "Written",
    "writer_ops",
]


def memory_r2_policies(backend: LLMBackend | AsyncLLMBackend, config: PolicyConfig = PolicyConfig()) -> tuple[ChunkExtractor, ChunkManager]:
    """Memory-R2: extractor and manager as two role prompts on one backbone (one model name)."""
    return ChunkExtractor(backend, config), ChunkManager(backend, config)


#: The LLM policy classes that can serve each client role; the first one is the role's default.
_SERVING: dict[str, tuple[type[LLMPolicy], ...]] = {"extractor": (LLMExtractor, ChunkExtractor), "manager": (LLMManager, ChunkManager, DeltaMemManager), "answerer": (LLMAnswerer,)}

#: built-in LLM policies a role can name, with the prompt id that serves them
#: (``policies={"manager": "deltamem"}``)
NAMED = {"manager": {"deltamem": "deltamem/v1"}}


def llm_policy_class(role: str, prompt_id: str | None = None) -> tuple[type[LLMPolicy], str | None]:
    """The class and prompt version that serve a client ``role`` with the prompt ``prompt_id``
    (``r2_manager/v2``; None: the role's default class and prompt).

    The class follows the prompt: a prompt's placeholders are the values its class renders
    (the r2 extractor prompt shows a chunk of turns, the Memory-R1 one a turn and its context).
    Raises ValueError for a prompt that does not exist or that ``role`` cannot run.
    """
    classes = _SERVING.get(role)
    if classes is None:
        raise ValueError(f"no LLM policy serves role {role!r}")
    if prompt_id is None:
        return classes[0], None
    prompt_role, version = split_prompt_id(prompt_id)
    for cls in classes:
        if cls.prompt_role == prompt_role:
            load_prompt(prompt_role, version)  # a missing prompt file fails here, not at the first request
            return cls, version
    raise ValueError(f"the {role} cannot run prompt {prompt_id!r}: its prompt roles are {', '.join(c.prompt_role for c in classes)}")


#: the class that runs a user's policy object of each role behind the role's interface
_PLUGGED: dict[str, type[Plugged[Any]]] = {"extractor": PluggedExtractor, "manager": PluggedManager, "answerer": PluggedAnswerer}


def plug(role: str, policy: Any, **kw: Any) -> Plugged[Any]:
    """A user's policy object for ``role``, ready for the pipeline (`memsdk.policies.plugged`)."""
    return _PLUGGED[role](policy, **kw)
