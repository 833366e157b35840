"""`erase(scope)` removes the scope's text from every file in the data dir, the interaction
log included, even where another scope's trajectory held it: an ingest that showed the erased
speaker's turn as context (same run_id), an answer over several scopes."""

from __future__ import annotations

from pathlib import Path

from memsdk import MemoryClient, Turn
from memsdk.embedding import HashEmbedder

ALICE = {"user_id": "alice", "run_id": "chat-7"}
BOB = {"user_id": "bob", "run_id": "chat-7"}
SECRET = "zanzibarquokka"  # one token, so a byte search finds any copy of it


def files_containing(root: Path, needle: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and needle.encode() in p.read_bytes()]


def speaker(turn: Turn) -> dict[str, str]:
    return ALICE if turn.speaker == "Alice" else BOB


def test_erase_removes_the_scope_from_other_scopes_trajectories(tmp_path: Path) -> None:
    data = tmp_path / "d"
    with MemoryClient(data_dir=data, embedder=HashEmbedder(64), policies="heuristic", context_turns=2) as client:
        client.ingest(
            [
                {"speaker": "Alice", "text": f"My bank password hint is {SECRET} please keep it"},
                {"speaker": "Bob", "text": "Noted, I will never tell anyone about it"},  # Alice's turn is context
                {"speaker": "Bob", "text": "Bob likes sailing on weekends with friends"},  # and here too
                {"speaker": "Bob", "text": "Bob also enjoys chess in the evening"},  # Bob's turns only
            ],
            scope=speaker,
        )
        client.answer("What is the password hint?", scope=[BOB, ALICE])  # logged under Bob, shows Alice's memory
        assert files_containing(data, SECRET), "the probe must be on disk before the erase"

        client.erase(scope=ALICE)
        assert files_containing(data, SECRET) == []
        kept = [t.input["turn"]["text"] for t in client.log.read(kind="ingest")]
        assert kept == ["Bob also enjoys chess in the evening"]  # what never held Alice's data stays
        assert list(client.log.read(kind="answer")) == []
        # a later ingest of the same conversation no longer sees the erased turn as context
        client.ingest({"speaker": "Bob", "text": "Bob will sail again next Sunday morning"}, scope=BOB)
    assert files_containing(data, SECRET) == []
