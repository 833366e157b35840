"""Whether a model's text came from what it was shown, and from which turn.

A small model copies its prompt's examples ("Has two dogs, Buddy and Scout") and the context
turns it sees beside the current one. Both checks here compare content words: `grounded`
guards what a manager or writer may store; `cited_turns` decides which shown turns a fact
came from, so that a stored memory names the turn that said it (or is not stored at all).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memsdk.dates import render_timestamp
from memsdk.types import Turn

__all__ = ["content_words", "grounded", "cited_turns", "FACT_GROUNDING"]

_WORD = re.compile(r"[a-z0-9']+")
_FUNCTION_WORDS = frozenset("the a an and or but of to in on at for with by from is are was were be has have had i you he she it we they my your his her their this that".split())

#: the share of a fact's content words the turns it cites must hold; below it in every
#: combination of shown turns, the fact came from the prompt or from nowhere
FACT_GROUNDING = 0.5
#: a fact rewrites a turn in the third person ("attended" for "attending", "plans" for
#: "planning"): words are compared by their first letters
_STEM = 5


def content_words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if w not in _FUNCTION_WORDS and len(w) > 1}


def grounded(text: str, sources: Sequence[str], minimum: float) -> bool:
    """Whether at least ``minimum`` of ``text``'s content words appear in ``sources``."""
    words = content_words(text)
    if not words:
        return False
    support = set().union(*(content_words(s) for s in sources)) if sources else set()
    return len(words & support) / len(words) >= minimum


def _stems(text: str) -> set[str]:
    return {w[:_STEM] for w in content_words(text)}


def cited_turns(fact: str, stated: Sequence[Turn], context: Sequence[Turn] = (), minimum: float = FACT_GROUNDING) -> list[Turn] | None:
    """The turns ``fact`` came from, in conversation order, or None when no shown turns hold it.

    The stated turns, when together they hold ``minimum`` of the fact's content words (a
    speaker's name and the turn's date count: "Caroline attended a support group on 8 May"
    from Caroline's "I went to a support group" that day); else the fewest shown turns that do, taken greedily by how many of the
    missing words each adds, the stated turns first on a tie. An extractor sees two context
    turns beside the current one and often states what the other speaker said there; citing
    the current turn for it would make the memory untraceable."""
    words = _stems(fact)
    if not words:
        return None
    shown = [*context, *stated]
    held = {id(t): _stems(f"{t.speaker} ({render_timestamp(t.timestamp) if t.timestamp else ''}): {t.text}") for t in shown}
    need = minimum * len(words)
    if len(words & set().union(*(held[id(t)] for t in stated))) >= need:
        return list(stated)
    chosen: list[Turn] = []
    covered: set[str] = set()
    candidates = [*stated, *context]  # stated first: max() keeps the first of equal gains
    while len(covered) < need and candidates:
        best = max(candidates, key=lambda t: len((words & held[id(t)]) - covered))
        if not (words & held[id(best)]) - covered:
            return None
        chosen.append(best)
        covered |= words & held[id(best)]
        candidates.remove(best)
    if len(covered) < need:
        return None
    return [t for t in shown if any(t is c for c in chosen)]
