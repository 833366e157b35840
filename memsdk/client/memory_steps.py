"""Direct memory access as steps both twins run: ``add``, ``update``, ``forget``, ``delete``,
``erase`` and ``feedback``. What changes memory goes through the transition function (an
`Apply`); what erases or records feedback is a `Call` the twin's runner makes."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from typing import Any

from pydantic import ValidationError

from memsdk.bank import MemoryBank, as_memory_id, as_query, as_scope
from memsdk.client._base import ScopeLike
from memsdk.client.results import ForgetResult
from memsdk.effects import Apply, Call, Effect
from memsdk.errors import InvalidInput, PolicyError
from memsdk.interactions import InteractionLog
from memsdk.pipeline.context import RecentTurns
from memsdk.pipeline.decisions import ActivePolicies
from memsdk.pipeline.forget_request import forget_steps
from memsdk.types import API_ACTOR, MemoryRecord, Op, QUESTION_MAX_CHARS, Tier

__all__ = ["add_steps", "checked_op", "delete_steps", "erase_steps", "feedback_steps", "forget_described_steps", "update_steps"]


def add_steps(text: str, scope: ScopeLike, metadata: dict[str, Any] | None, tier: Tier | str = Tier.SEMANTIC) -> Generator[Effect, Any, MemoryRecord]:
    op = checked_op(lambda: Op.add(text, metadata=metadata or {}, tier=tier))
    transition = yield Apply(as_scope(scope), [op], API_ACTOR)
    record: MemoryRecord = transition.records[0]
    return record


def update_steps(memory_id: uuid.UUID | str, text: str, scope: ScopeLike) -> Generator[Effect, Any, MemoryRecord]:
    op = checked_op(lambda: Op.update(as_memory_id(memory_id), text))
    # an update to the text the memory already has changes nothing (a retried request):
    # the record as it stands, not an error
    (change,) = (yield Apply(as_scope(scope), [op], API_ACTOR)).changes
    assert change.after is not None
    after: MemoryRecord = change.after
    return after


def forget_described_steps(description: str, scope: ScopeLike, active: ActivePolicies, dry_run: bool) -> Generator[Effect, Any, ForgetResult]:
    as_query(description, "description")
    if len(description) > QUESTION_MAX_CHARS:
        raise InvalidInput("description", f"is {len(description)} characters, the limit is {QUESTION_MAX_CHARS}")
    if not isinstance(dry_run, bool):
        raise InvalidInput("dry_run", f"must be true or false, got {type(dry_run).__name__}")
    # the runner's `applied` hook drops deleted turns from the recent context, as for delete
    plan, transition = yield from forget_steps(description, as_scope(scope), active.forget, API_ACTOR, dry_run=dry_run)
    return ForgetResult(description=description, memories=plan.targets, applied=transition is not None, refused=plan.refused)


def delete_steps(memory_id: uuid.UUID | str, scope: ScopeLike) -> Generator[Effect, Any, MemoryRecord]:
    # the runner's `applied` hook drops the deleted turn from the recent context
    transition = yield Apply(as_scope(scope), [Op.delete(as_memory_id(memory_id))], API_ACTOR)
    record: MemoryRecord = transition.records[0]
    return record


def checked_op(make: Callable[[], Op]) -> Op:
    try:
        return make()
    except ValidationError as exc:
        raise InvalidInput.from_pydantic(exc) from None


def erase_steps(scope: ScopeLike, bank: MemoryBank, log: InteractionLog | None, recent: RecentTurns) -> Generator[Effect, Any, int]:
    scope = as_scope(scope)
    n: int = yield Call(bank.delete_all, (scope,), stage="store")
    if log is not None:
        yield Call(log.erase, (scope,), stage="log")
    recent.drop(lambda s, t: s.key == scope.key)  # the scope's turns leave every conversation's context
    return n


def feedback_steps(log: InteractionLog | None, trajectory_id: uuid.UUID | str, correct: bool | None, gold: str | None) -> Generator[Effect, Any, None]:
    if log is None:
        raise PolicyError("feedback needs the interaction log, which is turned off (log_interactions=False)")
    yield Call(log.add_feedback, (trajectory_id,), {"correct": correct, "gold": gold}, stage="log")
