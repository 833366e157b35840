"""MemoryClient: the blocking client. Its async twin is `memsdk.client.aio.AsyncMemoryClient`."""

from __future__ import annotations

import logging
import os
import threading
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
from memsdk.llm.base import LoRABackend
from memsdk.pipeline import answer_steps, core_steps, retrieve_steps
from memsdk.serving.backends import Endpoint
from memsdk.serving.policy_set import Switch
from memsdk.types import HistoryEvent, MemoryRecord, ScoredMemory, Tier, Turn

__all__ = ["MemoryClient"]

log = logging.getLogger("memsdk.client")


class MemoryClient(BaseClient[LoRABackend]):
    """Memory for one app process, or the client of a memsdk server.

    ```python
    with MemoryClient() as client:                      # embedded: no server needed
        client.ingest({"speaker": "Caroline", "text": "I adopted a dog named Buddy"}, scope={"user_id": "caroline"})
        client.answer("What is Caroline's dog called?", scope={"user_id": "caroline"}).text

    MemoryClient(url="http://memsdk:8080", api_key="...")  # the same calls, to `memsdk serve`
    ```
    """

    def __new__(cls, *args: Any, url: str | None = None, **kwargs: Any) -> MemoryClient:
        """``url=`` (with ``api_key=``) makes the client of a `memsdk serve` server instead,
        a `RemoteMemoryClient` with the same methods (`memsdk.client.remote`)."""
        if url is not None and cls is MemoryClient:
            # imported here, not at the top: `import memsdk` stays without httpx (the one import
            # the cycle contract allows, pyproject.toml)
            from memsdk.client.remote import RemoteMemoryClient

            return object.__new__(RemoteMemoryClient)  # Python then runs its __init__ with these arguments
        return super().__new__(cls)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.pop("url", None)  # url=None: the embedded store, as without it
        super().__init__(*args, **kwargs)
        self._scope_locks = [threading.Lock() for _ in range(SCOPE_LOCK_STRIPES)]
        self._watcher: threading.Thread | None = None
        self._stop_watching = threading.Event()
        try:
            self._restore_policies()
        except BaseException:
            self.close()
            raise
        if self.config.announce:
            announce(self.policies)

    def _make_backend(self, endpoint: Endpoint) -> LoRABackend:
        # from the modules, not memsdk.llm's lazy names: those are typed `object`
        if endpoint.base_url:
            from memsdk.llm import Timeout
            from memsdk.llm.openai_compat import OpenAICompatibleBackend

            return OpenAICompatibleBackend(endpoint.base_url, model=endpoint.model, api_key=endpoint.api_key, timeout=Timeout.of(endpoint.timeout_s), limits=self._limits(), breaker=self._breaker())
        from memsdk.llm.transformers_backend import TransformersBackend

        return TransformersBackend(**in_process_model(endpoint.model, self.config.model), num_threads=1)

    # -- running the pipeline ------------------------------------------------------------------

    def _run(self, steps: Generator[Effect, Any, R], timings: Timings | None = None) -> R:
        return self._runner.run(steps, self._observed(Timings() if timings is None else timings))

    # -- the two calls apps make on every turn ------------------------------------------------------

    @overload
    def ingest(self, turns: TurnLike, *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult: ...
    @overload
    def ingest(self, turns: Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> list[IngestResult]: ...
    def ingest(self, turns: TurnLike | Iterable[TurnLike], *, scope: ScopeLike | Callable[[Turn], ScopeLike], progress: bool | None = None) -> IngestResult | list[IngestResult]:
        """Extract facts from each turn and let the manager apply ops to the scope's memory.

        One turn gives one `IngestResult`; a list gives a list (with a progress bar when
        there is more than one turn). ``scope`` may be a function of the turn, e.g.
        ``lambda t: {"user_id": t.speaker, "run_id": "chat-42"}`` for one memory per
        speaker. Each turn is recorded in the interaction log.
        """
        self._check_open()
        single = isinstance(turns, (Turn, dict))
        items = self._as_turns(turns)
        scope_of = self._scope_resolver(scope)
        results = []
        with tqdm(total=len(items), desc="ingest", unit="turn", disable=not (progress if progress is not None else len(items) > 1)) as bar:
            for chunk in batched(items, EMBED_AHEAD):
                embedding_s = self._run(self._embed_ahead(chunk))
                for turn in chunk:
                    results.append(self._ingest_one(turn, scope_of(turn), embedding_s))
                    bar.update()
        return results[0] if single else results

    def _ingest_one(self, turn: Any, scope: Any, embedding_s: float = 0.0) -> IngestResult:
        started, timings = time.perf_counter() - embedding_s, Timings(embedding=embedding_s)
        with self._telemetry.operation("ingest", [scope]):
            with self._scope_locks[self._stripe(scope)]:
                seen, seen_scopes = self._recent.of(scope)
                active = self._policies.active()
                outcome = self._run(self._ingest_steps(turn, seen, scope, active), timings)
                self._recent.add(scope, turn)
            return self._run(ingest_result(self, turn, seen, seen_scopes, scope, active, outcome, started, timings), timings)

    def answer(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> AnswerResult:
        """Answer from memory. With several scopes (e.g. both speakers of a conversation),
        the answerer sees the top ``answer_k / len(scopes)`` memories of each."""
        self._check_open()
        question = self._check_question(question)
        scopes = self._as_scopes(scope)
        started, timings = time.perf_counter(), Timings()
        active = self._policies.active()
        with self._telemetry.operation("answer", scopes):
            outcome = self._run(answer_steps(question, scopes, active, self._answer_k(active.answer_k), tiers=self.config.tiers, hybrid=self.config.hybrid), timings)
            return self._run(answer_result(self, question, scopes, active, outcome, started, timings), timings)

    def warm_up(self) -> None:
        """Load now what the first ingest and the first answer would load (the embedder, each
        policy's model): one turn and one question go through the pipelines on an empty
        bank held in memory, so nothing is stored or logged.
        `memsdk serve` runs it before ``/readyz`` says ready; an app can call it before its
        first request. A model that cannot load raises (`EmbedderError`); a policy whose
        backend is down fails as it would in a call (`PolicyUnavailable`, or its fallback serves)."""
        self._check_open()
        runner, steps = self._warm_up()
        runner.run(steps)

    def feedback(self, trajectory_id: uuid.UUID | str, *, correct: bool | None = None, gold: str | None = None) -> None:
        """Attach a reward signal to a logged answer (the trainer reads it back)."""
        self._check_open()
        self._run(feedback_steps(self.log, trajectory_id, correct, gold))

    # -- direct memory access ------------------------------------------------------------------

    def search(self, query: str, *, scope: ScopeLike, limit: int = 10, tier: Tier | str | None = None, hybrid: bool = False) -> list[ScoredMemory]:
        """The scope's live memories nearest to ``query`` (of one tier, or of all); ``hybrid``:
        dense + BM25 fused by rank, with fused scores (`MemoryBank.search`)."""
        self._check_open()
        return self.bank.search(scope, query, limit=limit, tier=tier, hybrid=hybrid)

    def retrieve(self, question: str, *, scope: ScopeLike | Sequence[ScopeLike]) -> list[ScoredMemory]:
        """What `answer` would show the answerer for ``question``, best first, without asking it."""
        self._check_open()
        scopes = self._as_scopes(scope)
        with self._telemetry.operation("retrieve", scopes):
            return self._run(retrieve_steps(self._check_question(question), scopes, self._answer_k(self._policies.active().answer_k), tiers=self.config.tiers, hybrid=self.config.hybrid))

    def get(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        """One live memory of ``scope``. `MemoryNotFound` when it does not exist, is deleted,
        or belongs to another scope (the same error: an id never confirms another scope's
        memory); `InvalidInput` for a malformed id or scope."""
        self._check_open()
        return self.bank.get(scope, memory_id)

    def list(self, *, scope: ScopeLike, include_deleted: bool = False, limit: int | None = None, offset: int = 0, tier: Tier | str | None = None) -> list[MemoryRecord]:
        """The memories of ``scope``, oldest first: every tier, or ``tier``'s; soft-deleted
        ones too with ``include_deleted``; a page with ``offset`` / ``limit``. Superseded
        memories are listed (``record.current`` says which are true now). `InvalidInput` for a
        negative offset or limit, or an unknown tier."""
        self._check_open()
        return self.bank.list(scope, include_deleted=include_deleted, limit=limit, offset=offset, tier=tier)

    def add(self, text: str, *, scope: ScopeLike, metadata: dict[str, Any] | None = None, tier: Tier | str = Tier.SEMANTIC) -> MemoryRecord:
        """Store a memory directly (no policy). ``tier="core"`` sets the scope's core memory
        when it has none (`update` rewrites it)."""
        self._check_open()
        return self._run(add_steps(text, scope, metadata, tier))

    def update(self, memory_id: uuid.UUID | str, text: str, *, scope: ScopeLike) -> MemoryRecord:
        """Rewrite a memory's text (a new version, with an UPDATE event); the same text again
        changes nothing and returns the record as it stands. `MemoryNotFound` as `get`;
        `InvalidInput` for empty or oversized text, or an episodic turn (kept verbatim)."""
        self._check_open()
        return self._run(update_steps(memory_id, text, scope))

    def forget(self, description: str, *, scope: ScopeLike, dry_run: bool = False) -> ForgetResult:
        """Forget what ``description`` names, in the user's words ("my phone number", "anything
        about my divorce"), in every tier of ``scope``: the memories the forget rules or the
        trained relevance head find about it, as a forget request said in conversation would.
        ``dry_run=True`` returns what would be forgotten and changes nothing; the same call
        without it forgets exactly that. A description that matches more than
        `forget.MAX_SUPERSEDED` memories is refused (``refused`` says so, nothing changes);
        one that names nothing specific ("everything") is `InvalidInput`. Soft: `restore`
        undoes it, `erase` makes it final."""
        self._check_open()
        with self._telemetry.operation("forget", self._as_scopes(scope)):
            return self._run(forget_described_steps(description, scope, self._policies.active(), dry_run))

    def delete(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        """Soft delete: `restore` brings it back; `erase` removes a scope for good."""
        self._check_open()
        return self._run(delete_steps(memory_id, scope))

    def restore(self, memory_id: uuid.UUID | str, *, scope: ScopeLike) -> MemoryRecord:
        """Undo a soft delete, else a supersession: the memory is current again, at a new
        version, with a RESTORE event. `MemoryNotFound` when the scope has no such memory
        (erased ones are gone for good)."""
        self._check_open()
        return self.bank.restore(scope, memory_id)

    def history(self, memory_id: uuid.UUID | str | None = None, *, scope: ScopeLike) -> builtins.list[HistoryEvent]:  # `list` is the method above
        """The audit history of ``scope``, or of one memory in it, in the order it happened:
        what changed, from what text to what, by which actor and policy version.
        `MemoryNotFound` for a memory id with no history in the scope."""
        self._check_open()
        return self.bank.history(scope, memory_id)

    def erase(self, *, scope: ScopeLike) -> int:
        """GDPR erase: the scope's memories, history and logged interactions, gone from disk."""
        self._check_open()
        return self._run(erase_steps(scope, self.bank, self.log, self._recent))

    def export(self, dest: str | os.PathLike[str] | IO[str], *, scope: ScopeLike) -> int:
        """Write ``scope``'s memories and history as JSON lines to a path or a text stream;
        returns the record count. `import_` reads it back."""
        self._check_open()
        return self.bank.export(scope, dest)

    def read(self, source: str | Iterable[TurnLike], *, scope: ScopeLike, budget_tokens: int = 256, chunk_tokens: int = 1024, progress: bool | None = None) -> ReadResult:
        """Read a long text (or conversation) chunk by chunk into a memory of at most
        ``budget_tokens`` that each chunk's reply rewrites (MemAgent), and store it as the
        scope's core memory, which every answer is shown. Cost grows linearly with the
        chunks and memory stays flat, so an input longer than the model's context works.
        Progress is saved after every chunk: calling again with the same input after a
        crash resumes from the last finished chunk."""
        self._check_open()
        plan = self._run(read_plan(self, source, scope, budget_tokens, chunk_tokens))
        started, timings = time.perf_counter(), Timings()
        reader = self._policies.reader()
        for chunk in read_bar(plan, progress):
            self._run(read_chunk(reader, plan, chunk), timings)
        with self._scope_locks[self._stripe(plan.scope)]:
            transition = self._run(core_steps(plan.scope, plan.memory, reader_actor(reader)), timings)
        return self._run(read_result(self, plan, reader, transition, started, timings), timings)

    def import_(self, src: str | os.PathLike[str] | IO[str], *, scope: ScopeLike | None = None) -> int:
        """Load an `export` into ``scope`` (default: the scope it came from); returns the record
        count. All or nothing: `InvalidInput` when the file does not parse or its history does
        not explain its records; `ImportConflict` when its ids exist already (into its own
        scope ids are kept; into another, every id is renewed)."""
        self._check_open()
        return self.bank.import_(src, scope=scope)

    # -- policy versions ---------------------------------------------------------------------

    def use_policy(self, role: str, version: str) -> None:
        """Switch ``role`` to a published checkpoint (or ``"base"``). On failure the old one stays."""
        self._check_open()
        switch = self._policies.plan(role, version)
        self._load(switch)
        self._policies.commit(switch)

    def rollback(self, role: str) -> None:
        """Go back to the version ``role`` ran before the last switch."""
        self._check_open()
        switch = self._policies.plan_rollback(role)
        self._load(switch)
        self._policies.commit(switch, rollback=True)

    def evaluate_policy(self, role: str, version: str, *, against: str | None = None, on: GateStates = "locomo-val", config: GateConfig = GateConfig(), k: int | None = None) -> GateDecision:
        """The release gate's comparison: ``version`` and the incumbent (``against``, default
        the version serving now) replay the same states (``on``: ``"locomo-val"``, ``"log"`` for the
        app's own judged answers, a JSONL file, or a list of `AnswerCase`; for the manager ``"log"``
        or a list of `ManagerCase`, judged by the answerer serving now; see `memsdk.gate`);
        the paired decision is recorded beside the candidate's manifest and returned. Nothing is switched. ``k``: memories per ``locomo-val``
        state, by default what an answer shows ``version`` once it serves (the client's ``answer_k``,
        or the version's training k: `_answer_k`)."""
        self._check_open()
        incumbent = against or incumbent_of(self, role)
        cases = self._run(gate_cases(self, role, version, on, k))
        sides = [(v, self._policies.build(self._loaded(role, v))) for v in (version, incumbent)]
        decision = gate.compare(role, sides, cases, on=on, config=config, frozen=manager_replay(self) if role == "manager" else None)
        self._policies.registry.record_decision(decision)
        return decision

    def promote(self, role: str, version: str, *, force: bool = False, on: GateStates = "locomo-val", config: GateConfig = GateConfig()) -> GateDecision | None:
        """Serve ``version`` only if the gate passes against the version serving now (else
        `GateFailed`, nothing switched). ``force=True`` skips the gate; either way the
        promotion is appended to the role's audit trail, which watching clients follow."""
        self._check_open()
        incumbent = incumbent_of(self, role)
        decision = None if force else self.evaluate_policy(role, version, against=incumbent, on=on, config=config)
        switch = self._loaded(role, version)  # loaded before the trail says it serves: a failed load promotes nothing
        self._run(promotion_steps(self.registry, role, version, incumbent, decision, force))
        self._policies.commit(switch)
        return decision

    def _loaded(self, role: str, version: str) -> Switch:
        switch = self._policies.plan(role, version)
        self._load(switch)
        return switch

    def _load(self, switch: Switch) -> None:
        if switch.adapter_name is None:
            return
        try:
            self._policies.backend(switch.role).load_lora_adapter(switch.adapter_name, str(switch.adapter_path))
        except Conflict:
            pass  # already loaded under this name (a rollback, or a restart of the client only)
        except Exception as exc:
            raise switch_failed(self._policies, switch, exc) from exc

    def _restore_policies(self) -> None:
        for role, version in self._policies.start_versions().items():
            try:
                switch = self._policies.plan(role, version)
                self._load(switch)
                self._policies.commit(switch, starting=True)
            except MemsdkError as exc:
                log.warning("could not restore %s %s at start, using base: %s", role, version, exc)
                self._policies.start_failed(role, version, exc)

    def watch_policies(self, interval_s: float = 10.0) -> None:
        """Follow the registry's promotions (the release gate's, or a forced one), checking every ``interval_s``."""
        self._check_open()
        check_interval(interval_s)
        if self._watcher is not None:
            return
        self._watcher = threading.Thread(target=self._watch, args=(interval_s,), name="memsdk-policy-watch", daemon=True)
        self._watcher.start()

    def _watch(self, interval_s: float) -> None:
        failed: set[tuple[str, str]] = set()
        while not self._stop_watching.wait(interval_s):
            for role, version in self._run(due_promotions(self, failed)):
                try:
                    self.use_policy(role, version)
                except MemsdkError as exc:
                    promotion_failed(failed, role, version, exc)

    # -- lifecycle ---------------------------------------------------------------------------

    def close(self) -> None:
        """Stop watching for promotions and release the store and the backends the client
        made (what was injected stays its owner's). Idempotent; any call after it raises
        `ClientClosed`."""
        if self._closed:
            return
        self._closed = True
        self._stop_watching.set()
        if self._watcher is not None:
            self._watcher.join()
        self._release_bank()
        if self.log is not None:
            self.log.close()
        for backend in self._owned_backends():
            if hasattr(backend, "close"):
                backend.close()

    def __enter__(self) -> MemoryClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
