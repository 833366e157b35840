"""Turning raw model text into a validated output: one reader for every policy.

`parse` is the function the runtime, the trainers and the evaluation all call. It finds a
JSON object, trying in order: the text as JSON; the first JSON object found in it (code
fences and chatter around it removed); for output cut off by the token limit inside a
string that repeats itself, that string cut where the repetition starts (`close_looping`);
and the longest prefix that ends on a complete element, with its brackets closed
(`close_truncated`). Any other open string is never closed: a half-written memory text is
dropped, not stored.

Then the object is read field by field: when it does not validate as a whole, the
schema's ``salvage`` (its rules: `memsdk.policies.calling.schema`) keeps every field that
is usable and drops or mends only the broken ones, each with a note in `Parsed.notes` that
the policy counts and logs. Nothing is invented: an object with no usable field is still a
failure, which the policies turn into a safe default and count.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError
from pydantic_core import from_json

__all__ = ["Parsed", "parse", "find_json_object", "close_truncated", "close_looping", "trim_loop"]

T = TypeVar("T", bound=BaseModel)

#: longer replies are not parsed at all: no valid policy output is anywhere near this long
MAX_PARSE_CHARS = 16_000


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    value: T | None
    error: str | None = None
    repaired: bool = False
    notes: tuple[str, ...] = ()  # each field the reader dropped or mended, and why

    @property
    def ok(self) -> bool:
        return self.value is not None


def _scan(text: str, start: int = 0) -> Iterator[tuple[int, str, int | None]]:
    """(index, char, index of the quote that opened the string it is in, or None) for every
    character from ``start`` on; a closing quote counts as outside."""
    opened: int | None = None
    escape = False
    for i in range(start, len(text)):
        ch = text[i]
        if opened is None:
            if ch == '"':
                opened = i
        elif escape:
            escape = False
        elif ch == "\\":
            escape = True
        elif ch == '"':
            opened = None
        yield i, ch, opened


def _structural(text: str, start: int) -> Iterator[tuple[int, str]]:
    """(index, char) of every character from ``start`` on that is not inside a JSON string."""
    return ((i, ch) for i, ch, opened in _scan(text, start) if opened is None and ch != '"')


def find_json_object(text: str) -> str | None:
    """The first balanced ``{...}`` in ``text`` (strings and escapes respected), else None."""
    start = text.find("{")
    while start != -1:
        depth = 0
        for i, ch in _structural(text, start):
            if ch in "{[":
                depth += 1
            elif ch in "}]":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def close_truncated(text: str) -> str | None:
    """Repair JSON cut off mid-way: keep the longest prefix ending on a complete element."""
    start = text.find("{")
    if start == -1:
        return None
    depth, cuts = 0, []  # where a complete element ends
    for i, ch in _structural(text, start):
        if ch in "{[":
            depth += 1
        elif ch in "}]":
            if depth == 0:
                break
            depth -= 1
            cuts.append(i + 1)
        elif ch == ",":
            cuts.append(i)
    for end in reversed(cuts):
        # pydantic-core closes the brackets left open. Cut first: on its own it would also
        # keep a half-written element ({"op": "DELETE", "id": 1 of "id": 12, "text": ...})
        try:
            return json.dumps(from_json(text[start:end], allow_partial=True), ensure_ascii=False)
        except ValueError:
            continue
    return None


_WORD = re.compile(r"\w+")
# what a cut leaves dangling: punctuation, dashes, a conjunction ("Nate has a turtle, and")
# a unit of up to 8 characters written 12+ times in a row ("0000000000000"): a loop inside
# what the tokenizer sees as one word (digits are a token each); 12, so that no real number
# ("100000000") is mistaken for one
_CHAR_LOOP = re.compile(r"(.{1,8}?)\1{11,}", re.DOTALL)
_DANGLING = re.compile(r"(?:[\s,;:\-\u2013\u2014]|\b(?:and|or|but|then|with)\b)+$", re.IGNORECASE)


def trim_loop(text: str, *, n: int = 4, times: int = 3, chars: bool = False) -> str | None:
    """``text`` up to where it starts over, or None when it does not loop.

    A loop is a word n-gram (case-folded) seen ``times`` times; the text is cut where its
    second occurrence starts, and dangling punctuation or a conjunction is dropped. A small
    model that loops writes the same sentence again and again ("I'm a mom to a baby girl.
    I'm a mom to a baby girl. ..."); what comes before the first repeat is the sentence.
    With ``chars`` (text already known to have run into the token limit), a unit of up to 8
    characters repeated 12+ times in a row is a loop too, cut after its first occurrence
    ("12:00:00.0000000000000..." -> "12:00:00.0"): digits are a token each, so such a loop
    fills the budget long before any character bound.
    """
    words = [(m.start(), m.group().casefold()) for m in _WORD.finditer(text)]
    starts: dict[tuple[str, ...], list[int]] = {}
    cut_at = None
    for i in range(len(words) - n + 1):
        seen = starts.setdefault(tuple(w for _, w in words[i : i + n]), [])
        seen.append(words[i][0])
        if len(seen) >= times:
            cut_at = seen[1]
            break
    if chars and (loop := _CHAR_LOOP.search(text)) is not None:
        cut_at = min(cut_at if cut_at is not None else len(text), loop.start() + len(loop.group(1)))
    if cut_at is None:
        return None
    return _DANGLING.sub("", text[:cut_at].rstrip()) or None


def _decode_partial(body: str) -> str | None:
    """The text of a JSON string body cut anywhere (a half escape sequence at the end is dropped)."""
    for end in range(len(body), max(-1, len(body) - 6), -1):
        try:
            text: str = json.loads('"' + body[:end] + '"')  # a JSON string literal decodes to a str
            return text
        except json.JSONDecodeError:
            continue
    return None


def close_looping(text: str) -> str | None:
    """Repair output cut by the token limit inside a string that repeats itself: the string
    is cut where it starts over and closed, with the elements before it. An open string that
    does not repeat is left alone (None): it may be a half-written memory."""
    start = None
    for _, _, start in _scan(text):  # where the string the text ends in opened, if it does
        pass
    if start is None:
        return None
    body = _decode_partial(text[start + 1 :])
    trimmed = None if body is None else trim_loop(body, times=2, chars=True)  # cut by the limit: two rounds are proof enough
    if trimmed is None:
        return None
    return close_truncated(text[:start] + json.dumps(trimmed, ensure_ascii=False) + ",")


def _read(obj: Any, schema: type[T], salvage: bool) -> tuple[T | None, tuple[str, ...], str | None]:
    """The schema's salvage field by field (when it has one), then validation of the whole."""
    mend: Callable[[Any], tuple[Any, list[str]]] | None = getattr(schema, "salvage", None) if salvage else None
    notes: list[str] = []
    if mend is not None:
        obj, notes = mend(obj)
    try:
        return schema.model_validate(obj), tuple(notes), None
    except ValidationError as exc:
        return None, (), _describe(exc)


def parse(raw: str, schema: type[T], *, repair: bool = True) -> Parsed[T]:
    if len(raw) > MAX_PARSE_CHARS:
        return Parsed(None, f"output is {len(raw)} characters, over the {MAX_PARSE_CHARS} parse limit")
    first_error: str | None = None
    fixes = (lambda text: text.strip(), find_json_object, close_looping, close_truncated) if repair else (lambda text: text.strip(),)
    for k, fix in enumerate(fixes):
        candidate = fix(raw)
        if candidate is None:
            continue
        try:
            obj = json.loads(candidate)
        except json.JSONDecodeError as exc:
            first_error = first_error or _describe(exc)
            continue
        value, notes, error = _read(obj, schema, salvage=repair)
        if value is not None:
            if fix is close_looping:
                notes = ("cut by the token limit inside a string that repeats itself: kept up to the repetition", *notes)
            return Parsed(value, repaired=k > 0, notes=notes)
        first_error = first_error or error
    return Parsed(None, first_error)


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        return f"schema: {'.'.join(str(p) for p in e['loc']) or 'output'}: {e['msg']}"
    return f"not JSON: {exc}"
