"""AsyncMemoryClient: the same methods as `MemoryClient`, awaited.

LLM calls go through the async backends (an httpx.AsyncClient for vLLM; a worker thread
for the in-process model); store calls run in worker threads. Independent scopes can be
ingested concurrently with ``asyncio.gather``; calls on the same scope are serialised by
the bank's write lock.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Sequence
from typing import IO, Any, overload

import builtins
from tqdm import tqdm

from memsdk import gate
from memsdk.client._base import BaseClient, EMBED_AHEAD, SCOPE_LOCK_STRIPES, ScopeLike, Timings, TurnLike, announce, batched, in_process_model
from memsdk.client.memory_steps import add_steps, delete_steps, erase_steps, feedback_steps, forget_described_steps, update_steps
from memsdk.client.promotion import gate_cases, incumbent_of, manager_replay, promotion_steps, switch_failed
from memsdk.client.read_steps import read_bar, read_chunk, read_plan, read_result, reader_actor
from memsdk.client.result_steps import answer_result, ingest_result
from memsdk.client.results import AnswerResult, ForgetResult, IngestResult, ReadResult
from memsdk.client.watcher import check_interval, due_promotions, promotion_failed
from memsdk.effects import Effect, R
from memsdk.errors import Conflict, MemsdkError
from memsdk.gate import GateConfig, GateDecision, GateStates
from memsdk.llm.base import AsyncLoRABackend
from memsdk.pipeline import answer_steps, core_steps, retrieve_steps
from memsdk.serving.backends import Endpoint
from memsdk.serving.policy_set import Switch
from memsdk.types import HistoryEvent, MemoryRecord, ScoredMemory, Tier, Turn

__all__ = ["AsyncMemoryClient"]

log = logging.getLogger("memsdk.client")


class AsyncMemoryClient(BaseClient[AsyncLoRABackend]):
    """The async twin of `MemoryClient`. Create it, then ``await client.start()`` (or use
    ``async with``) so saved policy versions are loaded before the first call."""

    def __new__(cls, *args: Any, url: str | None = None, **kwargs: Any) -> AsyncMemoryClient:
        """``url=`` (with ``api_key=``): the client of a `memsdk serve` server, an `AsyncRemoteMemoryClient`."""
        if url is not None and cls is AsyncMemoryClient:
            from memsdk.client.remote import AsyncRemoteMemoryClient  # lazily, as MemoryClient's

            return object.__new__(AsyncRemoteMemoryClient)
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("url", None)
        super().__init__(*args, **kwargs)
        self._scope_locks = [asyncio.Lock() for _ in range(SCOPE_LOCK_STRIPES)]
        self._watcher: asyncio.Task[None] | None = None

    def _make_backend(self, endpoint: Endpoint) -> AsyncLoRABackend:
        # from the modules, not memsdk.llm's lazy names: those are typed `object`
        if endpoint.base_url:
            from memsdk.llm import Timeout
            from memsdk.llm.openai_compat import AsyncOpenAICompatibleBackend

            return AsyncOpenAICompatibleBackend(endpoint.base_url, model=endpoint.model, api_key=endpoint.api_key, timeout=Timeout.of(endpoint.timeout_s), limits=self._limits(), breaker=self._breaker())
        from memsdk.llm.transformers_backend import AsyncTransformersBackend, TransformersBackend

        return AsyncTransformersBackend(TransformersBackend(**in_process_model(endpoint.model, self.config.model), num_threads=1))

    async def start(self) -> AsyncMemoryClient:
        """Load the policy versions this data dir was serving (and the packaged defaults), so
        the first call runs on them; returns the client. ``async with`` calls it."""
        for role, version in self._policies.start_versions().items():
            try:
                switch = self._policies.plan(role, version)
                await self._load(switch)
                self._policies.commit(switch, starting=True)
            except MemsdkError as exc:
                log.warning("could not restore %s %s at start, using base: %s", role, version, exc)
                self._policies.start_failed(role, version, exc)
        if self.config.announce:
            announce(self.policies)
        return self

    # -- running the pipeline ------------------------------------------------------------------

    async def _run(self, steps: Generator[Effect, Any, R], timings: Timings | None = None) -> R:
        return await self._runner.arun(steps, self._observed(Timings() if timings is None else timings))

    # -- the two calls apps make on every turn ------------------------------------------------------

    @overload
    async def ingest(self, turns: TurnLike, *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult: ...
    @overload
    async def ingest(self, turns: Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> list[IngestResult]: ...
    async def ingest(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult | list[IngestResult]:
        self._check_open()
        single = isinstance(turns, (Turn, dict))
        items = self._as_turns(turns)
        scope_of = self._scope_resolver(scope)
        results = []
        with tqdm(total=len(items), desc="ingest", unit="turn", disable=not (progress if progress is not None else len(items) > 1)) as bar:
            for chunk in batched(items, EMBED_AHEAD):
                embedding_s = await self._run(self._embed_ahead(chunk))
                for turn in chunk:
                    results.append(await self._ingest_one(turn, scope_of(turn), embedding_s))
                    bar.update()
        return results[0] if single else results

    async def _ingest_one(self, turn: Any, scope: Any, embedding_s: float = 0.0) -> IngestResult:
        started, timings = time.perf_counter() - embedding_s, Timings(embedding=embedding_s)
        with self._telemetry.operation("ingest", [scope]):
            async with self._scope_locks[self._stripe(scope)]:
                seen, seen_scopes = self._recent.of(scope)
                active = self._policies.active()
                outcome = await self._run(self._ingest_steps(turn, seen, scope, active), timings)
                self._recent.add(scope, turn)
            return await self._run(ingest_result(self, turn, seen, seen_scopes, scope, active, outcome, started, timings), timings)

    async def answer(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> AnswerResult:
        self._check_open()
        question = self._check_question(question)
        scopes = self._as_scopes(scope)
        started, timings = time.perf_counter(), Timings()
        active = self._policies.active()
        with self._telemetry.operation("answer", scopes):
            outcome = await self._run(answer_steps(question, scopes, active, self._answer_k(active.answer_k), tiers=self.config.tiers, hybrid=self.config.hybrid), timings)
            return await self._run(answer_result(self, question, scopes, active, outcome, started, timings), timings)

    async def warm_up(self) -> None:
        self._check_open()
        runner, steps = self._warm_up()
        await runner.arun(steps)

    async def feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> None:
        self._check_open()
        await self._run(feedback_steps(self.log, trajectory_id, correct, gold))

    # -- direct memory access ------------------------------------------------------------------

    async def search(self, query: str, *, scope: ScopeLike, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> list[ScoredMemory]:
        self._check_open()
        return await asyncio.to_thread(self.bank.search, scope, query, limit=limit, tier=tier, hybrid=hybrid)

    async def retrieve(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> list[ScoredMemory]:
        self._check_open()
        scopes = self._as_scopes(scope)
        with self._telemetry.operation("retrieve", scopes):
            return await self._run(retrieve_steps(self._check_question(question), scopes, self._answer_k(self._policies.active().answer_k), tiers=self.config.tiers, hybrid=self.config.hybrid))

    async def get(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        self._check_open()
        return await asyncio.to_thread(self.bank.get, scope, memory_id)

    async def list(self, *, scope: ScopeLike, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> list[MemoryRecord]:
        self._check_open()
        return await asyncio.to_thread(self.bank.list, scope, include_deleted=include_deleted, limit=limit, offset=offset, tier=tier)

    async def add(self, text: str, *, scope: ScopeLike, metadata: dict[str, Any] | None = None, tier: Tier | str = Tier.SEMANTIC) -> MemoryRecord:
        self._check_open()
        return await self._run(add_steps(text, scope, metadata, tier))

    async def update(self, memory_id: uuid.UUID | str, text: str, *, scope: ScopeLike) -> MemoryRecord:
        self._check_open()
        return await self._run(update_steps(memory_id, text, scope))

    async def forget(self, description: str, *, scope: ScopeLike, dry_run: bool = False) -> ForgetResult:
        self._check_open()
        with self._telemetry.operation("forget", self._as_scopes(scope)):
            return await self._run(forget_described_steps(description, scope, self._policies.active(), dry_run))

    async def delete(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        self._check_open()
        return await self._run(delete_steps(memory_id, scope))

    async def restore(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        self._check_open()
        return await asyncio.to_thread(self.bank.restore, scope, memory_id)

    async def history(self, memory_id: uuid.UUID | str | None = None, *, scope: ScopeLike) -> builtins.list[HistoryEvent]:  # `list` is the method above
        self._check_open()
        return await asyncio.to_thread(self.bank.history, scope, memory_id)

    async def erase(self, *, scope: ScopeLike) -> int:
        self._check_open()
        return await self._run(erase_steps(scope, self.bank, self.log, self._recent))

    async def export(self, dest: str | os.PathLike[str] | IO[str], *, scope: ScopeLike) -> int:
        self._check_open()
        return await asyncio.to_thread(self.bank.export, scope, dest)

    async def read(self, source: str | Iterable[TurnLike], *, scope: ScopeLike, budget_tokens: int = 256, chunk_tokens: int = 1024, progress: bool | None = None) -> ReadResult:
        self._check_open()
        plan = await self._run(read_plan(self, source, scope, budget_tokens, chunk_tokens))
        started, timings = time.perf_counter(), Timings()
        reader = self._policies.reader()
        for chunk in read_bar(plan, progress):
            await self._run(read_chunk(reader, plan, chunk), timings)
        async with self._scope_locks[self._stripe(plan.scope)]:
            transition = await self._run(core_steps(plan.scope, plan.memory, reader_actor(reader)), timings)
        return await self._run(read_result(self, plan, reader, transition, started, timings), timings)

    async def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        self._check_open()
        return await asyncio.to_thread(self.bank.import_, src, scope=scope)

    # -- policy versions ---------------------------------------------------------------------

    async def use_policy(self, role: str, version: str) -> None:
        self._check_open()
        switch = self._policies.plan(role, version)
        await self._load(switch)
        self._policies.commit(switch)

    async def rollback(self, role: str) -> None:
        self._check_open()
        switch = self._policies.plan_rollback(role)
        await self._load(switch)
        self._policies.commit(switch, rollback=True)

    async def evaluate_policy(self, role: str, version: str, *, against: str | None = None, on: GateStates = "locomo-val", config: GateConfig = GateConfig(), k: int | None = None) -> GateDecision:
        self._check_open()
        incumbent = against or incumbent_of(self, role)
        cases = await self._run(gate_cases(self, role, version, on, k))
        sides = [(v, self._policies.build(await self._loaded(role, v))) for v in (version, incumbent)]
        decision = await gate.acompare(role, sides, cases, on=on, config=config, frozen=manager_replay(self) if role == "manager" else None)
        await asyncio.to_thread(self._policies.registry.record_decision, decision)
        return decision

    async def promote(self, role: str, version: str, *, force: bool = False, on: GateStates = "locomo-val", config: GateConfig = GateConfig()) -> GateDecision | None:
        self._check_open()
        incumbent = incumbent_of(self, role)
        decision = None if force else await self.evaluate_policy(role, version, against=incumbent, on=on, config=config)
        switch = await self._loaded(role, version)  # loaded before the trail says it serves: a failed load promotes nothing
        await self._run(promotion_steps(self.registry, role, version, incumbent, decision, force))
        self._policies.commit(switch)
        return decision

    async def _loaded(self, role: str, version: str) -> Switch:
        switch = self._policies.plan(role, version)
        await self._load(switch)
        return switch

    async def _load(self, switch: Switch) -> None:
        if switch.adapter_name is None:
            return
        try:
            await self._policies.backend(switch.role).load_lora_adapter(switch.adapter_name, str(switch.adapter_path))
        except Conflict:
            pass
        except Exception as exc:
            raise switch_failed(self._policies, switch, exc) from exc

    def watch_policies(self, interval_s: float = 10.0) -> None:
        self._check_open()
        check_interval(interval_s)
        if self._watcher is None:
            self._watcher = asyncio.get_running_loop().create_task(self._watch(interval_s))

    async def _watch(self, interval_s: float) -> None:
        failed: set[tuple[str, str]] = set()
        while not self._closed:
            await asyncio.sleep(interval_s)
            for role, version in await self._run(due_promotions(self, failed)):
                try:
                    await self.use_policy(role, version)
                except MemsdkError as exc:
                    promotion_failed(failed, role, version, exc)

    # -- lifecycle ---------------------------------------------------------------------------

    async def aclose(self) -> None:
        """`MemoryClient.close`, awaited: stop watching for promotions and release what the
        client made. Idempotent; any call after it raises `ClientClosed`."""
        if self._closed:
            return
        self._closed = True
        if self._watcher is not None:
            self._watcher.cancel()
        await asyncio.to_thread(self._release_bank)
        if self.log is not None:
            self.log.close()
        for backend in self._owned_backends():
            if hasattr(backend, "aclose"):
                await backend.aclose()

    async def __aenter__(self) -> AsyncMemoryClient:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
