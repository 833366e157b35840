"""`whole_value`: an answer that is part of an email address or a number is the whole value."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from memsdk.pipeline.personal_data import DataKind, values
from memsdk.pipeline.retrieval import whole_value
from memsdk.policies import Answer
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Tier, content_hash

NOW = datetime(2024, 1, 1, tzinfo=UTC)


def shown(text: str, *, superseded: bool = False) -> ScoredMemory:
    r = MemoryRecord(
        id=uuid.uuid4(), text=text, scope=Scope(user_id="u"), created_at=NOW, updated_at=NOW, version=1, content_hash=content_hash(text),
        tier=Tier.SEMANTIC, invalid_at=NOW if superseded else None,
    )
    return ScoredMemory(record=r, score=0.5)


def answered(text: str, memories: list[ScoredMemory], evidence: int | None = None) -> str:
    cited = [] if evidence is None else [memories[evidence].record]
    return whole_value(Answer(text, cited), memories).text


def test_values_says_what_detect_found_in_order() -> None:
    text = "Mail zara.cobalt@example.net or call me on 555-0187."
    assert values(text) == [(DataKind.EMAIL, "zara.cobalt@example.net"), (DataKind.PHONE, "555-0187")]
    assert values("I live in Boston") == []


def test_a_part_of_an_address_or_a_number_is_answered_whole() -> None:
    memories = [shown("Zara (on 13 July 2024): Send the photos to zara.cobalt@example.net."), shown("Mei: You can reach me on 555-0187.")]
    assert answered("example.net", memories) == "zara.cobalt@example.net"
    assert answered("Example.net.", memories) == "zara.cobalt@example.net"
    assert answered("555", memories) == "555-0187"
    assert answered("zara.cobalt@example.net", memories) == "zara.cobalt@example.net"


def test_what_is_not_part_of_an_identifier_is_left_as_answered() -> None:
    memories = [shown("Sam (on 8 May 2023): I was born on 3 March 1990 and live at 12 Oak Street."), shown("Sam: my email is sam@x.org")]
    assert answered("1990", memories) == "1990"  # a date may be asked for in part
    assert answered("Oak Street", memories) == "Oak Street"  # so may an address
    assert answered("sa", memories) == "sa"  # too short to say which value
    assert answered("unknown", memories) == "unknown"
    assert answered("Paris", memories) == "Paris"


def test_the_cited_memory_says_which_value_else_the_first_shown() -> None:
    new, old = shown("My email is ann.new@example.net"), shown("My email was ann.old@example.net", superseded=True)
    assert answered("example.net", [new, old]) == "ann.new@example.net"
    assert answered("example.net", [new, old], evidence=1) == "ann.old@example.net"  # "what was her email before?"
