"""LLM-as-a-judge J: is a generated answer CORRECT or WRONG against the gold one?

The prompt follows the one Mem0 and Memory-R1 report J with (generous about wording and date
formats, strict about the fact), asked at temperature 0. Where the server supports
constrained decoding the reply is held to ``{"label": "CORRECT" | "WRONG"}``; otherwise the
first CORRECT/WRONG word in the reply is the label, and a reply with neither is unlabelled
(counted in neither J's numerator nor its denominator).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

from memsdk.llm.base import LLMBackend, SamplingParams

__all__ = ["Judge", "Verdict", "JUDGE_PROMPT", "parse_label"]

JUDGE_PROMPT = """Your task is to label an answer to a question as "CORRECT" or "WRONG".
You are given a question, a gold (ground truth) answer, and a generated answer.
Be generous: if the generated answer refers to the same thing as the gold answer, label it CORRECT,
even if it is longer or worded differently. For time questions, the same date or period in
another format (e.g. "May 7th" vs "7 May") is CORRECT. Otherwise label it WRONG.

Question: {question}
Gold answer: {gold}
Generated answer: {prediction}

Reply with JSON only: {{"label": "CORRECT"}} or {{"label": "WRONG"}}."""

LABEL_SCHEMA = {"type": "object", "properties": {"label": {"type": "string", "enum": ["CORRECT", "WRONG"]}}, "required": ["label"]}
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b", re.IGNORECASE)

Label = Literal["CORRECT", "WRONG"]


def parse_label(reply: str) -> Label | None:
    """The first CORRECT/WRONG in the reply (any case); None if there is neither."""
    m = _LABEL.search(reply)
    return None if m is None else m.group(1).upper()  # type: ignore[return-value]


@dataclass(frozen=True)
class Verdict:
    label: Label | None
    reply: str


class Judge:
    def __init__(self, backend: LLMBackend, *, max_tokens: int = 12) -> None:
        self.backend = backend
        self.params = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    def judge(self, question: str, gold: str, prediction: str) -> Verdict:
        prompt = JUDGE_PROMPT.format(question=question, gold=gold, prediction=prediction)
        schema = LABEL_SCHEMA if self.backend.supports_schema else None
        reply = self.backend.chat([{"role": "user", "content": prompt}], params=self.params, schema=schema).text
        return Verdict(parse_label(reply), reply)

    def close(self) -> None:
        self.backend.close()

    @classmethod
    def connect(cls, base_url: str, model: str) -> Judge:
        from memsdk.llm import OpenAICompatibleBackend

        return cls(OpenAICompatibleBackend(base_url, model=model))
