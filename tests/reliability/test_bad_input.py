"""Bad input through the public API: a typed `InvalidInput` naming the field, and nothing stored.

Each case is one the fuzzing in the reliability issue found escaping as a raw TypeError,
AttributeError, UnicodeDecodeError or UnicodeEncodeError, being misreported as a StoreError,
or being accepted and silently mangled."""

from __future__ import annotations

import io
from pathlib import Path
from typing import Any, Callable

import pytest

from memsdk import InvalidInput, MemoryClient
from memsdk.embedding import HashEmbedder

U = {"user_id": "u"}

CASES: list[tuple[str, Callable[[MemoryClient, Path], Any], str]] = [
    ("list limit as a string", lambda c, p: c.list(scope=U, limit="3"), "limit"),
    ("list negative limit", lambda c, p: c.list(scope=U, limit=-1), "limit"),
    ("list negative offset", lambda c, p: c.list(scope=U, offset=-2), "offset"),
    ("search limit None", lambda c, p: c.search("tea", scope=U, limit=None), "limit"),
    ("search limit float", lambda c, p: c.search("tea", scope=U, limit=1.5), "limit"),
    ("search limit bool", lambda c, p: c.search("tea", scope=U, limit=True), "limit"),
    ("ingest None", lambda c, p: c.ingest(None, scope=U), "turns"),
    ("ingest an int", lambda c, p: c.ingest(42, scope=U), "turns"),
    ("ingest a bare string", lambda c, p: c.ingest("hello there", scope=U), "turns"),
    ("export to None", lambda c, p: c.export(None, scope=U), "dest"),
    ("export to a bytes buffer", lambda c, p: c.export(io.BytesIO(), scope=U), "dest"),
    ("import from None", lambda c, p: c.import_(None), "src"),
    ("import a binary file", lambda c, p: c.import_(p), "src"),
    ("add bytes", lambda c, p: c.add(b"bytes", scope=U), "text"),
    ("metadata with a lone surrogate", lambda c, p: c.add("Likes tea", scope=U, metadata={"k": "\udcff"}), "metadata"),
    ("metadata key with a lone surrogate", lambda c, p: c.add("Likes tea", scope=U, metadata={"\udcff": 1}), "metadata"),
    ("metadata NaN", lambda c, p: c.add("Likes tea", scope=U, metadata={"score": float("nan")}), "metadata"),
    ("metadata infinity", lambda c, p: c.add("Likes tea", scope=U, metadata={"x": [float("inf")]}), "metadata"),
    ("metadata integer beyond 64 bits", lambda c, p: c.add("Likes tea", scope=U, metadata={"n": 2**70}), "metadata"),
]


@pytest.mark.parametrize("name,call,field", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_a_typed_error_naming_the_field_and_stores_nothing(tmp_path: Path, name: str, call: Callable, field: str) -> None:
    binary = tmp_path / "binary.jsonl"
    binary.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe\x00garbage")
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic") as client:
        client.add("Keeps bees", scope=U)
        with pytest.raises(InvalidInput) as err:
            call(client, binary)
        assert field in err.value.field, (err.value.field, str(err.value))
        assert [r.text for r in client.list(scope=U, include_deleted=True)] == ["Keeps bees"]


def test_integers_within_64_bits_round_trip_exactly(tmp_path: Path) -> None:
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic") as client:
        rec = client.add("Likes tea", scope=U, metadata={"big": 2**63 - 1, "small": -(2**63) + 1})
        assert client.get(rec.id, scope=U).metadata == {"big": 2**63 - 1, "small": -(2**63) + 1}
        assert client.list(scope=U, limit=0) == [] and len(client.list(scope=U, offset=0)) == 1


def test_records_are_checked_on_the_way_in_and_read_back_by_type_only() -> None:
    """What the bank stored passed every check when it was written; reading it back (the
    `STORED` context) checks types, not the text rules again, while any other record is
    checked in full."""
    from datetime import UTC, datetime
    import uuid

    from pydantic import ValidationError

    from memsdk.types import STORED, MemoryRecord

    now = datetime.now(UTC)
    fields = {"id": uuid.uuid4(), "text": "a\x00b", "scope": {"user_id": "bob\x07"}, "created_at": now, "updated_at": now, "version": 1, "content_hash": "h", "metadata": {"n": 2**70}}
    with pytest.raises(ValidationError) as raised:
        MemoryRecord.model_validate(fields)
    assert {e["loc"][0] for e in raised.value.errors()} == {"text", "scope", "metadata"}
    assert MemoryRecord.model_validate(fields, context=STORED).scope.user_id == "bob\x07"
    with pytest.raises(ValidationError):  # types are still checked
        MemoryRecord.model_validate({**fields, "version": "many"}, context=STORED)
