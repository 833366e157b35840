"""The answerer role: question + retrieved memories -> evidence, then a short answer (Memory-R1).

The role whole, in one module: `Answer` and the `Answerer` protocol, the output schema
(`AnswerOut`), the LLM policy (`LLMAnswerer`) and the policy without a model,
`ExtractiveAnswerer`: it picks the memory sharing most words with the question and answers
with its words that the question does not already contain. An answerer you write follows
`AnswererRules` and is run by `PluggedAnswerer` (`memsdk.policies.plugged`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from memsdk.effects import Request, Steps, run
from memsdk.errors import ContextTooLong
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.calling.caller import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.calling.prompts import load_prompt
from memsdk.policies.calling.schema import Notes, unloop
from memsdk.policies.manager import render_memories
from memsdk.policies.words import HEADER, STOPWORDS, split_words, word_key
from memsdk.types import MemoryRecord, ScoredMemory
from memsdk.policies.plugged import Plugged

__all__ = [
    "Answer", "Answerer", "LLMAnswerer", "UNKNOWN", "ABSTAIN_TEXT", "abstains", "AnswerOut", "ANSWER_ALIASES", "ExtractiveAnswerer", "AnswererRules",
    "PluggedAnswerer",
]  # fmt: skip

UNKNOWN = "unknown"
#: what the app is told when memory holds nothing that answers the question
ABSTAIN_TEXT = "I don't have that in memory."
#: the ways an answerer says so (lower case, no punctuation): what the policies here return
#: and what an answer model prompted for "unknown" writes instead
_ABSTENTIONS = frozenset({"unknown", "not mentioned", "no information", "i dont know", "i do not know", "not known", "not stated"})


def abstains(text: str) -> bool:
    """Whether ``text`` says that memory does not answer the question, rather than answering it."""
    return " ".join(re.sub(r"[^\w\s]", "", text.lower()).split()) in _ABSTENTIONS
MAX_QUESTION_CHARS = 500


#: the answer is at most ~6 words; the answerer keeps max_answer_words of it
MAX_ANSWER_CHARS = 100

MAX_EVIDENCE = 6

#: keys SmolLM2 was seen writing instead of "answer"; read as the answer only when "answer" is absent
ANSWER_ALIASES = ("name", "response", "final_answer")

class AnswerOut(BaseModel):
    model_config = ConfigDict(extra="ignore")

    # a short list: under constrained decoding SmolLM2 otherwise enumerates 1, 2, 3, ... until
    # the token budget runs out before it writes the answer
    evidence: list[Annotated[int, Field(ge=0, le=999)]] = Field(default_factory=list, max_length=MAX_EVIDENCE)
    answer: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_ANSWER_CHARS)]

    @model_validator(mode="before")
    @classmethod
    def _cut_rambling(cls, data: Any) -> Any:
        # An unconstrained answer that rambles past the bound is cut at a word, not rejected:
        # the answerer keeps only its first max_answer_words anyway. (Memory texts are never
        # cut: a half-written memory would be stored.)
        if isinstance(data, dict) and isinstance(data.get("answer"), str) and len(answer := data["answer"].strip()) > MAX_ANSWER_CHARS:
            cut = answer.rfind(" ", 0, MAX_ANSWER_CHARS + 1)
            data = {**data, "answer": answer[: cut if cut > 0 else MAX_ANSWER_CHARS].rstrip()}
        return data

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        notes: Notes = []
        if not isinstance(data, dict):
            return data, notes
        if "answer" not in data:
            alias = next((k for k in ANSWER_ALIASES if isinstance(data.get(k), str)), None)
            if alias is not None:
                notes.append(f"answer: read from {alias!r}, a documented alias")
                data = {**data, "answer": data[alias]}
        if isinstance(data.get("answer"), str):
            data = {**data, "answer": unloop(data["answer"], "answer", notes)}
        if "evidence" in data:
            data = {**data, "evidence": _memory_numbers(data["evidence"], notes)}
        return data, notes

def _memory_numbers(value: Any, notes: Notes) -> list[int]:
    """Evidence as the memory numbers shown: ints and digit strings are kept, anything else dropped."""
    items = value if isinstance(value, list) else [value]
    kept = []
    for item in items:
        if isinstance(item, str) and item.strip().isdigit():
            item = int(item)
        if isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= 999:
            kept.append(item)
    if len(kept) < len(items):
        notes.append(f"evidence: {len(items) - len(kept)} of {len(items)} items are not memory numbers, dropped")
    if not isinstance(value, list) and kept:
        notes.append("evidence: one number where a list is expected, read as a list of one")
    if len(kept) > MAX_EVIDENCE:
        notes.append(f"evidence: {len(kept)} numbers, the first {MAX_EVIDENCE} kept")
    return kept[:MAX_EVIDENCE]


@dataclass
class Answer:
    text: str
    evidence: list[MemoryRecord]
    calls: list[PolicyCall] = field(default_factory=list)
    fallback: bool = False


@runtime_checkable
class Answerer(Protocol):
    """``answer`` for a policy without a model; an LLM policy also has ``steps`` (see `Extractor`)."""

    role: str

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer: ...


class LLMAnswerer:
    """Shows up to 60 memories as ``[i] text``; the model names the ones it used, then answers.

    Answers are cut to ``max_answer_words`` (the prompt asks for 6; a rambling model is the
    common failure with small models) and an unparseable reply answers "unknown". A prompt
    that does not fit the model's context (a 2,048-token vLLM server and 60 memories) is
    asked again with the better-ranked half of the memories (they arrive best first), and
    each halving is counted as ``context_trims``: a question never fails for its length.
    """

    role = "answerer"
    prompt_role = "answerer"
    max_tokens = 64

    def __init__(
        self,
        backend: LLMBackend | AsyncLLMBackend,
        config: PolicyConfig = PolicyConfig(),
        *,
        max_answer_words: int = 12,
        fallback: Answerer | None = None,
        stats: PolicyStats | None = None,
    ) -> None:
        self.backend, self.max_answer_words, self.fallback = backend, max_answer_words, fallback
        prompt = load_prompt(self.prompt_role, config.prompt_version)
        self.caller = LLMCaller(prompt, AnswerOut, config, default_max_tokens=self.max_tokens, stats=stats)

    @property
    def stats(self) -> PolicyStats:
        return self.caller.stats

    @staticmethod
    def prompt_values(question: str, memories: Sequence[ScoredMemory]) -> dict[str, str]:
        return {"question": question[:MAX_QUESTION_CHARS], "memories": render_memories(memories, render_records=True)}

    def _finish(self, value: AnswerOut | None, call: PolicyCall, memories: Sequence[ScoredMemory]) -> Answer:
        if value is None:
            return Answer(UNKNOWN, [], [call])
        words = value.answer.split()
        if len(words) > self.max_answer_words:
            self.stats.add("long_answers")
            words = words[: self.max_answer_words]
        evidence = [memories[i].record for i in dict.fromkeys(value.evidence) if 0 <= i < len(memories)]
        if len(evidence) < len(set(value.evidence)):
            self.stats.add("unknown_evidence")
        return Answer(" ".join(words) or UNKNOWN, evidence, [call])

    def _fewer(self, shown: Sequence[ScoredMemory], exc: ContextTooLong) -> Sequence[ScoredMemory]:
        """The better-ranked half of the memories, after the prompt did not fit (60 -> 30 -> 15
        -> 7 -> 3 -> 1 -> none: bounded); re-raise when none were left to drop."""
        if not shown:
            raise exc
        self.stats.add("context_trims")
        return shown[: len(shown) // 2]

    def request(self, question: str, memories: Sequence[ScoredMemory]) -> Request:
        return self.caller.request(self.backend, self.prompt_values(question, memories))

    def read(self, request: Request, text: str, memories: Sequence[ScoredMemory]) -> Answer:
        """A sampled reply to `request` (its whole text) as serving would read it (the trainers' reading)."""
        return self._finish(*self.caller.read(self.backend, request, text), memories)

    def steps(self, question: str, memories: Sequence[ScoredMemory]) -> Steps[Answer]:
        shown = memories
        while True:
            try:
                value, call = yield from self.caller.steps(self.backend, self.prompt_values(question, shown))
            except ContextTooLong as exc:
                shown = self._fewer(shown, exc)
                continue
            return self._finish(value, call, shown)

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        """`steps` run with blocking calls (a script, a test); the clients drive `steps`."""
        return run(self.steps(question, memories))


@dataclass
class ExtractiveAnswerer:
    role: str = "answerer"
    version: str = "extractive-v1"
    max_words: int = 6

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        asked = {word_key(w) for w in split_words(question)}
        best, best_score = None, 0.0
        for rank, m in enumerate(memories):
            overlap = len(asked & {word_key(w) for w in split_words(m.record.text)} - STOPWORDS)
            score = overlap + m.score - 0.01 * rank  # retrieval rank breaks ties
            if best is None or score > best_score:
                best, best_score = m, score
        if best is None:
            return Answer(UNKNOWN, [])
        new = [w for w in split_words(HEADER.sub("", best.record.text)) if word_key(w) not in asked and w not in STOPWORDS]
        return Answer(" ".join(new[: self.max_words]) or UNKNOWN, [best.record])


# -- a policy you write (`memsdk.policies.plugged`) -------------------------------------


@runtime_checkable
class AnswererRules(Protocol):
    """An answerer without an LLM: a short answer to ``question`` from ``memories``."""

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> str | Answer: ...


class PluggedAnswerer(Plugged[Answer]):
    role, rule = "answerer", "answer"

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        return run(self.steps(question, tuple(memories)))

    def _coerce(self, value: Any, inputs: tuple[Any, ...], kw: dict[str, Any]) -> Answer:
        if isinstance(value, Answer):
            return value
        if not isinstance(value, str):
            raise self._wrong("an answer", value, "a string")
        return Answer(value.strip() or UNKNOWN, [])

    def _empty(self, why: str) -> Answer:
        return Answer(UNKNOWN, [])

    def _summary(self, result: Answer) -> dict[str, Any]:
        return {"answer": result.text}
