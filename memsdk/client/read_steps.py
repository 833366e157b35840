"""MemAgent's read as steps both twins run (``read``): the plan resumed from its progress
file, one chunk rewritten into the memory, the bar over the chunks left, and the result with
its trajectory logged. The plan and its progress file are `memsdk.client.reading`."""

from __future__ import annotations

import time
from collections.abc import Generator
from datetime import timedelta
from typing import Any

from tqdm import tqdm

from memsdk.bank import as_scope
from memsdk.client._base import BaseClient, ScopeLike, Timings
from memsdk.client.reading import ReadPlan, as_source, plan_read
from memsdk.client.results import ReadResult
from memsdk.effects import Call, Effect
from memsdk.interactions import Trajectory
from memsdk.pipeline.decisions import decide_with_fallback
from memsdk.pipeline.ingest import applied_ops
from memsdk.registry import BASE_VERSION
from memsdk.types import Actor, utcnow

__all__ = ["read_bar", "read_chunk", "read_plan", "read_result", "reader_actor"]


def read_plan(client: BaseClient[Any], source: Any, scope: ScopeLike, budget_tokens: Any, chunk_tokens: Any) -> Generator[Effect, Any, ReadPlan]:
    """The read's chunks, resumed from its progress file when an earlier read of the same
    input stopped part way."""
    turns, where = as_source(source, client._as_turns), as_scope(scope)
    plan: ReadPlan = yield Call(plan_read, (turns, where, budget_tokens, chunk_tokens, client.config.data_dir / "reads"), stage="store")
    return plan


def read_chunk(reader: Any, plan: ReadPlan, chunk: str) -> Generator[Effect, Any, None]:
    """One chunk read into the plan's memory (the reader's rewrite), its progress saved."""
    step = yield from decide_with_fallback(reader, "rewrite", plan.memory, chunk, plan.budget_tokens)
    yield Call(plan.advance, (step,), stage="store")


def read_bar(plan: ReadPlan, progress: bool | None) -> Any:
    """The chunks still to read, with a progress bar that starts where a resumed read stopped."""
    show = progress if progress is not None else len(plan.chunks) > 1
    return tqdm(plan.chunks[plan.done :], desc="read", unit="chunk", initial=plan.done, total=len(plan.chunks), disable=not show)


def reader_actor(reader: Any) -> Actor:
    return Actor(role="reader", version=getattr(reader, "version", BASE_VERSION))


def read_result(client: BaseClient[Any], plan: ReadPlan, reader: Any, transition: Any, started: float, timings: Timings) -> Generator[Effect, Any, ReadResult]:
    yield Call(plan.remove_progress, stage="store")  # the progress file goes: a read of the same input starts over
    versions = {"reader": reader_actor(reader).version or BASE_VERSION}
    latency = time.perf_counter() - started
    trajectory = yield from client._record(
        Trajectory(
            kind="read",
            scope=plan.scope,
            input={"chunks": len(plan.chunks), "budget_tokens": plan.budget_tokens, "chunk_tokens": plan.chunk_tokens, "resumed_from": plan.resumed_from},
            calls=[c.to_dict() for c in plan.last_calls],
            ops=applied_ops(transition),
            output={"memory": plan.memory, "kept_old": plan.kept_old, "fallback": plan.fallback},
            policy_versions=versions,
            latency_s=latency,
            started_at=utcnow() - timedelta(seconds=latency),
        )
    )
    return ReadResult(
        trajectory_id=trajectory.id, memory_id=transition.records[0].id, text=plan.memory, chunks=len(plan.chunks), resumed_from=plan.resumed_from,
        kept_old=plan.kept_old, policy_versions=versions, fallback=plan.fallback, latency_s=time.perf_counter() - started,
        prompt_tokens=plan.prompt_tokens, completion_tokens=plan.completion_tokens, timings=dict(timings),
    )
