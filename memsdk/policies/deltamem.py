"""DeltaMem's manager: it looks before it writes.

Before its ops, the model may ask for a search over the scope's semantic memories, a bounded
number of times (`DeltaMemManager.max_lookups`)::

    reply_0 = {"search": "dog"}          -> `Lookup` effect: the pipeline searches the scope
    found   = [3] "Has a dog named Buddy"   (numbered after what was shown; shown as a user turn)
    reply_1 = {"ops": [{"op": "UPDATE", "id": 3, "text": "Has two dogs, Buddy and Scout"}]}

Every call and every result is part of the trace (the last call's messages hold the whole
exchange, and each call is logged). The ops then go through the same reader, `to_ops` guard
and pipeline guard as Memory-R1's manager, over every memory the policy was shown, looked-up
ones included. It is served like the other managers: ``policies={"manager": "deltamem"}``
or an `LLMSpec` with ``prompt="deltamem/v1"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

from memsdk.effects import Lookup, Request, Steps
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.calling.caller import PolicyCall, PolicyConfig
from memsdk.policies.calling.schema import Notes, salvage_items
from memsdk.policies.manager import Decision, LLMManager, ManagerDecision, ManagerOpOut, MAX_OPS, MEMORY_CHARS
from memsdk.types import ScoredMemory

__all__ = ["DeltaMemManager", "DeltaStep"]


#: a DeltaMem search's query
MAX_SEARCH_CHARS = 200

class DeltaStep(BaseModel):
    """One DeltaMem reply: a search (more memories, please) or the final ops."""

    model_config = ConfigDict(extra="ignore")

    search: Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=MAX_SEARCH_CHARS)] | None = None
    ops: list[ManagerOpOut] | None = Field(None, max_length=MAX_OPS)

    @model_validator(mode="after")
    def _one_of(self) -> DeltaStep:
        if self.search is None and self.ops is None:
            raise ValueError('expected {"search": ...} or {"ops": [...]}')
        return self

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        if isinstance(data, dict) and "ops" not in data and isinstance(data.get("search"), str):
            return data, []
        return salvage_items(data, "ops", "op", ManagerOpOut, MAX_OPS)


class DeltaMemManager(LLMManager):
    """A ReAct-style manager: up to ``max_lookups`` searches of ``lookup_k`` memories, then ops."""

    prompt_role = "deltamem"
    schema = DeltaStep

    def __init__(self, backend: LLMBackend | AsyncLLMBackend, config: PolicyConfig = PolicyConfig(), *, max_lookups: int = 2, lookup_k: int = 5, **kw: Any) -> None:
        """``kw``: the manager's own (``guard``, ``fallback``, ``stats``)."""
        super().__init__(backend, config, **kw)
        self.max_lookups, self.lookup_k = max_lookups, lookup_k

    def _conclude(self, value: DeltaStep | None, call: PolicyCall, facts: Sequence[str], related: Sequence[ScoredMemory], turns: Sequence[str]) -> Decision:
        """The last reply as a decision: its ops through the manager's finish (reader, guard)."""
        if value is not None and value.ops is None:  # a search with no lookup left to run
            self.stats.add("lookups_exhausted")
            call.failure = f"a search ({value.search!r}) where ops were due: no lookup left"
            return Decision([], [call], [call.failure])
        return super()._finish(None if value is None else ManagerDecision(ops=value.ops or []), call, facts, related, turns)

    def read(self, request: Request, text: str, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Decision:
        """One sampled reply as serving would conclude it (a search there is a search with no
        lookup left: the trainers score single replies)."""
        return self._conclude(*self.caller.read(self.backend, request, text), facts, related, source_turn_ids)

    @staticmethod
    def found(query: str, new: Sequence[ScoredMemory], first: int) -> str:
        """The user turn that shows a search's results, numbered after the memories already shown."""
        lines = [f"[{first + i}] {m.record.text[:MEMORY_CHARS]}" for i, m in enumerate(new)] or ["(nothing new)"]
        return f"Found for <<<{query}>>>:\n" + "\n".join(lines) + '\nReply with {"search": ...} or {"ops": [...]}.'

    def steps(self, facts: Sequence[str], related: Sequence[ScoredMemory], *, source_turn_ids: Sequence[str] = ()) -> Steps[Decision]:
        if not related:
            return self._first_memories(facts, source_turn_ids)
        shown = list(related)
        request = self.request(facts, shown)
        calls: list[PolicyCall] = []
        for left in range(self.max_lookups, -1, -1):
            value, call = yield from self.caller.ask(self.backend, request)
            calls.append(call)
            if value is None or value.ops is not None or not left:
                break
            self.stats.add("lookups")
            hits: list[ScoredMemory] = yield Lookup(value.search or "", self.lookup_k)
            seen = {m.record.id for m in shown}
            new = [m for m in hits if m.record.id not in seen]
            request = self.caller.follow_up(request, call.raw_output, self.found(value.search or "", new, len(shown)))
            shown += new
        decision = self._conclude(value, call, facts, shown, source_turn_ids)
        decision.calls = calls
        return decision
