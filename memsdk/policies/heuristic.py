"""Policies with no LLM: the baseline every trained policy is compared with, and the
degraded mode the client falls back to when the LLM backend is down.

- `HeuristicExtractor`: the turn itself is the fact ("Caroline: ...", with its date).
- `HeuristicManager`: Mem0-style similarity thresholds. A near-duplicate is NOOP; a close
  match is UPDATEd to the old text plus the new fact (nothing is lost); anything else is
  ADDed. It never deletes.
- `ExtractiveAnswerer`: picks the memory sharing most words with the question and answers
  with its words that the question does not already contain.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memsdk.dates import render_timestamp
from memsdk.policies.answerer import UNKNOWN, Answer
from memsdk.policies.extractor import Extraction
from memsdk.policies.manager import Decision
from memsdk.types import Op, ScoredMemory, Turn

__all__ = ["HeuristicExtractor", "HeuristicManager", "ExtractiveAnswerer"]

_WORD = re.compile(r"[\w']+")
#: the "Speaker (on date): " header the heuristic extractor writes; dates contain colons too
_HEADER = re.compile(r"^[^:(]{1,80}(\([^)]*\))?:\s*")
STOPWORDS = frozenset(
    "a an the and or but of to in on at for with by from is are was were be been being do does did "
    "what when where who whom which why how i you he she it we they me him her us them my your his "
    "its our their this that these those there here as so if than then not no yes".split()
)


def _key(word: str) -> str:
    # a plural/third-person "s" is the only inflection stripped: "lives" meets "live"
    return word[:-1] if len(word) > 3 and word.endswith("s") and not word.endswith("ss") else word


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


class HeuristicExtractor:
    role = "extractor"
    version = "heuristic-v1"

    def __init__(self, min_words: int = 3, max_chars: int = 1000) -> None:
        self.min_words, self.max_chars = min_words, max_chars

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        if len(_words(turn.text)) < self.min_words:
            return Extraction([])
        when = f" (on {render_timestamp(turn.timestamp)})" if turn.timestamp else ""
        return Extraction([f"{turn.speaker}{when}: {turn.text.strip()[: self.max_chars]}"])


@dataclass
class HeuristicManager:
    role: str = "manager"
    version: str = "heuristic-v1"
    duplicate_at: float = 0.95
    merge_at: float = 0.85
    max_text_chars: int = 1000

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        turns = tuple(source_turn_ids)
        ops: list[Op] = []
        merged: set[int] = set()
        for fact in facts:
            best = max(range(len(related)), key=lambda i: related[i].score, default=None)
            if best is None:  # no memories yet
                ops.append(Op.add(fact, source_turn_ids=turns))
                continue
            top = related[best]
            if top.score >= self.duplicate_at:
                continue
            text = f"{top.record.text}; {fact}"
            if best not in merged and top.score >= self.merge_at and len(text) <= self.max_text_chars:
                ops.append(Op.update(top.record.id, text, source_turn_ids=turns, expected_version=top.record.version))
                merged.add(best)
            else:
                ops.append(Op.add(fact, source_turn_ids=turns))
        return Decision(ops)


@dataclass
class ExtractiveAnswerer:
    role: str = "answerer"
    version: str = "extractive-v1"
    max_words: int = 6

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        asked = {_key(w) for w in _words(question)}
        best, best_score = None, 0.0
        for rank, m in enumerate(memories):
            overlap = len(asked & {_key(w) for w in _words(m.record.text)} - STOPWORDS)
            score = overlap + m.score - 0.01 * rank  # retrieval rank breaks ties
            if best is None or score > best_score:
                best, best_score = m, score
        if best is None:
            return Answer(UNKNOWN, [])
        new = [w for w in _words(_HEADER.sub("", best.record.text)) if _key(w) not in asked and w not in STOPWORDS]
        return Answer(" ".join(new[: self.max_words]) or UNKNOWN, [best.record])
