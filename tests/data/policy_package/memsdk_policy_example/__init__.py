"""Example policies for memsdk: a rule-based manager and an LLM answerer (request/read)."""

from __future__ import annotations

import re

from memsdk.types import Op

CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")


class NoCardNumbers:
    """Stores each fact as a new memory, except facts that hold a payment card number."""

    role = "manager"
    version = "0.1.0"

    def decide(self, facts, related, *, source_turn_ids):
        return [Op.add(fact) for fact in facts if not CARD.search(fact)]


class QuotingAnswerer:
    """Asks the model to quote its answer; the quoted words are the answer."""

    role = "answerer"
    version = "0.1.0"

    def request(self, question, memories):
        notes = "\n".join(f"- {m.record.text}" for m in memories[:10])
        return [
            {"role": "system", "content": 'Answer from the notes. Reply with the answer in double quotes, e.g. "Paris".'},
            {"role": "user", "content": f"Notes:\n{notes}\n\nQuestion: {question}"},
        ]

    def read(self, reply, question, memories):
        quoted = re.search(r'"([^"]{1,80})"', reply)
        return quoted.group(1) if quoted else "unknown"


def quoting_answerer() -> QuotingAnswerer:
    return QuotingAnswerer()
