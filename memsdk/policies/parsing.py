"""Turning raw model text into a validated output, with exactly one repair step.

`parse` tries, in order: the text as JSON; the first JSON object found in it (code fences
and chatter around it removed); and, for output cut off by the token limit, the longest
prefix that ends on a complete element, with its brackets closed. It never closes an open
string: a half-written memory text is dropped, not stored. Whatever fails all three is a
`ParseFailure`, which the policies turn into a safe default and count.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

from pydantic import BaseModel, ValidationError

__all__ = ["Parsed", "parse", "find_json_object", "close_truncated"]

T = TypeVar("T", bound=BaseModel)

#: longer replies are not parsed at all: no valid policy output is anywhere near this long
MAX_PARSE_CHARS = 16_000
_CLOSERS = {"{": "}", "[": "]"}


@dataclass(frozen=True, slots=True)
class Parsed(Generic[T]):
    value: T | None
    error: str | None = None
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return self.value is not None


def _structural(text: str, start: int) -> Iterator[tuple[int, str]]:
    """(index, char) of every character from ``start`` on that is not inside a JSON string."""
    in_string = escape = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        else:
            yield i, ch


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
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end index, closing brackets) at safe cut points
    for i, ch in _structural(text, start):
        if ch in "{[":
            stack.append(ch)
        elif ch in "}]":
            if not stack:
                break
            stack.pop()
            cuts.append((i + 1, "".join(_CLOSERS[b] for b in reversed(stack))))
        elif ch == ",":
            cuts.append((i, "".join(_CLOSERS[b] for b in reversed(stack))))
    for end, closers in reversed(cuts):
        candidate = text[start:end] + closers
        try:
            json.loads(candidate)
        except json.JSONDecodeError:
            continue
        return candidate
    return None


def _validate(text: str, schema: type[T]) -> T:
    return schema.model_validate(json.loads(text))


def parse(raw: str, schema: type[T], *, repair: bool = True) -> Parsed[T]:
    if len(raw) > MAX_PARSE_CHARS:
        return Parsed(None, f"output is {len(raw)} characters, over the {MAX_PARSE_CHARS} parse limit")
    try:
        return Parsed(_validate(raw.strip(), schema))
    except (json.JSONDecodeError, ValidationError) as exc:
        first_error = _describe(exc)
    for fix in (find_json_object, close_truncated) if repair else ():
        candidate = fix(raw)
        if candidate is None:
            continue
        try:
            return Parsed(_validate(candidate, schema), repaired=True)
        except (json.JSONDecodeError, ValidationError):
            continue
    return Parsed(None, first_error)


def _describe(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        e = exc.errors()[0]
        return f"schema: {'.'.join(str(p) for p in e['loc']) or 'output'}: {e['msg']}"
    return f"not JSON: {exc}"
