"""What a model accepts as text, an id or metadata: the checks, and the field types that run them.

A model validated under the `STORED` context (what the bank reads back from its own store)
checks types only: its text, ids and metadata were checked on the way in.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, JsonValue, Strict, ValidationInfo

__all__ = [
    "Text",
    "ScopeId",
    "Metadata",
    "STORED",
    "check_text",
    "check_storable",
    "check_utf8",
    "check_id",
    "check_metadata",
    "ID_MAX_CHARS",
    "QUESTION_MAX_CHARS",
    "MAX_METADATA_INT",
]

T = TypeVar("T")

ID_MAX_CHARS = 256
#: the longest question or search query the client accepts
QUESTION_MAX_CHARS = 2000


def check_text(value: str) -> str:
    """Reject text no memory should hold: blank, NUL bytes, or lone UTF-16 surrogates.

    Surrogates come from mis-decoded input (``'\\udcff'``); they cannot be encoded as UTF-8,
    so they would fail later, deep inside the store, with a far worse message.
    """
    if not value.strip():
        raise ValueError("must not be empty or whitespace")
    return check_storable(value)


def check_storable(value: str) -> str:
    """Text that ends up inside a memory's text (a turn's timestamp is rendered into the
    facts extracted from it): no NUL, no lone surrogate; blank is the caller's business."""
    if "\x00" in value:
        raise ValueError("must not contain NUL characters")
    return check_utf8(value)


def check_utf8(value: str) -> str:
    """Reject a lone UTF-16 surrogate: it cannot be encoded, so the store, the log or BM25
    would fail on it later with a raw ``UnicodeEncodeError``."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError(f"is not valid UTF-8 (lone surrogate at index {exc.start})") from None
    return value


def check_id(value: str) -> str:
    check_text(value)
    if len(value) > ID_MAX_CHARS:
        raise ValueError(f"must be at most {ID_MAX_CHARS} characters")
    if any(unicodedata.category(ch) == "Cc" for ch in value):
        raise ValueError("must not contain control characters")
    return value


#: Qdrant stores payload integers as int64; a larger one would come back as a float
MAX_METADATA_INT = 2**63 - 1


def check_metadata(value: dict[str, Any]) -> dict[str, Any]:
    """Metadata must survive the store unchanged: no NaN/inf, no integer beyond int64, and
    keys and strings that are valid UTF-8 (a lone surrogate cannot be stored)."""

    def walk(node: Any, path: str) -> None:
        if isinstance(node, float) and not math.isfinite(node):
            raise ValueError(f"{path}: {node} is not a JSON number")
        if isinstance(node, int) and not isinstance(node, bool) and abs(node) > MAX_METADATA_INT:
            raise ValueError(f"{path}: integer beyond 64 bits (store it as a string)")
        if isinstance(node, str):
            try:
                check_utf8(node)
            except ValueError as exc:
                raise ValueError(f"{path}: {exc}") from None
        if isinstance(node, dict):
            for key, child in node.items():
                walk(key, f"{path} (a key)")
                walk(child, f"{path}.{key}")
        if isinstance(node, list):
            for i, child in enumerate(node):
                walk(child, f"{path}[{i}]")

    walk(value, "metadata")
    return value


#: the validation context of what the bank reads back from its own store: texts, ids and
#: metadata were checked on the way in (an import checks its file first), so a read checks
#: types only. A search decodes a few hundred records, and these checks were three quarters
#: of the decoding (`benchmarks/client.py`'s retrieve)
STORED: dict[str, bool] = {"stored": True}


def _unless_stored(check: Callable[[T], T]) -> Callable[[T, ValidationInfo], T]:
    def validate(value: T, info: ValidationInfo) -> T:
        return value if info.context is STORED else check(value)

    validate.__doc__ = check.__doc__
    return validate


# strict: bytes are not text (pydantic would decode b"..." silently)
Text = Annotated[str, Strict(), AfterValidator(_unless_stored(check_text))]
ScopeId = Annotated[str, AfterValidator(_unless_stored(check_id))]
Metadata = Annotated[dict[str, JsonValue], AfterValidator(_unless_stored(check_metadata))]
