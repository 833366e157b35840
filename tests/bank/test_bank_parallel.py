"""Writes to different scopes overlap; writes to one scope still run one at a time.

An embedder that blocks on a marked text holds one `apply` inside its read-plan-write cycle
(the embedding happens in `_commit`, under the scope's lock) for as long as the test wants.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.types import Op, Scope

from .conftest import DIM, Engine

SLOW = "slowmarker"
WAIT_S = 10.0


class GatedEmbedder(HashEmbedder):
    """Blocks any batch holding `SLOW` until `release` is set; `entered` says one is blocked."""

    def __init__(self) -> None:
        super().__init__(DIM)
        self.entered, self.release = threading.Event(), threading.Event()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if any(SLOW in t for t in texts):
            self.entered.set()
            assert self.release.wait(WAIT_S), "the test never released the slow embedding"
        return super().embed(texts)


def _in_thread(fn: object) -> threading.Thread:
    thread = threading.Thread(target=fn, daemon=True)  # type: ignore[arg-type]
    thread.start()
    return thread


def test_a_slow_apply_in_one_scope_does_not_block_another_scope(engine: Engine, tmp_path: Path, alice: Scope, bob: Scope) -> None:
    embedder = GatedEmbedder()
    with MemoryBank(engine.make(tmp_path), embedder) as bank:
        slow = _in_thread(lambda: bank.apply(alice, [Op.add(f"Alice keeps a {SLOW} diary")]))
        assert embedder.entered.wait(WAIT_S)
        fast = _in_thread(lambda: bank.apply(bob, [Op.add("Bob plays chess on Sundays")]))
        fast.join(WAIT_S)
        finished_while_blocked = not fast.is_alive()
        embedder.release.set()
        slow.join(WAIT_S)
        assert finished_while_blocked, "bob's apply waited for alice's embedding"
        assert [r.text for r in bank.list(bob)] == ["Bob plays chess on Sundays"]
        assert [r.text for r in bank.list(alice)] == [f"Alice keeps a {SLOW} diary"]


def test_two_applies_in_one_scope_still_run_one_at_a_time(engine: Engine, tmp_path: Path, alice: Scope) -> None:
    embedder = GatedEmbedder()
    with MemoryBank(engine.make(tmp_path), embedder) as bank:
        first = _in_thread(lambda: bank.apply(alice, [Op.add(f"Alice keeps a {SLOW} diary")]))
        assert embedder.entered.wait(WAIT_S)
        second = _in_thread(lambda: bank.apply(alice, [Op.add("Alice plays chess on Sundays")]))
        second.join(0.5)
        overlapped = not second.is_alive()
        embedder.release.set()
        first.join(WAIT_S)
        second.join(WAIT_S)
        assert not overlapped, "a second apply in the same scope ran inside the first one's cycle"
        # and the history follows the commit order
        assert [e.after for e in bank.history(alice)] == [f"Alice keeps a {SLOW} diary", "Alice plays chess on Sundays"]
