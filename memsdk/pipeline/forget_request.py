"""What a forget request reaches, and the app's own forget (`MemoryClient.forget`).

One search, then two matchers: the rules of `memsdk.pipeline.forget` (typed personal data,
sensitive topics, the request's own words) and the trained relevance head of
`memsdk.pipeline.forget_head` over the best hits. A forget said in conversation
(``ingest``) and one an app asks for by description (``client.forget("my divorce")``) go
through the same `forget_targets`, so a preview (``dry_run=True``) shows exactly what the
same call without it deletes.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator
from dataclasses import dataclass
from typing import Any

from memsdk.bank.transition import Transition
from memsdk.effects import QUERY_CHARS, Apply, Effect, Search
from memsdk.errors import InvalidInput
from memsdk.pipeline.forget import Correction, Forget, is_vague, supersede_ops
from memsdk.pipeline.forget_head import ForgetReading
from memsdk.types import Actor, MemoryRecord, Op, Scope, ScoredMemory

__all__ = ["SUPERSEDE_CANDIDATES", "MEANING_CANDIDATES", "RELEVANCE_CANDIDATES", "forget_targets", "forget_steps", "ForgetPlan"]

#: memories a forget / correction looks through (hybrid search; the words must then match)
SUPERSEDE_CANDIDATES = 100

#: ... and a forget by meaning ("my phone number"): the bank's most per search (`BankLimits`);
#: a scope larger than that can keep a match beyond it (README, "What is true now")
MEANING_CANDIDATES = 1000

#: the best hits of that search the trained relevance head reads: one embedding call of
#: this many texts per forget request
RELEVANCE_CANDIDATES = 50


def forget_targets(
    intent: Forget | Correction, scope: Scope, request: MemoryRecord | None, reader: ForgetReading | None
) -> Generator[Effect, Any, ForgetPlan]:
    """The ops that carry out ``intent`` in ``scope`` (`supersede_ops`), or none and why."""
    query = intent.about if isinstance(intent, Forget) else intent.wrong
    # a kind of data or a topic is matched by what a memory says, not by the request's
    # words, so a search for those words would miss it: look through as much as one search returns
    limit = MEANING_CANDIDATES if isinstance(intent, Forget) and intent.by_meaning else SUPERSEDE_CANDIDATES
    found: list[ScoredMemory] = yield Search([scope], query[:QUERY_CHARS], limit, hybrid=True)
    about: dict[uuid.UUID, float] = {}
    if isinstance(intent, Forget) and reader is not None:
        shown = [h.record for h in found[:RELEVANCE_CANDIDATES] if not h.record.deleted and (request is None or h.record.id != request.id)]
        about = yield from reader.about(intent.about, shown)
    ops, refused = supersede_ops(intent, [h.record for h in found], request=request, about=about.keys())
    records = {h.record.id: h.record for h in found} | ({request.id: request} if request is not None else {})
    return ForgetPlan([records[op.target] for op in ops if op.target in records], ops, refused)


@dataclass(frozen=True)
class ForgetPlan:
    """What a forget found: the memories its ops change (as they were), the ops, a refusal."""

    targets: list[MemoryRecord]
    ops: list[Op]
    refused: str | None


def forget_steps(description: str, scope: Scope, reader: ForgetReading | None, actor: Actor, *, dry_run: bool) -> Generator[Effect, Any, tuple[ForgetPlan, Transition | None]]:
    """The app's forget of ``description`` in ``scope``: its plan and, unless ``dry_run``
    or refused, the transition that applied it. `InvalidInput` for a description that
    names nothing specific ("everything", "all memories"): a forget never empties a scope;
    `erase` does, on purpose."""
    intent = Forget(description.strip())
    if is_vague(intent):
        raise InvalidInput("description", f"{description!r} names nothing specific to forget; erase(scope=...) removes a whole scope")
    plan: ForgetPlan = yield from forget_targets(intent, scope, None, reader)
    if dry_run or plan.refused or not plan.ops:
        return plan, None
    transition: Transition = yield Apply(scope, plan.ops, actor)
    return plan, transition
