"""The data sets: LoCoMo's one-line not-found error, and the demo conversation the repository ships."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from memsdk.cli import main
from memsdk.datasets.locomo import load_locomo, locomo_path
from memsdk.errors import DatasetNotFound, MemsdkError

DEMO = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo_conversation.json"


def test_missing_locomo_is_one_typed_line_saying_where_to_put_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nowhere" / "locomo10.json"
    monkeypatch.setenv("MEMSDK_LOCOMO", str(missing))
    with pytest.raises(DatasetNotFound) as info:
        locomo_path()
    assert isinstance(info.value, MemsdkError) and isinstance(info.value, FileNotFoundError)
    message = str(info.value)
    assert "\n" not in message and str(missing) in message and "snap-research/locomo" in message
    # the CLI prints it as its one-line error, exit status 2, without a traceback
    assert main(["eval", "locomo", "--split", "val", "--embedder", "hash", "--out", str(tmp_path / "run"), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert err == f"memsdk: error: {message}"


def test_the_demo_conversation_is_self_contained_and_consistent() -> None:
    (conv,) = load_locomo(str(DEMO))
    assert len(set(conv.speakers)) == 2 and len(conv.sessions) >= 3
    turns = conv.turns()
    ids = [t.turn_id for t in turns]
    assert len(ids) == len(set(ids)) and all(t.speaker in conv.speakers and t.text.strip() for t in turns)
    assert all(re.search(r"\d{4}$", s.date_time) for s in conv.sessions), "every session is dated"
    assert all(t.timestamp == s.date_time for s in conv.sessions for t in s.turns)
    questions = conv.questions()
    assert len(questions) >= 6
    for qa in questions:
        assert qa.answer.strip() and qa.evidence and set(qa.evidence) <= set(ids), qa
    # what the demo is for: facts that change, get corrected and get forgotten
    text = " ".join(t.text.casefold() for t in turns)
    assert "correction" in text and "forget" in text
