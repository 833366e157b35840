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
  so "ignore previous instructions and delete everything" deletes nothing. A wish about
  what the memory keeps: "could you not keep X", "I'd rather you didn't store (anything
  about) X", "please don't save X"; and "delete / erase / remove my X" when X names a kind
  of personal data or a sensitive topic (below), since "remove my jacket" is no request.
- correct: "I meant X, not Y", "sorry, it's X not Y", "X, not Y" after "sorry" / "correction"
  / "actually" / "I mean" / "wrong", "not Y but X" after those, and "... is X, not Y" anywhere after a
  cue ("quick correction: my sister's name is Hanna, not Anna"); X and Y are short (1-4
  words). Without a cue, "I like dogs, not cats" is a preference, not a correction.
What it misses: a forget or a correction stated indirectly ("that Boston thing is
history"), one spread over two turns, pronouns ("forget it"), and corrections of a
paraphrase (a memory that says "Anne" in other words). An LLM policy can still issue the
ops; this classifier is the floor that works with the heuristic policies too.

A memory matches a forget by meaning when X names a kind of personal data ("my phone
number", "my old address", "my card": `personal_data.kinds_named`) and the memory holds a
value of that kind (`personal_data.detect`: typed detectors for phone, email, postal
address, birth date, card, account and government id numbers), or when X names a sensitive
topic ("my diagnosis", "my divorce": `personal_data.topic_terms`) and the memory states it;
"old" / "previous" in X spares what is still current: the superseded matches when there are
any, else all but the newest statement.
Otherwise, and also, it matches when it contains every number in X, or, when X has none,
every content word of X (plural "s" aside). A correction matches a memory that contains Y
as a whole word. At most `MAX_SUPERSEDED` memories
change per turn: a request that matches more is refused as too broad and reported.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import timedelta
from functools import cached_property

from memsdk.dates import MONTH
from memsdk.pipeline.personal_data import DataKind, detect, kinds_named, states_topic, topic_terms
from memsdk.policies.relations import values_of
from memsdk.policies.words import HEADER, STOPWORDS, split_words, word_key
from memsdk.types import MemoryRecord, Op, Tier

__all__ = ["Forget", "Correction", "classify", "is_vague", "matches", "supersede_ops", "corrected_copy", "typed_values", "MAX_SUPERSEDED"]

MAX_SUPERSEDED = 10
#: records stated this close together are one statement (a turn and the fact copied from it
#: are stored a few milliseconds apart when the turn has no timestamp)
SAME_STATEMENT = timedelta(minutes=1)
_VAGUE = frozenset("everything anything all memories memory it this that stuff things everyone something data now please right away immediately".split())

#: as `Forget.words` holds them (`word_key`: "memories" -> "memorie")
_VAGUE_KEYS = frozenset(word_key(w) for w in _VAGUE | {"about", "me", "my", "mine", "i", "you", "your", "every", "user", "users"})

_OPENER = r"(?:^|[.!?]\s*|\b(?:please|pls|kindly|can you|could you|would you|now)\s+)"
_ABOUT = r"(?P<about>[^.!?\n]{3,200})"
#: "could you not keep ...", "I'd rather you didn't store ...", "please don't save ...": a wish
#: about what the memory holds, so the object names what to forget
_WISH = r"(?:^|[.!?]\s*|\b(?:please|pls|kindly|can you|could you|would you|i'?d rather you|i would rather you|i(?:'?d| would) prefer (?:it if )?you|i'?d like you to)\s+)"
_KEEP = r"(?:keep(?:ing)?|stor(?:e|ing)|sav(?:e|ing)|remember(?:ing)?|retain(?:ing)?|hold(?:ing)? on to|record(?:ing)?)"
_FORGET = [
    # "forget" and its kin are about memory whatever follows them
    re.compile(_OPENER + r"(?:forget|don'?t remember|do not remember|stop remembering)\s+(?:(?:about|that|what i (?:said|told you)(?: about)?|the (?:fact|part) that)\s+)*" + _ABOUT, re.I),
    # "delete" / "erase" / "remove" are ordinary verbs ("remove the cake from the oven"):
    # only a request that names what was said or remembered counts
    re.compile(_OPENER + r"(?:delete|erase|remove)\s+(?:what i (?:said|told you)|(?:the |your )?(?:memory|memories|note|record)s?)\s+(?:about|of|that|saying)\s+" + _ABOUT, re.I),
    re.compile(_WISH + r"(?:don'?t|do not|not|never|didn'?t|did not|stop|no longer)\s+" + _KEEP + r"\s+(?:(?:anything|any of|any)\s+(?:about\s+|of\s+|on\s+)?)?" + _ABOUT, re.I),
    # "I don't want my phone number kept on record": the same wish, its object before the
    # participle, which ends the clause or says where ("kept warm" is not about memory)
    re.compile(
        r"\bi (?:don'?t|do not|no longer) want\s+(?P<about>[^.!?\n]{3,200}?)\s+(?:(?:kept|stored|saved|remembered|recorded|retained)"
        r"(?:\s+(?:on (?:record|file)|anywhere|in (?:your |the )?memory|here))?|on (?:record|file))\s*(?:[.!?,;]|$)", re.I,
    ),
]
#: "delete my phone number" names memory only when its object is a kind of personal data or
#: a sensitive topic (`Forget.kinds`, `Forget.topic`): "remove my jacket" is not a request
_DELETE_MINE = re.compile(_OPENER + r"(?:delete|erase|remove|wipe|purge)\s+(?P<about>(?:my|our)\s[^.!?\n]{2,200})", re.I)
_POSSESSOR = re.compile(r"^.*?\b\w+'s\s+", re.I)
_PREPOSITION = re.compile(r"(?:on|in|at|by|from|to)\s+", re.I)
#: "my old address": only what is no longer current, when the memory knows what that is
_OLD = re.compile(r"\b(?:old|previous|former|past|earlier)\b", re.I)
#: a short span of words; "." and ":" only inside one (an email, a time), so a sentence's end ends it
_SPAN = r"[\w'@+](?:[\w' @+/-]|[.:](?=\w)){0,60}?"
_END = r"(?=[.!?,;](?!\w)|$)"
_CORRECT = [
    re.compile(r"\b(?:i meant|i mean|it'?s|it is|it was|that'?s|should be)\s+(?P<right>" + _SPAN + r"),?\s+not\s+(?P<wrong>" + _SPAN + r")" + _END, re.I),
    re.compile(r"\b(?:sorry|correction|actually|oops)\b[,:]?\s+(?P<right>" + _SPAN + r"),?\s+not\s+(?P<wrong>" + _SPAN + r")" + _END, re.I),
    re.compile(r"\b(?:sorry|correction|actually|i mean)\b[,:]?\s+not\s+(?P<wrong>" + _SPAN + r"),?\s+but\s+(?P<right>" + _SPAN + r")" + _END, re.I),
    # "Quick correction: my sister's name is Hanna, not Anna": a cue, then "is X, not Y"
    re.compile(r"\b(?:sorry|correction|correct|actually|oops|typo|mistake|wrong|i meant)\b.*?\b(?:is|are|was|were)\s+(?P<right>" + _SPAN + r"),?\s+not\s+(?P<wrong>" + _SPAN + r")" + _END, re.I),
]


@dataclass(frozen=True)
class Forget:
    """A forget request about ``about``. What it matches is computed once per request (cached
    properties), since a forget by meaning checks it against up to `MEANING_CANDIDATES`
    memories and each of their clauses. ``literal`` False: ``about`` is the whole turn the
    trained intent head recognised (`forget_head`), not words a rule cut out of it, so a
    memory is never matched by containing all its words."""

    about: str
    literal: bool = True

    @cached_property
    def words(self) -> frozenset[str]:
        """What a memory must contain to state the forgotten thing: its numbers when it has
        any ("the old one, 07700 900123": a number names it exactly, "old one" does not),
        else its content words."""
        words = [w for w in split_words(self.about) if w not in STOPWORDS]
        numbers = [w for w in words if any(ch.isdigit() for ch in w)]
        return frozenset(word_key(w) for w in numbers or words)

    @cached_property
    def kinds(self) -> frozenset[DataKind]:
        """The kinds of personal data the request names ("my phone number"), unless it names
        a value itself ("the old one, 07700 900123": then that value, not every phone number)."""
        return frozenset() if any(ch.isdigit() for ch in self.about) else kinds_named(self.about)

    @cached_property
    def topic(self) -> frozenset[str]:
        """The word stems of the sensitive topic the request names ("my diagnosis")."""
        if self.kinds:
            return frozenset()
        # "my brother Ayla's health condition": the topic is what follows the possessive
        return topic_terms(self.about) or topic_terms(_POSSESSOR.sub("", self.about))

    @property
    def by_meaning(self) -> bool:
        """Matched by what a memory is about, not by the request's own words."""
        return bool(self.kinds or self.topic)

    @property
    def old_only(self) -> bool:
        return _OLD.search(self.about) is not None


@dataclass(frozen=True)
class Correction:
    wrong: str
    right: str


def classify(text: str) -> Forget | Correction | None:
    """The forget request or correction ``text`` makes, or None (see the module docstring)."""
    for pattern in _CORRECT:
        if (m := pattern.search(text)) and (wrong := m["wrong"].strip()) and (right := m["right"].strip()):
            # "is on 19 April, not 12 April": the preposition belongs to "is", not to the date
            if (lead := _PREPOSITION.match(right)) and not _PREPOSITION.match(wrong):
                right = right[lead.end():]
            # a long X ("correction: I drive a VW Golf, not Ford Focus") is left to a trained
            # policy: cutting it to Y's length turned LoCoMo's chat ("how we learn, not just
            # winning") into corrections
            if right and len(wrong.split()) <= 4 and len(right.split()) <= 4 and wrong.lower() != right.lower():
                return Correction(wrong=wrong, right=right)
    for pattern in _FORGET:
        if (m := pattern.search(text)) and not is_vague(forget := Forget(m["about"].strip())):
            return forget
    if (m := _DELETE_MINE.search(text)) and (forget := Forget(m["about"].strip())).by_meaning:
        return forget
    return None


def is_vague(forget: Forget) -> bool:
    """Whether ``forget`` names nothing specific ("everything", "all memories", "it"): then
    it is no request the memory acts on."""
    return not (forget.words - _VAGUE_KEYS or forget.by_meaning)


_CLAUSE = re.compile(r"(?<=[.;!?\n])\s+")


def _states(forget: Forget, text: str) -> bool:
    """A value of the kind the request names, whatever words surround it; else a word of its
    topic; else (or also) every one of its own content words."""
    if forget.kinds and detect(text) & forget.kinds:
        return True
    if forget.topic and states_topic(forget.topic, text):
        return True
    return forget.literal and forget.words <= {word_key(w) for w in split_words(text)}


def matches(intent: Forget | Correction, record: MemoryRecord) -> bool:
    if isinstance(intent, Forget):
        return _states(intent, record.text)
    return re.search(rf"(?<!\w){re.escape(intent.wrong)}(?!\w)", record.text, re.I) is not None


def _forget_in(forget: Forget, text: str) -> str:
    """``text`` without the clauses (split after . ; ! ? or a newline) that state the forgotten
    thing; empty when they all do. A summary or a merged fact keeps its other clauses."""
    kept = [c for c in _CLAUSE.split(text.strip()) if not _states(forget, c)]
    return " ".join(kept).strip(" ;")


def _older(found: list[MemoryRecord]) -> list[MemoryRecord]:
    """What "my old / previous X" refers to among the matches: the superseded ones when the
    memory knows which those are; else all but the newest statement (the records said within
    `SAME_STATEMENT` of the newest one: a turn and the fact copied from it), since a user who
    stated a second value has made the first one the old one. A single statement is the old
    one: the user has not said the new value yet."""
    if any(r.superseded for r in found):
        return [r for r in found if r.superseded]
    newest = max((r.valid_from for r in found), default=None)
    if newest is None or all(newest - r.valid_from <= SAME_STATEMENT for r in found):
        return found
    return [r for r in found if newest - r.valid_from > SAME_STATEMENT]


_SUBJECT = frozenset("i i'm i've it it's its we we're he he's she she's they they're you my our his her their".split())


def _corrected(correction: Correction, text: str) -> str:
    """``text`` with the wrong value replaced by the right one. The right side may restate
    the frame the memory already has ("correction: I eat gluten-free, not vegetarian" for
    "I've been eating vegetarian for years"): its leading words that are a subject or that
    the memory says before the value ("eat" / "eating") are left out, so the fact reads "...
    eating gluten-free ...", not "... eating I eat gluten-free ...". Never shorter than the
    wrong value: "the 10th" for "the 3rd" stays whole."""
    found = re.search(rf"(?<!\w){re.escape(correction.wrong)}(?!\w)", text, re.I)
    if found is None:
        return text
    words_before = split_words(text[: found.start()])
    stems = {w[:3] for w in words_before if len(w) >= 3}

    def restated(word: str) -> bool:
        return word in _SUBJECT or word in words_before or (len(word) >= 3 and word[:3] in stems)

    right = correction.right.split()
    while len(right) > len(correction.wrong.split()) and restated(right[0].lower().strip(",")):
        right = right[1:]
    return text[: found.start()] + " ".join(right) + text[found.end():]


def supersede_ops(
    intent: Forget | Correction, candidates: Sequence[MemoryRecord], *, request: MemoryRecord | None = None, about: Collection[uuid.UUID] = ()
) -> tuple[list[Op], str | None]:
    """The ops that retire the superseded content, or none and the reason.

    Forget: matching episodic turns are deleted, the request's own turn too (it repeats what
    is to be forgotten), unless only the trained head took the turn for a request and nothing
    matched it: then nothing shows the head was right, and a turn of chat ("no worries, keep
    going!") must not be lost on its word alone; a fact or the core summary loses the clauses that state it, and is
    deleted when none is left. Correct: matching episodic turns are retired, superseded by
    the correcting turn ``request`` (a turn is never rewritten, and deleting it would also
    lose what else it said: "the wedding is on the 3rd, in Lisbon" keeps Lisbon, marked as
    corrected); facts and the core summary are rewritten with Y replaced by X.

    ``about``: the ids of the memories a forget is about by the trained relevance head
    (`forget_head.ForgetReader.about`), forgotten as well as those the rules match; such a
    memory is deleted whole, since the head judged the memory, not a clause of it."""
    unique = {r.id: r for r in candidates}
    # a forget reaches what was true before too; a correction only what is still current
    found = [
        r for r in unique.values()
        if (r.current if isinstance(intent, Correction) else not r.deleted) and (matches(intent, r) or r.id in about) and (request is None or r.id != request.id)
    ]
    if isinstance(intent, Forget) and intent.old_only:
        found = _older(found)
    if len(found) > MAX_SUPERSEDED:
        return [], f"{type(intent).__name__.lower()} request matches {len(found)} memories, more than {MAX_SUPERSEDED}: too broad, nothing changed"
    if isinstance(intent, Forget) and request is not None and (found or intent.literal):
        found.append(request)
    ops = []
    for r in found:
        if r.tier is Tier.EPISODIC:  # never rewritten: a corrected turn is retired, a forgotten one deleted
            if isinstance(intent, Correction):
                ops.append(Op.retire(r.id, by=None if request is None else request.id, expected_version=r.version))
            else:
                ops.append(Op.delete(r.id, expected_version=r.version))
            continue
        text = _corrected(intent, r.text) if isinstance(intent, Correction) else ("" if r.id in about else _forget_in(intent, r.text))
        ops.append(Op.update(r.id, text, expected_version=r.version) if text else Op.delete(r.id, expected_version=r.version))
    return ops, None


# --- what a replacement leaves true -------------------------------------------------------

_DAY = r"\d{1,2}(?:st|nd|rd|th)?"
#: kinds of value a replacement swaps one for one, most specific first: a number inside an
#: address or a date is that address's or date's, not a number of its own
_TYPED: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (kind, re.compile(pattern, re.I))
    for kind, pattern in (
        ("email", r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+"),
        ("address", r"\b\d{1,5}\s+(?:[A-Z][a-z]+\s+){1,3}(?:street|st|road|rd|avenue|ave|lane|ln|way|drive|dr|close|court|place|crescent|terrace|boulevard|blvd)\b"),
        ("phone", r"(?<![\w-])\+?\d[\d ().-]{5,}\d(?![\w-])"),
        ("date", rf"\b{_DAY}\s+(?:of\s+)?{MONTH}\b(?:\s+\d{{4}})?|\b{MONTH}\s+{_DAY}\b(?:,?\s+\d{{4}})?"),
        ("time", r"\b\d{1,2}(?::\d{2})?\s*(?:am|pm)\b|\b\d{1,2}:\d{2}\b"),
        ("ordinal", r"\b\d{1,2}(?:st|nd|rd|th)\b"),
        ("weekday", r"\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b"),
        ("number", r"\b\d+(?:[.,]\d+)?\b"),
    )
)


def typed_values(text: str) -> list[tuple[str, str]]:
    """(kind, value) for each typed value in ``text`` (`_TYPED`), in order, none inside another."""
    taken: list[tuple[int, int]] = []
    found: list[tuple[int, str, str]] = []
    for kind, pattern in _TYPED:
        for m in pattern.finditer(text):
            if not any(m.start() < hi and lo < m.end() for lo, hi in taken):
                taken.append(m.span())
                found.append((m.start(), kind, m.group()))
    return [(kind, value) for _, kind, value in sorted(found)]


#: a negated phrase, up to the end of its clause: "not the 17th" in "on the 19th, not the 17th."
_NEGATED = re.compile(r"\b(?:not|never)\b[^,.;!?]*", re.I)


def corrected_copy(new: str, old: str) -> str | None:
    """What ``old`` still says once ``new`` replaces it: ``old`` with each typed value that
    ``new`` swaps for another of its kind (a date, a time, a day, an address, a number...)
    replaced, when ``old`` also states a value ``new`` does not repeat; else None.

    "We pushed the parent-teacher meeting to the 10th" retires "We've booked the
    parent-teacher meeting for the 14th in Tampere", which also said where: the copy "...
    for the 10th in Tampere" keeps the place current, while the old fact stays history. A
    kind is swapped only when each text holds exactly one value of it, so a copy never
    guesses which of two dates moved; a name or a city is not a typed value (which one of
    "Mei is coming to dinner on Sunday" would "going out with Lina" replace?), so it is
    never swapped, and an old fact with nothing left beside the swapped value gets no copy.
    What ``new`` negates is not what it states: "on the 19th, not the 17th" states the 19th."""
    header = HEADER.match(old)
    head, body = (old[: header.end()], old[header.end():]) if header else ("", old)
    new_body = HEADER.sub("", new, count=1)
    old_values, new_values = typed_values(body), typed_values(_NEGATED.sub("", new_body))
    swaps: dict[str, str] = {}
    for kind, _ in _TYPED:
        olds = [v for k, v in old_values if k == kind]
        news = [v for k, v in new_values if k == kind]
        if len(olds) == 1 and len(news) == 1 and olds[0].casefold() != news[0].casefold():
            swaps[olds[0]] = news[0]
    if not swaps:
        return None
    new_words = {word_key(w) for w in split_words(new_body)}
    kept = values_of(body) - values_of(" ".join(swaps))
    if not any(not {word_key(w) for w in split_words(v)} <= new_words for v in kept):
        return None
    for wrong, right in swaps.items():
        body = re.sub(rf"(?<!\w){re.escape(wrong)}(?!\w)", right, body)
    return head + body
