"""The recent turns each ingest is shown: per conversation, with the scope each went to."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

from memsdk.bank.transition import Transition
from memsdk.types import Scope, Turn

__all__ = ["RecentTurns"]


class RecentTurns:
    """The last ``size`` turns of each conversation, each with the scope it was ingested into:
    scopes that share a ``run_id`` (one per speaker, say) share the context the extractor
    sees, and the log records whose turns an ingest was shown (for `erase`). A client keeps
    one; the gate's state builder keeps one the same way."""

    def __init__(self, size: int) -> None:
        self._size = max(1, size)
        self._runs: dict[str, deque[tuple[Scope, Turn]]] = {}

    def _run(self, scope: Scope) -> deque[tuple[Scope, Turn]]:
        return self._runs.setdefault(scope.run_id or scope.key, deque(maxlen=self._size))

    def of(self, scope: Scope) -> tuple[list[Turn], list[Scope]]:
        """The turns ``scope``'s conversation said last, oldest first, and their scopes."""
        pairs = list(self._run(scope))
        return [t for _, t in pairs], [s for s, _ in pairs]

    def add(self, scope: Scope, turn: Turn) -> None:
        self._run(scope).append((scope, turn))

    def drop(self, gone: Callable[[Scope, Turn], bool]) -> None:
        """Remove the turns ``gone`` names from every conversation."""
        for recent in self._runs.values():
            kept = [(s, t) for s, t in recent if not gone(s, t)]
            if len(kept) < len(recent):
                recent.clear()
                recent.extend(kept)

    def forget_deleted(self, transition: Transition) -> Transition:
        """A deleted episodic turn (a forget, a correction) leaves the recent turns the next
        ingest is shown, as the bank drops it from the indexes of the turns after it. Returns
        ``transition``: a runner's ``applied`` hook."""
        if gone := {(r.scope.key, r.text) for r in transition.deleted_turns}:
            self.drop(lambda s, t: (s.key, t.text) in gone)
        return transition
