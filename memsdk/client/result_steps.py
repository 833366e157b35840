"""The last step of ``ingest`` and ``answer``, shared by the twins: the call's telemetry
finished, its trajectory written to the interaction log, and the result the app gets."""

from __future__ import annotations

import time
from collections.abc import Generator, Sequence
from datetime import timedelta
from typing import Any

from memsdk.client._base import BaseClient, Timings
from memsdk.client.results import AnswerResult, IngestResult
from memsdk.effects import Effect
from memsdk.interactions import Trajectory
from memsdk.pipeline.decisions import ActivePolicies
from memsdk.pipeline.ingest import IngestOutcome
from memsdk.pipeline.retrieval import AnswerOutcome
from memsdk.policies.answerer import ABSTAIN_TEXT, abstains
from memsdk.types import Scope, Turn, utcnow

__all__ = ["answer_result", "ingest_result"]


def ingest_result(
    client: BaseClient[Any], turn: Turn, context: Sequence[Turn], context_scopes: Sequence[Scope], scope: Scope, active: ActivePolicies, outcome: IngestOutcome, started: float, timings: Timings
) -> Generator[Effect, Any, IngestResult]:
    """The ingest's result, its trajectory logged. ``timings`` is the dict the twin's runner
    books stages to, this step's log write included."""
    latency = time.perf_counter() - started
    client._telemetry.record_outcome("ingest", latency_s=latency, versions=active.versions, fallback=outcome.fallback, failures=len(outcome.failures))
    trajectory = yield from client._record(
        Trajectory(
            kind="ingest",
            scope=scope,
            involves=list(context_scopes),
            input={"turn": turn.model_dump(mode="json"), "context": [t.model_dump(mode="json") for t in context]},
            calls=[c.to_dict() for c in outcome.calls],
            ops=outcome.ops,
            output={"facts": outcome.facts, "failures": outcome.failures, "fallback": outcome.fallback, "episodic_id": outcome.episodic_id and str(outcome.episodic_id)},
            policy_versions=active.versions,
            latency_s=latency,
            started_at=utcnow() - timedelta(seconds=latency),
        )
    )
    return IngestResult(
        trajectory_id=trajectory.id,
        episodic_id=outcome.episodic_id,
        facts=outcome.facts,
        ops=outcome.ops,
        policy_versions=active.versions,
        failures=outcome.failures,
        fallback=outcome.fallback,
        latency_s=time.perf_counter() - started,
        prompt_tokens=sum(c.prompt_tokens for c in outcome.calls),
        completion_tokens=sum(c.completion_tokens for c in outcome.calls),
        timings=dict(timings),
    )


def answer_result(client: BaseClient[Any], question: str, scopes: list[Scope], active: ActivePolicies, outcome: AnswerOutcome, started: float, timings: Timings) -> Generator[Effect, Any, AnswerResult]:
    a = outcome.answer
    client._telemetry.record_outcome("answer", latency_s=time.perf_counter() - started, versions=active.versions, fallback=a.fallback, failures=0)
    trajectory = yield from client._record(
        Trajectory(
            kind="answer",
            scope=scopes[0],
            involves=scopes[1:],
            input={"question": question, "scopes": [s.model_dump(mode="json") for s in scopes], "shown": [str(h.record.id) for h in outcome.shown]},
            calls=[c.to_dict() for c in a.calls],
            output={"answer": a.text, "evidence": [str(r.id) for r in a.evidence], "fallback": a.fallback},
            policy_versions=active.versions,
            latency_s=time.perf_counter() - started,
        )
    )
    abstained = abstains(a.text)
    return AnswerResult(
        trajectory_id=trajectory.id,
        text=ABSTAIN_TEXT if abstained else a.text,
        abstained=abstained,
        evidence=a.evidence,
        retrieved=len(outcome.shown),
        policy_versions=active.versions,
        fallback=a.fallback,
        latency_s=time.perf_counter() - started,
        prompt_tokens=sum(c.prompt_tokens for c in a.calls),
        completion_tokens=sum(c.completion_tokens for c in a.calls),
        timings=dict(timings),
    )
