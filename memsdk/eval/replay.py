"""Fixed evaluation states replayed through a policy version: what the release gate compares.

An answerer state is (question, the memories shown, the gold answer). Its memories are
frozen when the states are built, so two versions are shown exactly the same thing and the
reward difference is the policy's alone. Sources:

- ``locomo-val``: LoCoMo's validation conversation (conv-30) ingested turn by turn through a
  heuristic `MemoryClient` (tiers and hybrid retrieval on, one scope per speaker, as
  ``memsdk eval locomo`` builds it), then for each scored question what the answer path
  shows (`MemoryClient.retrieve`, ``k`` memories): the answerer's trainer builds its states
  the same way, so a policy is trained and gated on what it is shown when it serves;
- ``log``: the app's own judged answers (`log_answer_cases`): each answer that got a gold
  (or a "correct" verdict) through ``client.feedback``, with the memories it was shown as they
  stood when it was asked, rebuilt from the bank's history;
- a JSONL file, one state per line: ``{"question": ..., "memories": ["...", ...], "gold": ...}``.

`replay_answerer` runs a version over the states: the reward is token F1 against the gold
(LoCoMo's scoring), and the guard metric is the share of replies the reader lost.

A manager state (`ManagerCase`, Memory-R1's q_mem = (x, M_old)) comes from the log only
(`log_manager_cases`): a logged ingest whose memories a judged answer later cited, with the
scope as it stood just before that ingest (`MemoryBank.as_of`), the facts the extractor took
from the turn, and those judged questions. `replay_manager` forks the scope, runs the
runtime's own ingest loop on the fork with the logged facts (the turn into the episodic tier,
then related memories -> the version's manager -> apply), and answers the questions from the
fork with the frozen answerer: the reward is their mean F1, and the guards are the share of
unparseable replies and of facts whose ops were refused. Both versions start from the same
fork and are judged by the same answerer, so the difference is the manager's alone.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import uuid
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memsdk.bank import MemoryBank
from memsdk.bank.history import events_until, replay
from memsdk.datasets.locomo import load_locomo
from memsdk.embedding.base import Embedder
from memsdk.errors import InvalidInput
from memsdk.eval.scoring import bleu1, evidence_ids, exact_match, token_f1
from memsdk.interactions import InteractionLog, Trajectory
from memsdk.policies import Answer, Answerer
from memsdk.bank.snapshot import BankSnapshot
from memsdk.client.pipeline import ActivePolicies, IngestOutcome, adrive, answer_steps, decided, drive, ingest_steps
from memsdk.policies import Extraction, Manager
from memsdk.policies.base import arun, run
from memsdk.registry.gate import SideResult
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Turn, content_hash, utcnow

__all__ = [
    "AnswerCase", "answer_cases", "locomo_answer_cases", "log_answer_cases", "judged_gold", "load_answer_cases", "replay_answerer", "areplay_answerer",
    "ManagerCase", "log_manager_cases", "replay_manager", "areplay_manager",
]  # fmt: skip


C = TypeVar("C")


@dataclass(frozen=True)
class AnswerCase:
    key: str
    question: str
    memories: tuple[ScoredMemory, ...]
    gold: str
    #: the turn ids the gold rests on (LoCoMo's evidence), when known: a teacher cites them
    evidence: frozenset[str] = frozenset()


def answer_cases(key: str, turns: Sequence[Turn], questions: Sequence[Any], embedder: Embedder, *, k: int, manager: str = "heuristic") -> list[AnswerCase]:
    """The turns ingested in order through a client without an LLM (the heuristic extractor,
    ``manager``: "heuristic" or a trained policy without an LLM such as "pairs", whose
    supersessions the answerer then sees marked; tiers and hybrid retrieval on; one scope per
    speaker, sharing ``key`` as their run), then each question (``.question``, ``.answer``,
    optionally ``.evidence``) with the ``k`` memories the answer path shows for it. The
    answerer's trainer and the gate's ``locomo-val`` build their states with it: a policy
    learns on, and is judged on, what it will be shown."""
    from memsdk.client import MemoryClient  # the client imports this module for its gate

    scopes = {t.speaker: Scope(user_id=t.speaker, run_id=key) for t in turns}
    cases = []
    roles = {"extractor": "heuristic", "manager": manager, "answerer": "heuristic"}
    with tempfile.TemporaryDirectory(prefix="memsdk-cases-") as tmp, MemoryClient(
        data_dir=tmp, embedder=embedder, policies=roles, answer_k=k, log_interactions=False
    ) as client:  # fmt: skip
        for turn in turns:
            client.ingest(turn, scope=scopes[turn.speaker])
        for i, qa in enumerate(questions):
            shown = tuple(client.retrieve(qa.question, scope=list(scopes.values())))
            cases.append(AnswerCase(f"{key}/q{i}", qa.question, shown, str(qa.answer), evidence_ids(getattr(qa, "evidence", ()))))
    return cases


def locomo_answer_cases(embedder: Embedder, *, split: str = "val", k: int = 60, manager: str = "heuristic") -> list[AnswerCase]:
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


class _Logged:
    """An extractor that states what the logged extractor stated: both versions of a manager
    decide the same facts."""

    role, version = "extractor", "logged"

    def __init__(self, facts: Sequence[str]) -> None:
        self.facts = list(facts)

    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        return Extraction(list(self.facts))


def _manager_run(case: ManagerCase, manager: Manager, answerer: Answerer, version: str, related_k: int, answer_k: int) -> tuple[Any, list[Any]]:
    """What one replay of ``case`` runs: the ingest loop, then one answer loop per question
    (generators: each starts when driven, so the answers read the bank the ingest left)."""
    active = ActivePolicies(extractor=_Logged(case.facts), manager=manager, answerer=answerer, versions={"extractor": "logged", "manager": version, "answerer": "frozen"})
    ingest = ingest_steps(case.turn, case.context, case.scope, active, related_k)
    return ingest, [answer_steps(q, [case.scope], active, answer_k) for q, _ in case.qa]


def _manager_side(version: str, cases: Sequence[ManagerCase], runs: Sequence[tuple[IngestOutcome, list[Answer]]], latencies: Sequence[float]) -> SideResult:
    n = max(1, len(cases))
    calls = [c for outcome, _ in runs for c in outcome.calls]
    facts = max(1, sum(len(c.facts) for c in cases))
    return SideResult(
        version=version,
        rewards=[float(np.mean([token_f1(a.text, gold) for a, (_, gold) in zip(answers, c.qa)])) for (_, answers), c in zip(runs, cases)],
        guards={
            "parse_failure_rate": sum(c.parsed is None for c in calls) / max(1, len(calls)),
            "rejected_op_rate": sum(len(outcome.failures) for outcome, _ in runs) / facts,
        },
        latency_p50_s=float(np.percentile(latencies, 50)) if latencies else 0.0,
        latency_p95_s=float(np.percentile(latencies, 95)) if latencies else 0.0,
        prompt_tokens=sum(c.prompt_tokens for c in calls) / n,
        completion_tokens=sum(c.completion_tokens for c in calls) / n,
    )


def replay_manager(manager: Manager, version: str, cases: Sequence[ManagerCase], *, answerer: Answerer, embedder: Embedder, related_k: int = 5, answer_k: int = 60) -> SideResult:
    """Mean answer F1 per state after the version's manager folded the state's facts into a
    fork of its bank, with its unparseable replies and refused facts as guards."""
    runs, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        fork = case.before.fork(embedder)
        ingest, questions = _manager_run(case, manager, answerer, version, related_k, answer_k)
        outcome = drive(ingest, fork)
        latencies.append(time.perf_counter() - started)  # the manager's work, not the frozen answerer's
        runs.append((outcome, [drive(q, fork).answer for q in questions]))
    return _manager_side(version, cases, runs, latencies)


async def areplay_manager(manager: Manager, version: str, cases: Sequence[ManagerCase], *, answerer: Answerer, embedder: Embedder, related_k: int = 5, answer_k: int = 60) -> SideResult:
    runs, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        fork = case.before.fork(embedder)
        ingest, questions = _manager_run(case, manager, answerer, version, related_k, answer_k)
        outcome = await adrive(ingest, fork)
        latencies.append(time.perf_counter() - started)
        runs.append((outcome, [(await adrive(q, fork)).answer for q in questions]))
    return _manager_side(version, cases, runs, latencies)


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


def _side(version: str, cases: Sequence[AnswerCase], answers: Sequence[Answer], latencies: Sequence[float]) -> SideResult:
    n = max(1, len(cases))
    calls = [a.calls for a in answers]
    pairs = list(zip(answers, cases))
    return SideResult(
        version=version,
        rewards=[token_f1(a.text, c.gold) for a, c in pairs],
        guards={"parse_failure_rate": sum(any(c.parsed is None for c in cs) for cs in calls) / n},
        metrics={"em": sum(exact_match(a.text, c.gold) for a, c in pairs) / n, "bleu1": sum(bleu1(a.text, c.gold) for a, c in pairs) / n},
        latency_p50_s=float(np.percentile(latencies, 50)) if latencies else 0.0,
        latency_p95_s=float(np.percentile(latencies, 95)) if latencies else 0.0,
        prompt_tokens=sum(c.prompt_tokens for cs in calls for c in cs) / n,
        completion_tokens=sum(c.completion_tokens for cs in calls for c in cs) / n,
    )


def _bar(cases: Sequence[C], version: str) -> Iterable[C]:
    """A progress bar on a terminal (a gate over LoCoMo validation with a CPU model takes
    many minutes); nothing when output is not a terminal."""
    return tqdm(cases, desc=f"gate {version}", unit="state", disable=None, leave=False)


def replay_answerer(answerer: Answerer, version: str, cases: Sequence[AnswerCase]) -> SideResult:
    """F1 per state, with what the version cost and how often its reply was lost."""
    answers, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        answers.append(run(decided(answerer, "answer", case.question, case.memories)))
        latencies.append(time.perf_counter() - started)
    return _side(version, cases, answers, latencies)


async def areplay_answerer(answerer: Answerer, version: str, cases: Sequence[AnswerCase]) -> SideResult:
    answers, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        answers.append(await arun(decided(answerer, "answer", case.question, case.memories)))
        latencies.append(time.perf_counter() - started)
    return _side(version, cases, answers, latencies)
