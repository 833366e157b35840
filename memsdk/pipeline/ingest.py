"""What one ingest does: the turn kept verbatim, forget requests and corrections applied, facts
extracted and settled by the manager (or Mem-alpha's writer), through `MemoryBank.apply`.

Ingest first writes the turn verbatim to the episodic tier, with no LLM, so whatever the
policies do next the turn is kept; the manager then sees and changes only semantic memories.
Concurrent writers to one scope use optimistic concurrency: every UPDATE / DELETE carries the
version of the memory it was decided on (`Op.expected_version`), and `MemoryBank.apply`
refuses it with `Conflict` when another writer changed that memory in between. The pipeline
then searches again and asks the manager again on the fresh memories, up to
`APPLY_ATTEMPTS` times; only then does the fact end in ``failures`` (never silently).
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memsdk.bank.transition import BankLimits, Transition, check_limits
from memsdk.dates import parse_when
from memsdk.effects import Apply, Done, Effect, Lookup, R, Search, resume
from memsdk.errors import Conflict, InvalidInput, MemoryNotFound, PolicyError
from memsdk.grounding import cited_turns
from memsdk.interactions.types import AppliedOp
from memsdk.pipeline.decisions import ActivePolicies, decide_with_fallback
from memsdk.pipeline.forget import Correction, Forget, classify, corrected_copy
from memsdk.pipeline.forget_head import ForgetReading
from memsdk.pipeline.forget_request import ForgetPlan, forget_targets
from memsdk.pipeline.retrieval import copied_turn
from memsdk.policies import Decision, Extraction, Manager, PolicyCall, PolicyStats
from memsdk.policies.manager import check_ops
from memsdk.policies.writer import Writer, Written
from memsdk.types import Actor, MemoryRecord, Op, OpType, Scope, ScoredMemory, Tier, Turn, shown_when, turn_header

__all__ = [
    "APPLY_ATTEMPTS", "INGEST_ACTOR", "FORGET_ACTOR", "IngestOutcome", "WriteOutcome", "ingest_steps", "write_steps", "episode_op", "episode_ops", "check_turn",
    "related_steps", "core_steps", "applied_ops",
]  # fmt: skip

#: search -> decide -> apply rounds per fact before a fact that keeps conflicting is reported
APPLY_ATTEMPTS = 4

#: who writes episodic turns (the transition lets only it and the API add them)
INGEST_ACTOR = Actor(role="ingest")

#: who applies a forget request or a correction (the only policy role that may delete a turn)
FORGET_ACTOR = Actor(role="forget", version="rules-v1")



@dataclass
class IngestOutcome:
    facts: list[str] = field(default_factory=list)
    ops: list[AppliedOp] = field(default_factory=list)
    calls: list[PolicyCall] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    fallback: bool = False
    episodic_id: uuid.UUID | None = None


@dataclass
class WriteOutcome(IngestOutcome):
    """What `write_steps` did. ``executed`` has one flag per call the writer's reply held:
    True where the bank applied it, False where the reader, the guard or the bank refused it
    (Mem-alpha's R2_t is their mean). ``episodic_id`` is the chunk's last turn."""

    executed: list[bool] = field(default_factory=list)
    episodic_ids: list[uuid.UUID] = field(default_factory=list)


#: a turn is indexed with the one before it unless both are dated and further apart than
#: this: a new session does not continue the last one
CONTEXT_GAP = timedelta(hours=6)


def episode_op(turn: Turn, previous: Turn | None = None) -> Op:
    """The ADD that keeps a turn verbatim in the episodic tier. A timestamp given as text is
    also kept as written (``metadata.timestamp``) and shown that way, readable or not: the
    app's own format ("1:56 pm on 8 May, 2023"), which retrieval was measured with.

    ``previous`` (the turn before it in the conversation, whichever scope it went to) gives
    its text as the record's ``context``, indexed with it and never shown: LoCoMo's questions often quote
    what a reply answers ("What did Caroline say about the support group?" is asked of
    Melanie's question and Caroline's "It was powerful"). The bank indexes the turn after it
    and stores only its hash (`MemoryRecord.context_hash`). LoCoMo, heuristic tiers + hybrid
    + `named_scope`: val recall@10/@60 .722/.824 -> .781/.908, train .766/.926."""
    when = parse_when(turn.timestamp)
    raw = {"timestamp": turn.timestamp} if isinstance(turn.timestamp, str) else {}
    turn_ids = (turn.turn_id,) if turn.turn_id else ()
    context = None
    if previous is not None and previous.text.strip():
        before = parse_when(previous.timestamp)
        if when is None or before is None or abs(when - before) <= CONTEXT_GAP:
            # its words only: a speaker header would count the name twice in BM25, and a
            # question naming the speaker would then prefer any reply over the turn it asks about;
            # the header is for the dense vector, which reads the turn as it was embedded
            context = previous.text
    header = turn_header(previous.speaker, shown_when(previous)) if context is not None and previous is not None else None
    return Op.add(turn.text, tier=Tier.EPISODIC, speaker=turn.speaker, occurred_at=when, source_turn_ids=turn_ids, metadata=raw, context=context, context_header=header)


#: what a turn's fields become in its episodic record (`episode_op`): a refusal of the record
#: names the turn's field the caller sent
_TURN_FIELDS = {"text": "text", "metadata": "timestamp"}


def check_turn(turn: Turn, field: str, max_chars: int, limits: BankLimits | None) -> Turn:
    """``turn`` if the bank will keep it: its text at most ``max_chars`` (the client's
    ``max_turn_chars``) and its episodic record within ``limits`` (None: no episodic tier), as
    `MemoryBank.apply` checks them; else `InvalidInput` naming the caller's field (``turn.text``,
    ``turns[3].timestamp``). Run before anything is written or queued, so that no turn is
    refused after it was accepted."""
    if len(turn.text) > max_chars:
        raise InvalidInput(f"{field}.text", f"is {len(turn.text)} characters, the limit is {max_chars}")
    if limits is None:
        return turn
    try:
        check_limits(0, episode_op(turn), limits)
    except InvalidInput as exc:
        raise InvalidInput(f"{field}.{_TURN_FIELDS.get(exc.field.removeprefix('ops[0].'), 'text')}", exc.reason) from None
    return turn


def episode_ops(chunk: Sequence[Turn], context: Sequence[Turn]) -> list[Op]:
    """`episode_op` for each turn of ``chunk``, each after the turn before it (the first after
    the last of ``context``, the conversation's recent turns)."""
    before = [context[-1] if context else None, *chunk[:-1]]
    return [episode_op(t, prev) for t, prev in zip(chunk, before)]


def _dated(ops: Sequence[Op], when: datetime | None) -> list[Op]:
    """Facts added from a turn happened when the turn did, unless the policy said otherwise."""
    if when is None:
        return list(ops)
    return [op.model_copy(update={"occurred_at": when}) if op.op is OpType.ADD and op.occurred_at is None else op for op in ops]


def ingest_steps(
    turns: Turn | Sequence[Turn], context: Sequence[Turn], scope: Scope, policies: ActivePolicies, related_k: int, *, episodic: bool = True, together: bool = False
) -> Generator[Effect, Any, IngestOutcome]:
    """The turns into the episodic tier (no LLM), then the extractor -> related semantic
    memories -> manager -> `MemoryBank.apply` loop, the one loop the clients run and the
    trainers drive over a forked bank.

    ``turns`` is one turn (Memory-R1: the extractor sees it after ``context``, and the
    manager decides each fact on its own) or a chunk of a session (Memory-R2: the extractor
    sees the chunk in one call; with ``together`` the manager decides all its facts in one
    call, on the memories related to any of them). Forget requests and corrections among
    the turns are applied by rules (`_supersede`) and state no fact.

    Once the turns are kept, a policy that fails for good (its backend down with no fallback,
    a malformed response, a prompt over the context window) costs only what it would have
    decided, and says so in ``failures``, as `write_steps` does: raising would abort the
    caller's remaining turns, and a caller that retried would store these twice."""
    chunk = [turns] if isinstance(turns, Turn) else list(turns)
    out = IngestOutcome()
    requests: list[MemoryRecord | None] = [None] * len(chunk)
    if episodic:  # before any policy runs: a store failure here costs the turns, and says so
        kept: Transition = yield Apply(scope, episode_ops(chunk, context), INGEST_ACTOR)
        requests = list(kept.records)
        out.episodic_id = kept.records[-1].id
    stated = []
    for turn, request in zip(chunk, requests):
        if (intent := (yield from _intent(turn.text, policies.forget))) is None:
            stated.append(turn)
        else:  # a forget request or a correction changes earlier memories and states no new fact
            yield from _supersede(intent, scope, request, out, policies.forget)
    if not stated:
        return out
    try:
        extraction: Extraction = yield from decide_with_fallback(policies.extractor, "extract", stated[-1], [*context, *stated[:-1]])
    except PolicyError as exc:
        if not episodic:
            raise  # the turn is stored nowhere: only the caller can keep it now
        out.failures.append(f"extractor failed, the turn is kept in the episodic tier only: {exc}")
        return out
    out.fallback = extraction.fallback
    out.calls += extraction.calls
    # a reply with no usable field is not "no facts in this turn": say so, as the manager does
    out.failures += [f"extractor: unparseable output: {c.failure}" for c in extraction.calls if c.failure]
    cited = _cite(extraction.facts, stated, context, out)
    out.facts = list(cited)
    when = parse_when(stated[-1].timestamp)
    actor = Actor(role=policies.manager.role, version=policies.versions["manager"])
    for facts in [out.facts] if together and out.facts else [[f] for f in out.facts]:
        turn_ids = [t.turn_id for t in dict.fromkeys(t for f in facts for t in cited[f]) if t.turn_id]
        try:
            transition = yield from _settle(facts, when, scope, policies.manager, related_k, turn_ids, actor, out)
        except PolicyError as exc:
            if not episodic:
                raise
            out.failures.append(f"manager failed on {_quoted(facts)}, the turn is kept in the episodic tier only: {exc}")
            continue
        if transition is not None:
            out.ops += applied_ops(transition)
            stating_turns = [requests[chunk.index(turn)] for f in facts for turn in cited[f] if turn in chunk]
            yield from _retire_copied_turns(transition, scope, stating_turns[-1] if stating_turns else requests[-1], out)
            yield from _keep_corrected(transition, scope, when, actor, out)
    return out


def _keep_corrected(transition: Transition, scope: Scope, when: datetime | None, actor: Actor, out: IngestOutcome) -> Generator[Effect, Any, None]:
    """A retired fact that also said something its successor does not repeat leaves a
    corrected copy (`corrected_copy`): "the meeting is on the 14th in Tampere", replaced by
    "we pushed the meeting to the 10th", keeps "... on the 10th in Tampere" current. The
    replacement rewrites only what it replaces, whichever manager decided it; the old fact
    stays history as it was."""
    added = {c.after.id: c.after for c in transition.changes if c.op is OpType.ADD and c.after is not None}
    copies = []
    for change in transition.changes:
        old, new = change.before, change.after
        if change.op is not OpType.RETIRE or old is None or old.tier is not Tier.SEMANTIC or new is None or new.superseded_by not in added:
            continue
        successor = added[new.superseded_by]
        if (text := corrected_copy(successor.text, old.text)) is not None:
            turns = tuple(dict.fromkeys([*old.source_turn_ids, *successor.source_turn_ids]))
            copies.append(Op.add(text, source_turn_ids=turns))
    if not copies:
        return
    try:
        kept: Transition = yield Apply(scope, _dated(copies, when), actor)
    except (InvalidInput, MemoryNotFound, Conflict) as exc:  # the replacement stands; say what was not kept
        out.failures.append(f"the corrected copy of a replaced fact was not stored: {exc}")
        return
    out.ops += applied_ops(kept)


def _retire_copied_turns(transition: Transition, scope: Scope, by: MemoryRecord | None, out: IngestOutcome) -> Generator[Effect, Any, None]:
    """A fact the manager superseded that is a copy of one turn (the heuristic extractor's
    "Speaker (on date): <turn>") takes that turn with it, retired by this ingest's turn: the
    turn says what the fact said, so leaving it current would keep the old value in the
    current view ("where does she live now?" shown "I live in Boston" unmarked). A fact in
    other words (an LLM extractor's "Maya lives in Boston") leaves its turn alone, since the
    turn may say more."""
    for change in transition.changes:
        old = change.before
        if change.op is not OpType.RETIRE or old is None or old.tier is not Tier.SEMANTIC:
            continue
        hits: list[ScoredMemory] = yield Search([scope], old.text[:2000], 3, Tier.EPISODIC)
        turn = copied_turn(old.text, [h.record for h in hits if h.record.current and h.record.source_turn_ids == old.source_turn_ids])
        if turn is None:
            continue
        try:
            retired: Transition = yield Apply(scope, [Op.retire(turn.id, by=None if by is None else by.id, expected_version=turn.version)], FORGET_ACTOR)
        except (MemoryNotFound, Conflict) as exc:  # changed meanwhile: the fact is retired, the turn is not
            out.failures.append(f"the turn of a superseded fact was not retired, it changed meanwhile: {exc}")
            continue
        out.ops += applied_ops(retired)


def _cite(facts: Sequence[str], stated: Sequence[Turn], context: Sequence[Turn], out: IngestOutcome) -> dict[str, list[Turn]]:
    """Each fact with the shown turns it came from (`cited_turns`); a fact that none of them
    holds (a copy of the prompt's example, an invention) is not stored, and says so: whoever
    wrote the extractor, a memory names the turn that said it. The turn itself is kept."""
    cited: dict[str, list[Turn]] = {}
    for fact in facts:
        if (turns := cited_turns(fact, stated, context)) is None:
            out.failures.append(f"extractor: fact not found in the turn or its context, not stored: {fact[:80]!r}")
        else:
            cited.setdefault(fact, turns)
    return cited


def _quoted(facts: Sequence[str]) -> str:
    return f"fact {facts[0]!r}" if len(facts) == 1 else f"{len(facts)} facts"


def write_steps(
    chunk: Sequence[Turn], scope: Scope, writer: Writer, related_k: int, *, version: str, episodic: bool = True, context: Sequence[Turn] = (),
    forget: ForgetReading | None = None,
) -> Generator[Effect, Any, WriteOutcome]:
    """Mem-alpha's write step: the chunk's turns into the episodic tier (no LLM), forget
    requests and corrections applied by rules (`_supersede`), then the writer sees the core
    memory and the chunk's related semantic memories and replies with calls, applied one op
    per `Apply` so that the transition function refuses a call alone.

    A dead writer costs nothing that was said: the turns are kept, the failure is reported."""
    out = WriteOutcome()
    if episodic:
        kept: Transition = yield Apply(scope, episode_ops(chunk, context), INGEST_ACTOR)
        out.episodic_ids = [r.id for r in kept.records]
        out.episodic_id = out.episodic_ids[-1] if out.episodic_ids else None
    stated = []
    for i, turn in enumerate(chunk):  # forget requests and corrections, as `ingest_steps` applies them
        if (intent := (yield from _intent(turn.text, forget))) is None:
            stated.append(turn)
        else:
            yield from _supersede(intent, scope, kept.records[i] if episodic else None, out, forget)
    if not stated:
        return out
    chunk = stated
    query = "\n".join(t.text for t in chunk)
    core: list[ScoredMemory] = yield Search([scope], query, 1, Tier.CORE)
    related: list[ScoredMemory] = yield Search([scope], query, related_k, Tier.SEMANTIC, hybrid=True)
    try:
        written: Written = yield from writer.steps(chunk, [*core, *related])
    except PolicyError as exc:
        out.failures.append(f"writer failed, the chunk is kept in the episodic tier only: {exc}")
        return out
    out.calls += written.calls
    out.failures += written.rejected
    out.executed += [False] * len(written.rejected)
    actor = Actor(role="writer", version=version)
    for op in _dated(written.ops, parse_when(chunk[-1].timestamp) if chunk else None):
        try:
            transition: Transition = yield Apply(scope, [op], actor)
        except (InvalidInput, MemoryNotFound, Conflict) as exc:
            out.executed.append(False)
            out.failures.append(f"{op.op} refused by the bank: {exc}")
            continue
        out.executed.append(True)
        out.ops += applied_ops(transition)
    return out


def applied_ops(transition: Transition) -> list[AppliedOp]:
    return [
        AppliedOp(
            op=str(c.op), memory_id=None if c.after is None else c.after.id,
            before=c.event.before if c.event else None, after=c.event.after if c.event else None,
            version=None if c.after is None else c.after.version, changed=c.changed,
        )
        for c in transition.changes
    ]


def _intent(text: str, forget: ForgetReading | None) -> Generator[Effect, Any, Forget | Correction | None]:
    """The forget request or correction ``text`` makes: the rules' (`classify`), else a
    forget the trained intent head recognises (its whole text names what to forget)."""
    if (intent := classify(text)) is not None or forget is None:
        return intent
    wish: str = yield from forget.wants(text)
    return Forget(text, literal=False) if wish == "forget" else None


def _supersede(intent: Forget | Correction, scope: Scope, request: MemoryRecord | None, out: IngestOutcome, forget: ForgetReading | None = None) -> Generator[Effect, Any, None]:
    """Retire what a forget request or a correction supersedes, in every tier (`forget_targets`)."""
    plan: ForgetPlan = yield from forget_targets(intent, scope, request, forget)
    if plan.refused is not None:
        out.failures.append(plan.refused)
        return
    if not plan.ops:
        return
    try:
        transition: Transition = yield Apply(scope, plan.ops, FORGET_ACTOR)
    except (MemoryNotFound, Conflict) as exc:  # another writer changed a match meanwhile: say so
        out.failures.append(f"{type(intent).__name__.lower()} not applied, a memory changed meanwhile: {exc}")
        return
    out.ops += applied_ops(transition)


def _settle(facts: Sequence[str], when: datetime | None, scope: Scope, manager: Manager, related_k: int, turn_ids: Sequence[str], actor: Actor, out: IngestOutcome) -> Generator[Effect, Any, Transition | None]:
    """Facts decided together: related memories -> manager -> apply; from the search again
    when another writer changed a memory the decision read. The applied transition, or None."""
    for attempt in range(1, APPLY_ATTEMPTS + 1):
        related: list[ScoredMemory] = yield from related_steps(scope, facts, related_k)
        looked_up: list[ScoredMemory] = []
        decision: Decision = yield from _with_lookups(decide_with_fallback(manager, "decide", list(facts), related, source_turn_ids=turn_ids), scope, looked_up)
        out.calls += decision.calls
        out.fallback |= decision.fallback
        ops, refused = check_ops(decision.ops, [*related, *looked_up])  # whoever wrote the manager
        if refused and isinstance(stats := getattr(manager, "stats", None), PolicyStats):
            stats.add("rejected_ops", len(refused))
        rejected = [*decision.rejected, *refused]
        if not ops:
            out.failures += rejected
            return None
        try:
            transition: Transition = yield Apply(scope, _dated(ops, when), actor)
        except (MemoryNotFound, Conflict) as exc:
            if attempt < APPLY_ATTEMPTS:
                continue  # the abandoned decision's rejections are not this fact's outcome
            out.failures += rejected
            out.failures.append(f"ops for {_quoted(facts)} not applied after {attempt} attempts: {exc}")
            return None
        except InvalidInput as exc:  # an op the bank's limits refuse costs this decision only
            out.failures += [*rejected, f"ops for {_quoted(facts)} refused by the bank: {exc}"]
            return None
        out.failures += rejected
        return transition
    return None  # pragma: no cover - the loop always returns


def _with_lookups(steps: Generator[Any, Any, R], scope: Scope, found: list[ScoredMemory]) -> Generator[Effect, Any, R]:
    """``steps`` with each `Lookup` it yields run as a semantic search of ``scope`` (what a
    DeltaMem manager asks to see before it writes); what it found is added to ``found``,
    which the guard counts as shown. Every other effect passes through."""
    step = resume(steps)
    while not isinstance(step, Done):
        try:
            if isinstance(step, Lookup):
                result = yield Search([scope], step.query[:2000] or "?", step.limit, Tier.SEMANTIC)
                found.extend(result)
            else:
                result = yield step
        except Exception as exc:  # the effect's failure is the policy's to handle, as unwrapped
            step = resume(steps, error=exc)
            continue
        step = resume(steps, result)
    return step.value


def related_steps(scope: Scope, facts: Sequence[str], k: int) -> Generator[Effect, Any, list[ScoredMemory]]:
    """The k semantic memories most similar to any of ``facts`` (per fact top-k, merged by
    best score); for one fact, that fact's top k. Never an episodic turn: the manager does
    not see or rewrite them."""
    best: dict[Any, ScoredMemory] = {}
    for fact in facts:
        hits: list[ScoredMemory] = yield Search([scope], fact, k, Tier.SEMANTIC, as_memory=True)
        for hit in hits:
            if hit.record.id not in best or hit.score > best[hit.record.id].score:
                best[hit.record.id] = hit
    return sorted(best.values(), key=lambda h: -h.score)[:k]


def core_steps(scope: Scope, text: str, actor: Actor) -> Generator[Effect, Any, Transition]:
    """Make ``text`` the scope's core memory: an UPDATE of the one there is (at the version
    read, so a concurrent rewrite is a `Conflict`, not a lost update), else its ADD."""
    core: list[ScoredMemory] = yield Search([scope], text[:2000], 1, Tier.CORE)
    if core:
        current = core[0].record
        op = Op.update(current.id, text, expected_version=current.version)
    else:
        op = Op.add(text, tier=Tier.CORE)
    transition: Transition = yield Apply(scope, [op], actor)
    return transition
