"""Mem-alpha's writer: one chunk of conversation + the memory it may change -> function calls.

One reply holds several calls (``memory_insert`` / ``memory_update`` / ``memory_delete``),
each naming a tier on insert. The model sees memories as ``[i] (tier) text``, integer
aliases as the manager does. `writer_ops` maps the aliases back and drops, one by one and
with a note each, the calls that cannot be ops (an unknown alias, no usable text, a second
call on one memory, a delete storm, text not grounded in the chunk). The rest are applied in
order by the pipeline (`memsdk.pipeline.write_steps`), one op per `MemoryBank.apply`,
so that the transition function refuses what a tier does not allow (an episodic insert, a
second core memory) call by call too. Every refused call is counted: Mem-alpha's format
reward R2_t is the share of a step's calls that executed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from memsdk.dates import render_timestamp
from memsdk.effects import Request, Steps, run
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.calling.caller import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.calling.prompts import load_prompt
from memsdk.policies.calling.schema import Notes, salvage_items
from memsdk.policies.extractor import MAX_TURN_CHARS, render_turn
from memsdk.grounding import grounded
from memsdk.policies.manager import OpGuard, alias_problem, valid_text
from memsdk.types import Op, ScoredMemory, Tier, Turn

__all__ = ["Written", "Writer", "LLMWriter", "writer_ops", "render_tiered", "WriterCallOut", "WriterCalls", "dropped_calls"]


#: calls in one writer reply (Mem-alpha emits several per chunk); its 256 tokens fit about this many
MAX_CALLS = 6

#: the writer rewrites the core summary in one call; the bank bounds a core memory itself
#: (`BankLimits.max_core_chars`), this keeps one call within the writer's token budget
MAX_WRITER_TEXT_CHARS = 600

class WriterCallOut(BaseModel):
    """One Mem-alpha function call: ``fn`` names the function, ``id`` is a memory's alias.

    ``tier`` accepts every tier, episodic included: what a tier allows is the transition
    function's rule (an episodic insert by the writer is refused there, and counted as a
    call that did not execute), not the schema's."""

    model_config = ConfigDict(extra="ignore")

    fn: Literal["memory_insert", "memory_update", "memory_delete"]
    tier: Literal["core", "semantic", "episodic"] | None = None
    id: int | None = None
    text: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_WRITER_TEXT_CHARS)] | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare_name(cls, data: Any) -> Any:
        # the prompt's response prefix ends in "memory_", and an unconstrained reply is read
        # with the prefix in front; a model that repeats the prefix writes "memory_memory_insert"
        if isinstance(data, dict) and isinstance(fn := data.get("fn"), str) and fn.startswith("memory_memory_"):
            data = {**data, "fn": fn.removeprefix("memory_")}
        return data

class WriterCalls(BaseModel):
    model_config = ConfigDict(extra="ignore")

    calls: list[WriterCallOut] = Field(max_length=MAX_CALLS)

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        """As `ManagerDecision.salvage`: a bare call or list is the reply, each call that does
        not validate is dropped with a note (`dropped_calls` counts them: Mem-alpha's R2 needs
        every call the model wrote, executed or not), a looping text is cut."""
        return salvage_items(data, "calls", "fn", WriterCallOut, MAX_CALLS)

def dropped_calls(notes: Notes) -> int:
    """How many of a writer reply's calls the reader dropped (`WriterCalls.salvage`'s notes)."""
    return sum(1 for n in notes if n.startswith("calls[") and ": dropped (" in n) + sum(
        int(n.split()[1]) - MAX_CALLS for n in notes if n.startswith("calls: ") and n.endswith(f"the first {MAX_CALLS} kept")
    )


@dataclass
class Written:
    """A writer's reply as ops, in the order the model wrote them.

    ``rejected`` has one note per call that never reached the bank (dropped by the reader or
    by `writer_ops`); the bank may refuse some of ``ops`` too (`write_steps` counts those)."""

    ops: list[Op]
    calls: list[PolicyCall] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)


@runtime_checkable
class Writer(Protocol):
    """An LLM policy: ``steps`` yields its model requests (`base.Steps`)."""

    role: str

    def steps(self, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Steps[Written]: ...


def render_tiered(memories: Sequence[ScoredMemory]) -> str:
    """``[i] (tier) text`` per memory: the writer must know which one is the core summary."""
    return "\n".join(f"[{i}] ({m.record.tier}) {m.record.text[:MAX_WRITER_TEXT_CHARS]}" for i, m in enumerate(memories)) or "(none)"


def writer_ops(reply: WriterCalls, memories: Sequence[ScoredMemory], *, chunk: str, source_turn_ids: Sequence[str] = (), guard: OpGuard = OpGuard()) -> tuple[list[Op], list[str]]:
    """The reply's calls as ops, and a note per call dropped (see the module docstring).

    Written text must be grounded in the chunk (an update: in the chunk or the memory it
    rewrites), `OpGuard.min_grounding` of its content words: a small model copies its
    prompt's example over unrelated memories. A core rewrite is exempt from the
    ``max_text_chars`` bound of a fact; the bank bounds it (``max_core_chars``)."""
    ops: list[Op] = []
    rejected: list[str] = []
    touched: set[int] = set()
    turns = tuple(source_turn_ids)
    deletes = sum(c.fn == "memory_delete" for c in reply.calls)
    storm = deletes > guard.max_deletes or (len(memories) > 1 and deletes >= len(memories))
    for i, call in enumerate(reply.calls):
        where = f"calls[{i}] {call.fn}"
        if call.fn == "memory_insert":
            tier = Tier(call.tier or Tier.SEMANTIC)
            text = valid_text(call.text, MAX_WRITER_TEXT_CHARS if tier is Tier.CORE else guard.max_text_chars)
            if text is None:
                rejected.append(f"{where}: no usable text")
            elif not grounded(text, [chunk], guard.min_grounding):
                rejected.append(f"{where}: text not grounded in the chunk: {text[:60]!r}")
            else:
                ops.append(Op.add(text, tier=tier, source_turn_ids=turns))
            continue
        if (problem := alias_problem(call.id, len(memories), touched, "call")) is not None:
            rejected.append(f"{where}: {problem}")
            continue
        assert call.id is not None  # alias_problem rejects a missing alias
        target = memories[call.id].record
        if call.fn == "memory_delete":
            if storm:
                rejected.append(f"{where}: delete storm ({deletes} deletes of {len(memories)} memories), not applied")
                continue
            ops.append(Op.delete(target.id, expected_version=target.version))
        else:
            text = valid_text(call.text, MAX_WRITER_TEXT_CHARS if target.tier is Tier.CORE else guard.max_text_chars)
            if text is None:
                rejected.append(f"{where}: no usable text for [{call.id}]")
                continue
            if not grounded(text, [chunk, target.text], guard.min_grounding):
                rejected.append(f"{where}: text for [{call.id}] not grounded in the chunk or the memory: {text[:60]!r}")
                continue
            ops.append(Op.update(target.id, text, source_turn_ids=turns, expected_version=target.version))
        touched.add(call.id)
    return ops, rejected


class LLMWriter:
    """Asks the model for Mem-alpha's function calls on one chunk (several per reply)."""

    role = "writer"
    prompt_role = "writer"
    max_tokens = 256

    def __init__(self, backend: LLMBackend | AsyncLLMBackend, config: PolicyConfig = PolicyConfig(), *, guard: OpGuard = OpGuard(), stats: PolicyStats | None = None) -> None:
        self.backend, self.guard = backend, guard
        self.caller = LLMCaller(load_prompt(self.prompt_role, config.prompt_version), WriterCalls, config, default_max_tokens=self.max_tokens, stats=stats)

    @property
    def stats(self) -> PolicyStats:
        return self.caller.stats

    @staticmethod
    def chunk_text(chunk: Sequence[Turn]) -> str:
        budget = MAX_TURN_CHARS * 2 // max(1, len(chunk))
        return "\n".join(render_turn(t, budget) for t in chunk)

    @classmethod
    def prompt_values(cls, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> dict[str, str]:
        when = chunk[0].timestamp if chunk else None
        return {"memories": render_tiered(memories), "chunk": cls.chunk_text(chunk), "timestamp": render_timestamp(when) if when else "unknown"}

    def _written(self, value: WriterCalls | None, notes: Sequence[str], error: str | None, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Written:
        """A parsed reply (`parsing.parse`: value, notes, error) as ops and a note per refused call."""
        if value is None:
            return Written([], [], [f"unparseable output: {error}"])
        dropped = [f"calls: {n}" for n in notes if n.startswith("calls[") and ": dropped (" in n]
        dropped += ["calls: over the limit, dropped"] * (dropped_calls(list(notes)) - len(dropped))
        turns = [t.turn_id for t in chunk if t.turn_id]
        ops, rejected = writer_ops(value, memories, chunk=self.chunk_text(chunk), source_turn_ids=turns, guard=self.guard)
        return Written(ops, [], dropped + rejected)

    def _finish(self, value: WriterCalls | None, call: PolicyCall, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Written:
        written = self._written(value, call.salvaged, call.failure, chunk, memories)
        written.calls.append(call)
        if written.rejected:
            self.stats.add("rejected_calls", len(written.rejected))
            call.failure = "; ".join(written.rejected)
        return written

    def request(self, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Request:
        return self.caller.request(self.backend, self.prompt_values(chunk, memories))

    def read(self, request: Request, text: str, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Written:
        """A sampled reply to `request` (its whole text) as serving would apply it: the one
        reading of a reply that serving and the Mem-alpha recipe share."""
        return self._finish(*self.caller.read(self.backend, request, text), chunk, memories)

    def steps(self, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Steps[Written]:
        value, call = yield from self.caller.steps(self.backend, self.prompt_values(chunk, memories))
        return self._finish(value, call, chunk, memories)

    def write(self, chunk: Sequence[Turn], memories: Sequence[ScoredMemory]) -> Written:
        """`steps` run with blocking calls (a script, a test); the clients drive `steps`."""
        return run(self.steps(chunk, memories))
