"""Extractor policies: a turn (with a little context) -> atomic facts worth remembering."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memsdk.dates import render_timestamp
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.effects import Request, Steps, run
from memsdk.policies.base import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.prompts import load_prompt
from memsdk.policies.schemas import ExtractedFacts
from memsdk.types import Turn

__all__ = ["Extraction", "Extractor", "LLMExtractor", "ChunkExtractor", "render_turn"]

#: the part of a turn an extractor prompt shows; keeps the prompt within the token budget
MAX_TURN_CHARS = 1500
CONTEXT_CHARS = 200


@dataclass
class Extraction:
    facts: list[str]
    calls: list[PolicyCall] = field(default_factory=list)
    fallback: bool = False


@runtime_checkable
class Extractor(Protocol):
    """What the pipeline calls: ``extract`` for a policy without a model, or ``steps`` (the
    same decision as `base.Steps`, yielding its model requests) for an LLM policy."""

    role: str

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction: ...


def render_turn(turn: Turn, limit: int = CONTEXT_CHARS) -> str:
    return f"{turn.speaker}: {turn.text[:limit]}"


class LLMExtractor:
    """The Memory-R1 extractor: one call per turn, JSON ``{"facts": [...]}``.

    With ``fallback`` set, the pipeline degrades to that policy while the backend is dead
    instead of failing the turn; without it, `PolicyUnavailable` reaches the pipeline.
    """

    role = "extractor"
    prompt_role = "extractor"
    max_tokens = 96
    #: shorter "facts" are names or fragments ("Caroline", "The group"), not facts
    min_fact_words = 3

    def __init__(
        self,
        backend: LLMBackend | AsyncLLMBackend,
        config: PolicyConfig = PolicyConfig(),
        *,
        context_turns: int = 2,
        fallback: Extractor | None = None,
        stats: PolicyStats | None = None,
    ) -> None:
        self.backend, self.context_turns, self.fallback = backend, context_turns, fallback
        prompt = load_prompt(self.prompt_role, config.prompt_version)
        self.caller = LLMCaller(prompt, ExtractedFacts, config, default_max_tokens=self.max_tokens, stats=stats)

    @property
    def stats(self) -> PolicyStats:
        return self.caller.stats

    def prompt_values(self, turn: Turn, context: Sequence[Turn]) -> dict[str, str]:
        recent = list(context)[-self.context_turns :] if self.context_turns else []
        return {
            "timestamp": render_timestamp(turn.timestamp) if turn.timestamp else "unknown",
            "context": "\n".join(render_turn(t) for t in recent) or "(none)",
            "speaker": turn.speaker,
            "text": turn.text[:MAX_TURN_CHARS],
        }

    def _finish(self, value: ExtractedFacts | None, call: PolicyCall) -> Extraction:
        facts = [] if value is None else [f for f in value.facts if len(f.split()) >= self.min_fact_words]
        if value is not None and len(facts) < len(value.facts):
            self.stats.add("fragment_facts", len(value.facts) - len(facts))
        return Extraction(facts, [call])

    def request(self, turn: Turn, context: Sequence[Turn] = ()) -> Request:
        return self.caller.request(self.backend, self.prompt_values(turn, context))

    def steps(self, turn: Turn, context: Sequence[Turn] = ()) -> Steps[Extraction]:
        return self._finish(*(yield from self.caller.steps(self.backend, self.prompt_values(turn, context))))

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        """`steps` run with blocking calls (a script, a test); the clients drive `steps`."""
        return run(self.steps(turn, context))


class ChunkExtractor(LLMExtractor):
    """Memory-R2's extractor role: one call per chunk of a session instead of per turn."""

    role = "r2_extractor"
    prompt_role = "r2_extractor"

    def prompt_values(self, turn: Turn, context: Sequence[Turn]) -> dict[str, str]:
        # `context` is the chunk before `turn`; the whole chunk goes into one prompt
        chunk = [*context, turn]
        budget = MAX_TURN_CHARS * 2 // max(1, len(chunk))
        return {"timestamp": render_timestamp(turn.timestamp) if turn.timestamp else "unknown", "chunk": "\n".join(render_turn(t, budget) for t in chunk)}

    def extract_chunk(self, chunk: Sequence[Turn]) -> Extraction:
        return self.extract(chunk[-1], chunk[:-1])
