"""What the concurrency-at-scale and the crash suites share: the facts writers write, a
manager stub that rewrites memories other writers are rewriting, and the invariants a bank
must keep under both (no fact lost, none doubled, every history explaining its record).

Every fact is one token (`token`). The manager stub never drops one: it only moves tokens
between memories, so in a correct bank each token a caller was told is stored sits in
exactly one live semantic memory. A stale op applied over another writer's change loses
tokens; a multi-op batch applied by halves loses or doubles them.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.bank import MemoryBank
from memsdk.policies.manager import Decision
from memsdk.types import EventType, HistoryEvent, MemoryRecord, Op, Scope, ScoredMemory, Tier

__all__ = ["TOKEN", "token", "turn", "ChurnManager", "use_manager", "token_counts", "dropping_events", "check_scope"]

#: fixed width, so no token is a substring of another
TOKEN = re.compile(r"\bw\d{3}n\d{5}\b")


def token(writer: int, i: int) -> str:
    return f"w{writer:03d}n{i:05d}"


def turn(writer: int, i: int, speaker: str = "Sam") -> dict[str, str]:
    return {"speaker": speaker, "text": f"{speaker} wrote down note {token(writer, i)} today"}


@dataclass
class ChurnManager:
    """A manager that always rewrites what it was shown, the way a trained one consolidates.

    Per fact, on the related memories it was shown (which other writers are changing too):
    UPDATE one to append the fact, merge two (UPDATE one to hold both, DELETE the other),
    move one (DELETE it, ADD its text plus the fact), or ADD the fact alone. Every UPDATE and
    DELETE carries the version it read. A memory holds at most ``max_tokens`` facts, so a
    scope keeps a pool of memories that are still being rewritten."""

    role: str = "manager"
    version: str = "churn-v1"
    seed: int = 0
    max_tokens: int = 40

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        (fact,) = facts  # the ingest pipeline decides one fact at a time
        (new,) = TOKEN.findall(fact)
        shown = [m.record for m in related]
        # seeded by what it was shown, so a re-decision after a Conflict may choose anew
        rng = random.Random(f"{self.seed}:{new}:{[(str(r.id), r.version) for r in shown]}")
        return Decision(self._ops(new, shown, rng))

    async def adecide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        return self.decide(facts, related, source_turn_ids=source_turn_ids)

    def _fits(self, text: str) -> bool:
        return len(TOKEN.findall(text)) <= self.max_tokens

    def _ops(self, new: str, shown: list[MemoryRecord], rng: random.Random) -> list[Op]:
        kind = rng.choices(("update", "merge", "move", "add"), weights=(4, 3, 2, 1))[0]
        if kind == "merge" and len(shown) >= 2:
            a, b = rng.sample(shown, 2)
            if self._fits(text := f"{a.text}; {b.text}; {new}"):
                return [Op.update(a.id, text, expected_version=a.version), Op.delete(b.id, expected_version=b.version)]
        if kind in ("update", "move") and shown:
            a = rng.choice(shown)
            if self._fits(text := f"{a.text}; {new}"):
                if kind == "update":
                    return [Op.update(a.id, text, expected_version=a.version)]
                return [Op.delete(a.id, expected_version=a.version), Op.add(text)]
        return [Op.add(new)]


def use_manager(client: MemoryClient | AsyncMemoryClient, manager: Any) -> None:
    # no public hook injects a manager object; the heuristic policy set holds one per role
    client._policies._policies["manager"] = manager


def token_counts(bank: MemoryBank, scope: Scope | dict[str, Any]) -> Counter[str]:
    """How many live semantic memories of ``scope`` hold each token."""
    return Counter(t for r in bank.list(scope, tier=Tier.SEMANTIC) for t in TOKEN.findall(r.text))


def dropping_events(history: Iterable[HistoryEvent]) -> list[HistoryEvent]:
    """UPDATEs that wrote a text without a token the text before held: an op decided on an
    older version, applied over a newer one (a lost update)."""
    return [e for e in history if e.event is EventType.UPDATE and not set(TOKEN.findall(e.before or "")) <= set(TOKEN.findall(e.after or ""))]


def check_scope(bank: MemoryBank, scope: Scope | dict[str, Any], acknowledged: Iterable[str], maybe: Iterable[str] = ()) -> list[str]:
    """What is wrong with ``scope`` ([] if nothing): an acknowledged token not stored exactly
    once, a ``maybe`` token (its writer was killed mid-call) stored more than once, a token
    stored that is neither (one reported as failed must be nowhere), a history that does not
    explain its records (`BankSnapshot.violations`), an UPDATE that dropped a token."""
    counts = token_counts(bank, scope)
    acknowledged, maybe = set(acknowledged), set(maybe)
    problems = [f"{t} acknowledged, stored {counts[t]} times" for t in sorted(acknowledged) if counts[t] != 1]
    problems += [f"{t} stored {n} times" for t, n in sorted(counts.items()) if t in maybe and n > 1]
    problems += [f"{t} stored but never acknowledged" for t in sorted(counts.keys() - acknowledged - maybe)]
    problems += bank.snapshot(scope).violations()
    problems += [f"UPDATE v{e.version} of {e.memory_id} dropped a fact" for e in dropping_events(bank.history(scope))]
    return problems
