"""The ingest and answer pipelines, written once for the sync and the async client.

Each pipeline is a generator that *yields effects* (extract, search, decide, apply,
answer) and receives their results; it does no I/O itself. `MemoryClient` runs the
effects with blocking calls, `AsyncMemoryClient` awaits them, so the two clients cannot
drift apart. An effect that fails is thrown back into the generator, which decides
whether the failure costs the turn (a dead store does) or only that fact.

Concurrent writers to one scope use optimistic concurrency: every UPDATE / DELETE carries
the version of the memory it was decided on (`Op.expected_version`), and `MemoryBank.apply`
refuses it with `Conflict` when another writer changed that memory in between. The
pipeline then searches again and asks the manager again on the fresh memories, up to
`APPLY_ATTEMPTS` times; only then does the fact end in ``failures`` (never silently).

The policies are captured once per call (`ActivePolicies`): a policy swapped in while a
request is in flight takes effect from the next request on.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from typing import Any

from memsdk.errors import Conflict, MemoryNotFound
from memsdk.interactions.types import AppliedOp
from memsdk.policies import Answer, Answerer, Decision, Extraction, Extractor, Manager, PolicyCall
from memsdk.bank.transition import Transition
from memsdk.types import Actor, Op, Scope, ScoredMemory, Turn

__all__ = ["APPLY_ATTEMPTS", "Done", "resume", "ActivePolicies", "Extract", "Search", "Decide", "Apply", "AnswerQuestion", "Effect", "IngestOutcome", "AnswerOutcome", "ingest_steps", "answer_steps"]


#: search -> decide -> apply rounds per fact before a fact that keeps conflicting is reported
APPLY_ATTEMPTS = 4


@dataclass(frozen=True)
class ActivePolicies:
    extractor: Extractor
    manager: Manager
    answerer: Answerer
    versions: dict[str, str]


@dataclass(frozen=True)
class Extract:
    policy: Extractor
    turn: Turn
    context: Sequence[Turn]


@dataclass(frozen=True)
class Search:
    scopes: Sequence[Scope]
    query: str
    limit_each: int


@dataclass(frozen=True)
class Decide:
    policy: Manager
    facts: Sequence[str]
    related: Sequence[ScoredMemory]
    turn_ids: Sequence[str]


@dataclass(frozen=True)
class Apply:
    scope: Scope
    ops: Sequence[Op]
    actor: Actor


@dataclass(frozen=True)
class AnswerQuestion:
    policy: Answerer
    question: str
    memories: Sequence[ScoredMemory]


Effect = Extract | Search | Decide | Apply | AnswerQuestion


@dataclass(frozen=True)
class Done:
    """A pipeline that has returned ``value``."""

    value: Any


def resume(steps: Generator[Effect, Any, Any], result: Any = None, error: BaseException | None = None) -> Effect | Done:
    """Hand a pipeline its last effect's result (or throw that effect's error into it) and
    get the next effect, or `Done` when it returns. Both clients drive pipelines with it."""
    try:
        return steps.throw(error) if error is not None else steps.send(result)
    except StopIteration as done:
        return Done(done.value)


@dataclass
class IngestOutcome:
    facts: list[str] = field(default_factory=list)
    ops: list[AppliedOp] = field(default_factory=list)
    calls: list[PolicyCall] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    fallback: bool = False


@dataclass
class AnswerOutcome:
    answer: Answer
    shown: list[ScoredMemory]


def ingest_steps(turn: Turn, context: Sequence[Turn], scope: Scope, policies: ActivePolicies, related_k: int) -> Generator[Effect, Any, IngestOutcome]:
    """Extractor -> per fact: related memories -> manager -> `MemoryBank.apply` (Memory-R1's loop)."""
    out = IngestOutcome()
    extraction: Extraction = yield Extract(policies.extractor, turn, context)
    out.facts, out.fallback = extraction.facts, extraction.fallback
    out.calls += extraction.calls
    turn_ids = [turn.turn_id] if turn.turn_id else []
    actor = Actor(role="manager", version=policies.versions["manager"])
    for fact in extraction.facts:
        transition = yield from _settle(fact, scope, policies.manager, related_k, turn_ids, actor, out)
        if transition is None:
            continue
        out.ops += [
            AppliedOp(
                op=str(c.op), memory_id=None if c.after is None else c.after.id,
                before=c.event.before if c.event else None, after=c.event.after if c.event else None,
                version=None if c.after is None else c.after.version, changed=c.changed,
            )
            for c in transition.changes
        ]
    return out


def _settle(fact: str, scope: Scope, manager: Manager, related_k: int, turn_ids: Sequence[str], actor: Actor, out: IngestOutcome) -> Generator[Effect, Any, Transition | None]:
    """One fact: related memories -> manager -> apply; from the search again when another
    writer changed a memory the decision read. The applied transition, or None."""
    for attempt in range(1, APPLY_ATTEMPTS + 1):
        related: list[ScoredMemory] = yield Search([scope], fact, related_k)
        decision: Decision = yield Decide(manager, [fact], related, turn_ids)
        out.calls += decision.calls
        out.fallback |= decision.fallback
        if not decision.ops:
            out.failures += decision.rejected
            return None
        try:
            transition: Transition = yield Apply(scope, decision.ops, actor)
        except (MemoryNotFound, Conflict) as exc:
            if attempt < APPLY_ATTEMPTS:
                continue  # the abandoned decision's rejections are not this fact's outcome
            out.failures += decision.rejected
            out.failures.append(f"ops for fact {fact!r} not applied after {attempt} attempts: {exc}")
            return None
        out.failures += decision.rejected
        return transition
    return None  # pragma: no cover - the loop always returns


def answer_steps(question: str, scopes: Sequence[Scope], policies: ActivePolicies, answer_k: int) -> Generator[Effect, Any, AnswerOutcome]:
    """Top ``answer_k / len(scopes)`` memories from each scope (per speaker), best first, then the answerer."""
    hits: list[ScoredMemory] = yield Search(scopes, question, max(1, answer_k // len(scopes)))
    shown = sorted(hits, key=lambda h: -h.score)
    answer: Answer = yield AnswerQuestion(policies.answerer, question, shown)
    return AnswerOutcome(answer, shown)
