"""The extractor role: a turn (with a little context) -> atomic facts worth remembering.

The role whole, in one module: what it returns (`Extraction`) and promises (`Extractor`), its
output schema (`ExtractedFacts`), its LLM policies (`LLMExtractor`, Memory-R2's
`ChunkExtractor`) and its policy without a model, `HeuristicExtractor`: the turn itself is the
fact ("Caroline: ...", with its date), the baseline every trained extractor is compared with
and the fallback while the LLM backend is down. An extractor you write follows
`ExtractorRules` and is run by `PluggedExtractor` (`memsdk.policies.plugged`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from memsdk.dates import render_timestamp
from memsdk.effects import Request, Steps, run
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.calling.caller import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.calling.prompts import load_prompt
from memsdk.policies.calling.schema import Notes, as_list, unloop
from memsdk.policies.words import split_words
from memsdk.types import Turn
from memsdk.policies.plugged import Plugged

__all__ = ["Extraction", "Extractor", "LLMExtractor", "ChunkExtractor", "render_turn", "ExtractedFacts", "HeuristicExtractor", "ExtractorRules", "PluggedExtractor"]

#: the part of a turn an extractor prompt shows; keeps the prompt within the token budget
MAX_TURN_CHARS = 1500
CONTEXT_CHARS = 200


#: an atomic fact is a sentence ("Caroline adopted a dog named Buddy in May 2023"), not a paragraph
MAX_FACT_CHARS = 200

#: a turn rarely holds more facts than this; the extractor's 96 tokens would not fit more
MAX_FACTS = 8

Fact = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_FACT_CHARS)]

class ExtractedFacts(BaseModel):
    model_config = ConfigDict(extra="ignore")

    facts: list[Fact] = Field(default_factory=list, max_length=MAX_FACTS)

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        notes: Notes = []
        if not isinstance(data, dict) or "facts" not in data:
            return data, notes
        facts = as_list(data["facts"], "facts", notes)
        if not isinstance(facts, list):
            return data, notes
        kept: dict[str, str] = {}
        for i, fact in enumerate(facts):
            where = f"facts[{i}]"
            if not isinstance(fact, str) or not fact.strip():
                notes.append(f"{where}: not a text, dropped")
                continue
            fact = unloop(fact.strip(), where, notes)
            if len(fact) > MAX_FACT_CHARS:
                notes.append(f"{where}: {len(fact)} characters, over {MAX_FACT_CHARS}: dropped")
            elif fact.casefold() in kept:  # a looping model repeats one item until the token limit
                notes.append(f"{where}: repeats an earlier fact, dropped")
            else:
                kept[fact.casefold()] = fact
        if facts and not kept:
            return data, notes  # nothing usable: a failure, not an empty extraction
        if len(kept) > MAX_FACTS:
            notes.append(f"facts: {len(kept)} facts, the first {MAX_FACTS} kept")
        return {**data, "facts": list(kept.values())[:MAX_FACTS]}, notes


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


class HeuristicExtractor:
    role = "extractor"
    version = "heuristic-v1"

    def __init__(self, min_words: int = 3, max_chars: int = 1000) -> None:
        self.min_words, self.max_chars = min_words, max_chars

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        if len(split_words(turn.text)) < self.min_words:
            return Extraction([])
        when = f" (on {render_timestamp(turn.timestamp)})" if turn.timestamp else ""
        return Extraction([f"{turn.speaker}{when}: {turn.text.strip()[: self.max_chars]}"])


# -- a policy you write (`memsdk.policies.plugged`) -------------------------------------


@runtime_checkable
class ExtractorRules(Protocol):
    """An extractor without an LLM: the facts worth keeping from ``turn``."""

    def extract(self, turn: Turn, context: Sequence[Turn]) -> Sequence[str] | Extraction: ...


class PluggedExtractor(Plugged[Extraction]):
    role, rule = "extractor", "extract"

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        return run(self.steps(turn, tuple(context)))

    def _coerce(self, value: Any, inputs: tuple[Any, ...], kw: dict[str, Any]) -> Extraction:
        if isinstance(value, Extraction):
            return value
        if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
            raise self._wrong("a result", value, "a list of fact strings")
        for i, fact in enumerate(value):
            if not isinstance(fact, str):
                raise self._wrong(f"facts[{i}]", fact, "a string")
        return Extraction([f.strip() for f in value if f.strip()])

    def _empty(self, why: str) -> Extraction:
        return Extraction([])

    def _summary(self, result: Extraction) -> dict[str, Any]:
        return {"facts": result.facts}
