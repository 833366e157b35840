"""Answerer policies: question + retrieved memories -> evidence, then a short answer (Memory-R1)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from memsdk.errors import ContextTooLong
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.effects import Request, Steps, run
from memsdk.policies.base import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.manager import render_memories
from memsdk.policies.prompts import load_prompt
from memsdk.policies.schemas import AnswerOut
from memsdk.types import MemoryRecord, ScoredMemory

__all__ = ["Answer", "Answerer", "LLMAnswerer", "UNKNOWN"]

UNKNOWN = "unknown"
MAX_QUESTION_CHARS = 500


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
        return {"question": question[:MAX_QUESTION_CHARS], "memories": render_memories(memories, dated=True)}

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
