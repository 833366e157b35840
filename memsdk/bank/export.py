"""A scope as JSONL: a header line, then every record (deleted ones too), then every event.

The format keeps ids, timestamps, versions and history exactly, so export -> import ->
export reproduces the file byte for byte. Vectors are not exported: they belong to the
embedding model, and importing re-embeds with whatever model the target bank uses.

Reading a file back (`read_export`) refuses one that does not parse or whose history does
not explain its records; `prepare_import` then holds it to the bank's limits and the core
tier's rule, and readies it for the scope it goes into.
"""

from __future__ import annotations

import io
import json
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any, NamedTuple

from pydantic import ValidationError

from memsdk.bank.history import replay
from memsdk.bank.transition import BankLimits
from memsdk.errors import InvalidInput
from memsdk.types import EventType, HistoryEvent, MemoryRecord, Scope, Tier, content_hash

__all__ = ["export_scope", "read_export", "prepare_import", "ImportBatch", "FORMAT"]

FORMAT = "memsdk.export"
VERSION = 1


@contextmanager
def _open(target: str | os.PathLike[str] | IO[str], mode: str) -> Iterator[IO[str]]:
    """A path is opened as UTF-8 text; a file object must be a text stream (``io.StringIO``,
    ``open(..., "w")``), since an export is JSON lines. Anything else is `InvalidInput`."""
    field = "dest" if mode == "w" else "src"
    if isinstance(target, (str, os.PathLike)):
        try:
            f = open(target, mode, encoding="utf-8", newline="\n")
        except ValueError as exc:  # a NUL in the path; a missing file stays the OSError open() raises
            raise InvalidInput(field, f"is not a usable path ({exc})") from None
        with f:
            yield f
    elif isinstance(target, io.TextIOBase) or (hasattr(target, "write" if mode == "w" else "read") and not isinstance(target, (io.RawIOBase, io.BufferedIOBase))):
        yield target
    else:
        raise InvalidInput(field, f"expected a path or a text file object, got {type(target).__name__}")


def _line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=True) + "\n"


def export_scope(bank: Any, scope: Scope, dest: str | os.PathLike[str] | IO[str]) -> int:
    """Write ``scope`` to ``dest``; returns the number of records written."""
    records = bank.list(scope, include_deleted=True)
    events = bank.history(scope)
    with _open(dest, "w") as out:
        out.write(_line({"format": FORMAT, "version": VERSION, "scope": scope.model_dump(mode="json"), "records": len(records), "events": len(events)}))
        for r in records:
            out.write(_line({"type": "memory", "record": r.model_dump(mode="json")}))
        for e in events:
            out.write(_line({"type": "event", "event": e.model_dump(mode="json")}))
    return len(records)


def _parse(src: IO[str]) -> tuple[Scope, list[MemoryRecord], list[HistoryEvent]]:
    records: list[MemoryRecord] = []
    events: list[HistoryEvent] = []
    header: dict[str, Any] | None = None
    for n, raw in enumerate(src, start=1):
        if not raw.strip():
            continue
        field = f"line {n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InvalidInput(field, f"is not JSON ({exc.msg}); the file may be truncated") from None
        if not isinstance(obj, dict):
            raise InvalidInput(field, "must be a JSON object")
        if header is None:
            if obj.get("format") != FORMAT or obj.get("version") != VERSION:
                raise InvalidInput(field, f"is not a {FORMAT} v{VERSION} header")
            header = obj
            continue
        try:
            if obj.get("type") == "memory":
                records.append(MemoryRecord.model_validate(obj.get("record")))
            elif obj.get("type") == "event":
                events.append(HistoryEvent.model_validate(obj.get("event")))
            else:
                raise InvalidInput(f"{field}.type", f"must be 'memory' or 'event', got {obj.get('type')!r}")
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc, field) from None
    if header is None:
        raise InvalidInput("line 1", "missing header: the file is empty")
    if len(records) != header.get("records") or len(events) != header.get("events"):
        raise InvalidInput("file", f"header announces {header.get('records')} records and {header.get('events')} events, found {len(records)} and {len(events)}: truncated?")
    try:
        scope = Scope.model_validate(header["scope"])
    except (ValidationError, KeyError):
        raise InvalidInput("line 1.scope", "is not a valid scope") from None
    return scope, records, events


def check_consistent(records: list[MemoryRecord], events: list[HistoryEvent]) -> None:
    """A file whose history does not explain its records is refused (`InvalidInput`), so an
    import can never create a memory that restore, history or training would misread.

    Per record: its events are versions 1..version, the first an ADD; its text is what the
    last ADD/UPDATE wrote and its content hash that text's; it is deleted, and superseded,
    exactly as its history leaves it (`history.replay`). Every event belongs to a record of the file.
    """
    ids = {r.id for r in records}
    for j, e in enumerate(events):
        if e.memory_id not in ids:
            raise InvalidInput(f"events[{j}].memory_id", f"names {e.memory_id}, which is no record of this file")
    by_memory: dict[Any, list[HistoryEvent]] = {}
    for e in events:
        by_memory.setdefault(e.memory_id, []).append(e)
    for i, r in enumerate(records):
        where = f"records[{i}]"
        history = sorted(by_memory.get(r.id, []), key=lambda e: e.version)
        if [e.version for e in history] != list(range(1, r.version + 1)):
            raise InvalidInput(f"{where}.version", f"is {r.version}, but its history has versions {[e.version for e in history]}")
        if history[0].event is not EventType.ADD:
            raise InvalidInput(f"{where}.history", f"starts with {history[0].event}, not ADD")
        written = [e.after for e in history if e.event in (EventType.ADD, EventType.UPDATE)][-1]
        if r.text != written:
            raise InvalidInput(f"{where}.text", "is not the text its last ADD/UPDATE event wrote")
        if r.content_hash != content_hash(r.text):
            raise InvalidInput(f"{where}.content_hash", "does not match its text")
        left = replay(history, {r.id: r})[0]
        if r.deleted != left.deleted:
            raise InvalidInput(f"{where}.deleted", f"is {r.deleted}, but its history leaves it {'deleted' if left.deleted else 'live'}")
        if (r.invalid_at, r.superseded_by) != (left.invalid_at, left.superseded_by):
            raise InvalidInput(f"{where}.invalid_at", "is not the validity its SUPERSEDE / RESTORE events leave")


def read_export(src: str | os.PathLike[str] | IO[str]) -> tuple[Scope, list[MemoryRecord], list[HistoryEvent]]:
    """Parse and validate a whole export before anything is written; errors name the line."""
    with _open(src, "r") as f:
        try:
            text = f.read()
        except UnicodeDecodeError as exc:
            raise InvalidInput("src", f"is not UTF-8 text (byte {exc.start}): not a {FORMAT} file") from None
    if not isinstance(text, str):
        raise InvalidInput("src", f"read {type(text).__name__}, expected text: open the file in text mode")
    scope, records, events = _parse(io.StringIO(text))
    check_consistent(records, events)
    return scope, records, events


class ImportBatch(NamedTuple):
    """An export's records and events, ready for the scope they go into."""

    records: list[MemoryRecord]
    events: list[HistoryEvent]
    #: the ids of both, which must not exist in the store yet
    ids: list[str]
    #: whether the file holds a live core memory (then the target must hold none)
    core: bool


def prepare_import(records: list[MemoryRecord], events: list[HistoryEvent], source: Scope, target: Scope, limits: BankLimits) -> ImportBatch:
    """An export of ``source`` (`read_export`) held to ``limits`` and the core tier's rule
    (`InvalidInput`), and readied for ``target``: into the scope it came from, ids are kept
    (an exact round trip); into another scope, every record and event gets a fresh id."""
    for i, r in enumerate(records):
        if r.scope != source:
            raise InvalidInput(f"records[{i}].scope", "differs from the header's scope")
        most = limits.max_core_chars if r.tier is Tier.CORE else limits.max_text_chars
        if len(r.text) > most:
            raise InvalidInput(f"records[{i}].text", f"is {len(r.text)} characters, the limit is {most}")
    # the core tier's rule (one live core memory per scope), for the file and the target
    cores = [r for r in records if r.tier is Tier.CORE and not r.deleted]
    if len(cores) > 1:
        raise InvalidInput("file", f"holds {len(cores)} live core memories; a scope has at most one")
    ids = [str(r.id) for r in records] + [str(e.id) for e in events]
    if len(set(ids)) != len(ids):
        raise InvalidInput("file", "contains duplicate ids")
    if target == source:
        records = [r.model_copy(update={"scope": target}) for r in records]
        events = [e.model_copy(update={"scope": target}) for e in events]
    else:
        fresh: dict[uuid.UUID, uuid.UUID] = {}
        renew = lambda old: fresh.setdefault(old, uuid.uuid4())  # noqa: E731
        # a successor named by a record or an event is renewed with the record it names
        succ = lambda old: None if old is None else renew(old)  # noqa: E731
        records = [r.model_copy(update={"scope": target, "id": renew(r.id), "superseded_by": succ(r.superseded_by)}) for r in records]
        events = [e.model_copy(update={"scope": target, "id": renew(e.id), "memory_id": renew(e.memory_id), "batch_id": renew(e.batch_id), "superseded_by": succ(e.superseded_by)}) for e in events]
        ids = [str(r.id) for r in records] + [str(e.id) for e in events]
    return ImportBatch(records, events, ids, bool(cores))
