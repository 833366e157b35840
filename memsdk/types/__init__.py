"""The data shapes of the memory bank, declared once and validated at the boundary.

Every model is frozen: a record read from the bank is a value, and a snapshot can share
records with the bank it was taken from without copying them.

Import them from here; each module holds one kind: `scope` (whose memory), `turns` (a turn
and how it is shown), `ops` (what a policy or the API asks for), `records` (what the bank
stores: records, history events, search hits) and `fields` (the checks on text, ids and
metadata that the models run).
"""

from memsdk.types.fields import STORED, check_storable, check_text, check_utf8
from memsdk.types.ops import Op, OpType
from memsdk.types.records import API_ACTOR, Actor, EventType, HistoryEvent, MemoryRecord, ScoredMemory, Tier, content_hash, utcnow
from memsdk.types.scope import Scope
from memsdk.types.turns import HEADER, Turn, shown_when, split_header, turn_header, turn_parts

# importable from here as before, though not part of the listed surface: the field types
# and limits that other modules validate their own models with
from memsdk.types.fields import ID_MAX_CHARS as ID_MAX_CHARS, MAX_METADATA_INT as MAX_METADATA_INT, QUESTION_MAX_CHARS as QUESTION_MAX_CHARS
from memsdk.types.fields import Metadata as Metadata, ScopeId as ScopeId, Text as Text, check_metadata as check_metadata

__all__ = [
    "Scope",
    "Tier",
    "OpType",
    "Op",
    "EventType",
    "Actor",
    "API_ACTOR",
    "MemoryRecord",
    "HistoryEvent",
    "ScoredMemory",
    "Turn",
    "content_hash",
    "turn_header",
    "split_header",
    "HEADER",
    "shown_when",
    "turn_parts",
    "check_text",
    "check_storable",
    "check_utf8",
    "utcnow",
    "STORED",
]
