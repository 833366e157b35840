"""The fixed evaluation states the release gate replays, and where they come from.

An answerer state is (question, the memories shown, the gold answer). Its memories are
frozen when the states are built, so two versions are shown exactly the same thing and the
reward difference is the policy's alone. Sources:

- ``locomo-val``: LoCoMo's validation conversation (conv-30) ingested turn by turn with no
  LLM (the heuristic extractor, tiers and hybrid retrieval on, one scope per speaker, as
  ``memsdk eval locomo`` builds it), then for each scored question what the answer path
  shows (`memsdk.pipeline.retrieve_steps`, ``k`` memories), all through the effect runner a
  client runs: the answerer's trainer builds its states the same way, so a policy is
  trained and gated on what it is shown when it serves;
- ``log``: the app's own judged answers (`log_answer_cases`): each answer that got a gold
  (or a "correct" verdict) through ``client.feedback``, with the memories it was shown as they
  stood when it was asked, rebuilt from the bank's history;
- a JSONL file, one state per line: ``{"question": ..., "memories": ["...", ...], "gold": ...}``.

A manager state (`ManagerCase`, Memory-R1's q_mem = (x, M_old)) comes from the log only
(`log_manager_cases`): a logged ingest whose memories a judged answer later cited, with the
scope as it stood just before that ingest (`MemoryBank.as_of`), the facts the extractor took
from the turn, and those judged questions.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tempfile

from memsdk.bank import MemoryBank
from memsdk.bank.history import events_until, replay
from memsdk.bank.snapshot import BankSnapshot
from memsdk.config import ClientConfig
from memsdk.datasets.locomo import load_locomo
from memsdk.effects import Runner
from memsdk.embedding.base import CachedEmbedder, Embedder
from memsdk.errors import InvalidInput
from memsdk.interactions import InteractionLog, Trajectory
from memsdk.pipeline import ActivePolicies, ingest_steps, retrieve_steps
from memsdk.pipeline.context import RecentTurns
from memsdk.policies import ExtractiveAnswerer, HeuristicExtractor, HeuristicManager, Manager
from memsdk.scoring import evidence_ids
from memsdk.store import open_transport
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Turn, content_hash, utcnow

__all__ = [
    "AnswerCase", "ManagerCase", "answer_cases", "locomo_answer_cases", "log_answer_cases", "log_manager_cases", "judged_gold", "load_answer_cases",
]  # fmt: skip


@dataclass(frozen=True)
class AnswerCase:
    key: str
    question: str
    memories: tuple[ScoredMemory, ...]
    gold: str
    #: the turn ids the gold rests on (LoCoMo's evidence), when known: a teacher cites them
    evidence: frozenset[str] = frozenset()


def answer_cases(key: str, turns: Sequence[Turn], questions: Sequence[Any], embedder: Embedder, *, k: int, manager: Manager | None = None) -> list[AnswerCase]:
    """The turns ingested in order with no LLM (the heuristic extractor; ``manager``: the
    heuristic one, or a trained policy without an LLM such as the pair manager, whose
    supersessions the answerer then sees marked; tiers and hybrid retrieval on; one scope per
    speaker, sharing ``key`` as their run), then each question (``.question``, ``.answer``,
    optionally ``.evidence``) with the ``k`` memories the answer path shows for it. The
    answerer's trainer and the gate's ``locomo-val`` build their states with it: a policy
    learns on, and is judged on, what it will be shown.

    A client's defaults and its embedded store, driven by the same effect runner a client
    runs, in a folder that is removed afterwards: a client's ingest and retrieve, without a
    client (the gate sits below the clients)."""
    manager = manager or HeuristicManager()
    defaults = ClientConfig()
    active = ActivePolicies(
        extractor=HeuristicExtractor(), manager=manager, answerer=ExtractiveAnswerer(),
        versions={"extractor": "heuristic", "manager": getattr(manager, "version", "heuristic"), "answerer": "heuristic"},
    )  # fmt: skip
    scopes = {t.speaker: Scope(user_id=t.speaker, run_id=key) for t in turns}
    recent = RecentTurns(defaults.context_turns)  # as a client keeps them for the extractor
    cases = []
    with tempfile.TemporaryDirectory(prefix="memsdk-cases-") as tmp:
        cached = CachedEmbedder(embedder)
        bank = MemoryBank(open_transport(Path(tmp) / "store", dim=cached.dim), cached)
        try:
            runner = Runner(bank, applied=recent.forget_deleted)
            for turn in turns:
                runner.run(ingest_steps(turn, recent.of(scopes[turn.speaker])[0], scopes[turn.speaker], active, defaults.related_k, episodic=defaults.tiers))
                recent.add(scopes[turn.speaker], turn)
            for i, qa in enumerate(questions):
                shown = tuple(runner.run(retrieve_steps(qa.question, list(scopes.values()), k, tiers=defaults.tiers, hybrid=defaults.hybrid)))
                cases.append(AnswerCase(f"{key}/q{i}", qa.question, shown, str(qa.answer), evidence_ids(getattr(qa, "evidence", ()))))
        finally:
            bank.close()
    return cases


def locomo_answer_cases(embedder: Embedder, *, split: str = "val", k: int = 60, manager: Manager | None = None) -> list[AnswerCase]:
    """The split's questions over its conversations' day-stamped turns (as the trainer sees them)."""
    return [c for conv in load_locomo() if conv.split == split for c in answer_cases(conv.sample_id, conv.day_stamped_turns(), conv.questions(), embedder, k=k, manager=manager)]


def judged_gold(answer: Trajectory) -> str | None:
    """The gold an app gave an answer through ``client.feedback``: its last gold, else the
    answer itself when it was called correct; None when it was only called wrong (nothing to
    score against). The gate's log states and the manager's log states both read it here."""
    golds = [f.gold for f in answer.feedback if f.gold]
    if golds:
        return golds[-1]
    if any(f.correct for f in answer.feedback):
        return str(answer.output.get("answer") or "") or None
    return None


def log_answer_cases(log: InteractionLog, bank: MemoryBank, *, scope: Scope | None = None) -> list[AnswerCase]:
    """The answers an app judged with ``client.feedback``, as states: the question, the
    memories it was shown in the order shown, each as it stood when the question was asked
    (the bank's history replayed up to that moment, so a later edit or forget does not change
    a state), and the gold. An answer whose memories are all gone from the bank (erased) is
    skipped. Keys are ``log/<answer id>``, stable across calls."""
    cases, events = [], {}
    for answer in log.read(scope=scope, kind="answer"):
        gold = judged_gold(answer)
        if gold is None:
            continue
        records = {}
        for raw in answer.input.get("scopes") or [answer.scope.model_dump(mode="json")]:
            s = Scope.model_validate(raw)
            if s not in events:
                events[s] = (bank.history(s), {r.id: r for r in bank.list(s, include_deleted=True)})
            history, current = events[s]
            records.update({r.id: r for r in replay(events_until(history, answer.created_at), current) if not r.deleted})
        shown = [records[i] for i in map(uuid.UUID, answer.input.get("shown", [])) if i in records]
        if shown:
            cases.append(AnswerCase(f"log/{answer.id}", str(answer.input["question"]), tuple(ScoredMemory(record=r, score=1.0) for r in shown), gold))
    return cases


@dataclass(frozen=True)
class ManagerCase:
    """One logged ingest as a manager state: ``before`` is the scope just before it."""


    key: str
    before: BankSnapshot
    turn: Turn
    context: tuple[Turn, ...]
    facts: tuple[str, ...]
    #: (question, gold) of the judged answers that cited a memory this ingest wrote
    qa: tuple[tuple[str, str], ...]


    @property
    def scope(self) -> Scope:
        return self.before.scope


def log_manager_cases(log: InteractionLog, bank: MemoryBank, *, scope: Scope | None = None) -> list[ManagerCase]:
    """One state per logged ingest with facts whose written memories (its episodic turn
    included: answers cite the turn itself too) a later judged answer of the same scope cited
    as evidence. Keys are ``log/<ingest id>``, stable across calls."""
    trajectories = list(log.read(scope=scope))
    answers = [t for t in trajectories if t.kind == "answer" and t.feedback]
    cases = []
    for t in trajectories:
        if t.kind != "ingest" or not t.output.get("facts") or t.started_at is None:
            continue
        written = {str(op.memory_id) for op in t.ops if op.memory_id is not None and op.changed}
        written |= {t.output["episodic_id"]} if t.output.get("episodic_id") else set()
        qa = tuple(
            (str(a.input["question"]), gold)
            for a in answers
            if a.scope == t.scope and a.created_at > t.created_at and written & set(a.output.get("evidence", [])) and (gold := judged_gold(a))
        )
        if qa:
            before = bank.as_of(t.scope, t.started_at, inclusive=False)  # what the manager saw, not what it then wrote
            context = tuple(Turn.model_validate(c) for c in t.input.get("context", []))
            cases.append(ManagerCase(f"log/{t.id}", before, Turn.model_validate(t.input["turn"]), context, tuple(t.output["facts"]), qa))
    return cases


def _memory(text: str, scope: Scope) -> ScoredMemory:
    now = utcnow()
    record = MemoryRecord(id=uuid.uuid4(), text=text, scope=scope, created_at=now, updated_at=now, version=1, content_hash=content_hash(text))
    return ScoredMemory(record=record, score=1.0)


def load_answer_cases(path: str | os.PathLike[str]) -> list[AnswerCase]:
    """A JSONL file of states; a bad line is an `InvalidInput` naming the line and the field."""
    scope = Scope(user_id="gate")
    cases = []
    for n, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidInput(f"{path}:{n}", f"not JSON ({exc.msg})") from None
        if not isinstance(raw, dict):
            raise InvalidInput(f"{path}:{n}", "expected an object with question, memories, gold")
        for name, kind in (("question", str), ("gold", str), ("memories", list)):
            if not isinstance(raw.get(name), kind):
                raise InvalidInput(f"{path}:{n}.{name}", f"expected a {kind.__name__}")
        if not all(isinstance(m, str) and m.strip() for m in raw["memories"]):
            raise InvalidInput(f"{path}:{n}.memories", "expected non-empty strings")
        cases.append(AnswerCase(f"{Path(path).name}:{n}", raw["question"], tuple(_memory(m, scope) for m in raw["memories"]), raw["gold"]))
    if not cases:
        raise InvalidInput(str(path), "holds no evaluation state")
    return cases
