"""What a question asks of time, and what an answer is made before it is returned.

A 135M answerer copies the span nearest the question's words and does not weigh "(until 20
March 2025)": an answer to a question about the present ("where does she live now?",
`asks_now`) that only superseded memories hold, or to one about the past (`asks_before`)
that only their replacements hold, is asked for again of the other side of the change
(`second_look`, applied in `memsdk.pipeline.retrieval.answer_steps`, which keeps the second
answer only when that side holds it). The answerer's text is then
checked against the memories it was shown, in this order (`answer_steps` applies them), for
three mistakes the memory itself can settle: a part of an identifier for the whole
(`whole_value`), the value a correction says is wrong ("Hanna, not Anna" answered "Anna":
`apply_correction`), and a relative day or a day without its year (`complete_date`: "Friday"
-> "Friday (31 May 2024)", "19 April" -> "19 April 2025"). The model's own reply stays in its logged call.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import replace

from memsdk.dates import resolve_relative, with_year
from memsdk.pipeline.forget import Correction, classify
from memsdk.pipeline.personal_data import DataKind, values
from memsdk.policies import UNKNOWN, Answer
from memsdk.types import MemoryRecord, ScoredMemory

__all__ = ["IDENTIFIERS", "asks_now", "asks_before", "holders", "second_look", "whole_value", "apply_correction", "complete_date"]

#: the kinds of personal data whose every character counts: a part of one is no answer
#: (`whole_value`); a date, an address or a place can be asked for in part ("which year?")
IDENTIFIERS = frozenset({DataKind.PHONE, DataKind.EMAIL, DataKind.CARD_NUMBER, DataKind.ACCOUNT_NUMBER, DataKind.GOVERNMENT_ID})

#: a question that asks for a whole postal address: where post goes, or the address itself
_ASKS_ADDRESS = re.compile(r"\b(?:address(?:es)?|mail|post|send|sent|deliver\w*|parcels?|packages?|letters?)\b", re.I)

# words that ask what was true before a change ("previous partner", "first set for", "old
# address"), and with them the words that put any question in the past ("three years ago")
_EARLIER = r"before|previous(?:ly)?|former(?:ly)?|used to|original(?:ly)?|at first|first|earlier|prior"
_BEFORE = re.compile(r"\b(?:" + _EARLIER + r"|(?<!how )old)\b", re.I)
# "how old is she?" is left to the whole view too: it costs nothing
_PAST = re.compile(r"\b(?:" + _EARLIER + r"|past|old|until|ago|once|last)\b", re.I)
_NOW = re.compile(r"\b(?:now|currently|current|these days|nowadays|at the moment|at present|still|any ?more|today)\b", re.I)
# "'s" is a verb after a question word ("what's"), a possessive elsewhere ("Caroline's")
_AUXILIARY = re.compile(r"\b(?P<now>is|are|am|does|do|has|have|should|can|will|(?:what|where|who|how)'s)\b|\b(?P<past>was|were|did|had)\b", re.I)


def asks_now(question: str) -> bool:
    """Whether ``question`` asks what is true now: no word of the past ("before", "previous",
    "first") and a word of the present ("now", "these days", "current") or a present-tense
    auxiliary before any past one ("what is", "where does", "where should"). A question
    about an event ("when was the race?") or with no auxiliary is not: it sees history too."""
    if _PAST.search(question):
        return False
    if _NOW.search(question):
        return True
    verb = _AUXILIARY.search(question)
    return verb is not None and verb["now"] is not None


def asks_before(question: str) -> bool:
    """Whether ``question`` asks what was true before something replaced it ("previous",
    "before", "used to", "first set for", "old address")."""
    return _BEFORE.search(question) is not None


def _answer_text(answer: Answer) -> str:
    """The answer's text as a memory would hold it: without the spaces and the full stop a
    model puts around it."""
    return answer.text.strip().rstrip(".")


def holders(answer: Answer, shown: Sequence[ScoredMemory]) -> list[MemoryRecord]:
    """The memories of ``shown`` that hold ``answer``'s text (none for "unknown")."""
    value = _answer_text(answer).casefold()
    if len(value) < 2 or value == UNKNOWN:
        return []
    return [h.record for h in shown if value in h.record.text.casefold()]


def _replaced(record: MemoryRecord, history: Sequence[ScoredMemory]) -> bool:
    """Whether ``record`` was said where a memory of ``history`` ended: in its scope, at or
    after its ``invalid_at``. A replacement and the fact or turn that copies it share a
    time, while ``superseded_by`` names one of the two and retrieval may show the other."""
    return any(record.scope == h.record.scope and h.record.invalid_at is not None and record.valid_from >= h.record.invalid_at for h in history)


def second_look(question: str, answer: Answer, shown: Sequence[ScoredMemory]) -> list[ScoredMemory] | None:
    """The memories to ask again of when ``answer`` came from the wrong side of a change, else
    None. A 135M answerer copies the span nearest the question's words, whatever its
    "(until ...)":
    - asked about now (`asks_now`), it answered what only superseded memories hold ("23
      Bramble Way" for "where should mail go?" after "post goes to 18 Bramble Way these
      days" retired it): ask again of the current ones;
    - asked about before (`asks_before`), it answered what only current memories said where
      a shown memory ended hold ("bank teller" for "what was her previous job?", from the
      turn that retired "social worker"): ask again of the superseded ones.
    The caller keeps the second answer only when the side it asked holds it. Retrieval itself
    keeps history in view: hiding superseded memories from every "now" question cost LoCoMo
    val recall @10 / @30 / @60 .775 / .890 / .961 -> .750 / .849 / .917 (pairs-v4), since
    present-tense chat questions ("what is Jon currently reading?") lose the turns the pair
    manager wrongly retired; a second look touches only the answers from the wrong side."""
    found = holders(answer, shown)
    if not found:
        return None
    current = [h for h in shown if not h.record.superseded]
    history = [h for h in shown if h.record.superseded]
    if asks_now(question) and all(r.superseded for r in found):
        return current or None
    if asks_before(question) and history and not any(r.superseded for r in found) and all(_replaced(r, history) for r in found):
        return history
    return None


def _cited_first(answer: Answer, shown: Sequence[ScoredMemory]) -> list[MemoryRecord]:
    """The memories the answer cited, then the rest it was shown: where its text came from."""
    return [*answer.evidence, *(h.record for h in shown)]


def whole_value(answer: Answer, shown: Sequence[ScoredMemory], question: str = "") -> Answer:
    """The answer, or the whole `IDENTIFIERS` value it is a part of in a memory it cited, else
    in the first memory shown that holds one: SmolLM2 answers "where can Zara be emailed?" with
    "example.net" from "zara.cobalt@example.net", and a part of an email address, a phone
    number or an account number is never the answer. The memories it cited go first: "what
    was her email before?" is answered from the retired one. (Management benchmark val,
    default client: current-state answers 36 -> 40 of 50, previous-state unchanged; no LoCoMo
    conversation holds such a value, so its F1 cannot move.) A postal address is made whole
    too when ``question`` asks for one ("where should mail for Lina go?": "Birch Road" ->
    "27 Birch Road"), not when it may ask for a part ("which street does she live on?")."""
    part = _answer_text(answer).casefold()
    if len(part) < 3:
        return answer
    kinds = (IDENTIFIERS | {DataKind.POSTAL_ADDRESS}) if _ASKS_ADDRESS.search(question) else IDENTIFIERS
    for record in _cited_first(answer, shown):
        if part not in record.text.casefold():
            continue  # the detectors' regexes run only on a memory that holds the answer
        for kind, value in values(record.text):
            whole = value.rstrip(" .,;")  # "49 Bramble Way." at a sentence's end: the dot is no part of it
            if kind in kinds and part in whole.casefold() and part != whole.casefold():
                return replace(answer, text=whole)
    return answer


# a question about the mistake itself ("what name did he get wrong?") is answered by it
_ABOUT_MISTAKE = re.compile(r"\b(?:not|never|wrong|mistake|mistaken|typo|misspel\w*|instead)\b|n't\b", re.I)
_LEADING_FILLER = re.compile(r"^(?:(?:a|an|the|my|his|her|their|our|your)\s+)+", re.I)


def _correction_of(text: str, value: str) -> str | None:
    """What ``text`` says instead of ``value`` when it corrects it: the correction `classify`
    reads ("my sister's name is Hanna, not Anna"), else "X, not <value>" with X the as many
    words before the comma as ``value`` has ("I drive a VW Golf, not Ford Focus": the rules
    leave a long X to the manager; here the answer says how long it is)."""
    intent = classify(text)
    if isinstance(intent, Correction) and intent.wrong.casefold() == value.casefold():
        return intent.right
    m = re.search(r"(?P<before>[^.!?;:\n]+?)\s*,\s*not\s+(?:(?:a|an|the|my|his|her|their|our)\s+)?" + re.escape(value) + r"(?!\w)", text, re.I)
    if m is None:
        return None
    words = m["before"].split()[-len(value.split()):]
    right = _LEADING_FILLER.sub("", " ".join(words)).strip()
    return right if right and right.casefold() != value.casefold() else None


def apply_correction(question: str, answer: Answer, shown: Sequence[ScoredMemory]) -> Answer:
    """The answer, or what a current memory says instead of it when that memory corrects it:
    a 135M answerer asked for Leo's sister reads "my sister's name is Hanna, not Anna" and
    answers "Anna". A correction says the wrong value was never true, so this holds for
    questions about the past as well; not for questions about the mistake itself."""
    value = _LEADING_FILLER.sub("", _answer_text(answer)).strip()
    if len(value) < 2 or _ABOUT_MISTAKE.search(question):
        return answer
    for record in _cited_first(answer, shown):
        if record.current and (right := _correction_of(record.text, value)):
            return replace(answer, text=right)
    return answer


_WEEKDAY = re.compile(r"(?:(?:next|this|last|on)\s+)?(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)", re.I)


def _resolved(value: str, record: MemoryRecord, rendered: str) -> str | None:
    """The date the memory's rendering (``rendered``) gives a relative day the answer copied
    ("Friday" from "my meeting is next Friday (31 May 2024)"), else None."""
    if not (_WEEKDAY.fullmatch(value) or resolve_relative(value, record.valid_from) != value):
        return None
    m = re.search(re.escape(value) + r" \(([^()]{4,60})\)", rendered, re.I)
    # only a date the rendering added: "Friday (the 31st)" as the speaker wrote it is theirs
    return m[1] if m is not None and m[0].casefold() not in record.text.casefold() else None


def complete_date(answer: Answer, shown: Sequence[ScoredMemory]) -> Answer:
    """The answer with the date it means, from the first memory (cited first) that holds it:
    a relative day with the date the memory resolved it to ("Friday" -> "Friday (31 May
    2024)", `memsdk.dates.resolve_relative`); a day without a year with the year written
    after it there ("19 April, 2025"), else the year that puts it nearest when the memory
    was said ("19 April" -> "19 April 2025", `with_year`)."""
    value = _answer_text(answer)
    for record in _cited_first(answer, shown):
        text = record.render()
        if (at := text.casefold().find(value.casefold())) < 0:
            continue
        if meaning := _resolved(value, record, text):
            return replace(answer, text=f"{value} ({meaning})")
        if (full := with_year(value, record.valid_from)) is None:
            return answer  # not a day without its year
        if written := re.match(r",?\s+\d{4}\b", text[at + len(value):]):
            full = value + written[0]
        return replace(answer, text=full)
    return answer
