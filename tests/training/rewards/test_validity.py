import uuid
from datetime import UTC, datetime

import pytest

from memsdk.types import MemoryRecord, Scope, content_hash
from memsdk_training.rewards.validity import Expectation, holds, validity_score

SCOPE = Scope(user_id="u")
NOW = datetime(2024, 1, 1, tzinfo=UTC)


def rec(text: str, source: str, *, superseded: bool = False, deleted: bool = False) -> MemoryRecord:
    return MemoryRecord(
        id=uuid.uuid4(), scope=SCOPE, text=text, content_hash=content_hash(text), source_turn_ids=(source,), created_at=NOW, updated_at=NOW,
        version=1, invalid_at=NOW if superseded else None, deleted=deleted,
    )  # fmt: skip


BANK = [rec("Lives in Boston", "D1:1", superseded=True), rec("Moved to Austin", "D2:1"), rec("Has a dog", "D1:2", deleted=True)]


@pytest.mark.parametrize(
    ("expectation", "expected"),
    [
        (Expectation(("D2:1",), "current"), True),
        (Expectation(("D1:1",), "current"), False),  # superseded is not current
        (Expectation(("D1:1",), "retired"), True),  # kept as history, not current
        (Expectation(("D2:1",), "retired"), False),
        (Expectation(("D1:2",), "retired"), False),  # deleted is not kept: a history-losing delete fails
        (Expectation(("D1:2",), "absent"), True),
        (Expectation(("D3:1",), "absent"), True),  # never stored
        (Expectation(("D3:1",), "current"), False),
        (Expectation(("D3:1", "D2:1"), "current"), True),  # any of the turns
    ],
)
def test_each_expectation_reads_the_records_its_turns_sourced(expectation, expected):
    assert holds(expectation, BANK) is expected


def test_the_score_is_the_share_that_holds():
    # hand count: current D2:1 holds, retired D1:1 holds, current D1:1 fails -> 2 / 3
    expectations = [Expectation(("D2:1",), "current"), Expectation(("D1:1",), "retired"), Expectation(("D1:1",), "current")]
    assert validity_score(expectations, BANK) == pytest.approx(2 / 3)
    assert validity_score([], BANK) == 1.0
