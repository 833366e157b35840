"""A policy version replayed over the gate's states: one reward per state, and what it cost.

`replay_answerer` runs a version over answerer states: the reward is token F1 against the
gold (LoCoMo's scoring), and the guard metric is the share of replies the reader lost.

`replay_manager` forks each manager state's scope, runs the runtime's own ingest loop on the
fork with the logged facts (the turn into the episodic tier, then related memories -> the
version's manager -> apply), and answers the questions from the fork with the frozen
answerer: the reward is their mean F1, and the guards are the share of unparseable replies
and of facts whose ops were refused. Both versions start from the same fork and are judged by
the same answerer, so the difference is the manager's alone. Every effect runs through
`memsdk.effects.Runner`, as in a client.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
from tqdm import tqdm

from memsdk.bank import MemoryBank
from memsdk.effects import Runner, arun, run
from memsdk.embedding.base import Embedder
from memsdk.gate.states import AnswerCase, ManagerCase
from memsdk.gate.stats import SideResult
from memsdk.pipeline import ActivePolicies, IngestOutcome, answer_steps, decide_with_fallback, ingest_steps
from memsdk.policies import Answer, Answerer, Extraction, Manager
from memsdk.scoring import bleu1, exact_match, token_f1
from memsdk.types import Turn

__all__ = ["ManagerReplay", "replay_answerer", "areplay_answerer", "replay_manager", "areplay_manager"]

C = TypeVar("C")


@dataclass(frozen=True)
class ManagerReplay:
    """What a manager replay holds frozen on both sides: the answerer serving now, the
    embedder the forks search with, and the client's sizes."""

    answerer: Answerer
    embedder: Embedder
    related_k: int = 5
    answer_k: int = 60

class _Logged:
    """An extractor that states what the logged extractor stated: both versions of a manager
    decide the same facts."""


    role, version = "extractor", "logged"


    def __init__(self, facts: Sequence[str]) -> None:
        self.facts = list(facts)


    def extract(self, turn: Turn, context: Sequence[Turn] = ()) -> Extraction:
        return Extraction(list(self.facts))


def _manager_run(case: ManagerCase, manager: Manager, version: str, frozen: ManagerReplay) -> tuple[Any, list[Any]]:
    """What one replay of ``case`` runs: the ingest loop, then one answer loop per question
    (generators: each starts when driven, so the answers read the bank the ingest left)."""
    active = ActivePolicies(extractor=_Logged(case.facts), manager=manager, answerer=frozen.answerer, versions={"extractor": "logged", "manager": version, "answerer": "frozen"})
    ingest = ingest_steps(case.turn, case.context, case.scope, active, frozen.related_k)
    return ingest, [answer_steps(q, [case.scope], active, frozen.answer_k) for q, _ in case.qa]


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


def replay_manager(manager: Manager, version: str, cases: Sequence[ManagerCase], frozen: ManagerReplay) -> SideResult:
    """Mean answer F1 per state after the version's manager folded the state's facts into a
    fork of its bank, with its unparseable replies and refused facts as guards."""
    runs, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        fork = Runner(MemoryBank.from_snapshot(case.before, frozen.embedder))
        ingest, questions = _manager_run(case, manager, version, frozen)
        outcome = fork.run(ingest)
        latencies.append(time.perf_counter() - started)  # the manager's work, not the frozen answerer's
        runs.append((outcome, [fork.run(q).answer for q in questions]))
    return _manager_side(version, cases, runs, latencies)


async def areplay_manager(manager: Manager, version: str, cases: Sequence[ManagerCase], frozen: ManagerReplay) -> SideResult:
    runs, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        fork = Runner(MemoryBank.from_snapshot(case.before, frozen.embedder))
        ingest, questions = _manager_run(case, manager, version, frozen)
        outcome = await fork.arun(ingest)
        latencies.append(time.perf_counter() - started)
        runs.append((outcome, [(await fork.arun(q)).answer for q in questions]))
    return _manager_side(version, cases, runs, latencies)


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
        answers.append(run(decide_with_fallback(answerer, "answer", case.question, case.memories)))
        latencies.append(time.perf_counter() - started)
    return _side(version, cases, answers, latencies)


async def areplay_answerer(answerer: Answerer, version: str, cases: Sequence[AnswerCase]) -> SideResult:
    answers, latencies = [], []
    for case in _bar(cases, version):
        started = time.perf_counter()
        answers.append(await arun(decide_with_fallback(answerer, "answer", case.question, case.memories)))
        latencies.append(time.perf_counter() - started)
    return _side(version, cases, answers, latencies)
