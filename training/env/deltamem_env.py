"""DeltaMem's environment: a triple's turns ingested by the runtime's own DeltaMem steps over a
fork of the bank before, every model call sampled from the policy being trained, and the
resulting state scored against the target.

    S_t      = the triple's bank before, forked (`BankSnapshot.fork`)
    rollout  for each turn: the runtime's `ingest_steps` (episodic turn, rules, the triple's
             facts, related memories -> DeltaMem manager -> `MemoryBank.apply`); the manager
             may yield `Lookup`s (searches of the bank) before its ops. Only each `Chat` is
             answered differently: sampled from the policy at the trainer's settings
    S_pred   the fork's live semantic memories afterwards; S_target the triple's bank after's
    R        = 0.1 R_format + 0.1 R_retrieval + 0.8 R_state        (`rewards.deltamem`)

- R_format: the share of the rollout's decisions whose trace is well formed: every reply
  parses as a DeltaMem step (a search or ops), the trace ends with ops within the lookup
  budget, and the manager's reader and guard keep every op (no unknown alias, no ungrounded
  text, no delete storm).
- R_retrieval (`retrieval_score`): of the memories the final replies UPDATE or DELETE (an
  alias never shown counts as one it did not retrieve) and those of the bank before that the
  target changes (not by the forget / correction rules, which no manager decides), the share
  the trace retrieved: the pipeline's related memories and its own lookups' finds.
- R_state: `soft_state_f1` of S_pred against S_target, Phi = cosine of the embedder's vectors;
  texts written by an UPDATE of a memory the target left unchanged are unintended (unmatched).

Every model call of the rollout (each lookup turn and each final reply, over all turns) is
one `SampledCall`: the recipe makes each a row of the update with the rollout's advantage.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memsdk.bank import BankLimits, MemoryBank
from memsdk.effects import Runner
from memsdk.pipeline.decisions import ActivePolicies
from memsdk.pipeline.ingest import FORGET_ACTOR, ingest_steps
from memsdk.embedding import Embedder
from memsdk.llm.base import Completion, LLMBackend, SamplingParams
from memsdk.policies import DeltaMemManager, ExtractiveAnswerer, PolicyConfig
from memsdk.effects import Chat
from memsdk.policies.calling.caller import PolicyCall
from memsdk.policies.extractor import Extraction
from memsdk.policies.manager import Decision
from memsdk.policies.deltamem import DeltaStep
from memsdk.types import MemoryRecord, ScoredMemory, Tier, Turn

from ..rewards.deltamem import DeltaMemConfig, Similarity, StateF1, deltamem_reward, retrieval_score, soft_state_f1
from .deltamem_targets import TargetTriple

__all__ = ["GivenFacts", "Trace", "TracedDeltaMem", "SampledCall", "DeltaRollout", "DeltaMemEnv", "TargetChanges", "cosine_similarity", "trace_well_formed", "wanted_memories", "target_changes", "semantic_texts", "TERMS", "VERSION"]

#: the manager's version inside training rollouts (history says who wrote what)
VERSION = "training"
#: the reward's terms, as the metrics log names them
TERMS = ("format", "retrieval", "state_f1")


class GivenFacts:
    """The rollout's extractor: the facts the target's run took from the turn (no model)."""

    role = "extractor"
    version = "given"

    def __init__(self, facts: Sequence[str]) -> None:
        self.facts = list(facts)

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        return Extraction(list(self.facts))


@dataclass
class Trace:
    """One DeltaMem decision: what it was shown in the end (related + looked up, alias = position),
    its last reply as parsed, and the decision (its calls, ops and rejections)."""

    shown: tuple[ScoredMemory, ...]
    value: DeltaStep | None
    decision: Decision


class TracedDeltaMem(DeltaMemManager):
    """The runtime's DeltaMem manager, unchanged, that also keeps each decision's `Trace`."""

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.traces: list[Trace] = []

    def _conclude(self, value: DeltaStep | None, call: PolicyCall, facts: Sequence[str], related: Sequence[ScoredMemory], turns: Sequence[str]) -> Decision:
        decision = super()._conclude(value, call, facts, related, turns)
        self.traces.append(Trace(tuple(related), value, decision))  # `steps` then sets decision.calls to the whole trace
        return decision


@dataclass(frozen=True)
class SampledCall:
    """One model call of a rollout: what the trainer scores."""

    prompt: str  # rendered: exactly what generation started from
    token_ids: tuple[int, ...]
    text: str  # the whole reply (response prefix included)
    parse_failed: bool


@dataclass(frozen=True)
class DeltaRollout:
    triple: TargetTriple
    calls: tuple[SampledCall, ...]
    traces: tuple[Trace, ...]
    predicted: tuple[str, ...]  # S_pred: live semantic texts
    format: float
    retrieval: float
    state: StateF1
    reward: float
    failures: tuple[str, ...] = field(default=())

    @property
    def lookups(self) -> int:
        return sum(len(t.decision.calls) - 1 for t in self.traces)

    @property
    def terms(self) -> dict[str, float]:
        return {"format": self.format, "retrieval": self.retrieval, "state_f1": self.state.f1}


def semantic_texts(records: Sequence[MemoryRecord]) -> list[str]:
    return [r.text for r in records if r.tier == Tier.SEMANTIC and not r.deleted]


def cosine_similarity(embedder: Embedder) -> Similarity:
    """Phi_ij = cosine of the embedder's vectors (DeltaMem's choice)."""

    def phi(pred: Sequence[str], target: Sequence[str]) -> np.ndarray:
        a, b = np.asarray(embedder.embed(list(pred)), dtype=float), np.asarray(embedder.embed(list(target)), dtype=float)
        a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
        b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
        result: np.ndarray = a @ b.T
        return result

    return phi


def trace_well_formed(trace: Trace) -> bool:
    """Every reply parsed, the trace ended in ops (not a search past the budget), and the
    reader and guard kept every op."""
    return all(c.parsed is not None for c in trace.decision.calls) and trace.value is not None and trace.value.ops is not None and not trace.decision.rejected


@dataclass(frozen=True)
class TargetChanges:
    """What the target did to the semantic memories of the bank before."""

    updated: frozenset[Any]  # ids it rewrote (still live, other text)
    changed: frozenset[Any]  # ids it rewrote or deleted, not by the forget / correction rules


def target_changes(triple: TargetTriple) -> TargetChanges:
    before = {r.id: r for r in triple.before.records() if r.tier == Tier.SEMANTIC}
    after = {r.id: r for r in triple.after.records(include_deleted=True)}
    seen = {e.id for e in triple.before.history()}
    by_rules = {e.memory_id for e in triple.after.history() if e.id not in seen and e.actor.role == FORGET_ACTOR.role}
    updated = {i for i, r in before.items() if i in after and not after[i].deleted and after[i].text != r.text}
    gone = {i for i in before if i not in after or after[i].deleted}
    return TargetChanges(frozenset(updated), frozenset((updated | gone) - by_rules))


def wanted_memories(traces: Sequence[Trace], changes: TargetChanges) -> tuple[set[Hashable], set[Hashable]]:
    """(wanted, retrieved) for `retrieval_score`: the memories the final replies UPDATE or
    DELETE (by alias; an alias never shown is its own unretrieved item) and those the target
    changes; every memory any decision was shown."""
    wanted: set[Hashable] = set(changes.changed)
    retrieved: set[Hashable] = set()
    for k, trace in enumerate(traces):
        retrieved |= {m.record.id for m in trace.shown}
        for op in (trace.value.ops or []) if trace.value is not None else []:
            if op.op in ("UPDATE", "DELETE"):
                shown = op.id is not None and 0 <= op.id < len(trace.shown)
                wanted.add(trace.shown[op.id].record.id if shown and op.id is not None else ("unshown", k, op.id))
    return wanted, retrieved


class DeltaMemEnv:
    """Rolls triples out with the runtime's DeltaMem manager on ``backend`` and scores them.

    ``render`` turns a request's messages into the exact prompt text the policy scores
    (`LoRAModel.render`); ``similarity`` is Phi (default: the embedder's cosine).
    """

    def __init__(
        self,
        backend: LLMBackend,
        render: Callable[[list[dict[str, str]]], str],
        embedder: Embedder,
        *,
        model: str | None = None,
        related_k: int = 5,
        max_lookups: int = 2,
        lookup_k: int = 5,
        config: DeltaMemConfig = DeltaMemConfig(),
        similarity: Similarity | None = None,
        limits: BankLimits = BankLimits(),
    ) -> None:
        self.backend, self.render, self.embedder = backend, render, embedder
        self.model, self.related_k, self.max_lookups, self.lookup_k = model, related_k, max_lookups, lookup_k
        self.config, self.limits = config, limits
        self.similarity = similarity or cosine_similarity(embedder)

    def manager(self) -> TracedDeltaMem:
        # unconstrained (log-probs are those of free sampling) and never re-asked (a rollout is
        # judged on what the policy wrote), as every recipe builds its runtime policy
        config = PolicyConfig(model=self.model, constrained=False, reask=False)
        return TracedDeltaMem(self.backend, config, max_lookups=self.max_lookups, lookup_k=self.lookup_k)

    @property
    def prompt_id(self) -> str:
        return self.manager().caller.prompt.id

    def roll_out(self, triple: TargetTriple, params: SamplingParams) -> DeltaRollout:
        """One rollout: every turn of the triple ingested on a fork of its bank before.
        ``params`` (n = 1) are every call's sampling; its seed is advanced per call."""
        manager = self.manager()
        bank = MemoryBank.from_snapshot(triple.before, self.embedder, limits=self.limits)
        sampled: list[dict[str, Any]] = []

        def sample(effect: Chat) -> Completion:
            request = effect.request
            options = params.model_copy(update={"n": 1, "seed": None if params.seed is None else params.seed + len(sampled), "stop": request.params.stop})
            completion: Completion = effect.backend.chat(request.messages, params=options, model=request.model)
            choice = completion.choices[0]
            sampled.append({"prompt": self.render(request.messages), "token_ids": tuple(choice.token_ids or ()), "text": manager.caller.reply_text(request, choice)})
            return completion

        calls: list[PolicyCall] = []
        failures: list[str] = []
        applied_updates: list[tuple[Any, str]] = []
        for turn, facts in zip(triple.turns, triple.facts):
            policies = ActivePolicies(GivenFacts(facts), manager, ExtractiveAnswerer(), versions={"manager": VERSION})
            outcome = Runner(bank, chat=sample).run(ingest_steps(turn, (), triple.scope, policies, self.related_k))
            calls += [c for c in outcome.calls if c.role == manager.caller.prompt.role]
            failures += outcome.failures
            applied_updates += [(op.memory_id, op.after) for op in outcome.ops if op.op == "UPDATE" and op.after is not None]
        if len(calls) != len(sampled):  # one Chat per call: the manager never re-asks here
            raise RuntimeError(f"{len(sampled)} sampled replies for {len(calls)} manager calls")
        samples = tuple(SampledCall(s["prompt"], s["token_ids"], s["text"], c.parsed is None) for s, c in zip(sampled, calls))
        return self.score(triple, tuple(manager.traces), samples, semantic_texts(bank.list(triple.scope, tier=Tier.SEMANTIC)), applied_updates, tuple(failures))

    def score(
        self, triple: TargetTriple, traces: tuple[Trace, ...], calls: tuple[SampledCall, ...], predicted: Sequence[str],
        applied_updates: Sequence[tuple[Any, str]] = (), failures: tuple[str, ...] = (),
    ) -> DeltaRollout:  # fmt: skip
        """The reward of a finished rollout: its traces, its S_pred, the UPDATEs it applied."""
        changes = target_changes(triple)
        existed = {r.id for r in triple.before.records() if r.tier == Tier.SEMANTIC}
        # an UPDATE of a memory the target left as it was: its text may not be matched
        unintended = {text for mid, text in applied_updates if mid in existed and mid not in changes.updated}
        form = sum(trace_well_formed(t) for t in traces) / len(traces) if traces else 1.0
        wanted, retrieved = wanted_memories(traces, changes)
        state = soft_state_f1(predicted, semantic_texts(triple.after.records()), self.similarity, unintended_update=unintended, config=self.config)
        retrieval = retrieval_score(wanted, retrieved)
        reward = deltamem_reward(form, retrieval, state.f1, self.config)
        return DeltaRollout(triple, calls, traces, tuple(predicted), form, retrieval, state, reward, failures)

