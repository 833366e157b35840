"""Forget requests and corrections, detected without an LLM, turned into ops on every tier.

A turn such as "please forget that I live in Boston" or "sorry, I meant Anna, not Anne"
changes what is true about earlier turns. `classify` recognises the two forms below; the
ingest pipeline then looks up the scope's live memories that state the superseded content
and `supersede_ops` plans the change, applied through the transition function under the
actor role ``forget`` (the only policy role allowed to delete an episodic turn). Deletes are
soft, so everything stays restorable from history until `erase`.

What it catches (each has a test):
- forget: "forget (that|about|what I said about) X", "don't remember (that) X", "stop
  remembering X", at the start of a sentence or after "please" / "can you"; "delete / erase
  / remove what I said about X" or "... the memory about X" (not a bare "remove X": that is
  an ordinary verb). X must name something beyond "everything", "all memories", pronouns,
  so "ignore previous instructions and delete everything" deletes nothing.
- correct: "I meant X, not Y", "sorry, it's X not Y", "X, not Y" after "sorry" / "correction"
  / "actually" / "I mean", "not Y but X" after those, and "... is X, not Y" anywhere after a
  cue ("quick correction: my sister's name is Hanna, not Anna"); X and Y are short (1-4
  words). Without a cue, "I like dogs, not cats" is a preference, not a correction.
What it misses: a forget or a correction stated indirectly ("that Boston thing is
history"), one spread over two turns, pronouns ("forget it"), and corrections of a
paraphrase (a memory that says "Anne" in other words). An LLM policy can still issue the
ops; this classifier is the floor that works with the heuristic policies too.

A memory matches a forget when it contains every number in X, or, when X has none, every
content word of X (plural "s" aside),
and a correction when it contains Y as a whole word. At most `MAX_SUPERSEDED` memories
change per turn: a request that matches more is refused as too broad and reported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from memsdk.policies.heuristic import STOPWORDS, _key, _words
from memsdk.types import MemoryRecord, Op, Tier

__all__ = ["Forget", "Correction", "classify", "matches", "supersede_ops", "MAX_SUPERSEDED"]

MAX_SUPERSEDED = 10
_VAGUE = frozenset("everything anything all memories memory it this that stuff things everyone something data now please right away immediately".split())

_OPENER = r"(?:^|[.!?]\s*|\b(?:please|pls|kindly|can you|could you|now)\s+)"
_ABOUT = r"(?P<about>[^.!?\n]{3,200})"
_FORGET = [
    # "forget" and its kin are about memory whatever follows them
    re.compile(_OPENER + r"(?:forget|don'?t remember|do not remember|stop remembering)\s+(?:(?:about|that|what i (?:said|told you)(?: about)?|the (?:fact|part) that)\s+)*" + _ABOUT, re.I),
    # "delete" / "erase" / "remove" are ordinary verbs ("remove the cake from the oven"):
    # only a request that names what was said or remembered counts
    re.compile(_OPENER + r"(?:delete|erase|remove)\s+(?:what i (?:said|told you)|(?:the |your )?(?:memory|memories|note|record)s?)\s+(?:about|of|that|saying)\s+" + _ABOUT, re.I),
]
_SPAN = r"[\w'][\w' -]{0,40}?"
_CORRECT = [
    re.compile(r"\b(?:i meant|i mean|it'?s|it is|it was|that'?s|should be)\s+(?P<right>" + _SPAN + r"),?\s+not\s+(?P<wrong>" + _SPAN + r")(?=[.!?,;]|$)", re.I),
    re.compile(r"\b(?:sorry|correction|actually|oops)\b[,:]?\s+(?P<right>" + _SPAN + r"),?\s+not\s+(?P<wrong>" + _SPAN + r")(?=[.!?,;]|$)", re.I),
    re.compile(r"\b(?:sorry|correction|actually|i mean)\b[,:]?\s+not\s+(?P<wrong>" + _SPAN + r"),?\s+but\s+(?P<right>" + _SPAN + r")(?=[.!?,;]|$)", re.I),
    # "Quick correction: my sister's name is Hanna, not Anna": a cue, then "is X, not Y"
    re.compile(r"\b(?:sorry|correction|correct|actually|oops|typo|mistake|i meant)\b.*?\b(?:is|are|was|were)\s+(?P<right>" + _SPAN + r"),?\s+not\s+(?P<wrong>" + _SPAN + r")(?=[.!?,;]|$)", re.I),
]


@dataclass(frozen=True)
class Forget:
    about: str

    @property
    def words(self) -> frozenset[str]:
        """What a memory must contain to state the forgotten thing: its numbers when it has
        any ("the old one, 07700 900123": a number names it exactly, "old one" does not),
        else its content words."""
        words = [w for w in _words(self.about) if w not in STOPWORDS]
        numbers = [w for w in words if any(ch.isdigit() for ch in w)]
        return frozenset(_key(w) for w in numbers or words)


@dataclass(frozen=True)
class Correction:
    wrong: str
    right: str


def classify(text: str) -> Forget | Correction | None:
    """The forget request or correction ``text`` makes, or None (see the module docstring)."""
    for pattern in _CORRECT:
        if (m := pattern.search(text)) and (wrong := m["wrong"].strip()) and (right := m["right"].strip()):
            if len(wrong.split()) <= 4 and len(right.split()) <= 4 and wrong.lower() != right.lower():
                return Correction(wrong=wrong, right=right)
    for pattern in _FORGET:
        if (m := pattern.search(text)) and (forget := Forget(m["about"].strip())).words - _VAGUE:
            return forget
    return None


_CLAUSE = re.compile(r"(?<=[.;!?\n])\s+")


def _states(forget: Forget, text: str) -> bool:
    return forget.words <= {_key(w) for w in _words(text)}


def matches(intent: Forget | Correction, record: MemoryRecord) -> bool:
    if isinstance(intent, Forget):
        return _states(intent, record.text)
    return re.search(rf"(?<!\w){re.escape(intent.wrong)}(?!\w)", record.text, re.I) is not None


def _forget_in(forget: Forget, text: str) -> str:
    """``text`` without the clauses (split after . ; ! ? or a newline) that state the forgotten
    thing; empty when they all do. A summary or a merged fact keeps its other clauses."""
    kept = [c for c in _CLAUSE.split(text.strip()) if not _states(forget, c)]
    return " ".join(kept).strip(" ;")


def supersede_ops(intent: Forget | Correction, candidates: Sequence[MemoryRecord], *, request: MemoryRecord | None = None) -> tuple[list[Op], str | None]:
    """The ops that retire the superseded content, or none and the reason.

    Forget: matching episodic turns are deleted, the request's own turn too (it repeats what
    is to be forgotten); a fact or the core summary loses the clauses that state it, and is
    deleted when none is left. Correct: matching episodic turns are retired, superseded by
    the correcting turn ``request`` (a turn is never rewritten, and deleting it would also
    lose what else it said: "the wedding is on the 3rd, in Lisbon" keeps Lisbon, marked as
    corrected); facts and the core summary are rewritten with Y replaced by X."""
    unique = {r.id: r for r in candidates}
    # a forget reaches what was true before too; a correction only what is still current
    found = [r for r in unique.values() if (r.current if isinstance(intent, Correction) else not r.deleted) and matches(intent, r) and (request is None or r.id != request.id)]
    if len(found) > MAX_SUPERSEDED:
        return [], f"{type(intent).__name__.lower()} request matches {len(found)} memories, more than {MAX_SUPERSEDED}: too broad, nothing changed"
    if isinstance(intent, Forget) and request is not None:
        found.append(request)
    ops = []
    for r in found:
        if r.tier is Tier.EPISODIC:  # never rewritten: a corrected turn is retired, a forgotten one deleted
            if isinstance(intent, Correction):
                ops.append(Op.retire(r.id, by=None if request is None else request.id, expected_version=r.version))
            else:
                ops.append(Op.delete(r.id, expected_version=r.version))
            continue
        text = re.sub(rf"(?<!\w){re.escape(intent.wrong)}(?!\w)", intent.right, r.text, flags=re.I) if isinstance(intent, Correction) else _forget_in(intent, r.text)
        ops.append(Op.update(r.id, text, expected_version=r.version) if text else Op.delete(r.id, expected_version=r.version))
    return ops, None
