"""Manager policies: a fact + related memories -> validated ops (Memory-R1's memory manager).

The model sees memories as ``[0] text``, ``[1] text``: short integer aliases, never UUIDs
(a 135M model copies UUIDs badly, and ids must not leak into prompts). `to_ops` maps the
aliases back and is the guard between the model and the bank: an op on an unknown alias,
a second op on the same memory, an op the schema does not allow, or a burst of DELETEs
is dropped (DELETE storms become NOOP), and every drop is counted.

The role whole, in one module: `Decision` and the `Manager` protocol, the output schema
(`ManagerDecision`), the guard, the LLM policies (`LLMManager`, Memory-R2's `ChunkManager`)
and the policy without a model, `HeuristicManager`: Mem0-style similarity thresholds. A
near-duplicate is NOOP; a close match is UPDATEd to the old text plus the new fact (nothing is
lost); anything else is ADDed. It never deletes. The trained managers without an LLM
(`pair_manager`) and DeltaMem's (`deltamem`) build on these parts. A manager you write
follows `ManagerRules` and is run by `PluggedManager` (`memsdk.policies.plugged`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from memsdk.effects import Request, Steps, run
from memsdk.errors import InvalidInput, PolicyError
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.calling.caller import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.calling.prompts import load_prompt
from memsdk.policies.calling.schema import Notes, salvage_items
from memsdk.grounding import grounded
from memsdk.types import Op, OpType, ScoredMemory, Tier, check_text
from memsdk.policies.plugged import Plugged

__all__ = ["Decision", "Manager", "LLMManager", "ChunkManager", "OpGuard", "to_ops", "check_ops", "render_memories", "alias_problem", "valid_text", "ManagerOpOut", "ManagerDecision", "HeuristicManager", "ManagerRules", "PluggedManager"]

MEMORY_CHARS = 300


#: one memory as the manager writes it: a merged UPDATE ("Has two dogs, Buddy and Scout") included
MAX_MEMORY_CHARS = 300

#: one op per memory shown (5) plus one ADD
MAX_OPS = 6

class ManagerOpOut(BaseModel):
    """One op as the model writes it: ``id`` is the integer alias shown in the prompt."""

    model_config = ConfigDict(extra="ignore")

    op: Literal["ADD", "UPDATE", "DELETE", "NOOP"]
    # any int: a wrong alias is dropped (and counted) by the manager's guard, op by op,
    # instead of failing the whole decision at the schema
    id: int | None = None
    text: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_MEMORY_CHARS)] | None = None
    #: on an ADD: the aliases of the memories the new one replaces ("moved to Austin" replaces
    #: "lives in Boston"); they are retired, kept as history, not deleted
    replaces: list[int] = Field(default_factory=list, max_length=MAX_OPS)

class ManagerDecision(BaseModel):
    model_config = ConfigDict(extra="ignore")

    ops: list[ManagerOpOut] = Field(max_length=MAX_OPS)

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        # small models often drop the wrapper: a bare op or a bare list
        return salvage_items(data, "ops", "op", ManagerOpOut, MAX_OPS)


@dataclass
class Decision:
    ops: list[Op]
    calls: list[PolicyCall] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    fallback: bool = False


@runtime_checkable
class Manager(Protocol):
    """``decide`` for a policy without a model; an LLM policy also has ``steps`` (see `Extractor`)."""

    role: str

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision: ...


@dataclass(frozen=True)
class OpGuard:
    """Limits on what one decision may do to the bank.

    ``min_grounding``: the share of a written text's content words that must come from the
    fact or the memory it replaces. A small model copies its prompt's example ("Has two
    dogs, Buddy and Scout") over unrelated memories; an ungrounded write is dropped.
    """

    max_deletes: int = 1
    max_text_chars: int = 400
    min_grounding: float = 0.5
    #: an UPDATE whose text keeps less than this share of the old memory's content words is
    #: a replacement, not a merge: it is stored as an ADD and the old memory stays live
    #: (an untrained manager otherwise funnels every fact into one memory, overwriting it)
    min_kept: float = 0.3


def render_memories(memories: Sequence[ScoredMemory], *, render_records: bool = False) -> str:
    """``[i] text`` per memory. ``render_records``: with speaker, date and relative dates resolved
    (`MemoryRecord.render`), as the answerer needs them; the manager sees the bare text it
    may rewrite."""
    text = (lambda m: m.record.render()) if render_records else (lambda m: m.record.text)
    return "\n".join(f"[{i}] {text(m)[:MEMORY_CHARS]}" for i, m in enumerate(memories)) or "(none)"


def to_ops(
    decision: ManagerDecision,
    related: Sequence[ScoredMemory],
    *,
    facts: Sequence[str] = (),
    source_turn_ids: Sequence[str] = (),
    guard: OpGuard = OpGuard(),
) -> tuple[list[Op], list[str]]:
    """Map aliases back to memory ids and keep only ops that are safe to apply.

    With ``facts`` given, written text must be grounded in them (and, for UPDATE, in the
    memory it replaces): see `OpGuard.min_grounding`."""
    ops: list[Op] = []
    rejected: list[str] = []
    touched: set[int] = set()
    turns = tuple(source_turn_ids)
    deletes = [o for o in decision.ops if o.op == "DELETE"]
    storm = len(deletes) > guard.max_deletes or (len(related) > 1 and len(deletes) >= len(related))
    if storm and deletes:
        rejected.append(f"delete storm: {len(deletes)} DELETEs of {len(related)} memories turned into NOOP")
    for i, out in enumerate(decision.ops):
        kind = OpType(out.op)
        if kind is OpType.NOOP:
            continue
        if kind is OpType.DELETE and storm:
            continue
        if kind is OpType.ADD:
            text = valid_text(out.text, guard.max_text_chars)
            if text is None:
                rejected.append(f"ops[{i}]: ADD without usable text")
            elif facts and not grounded(text, facts, guard.min_grounding):
                rejected.append(f"ops[{i}]: ADD of text not grounded in the fact: {text[:60]!r}")
            else:
                replaced: list[int] = []
                for alias in dict.fromkeys(out.replaces):  # each alias once, as the op guard wants
                    if (problem := alias_problem(alias, len(related), touched, "op")) is not None:
                        rejected.append(f"ops[{i}]: ADD replacing {problem}; added without replacing it")
                    else:
                        replaced.append(alias)
                touched.update(replaced)
                ops.append(Op.add(text, source_turn_ids=turns, supersedes=tuple(related[a].record.id for a in replaced)))
            continue
        if (problem := alias_problem(out.id, len(related), touched, "op")) is not None:
            rejected.append(f"ops[{i}]: {kind} of {problem}" if problem.startswith("unknown") else f"ops[{i}]: {problem}")
            continue
        assert out.id is not None  # alias_problem rejects a missing alias
        target, seen = related[out.id].record.id, related[out.id].record.version
        if kind is OpType.DELETE:
            ops.append(Op.delete(target, expected_version=seen))
        else:
            text = valid_text(out.text, guard.max_text_chars)
            if text is None:
                rejected.append(f"ops[{i}]: UPDATE of [{out.id}] without usable text")
                continue
            old = related[out.id].record.text
            if facts and not grounded(text, [*facts, old], guard.min_grounding):
                rejected.append(f"ops[{i}]: UPDATE of [{out.id}] to text not grounded in the fact or the memory: {text[:60]!r}")
                continue
            if facts and not grounded(old, [text], guard.min_kept):
                rejected.append(f"ops[{i}]: UPDATE of [{out.id}] would drop the old memory; stored as ADD")
                ops.append(Op.add(text, source_turn_ids=turns))
                continue
            ops.append(Op.update(target, text, source_turn_ids=turns, expected_version=seen))
        touched.add(out.id)
    return ops, rejected


def check_ops(ops: Sequence[Op], related: Sequence[ScoredMemory]) -> tuple[list[Op], list[str]]:
    """The guard every manager's ops pass, built-in or plugged in, before the bank sees them:
    an UPDATE or DELETE only of a memory the manager was shown (so never of another scope's
    memory, whatever id it learned), an ADD superseding only shown memories, at most one op
    per memory, ADDs to the semantic tier
    only (turns and the core memory are not the manager's), and every change carrying the
    version it was decided on (a stale decision is then a `Conflict`, retried)."""
    shown = {m.record.id: m.record for m in related}
    kept: list[Op] = []
    rejected: list[str] = []
    touched: set[Any] = set()
    for i, op in enumerate(ops):
        if op.op is OpType.NOOP:
            continue
        if op.op is OpType.ADD:
            unshown = [old for old in op.supersedes if old not in shown]
            if op.tier is not Tier.SEMANTIC:
                rejected.append(f"ops[{i}]: ADD to the {op.tier} tier refused: a manager writes semantic memories only")
            elif unshown or touched & set(op.supersedes):
                rejected.append(f"ops[{i}]: ADD superseding {'memory ' + str(unshown[0]) + ' it was not shown' if unshown else 'a memory another op changes'} refused")
            else:
                touched.update(op.supersedes)
                kept.append(op)
            continue
        if op.op is OpType.RETIRE:  # a manager replaces a memory by adding its successor (ADD supersedes)
            rejected.append(f"ops[{i}]: RETIRE refused: a manager retires a memory only by an ADD that supersedes it")
            continue
        record = None if op.target is None else shown.get(op.target)
        if record is None:
            rejected.append(f"ops[{i}]: {op.op} of memory {op.target} refused: the manager was not shown it")
        elif op.target in touched:
            rejected.append(f"ops[{i}]: second op on memory {op.target} refused")
        else:
            touched.add(op.target)
            kept.append(op if op.expected_version is not None else op.model_copy(update={"expected_version": record.version}))
    return kept, rejected


def alias_problem(alias: int | None, shown: int, touched: set[int], noun: str) -> str | None:
    """Why an op (or a writer call) on memory ``[alias]`` cannot run: an alias that was not
    shown, or a second ``noun`` on a memory one already changed; None when it can."""
    if alias is None or not 0 <= alias < shown:
        return f"unknown memory [{alias}]"
    if alias in touched:
        return f"second {noun} on memory [{alias}]"
    return None


def valid_text(text: str | None, max_chars: int) -> str | None:
    """``text`` when a memory may hold it (not blank, no NULs, at most ``max_chars``), else None."""
    if text is None or len(text) > max_chars:
        return None
    try:
        return check_text(text)
    except ValueError:
        return None


class LLMManager:
    """Asks the model for ops on the related memories (Memory-R1's memory manager)."""

    role = "manager"
    prompt_role = "manager"
    schema: type[BaseModel] = ManagerDecision
    max_tokens = 160

    def __init__(
        self,
        backend: LLMBackend | AsyncLLMBackend,
        config: PolicyConfig = PolicyConfig(),
        *,
        guard: OpGuard = OpGuard(),
        fallback: Manager | None = None,
        stats: PolicyStats | None = None,
    ) -> None:
        self.backend, self.guard, self.fallback = backend, guard, fallback
        prompt = load_prompt(self.prompt_role, config.prompt_version)
        # Any: a subclass reads another schema (DeltaMem's search-or-ops step)
        self.caller: LLMCaller[Any] = LLMCaller(prompt, self.schema, config, default_max_tokens=self.max_tokens, stats=stats)

    @property
    def stats(self) -> PolicyStats:
        return self.caller.stats

    @staticmethod
    def prompt_values(facts: Sequence[str], related: Sequence[ScoredMemory]) -> dict[str, str]:
        return {"fact": " ".join(facts), "facts": "\n".join(f"- {f}" for f in facts), "memories": render_memories(related)}

    def _finish(self, value: ManagerDecision | None, call: PolicyCall, facts: Sequence[str], related: Sequence[ScoredMemory], turns: Sequence[str]) -> Decision:
        if value is None:
            return Decision([], [call], [f"unparseable output: {call.failure}"])
        ops, rejected = to_ops(value, related, facts=facts, source_turn_ids=turns, guard=self.guard)
        if rejected:
            self.stats.add("rejected_ops", len(rejected))
            call.failure = "; ".join(rejected)
        return Decision(ops, [call], rejected)

    def _first_memories(self, facts: Sequence[str], turns: Sequence[str]) -> Decision:
        """With no related memory there is nothing to update, delete or duplicate: every fact
        is new. Asking the model anyway only risks dropping the fact (a small model invents
        aliases for memories that are not there), so the decision is ADD without a call."""
        texts = [t for f in facts if (t := valid_text(f, self.guard.max_text_chars)) is not None]
        self.stats.add("first_memory_adds", len(texts))
        return Decision([Op.add(t, source_turn_ids=tuple(turns)) for t in texts])

    def request(self, facts: Sequence[str], related: Sequence[ScoredMemory]) -> Request:
        return self.caller.request(self.backend, self.prompt_values(facts, related))

    def read(self, request: Request, text: str, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        """A sampled reply to `request` (its whole text: `LLMCaller.reply_text`) as the decision
        serving would make of it: the trainers' reading, with the parser, guard and finish of `steps`."""
        return self._finish(*self.caller.read(self.backend, request, text), facts, related, source_turn_ids)

    def steps(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Steps[Decision]:
        if not related:
            return self._first_memories(facts, source_turn_ids)
        value, call = yield from self.caller.steps(self.backend, self.prompt_values(facts, related))
        return self._finish(value, call, facts, related, source_turn_ids)

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        """`steps` run with blocking calls (a script, a test); the clients drive `steps`."""
        return run(self.steps(facts, related, source_turn_ids=source_turn_ids))


class ChunkManager(LLMManager):
    """Memory-R2's manager role: all facts of a session chunk in one call, on the extractor's backbone."""

    role = "r2_manager"
    prompt_role = "r2_manager"


@dataclass
class HeuristicManager:
    role: str = "manager"
    version: str = "heuristic-v1"
    duplicate_at: float = 0.95
    merge_at: float = 0.85
    max_text_chars: int = 1000

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        turns = tuple(source_turn_ids)
        ops: list[Op] = []
        merged: set[int] = set()
        for fact in facts:
            best = max(range(len(related)), key=lambda i: related[i].score, default=None)
            if best is None:  # no memories yet
                ops.append(Op.add(fact, source_turn_ids=turns))
                continue
            top = related[best]
            if top.score >= self.duplicate_at:
                continue
            text = f"{top.record.text}; {fact}"
            if best not in merged and top.score >= self.merge_at and len(text) <= self.max_text_chars:
                ops.append(Op.update(top.record.id, text, source_turn_ids=turns, expected_version=top.record.version))
                merged.add(best)
            else:
                ops.append(Op.add(fact, source_turn_ids=turns))
        return Decision(ops)


# -- a policy you write (`memsdk.policies.plugged`) -------------------------------------


@runtime_checkable
class ManagerRules(Protocol):
    """A manager without an LLM: ops for ``facts`` on the ``related`` memories it is shown."""

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str]) -> Sequence[Op | dict[str, Any]] | Decision: ...


class PluggedManager(Plugged[Decision]):
    role, rule = "manager", "decide"

    def decide(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        return run(self.steps(tuple(facts), tuple(related), source_turn_ids=tuple(source_turn_ids)))

    def _coerce(self, value: Any, inputs: tuple[Any, ...], kw: dict[str, Any]) -> Decision:
        turns = tuple(kw.get("source_turn_ids", ()))
        if isinstance(value, Decision):
            ops: Sequence[Any] = value.ops
        elif isinstance(value, (list, tuple)):
            ops = value
        else:
            raise self._wrong("a result", value, "a list of memsdk.types.Op (or dicts of their fields)")
        checked = []
        for i, op in enumerate(ops):
            try:
                op = op if isinstance(op, Op) else Op.model_validate(op)
            except ValidationError as exc:
                self.stats.add("bad_results")
                raise PolicyError(f"{self.version} returned an invalid op: {InvalidInput.from_pydantic(exc, f'ops[{i}]')}") from None
            if op.op is not OpType.DELETE and op.op is not OpType.NOOP and not op.source_turn_ids and turns:
                op = op.model_copy(update={"source_turn_ids": turns})  # provenance, as the built-ins record it
            checked.append(op)
        if isinstance(value, Decision):
            value.ops = checked
            return value
        return Decision(checked)

    def _empty(self, why: str) -> Decision:
        return Decision([], rejected=[f"unreadable reply: {why}"])

    def _summary(self, result: Decision) -> dict[str, Any]:
        return {"ops": [op.model_dump(mode="json") for op in result.ops]}
