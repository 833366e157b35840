"""The logic both clients share, with no I/O of its own (httpx's BaseClient pattern): making
a client and undoing that, and what every call shares (its arguments checked, its stages
timed, its trajectory logged).

Whatever a call does to the store, the interaction log or the registry, this module and its
siblings say as steps that yield effects (`memsdk.effects`): an `Apply` for the bank's
transition function, a `Call` for any other blocking call. Each sibling holds one family of
calls: `memory_steps` (add, update, forget, delete, erase, feedback), `result_steps` (what
ingest and answer return), `read_steps` (MemAgent's read), `promotion` (the release gate)
and `watcher` (following promotions). `MemoryClient` and `AsyncMemoryClient` add only the
I/O: their runner makes those calls blocking, or awaited in worker threads, and they call
the bank's plain reads (``get``, ``list``, ``search``, ...) themselves.

Two things stay blocking in both twins, because a constructor cannot await: opening the
store, the log and the registry in ``__init__``, and undoing that when construction fails
(`_release_bank`, which ``aclose`` also runs, in a worker thread, and `_close_backends_now`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Generator, Iterable, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Generic, Iterator

import numpy as np
import sys
import zlib
from pydantic import ValidationError

from memsdk.bank import BankSnapshot, MemoryBank, as_query, as_scope
from memsdk.config import ClientConfig
from memsdk.effects import Call, Chat, Effect, Runner
from memsdk.embedding.base import CachedEmbedder, Embedder, EmbedderWrapper
from memsdk.errors import ClientClosed, InvalidInput
from memsdk.interactions import InteractionLog, Redactor, Trajectory
from memsdk.llm.base import Completion
from memsdk.llm.config import CircuitBreaker, Limits
from memsdk.pipeline.context import RecentTurns
from memsdk.pipeline.decisions import ActivePolicies
from memsdk.pipeline.ingest import IngestOutcome, check_turn, ingest_steps, write_steps
from memsdk.pipeline.retrieval import AnswerOutcome, answer_steps
from memsdk.registry import PACKAGED_DIR, PolicyRegistry
from memsdk.serving.backends import B, Backends, Endpoint
from memsdk.serving.policy_set import PolicyInfo, PolicySet
from memsdk.telemetry import Telemetry
from memsdk.types import QUESTION_MAX_CHARS, Scope, Turn, turn_parts

__all__ = ["BaseClient", "TimedEmbedder", "Timings", "SCOPE_LOCK_STRIPES"]

log = logging.getLogger("memsdk.client")

SCOPE_LOCK_STRIPES = 64
#: turns of one ``ingest(list)`` embedded in one call before each is ingested (well under the
#: client's cache of 1,024 vectors, so none is evicted before its turn comes)
EMBED_AHEAD = 64

ScopeLike = Scope | dict[str, Any]
TurnLike = Turn | dict[str, Any]

#: what `warm_up` runs through the pipelines, in a scope of a copy held in memory (no app's)
WARM_UP_SCOPE = Scope(run_id=".warm-up")
#: a first-person statement, so the extractor makes a fact and the manager reads it; its
#: words are nobody's: the bank holding it is thrown away
WARM_UP_TURN = Turn(speaker="Warmup", text="I keep the warm-up notes in the grey folder on my desk.")
WARM_UP_QUESTION = "Where does Warmup keep the warm-up notes?"


class TimedEmbedder(EmbedderWrapper):
    """Wraps an embedder and keeps, per thread, the seconds spent embedding.

    The client subtracts it from the store and retrieval stages, so a latency breakdown
    says how much of a call was the embedding model and how much the store.
    """

    def __init__(self, inner: Embedder) -> None:
        super().__init__(inner)
        self._local = threading.local()

    @property
    def elapsed(self) -> float:
        return getattr(self._local, "elapsed", 0.0)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self._local.elapsed = self.elapsed + time.perf_counter() - start


_ANNOUNCED: set[str] = set()  # the lines said in this process: a run opening a client per conversation says each once


def announce(policies: dict[str, PolicyInfo]) -> None:
    """Say on stderr what each role serves and why (`PolicyInfo.why`): a user who installed
    memsdk sees whether the measured default serves, or why it does not."""
    lines = [f"memsdk: {role} {p.version}{f' on {p.model} ({p.served_by})' if p.served_by.startswith('llm') else ''}: {p.why}" for role, p in policies.items()]
    text = "\n".join(lines)
    if text not in _ANNOUNCED:
        _ANNOUNCED.add(text)
        print(text, file=sys.stderr)


def in_process_model(model: str, default: str) -> dict[str, Any]:
    """`TransformersBackend` arguments for a model name: ``default`` (the client's model
    name, "smollm2" unless set) is SmolLM2 served under that name; a folder is loaded from
    there; any other name is a Hugging Face id, loaded from the local cache (offline)."""
    if model == default:
        return {"served_model_name": model}
    path = Path(model).expanduser()
    return {"model_path": path if path.is_dir() else model, "served_model_name": path.name if path.is_dir() else model}


def batched(items: Sequence[Turn], size: int) -> Iterator[Sequence[Turn]]:
    """``items`` in runs of ``size`` (itertools.batched is Python 3.12)."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


class Timings(dict[str, float]):
    def add(self, stage: str, seconds: float) -> None:
        self[stage] = self.get(stage, 0.0) + seconds


class _Observed:
    """The client's `Observer`: each effect's time booked to its stage (`BaseClient._stage`),
    each LLM call a telemetry span."""

    def __init__(self, client: BaseClient[Any], timings: Timings) -> None:
        self._client, self._timings = client, timings

    def stage(self, name: str) -> AbstractContextManager[None]:
        return self._client._stage(self._timings, name)

    def chat(self, effect: Chat) -> AbstractContextManager[Callable[[Completion], None]]:
        return self._client._telemetry.chat(effect.role, effect.request.model or effect.backend.model)


class BaseClient(Generic[B]):
    #: each twin builds its own kind of backend (blocking or async) for an endpoint
    _make_backend: Callable[[Endpoint], B]

    def __init__(
        self,
        config: ClientConfig | None = None,
        *,
        backend: Any = None,
        embedder: Embedder | None = None,
        bank: MemoryBank | None = None,
        redact: Redactor | None = None,
        telemetry: Telemetry | None = None,
        **overrides: Any,
    ) -> None:
        """``MemoryClient()`` is the embedded default; keyword overrides (``qdrant_url=``,
        ``llm_base_url=``, ``model=``, ``data_dir=``, ...) build a `ClientConfig` on top of
        the environment (``MEMSDK_*``). ``backend``/``embedder``/``bank`` inject parts;
        ``telemetry`` says where spans and metrics go (`memsdk.telemetry`; default: the
        app's global OpenTelemetry providers, a no-op until it configures an SDK)."""
        if config is not None and overrides:
            raise InvalidInput("config", "pass either a ClientConfig or keyword settings, not both")
        try:
            self.config = config or ClientConfig.from_env(**overrides)
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc, "config") from None
        self.config.data_dir.mkdir(parents=True, exist_ok=True)
        self._closed = False
        self._telemetry = telemetry if telemetry is not None else Telemetry()
        self._recent = RecentTurns(self.config.context_turns)
        if bank is None:
            from memsdk.embedding.minilm import SentenceTransformerEmbedder
            from memsdk.store import open_transport

            self._embedder = TimedEmbedder(CachedEmbedder(embedder or SentenceTransformerEmbedder(threads=self.config.embedder_threads)))
            location = self.config.qdrant_url or self.config.data_dir / "store"
            self.bank = MemoryBank(open_transport(location, dim=self._embedder.dim, api_key=self.config.qdrant_api_key), self._embedder)
        else:
            # an injected bank stays as its owner made it (another user of it must not see a
            # client's wrapper, nor lose it when the client closes): the client times and
            # caches only the embeddings it asks for itself (queries), and the bank's own
            # (the texts it writes) count as store time
            self._embedder = TimedEmbedder(CachedEmbedder(bank.embedder))
            self.bank = bank
        # what was injected stays the caller's: close() releases only what the client made
        self._owns_bank = bank is None
        if self.config.tiers and self.config.max_turn_chars > self.bank.limits.max_text_chars:
            self._release_bank()
            raise InvalidInput("max_turn_chars", f"is {self.config.max_turn_chars}; a turn is kept verbatim as one episodic memory, and a memory holds at most {self.bank.limits.max_text_chars} characters")
        # a search embeds through the client's cache; a forget's deleted turns leave the context
        self._runner = Runner(self.bank, embedder=self._embedder, applied=self._recent.forget_deleted, threads=True)
        try:
            self.log = InteractionLog(self.config.data_dir / "interactions.sqlite3", redact=redact) if self.config.log_interactions else None
            # annotated: an injected `backend` is Any, which would otherwise make B Any
            self._backends: Backends[B] = Backends(self.config, self._make_backend, injected=backend)
            # the cached embedder, not its timer: a policy's embedding counts as the policy's time
            self._policies: PolicySet[B] = PolicySet(self._backends, self.config, self._registry(), self.config.data_dir / "active_policies.json", embedder=self._embedder.inner)
        except BaseException:
            self._release_bank()
            self._close_backends_now()
            raise

    # -- construction and its undoing (blocking in both twins: a constructor cannot await) -----

    def _registry(self) -> PolicyRegistry:
        return PolicyRegistry(self.config.checkpoints, packaged=PACKAGED_DIR if self.config.packaged_adapters else None)

    def _release_bank(self) -> None:
        """Close the bank if the client opened it; an injected one is its owner's to close."""
        if self._owns_bank:
            self.bank.close()

    def _breaker(self) -> CircuitBreaker | None:
        """A circuit breaker for each server backend the client makes (None: turned off)."""
        c = self.config
        return CircuitBreaker(c.llm_breaker_failures, c.llm_breaker_cooldown_s) if c.llm_breaker_failures else None

    def _limits(self) -> Limits:
        """The cap on one server backend's requests in flight (vLLM batches what is in flight)."""
        n = self.config.llm_max_concurrency
        return Limits(max_connections=max(16, n), max_keepalive_connections=max(8, n), max_concurrency=n)

    @property
    def _backend(self) -> B | None:
        """The default LLM backend (the one roles without an endpoint of their own use), or
        None while no role has needed it."""
        return self._backends.made_default() if hasattr(self, "_backends") else None

    def _owned_backends(self) -> list[B]:
        """The backends to close: those the client built, never an injected one."""
        return self._backends.made() if hasattr(self, "_backends") else []

    def _close_backends_now(self) -> None:
        """Close what a failed construction built (blocking: no event loop may be running)."""
        for backend in self._owned_backends():
            close = getattr(backend, "close", None) or getattr(getattr(backend, "sync", None), "close", None)
            if callable(close):
                close()

    # -- the two calls apps make on every turn ------------------------------------------------

    def _ingest_steps(self, turn: Turn, context: Sequence[Turn], scope: Scope, active: ActivePolicies) -> Generator[Effect, Any, IngestOutcome]:
        """The pipeline one turn goes through: Mem-alpha's writer when it is on, else the
        extractor and the manager (Memory-R1)."""
        if active.writer is not None:
            return write_steps([turn], scope, active.writer, self.config.related_k, version=active.versions["writer"], context=context, forget=active.forget)
        return ingest_steps(turn, context, scope, active, self.config.related_k, episodic=self.config.tiers)

    def _warm_up(self) -> tuple[Runner, Generator[Effect, Any, AnswerOutcome]]:
        """`warm_up`'s runner and steps: `WARM_UP_TURN` ingested and a question about it
        answered in an empty bank held in memory with the client's embedder and limits, so
        the models a first call would load (the embedder, each policy's) load now, and
        nothing reaches the store or the interaction log."""
        active = self._policies.active()

        def steps() -> Generator[Effect, Any, AnswerOutcome]:
            yield from self._ingest_steps(WARM_UP_TURN, [], WARM_UP_SCOPE, active)
            k = self._answer_k(active.answer_k)
            return (yield from answer_steps(WARM_UP_QUESTION, [WARM_UP_SCOPE], active, k, tiers=self.config.tiers, hybrid=self.config.hybrid))

        empty = MemoryBank.from_snapshot(BankSnapshot(WARM_UP_SCOPE, (), self.bank.embedder.dim), self.bank.embedder, limits=self.bank.limits)
        return Runner(empty, embedder=self._embedder, threads=True), steps()

    # -- what every call shares: arguments checked, stages timed, the trajectory logged -----------

    def _check_open(self) -> None:
        if self._closed:
            raise ClientClosed("this client is closed; create a new one")

    def _as_turns(self, turns: TurnLike | Iterable[TurnLike]) -> list[Turn]:
        if isinstance(turns, (str, bytes)) or not isinstance(turns, (Turn, dict, Iterable)):
            raise InvalidInput("turns", f"expected a turn (a dict or Turn) or a list of turns, got {type(turns).__name__}")
        items = [turns] if isinstance(turns, (Turn, dict)) else list(turns)
        if not items:
            raise InvalidInput("turns", "no turns given")
        out = []
        for i, item in enumerate(items):
            field = "turn" if len(items) == 1 else f"turns[{i}]"
            try:
                turn = item if isinstance(item, Turn) else Turn.model_validate(item)
            except ValidationError as exc:
                raise InvalidInput.from_pydantic(exc, field) from None
            out.append(check_turn(turn, field, self.config.max_turn_chars, self.bank.limits if self.config.tiers else None))
        return out

    @staticmethod
    def _as_scopes(scope: ScopeLike | Sequence[ScopeLike]) -> list[Scope]:
        if isinstance(scope, (list, tuple)):
            if not scope:
                raise InvalidInput("scope", "an empty list of scopes")
            return [as_scope(s, f"scope[{i}]") for i, s in enumerate(scope)]
        return [as_scope(scope)]

    @staticmethod
    def _stripe(scope: Scope) -> int:
        """Which of the client's `SCOPE_LOCK_STRIPES` scope locks a scope's ingests take.

        Ingests into one scope run one at a time (read memories -> decide -> apply would
        otherwise race, and the loser's retries could run out under heavy contention);
        different scopes run in parallel unless they share a stripe. A fixed number of
        stripes keeps memory flat however many scopes a client sees."""
        return zlib.crc32(scope.key.encode()) % SCOPE_LOCK_STRIPES

    @staticmethod
    def _scope_resolver(scope: ScopeLike | Callable[[Turn], ScopeLike]) -> Callable[[Turn], Scope]:
        if callable(scope):
            return lambda turn: as_scope(scope(turn))
        fixed = as_scope(scope)
        return lambda turn: fixed

    @contextmanager
    def _stage(self, timings: Timings, stage: str) -> Iterator[None]:
        """Time a stage; embedding done inside it is booked to 'embedding' instead."""
        start, embedded = time.perf_counter(), self._embedder.elapsed
        try:
            with self._telemetry.span(f"memsdk.{stage}"):
                yield
        finally:
            embed = self._embedder.elapsed - embedded
            timings.add("embedding", embed)
            timings.add(stage, time.perf_counter() - start - embed)

    def _observed(self, timings: Timings) -> _Observed:
        """How the runner reports one call's effects: time booked to ``timings``, LLM calls traced."""
        return _Observed(self, timings)

    def _record(self, trajectory: Trajectory) -> Generator[Effect, Any, Trajectory]:
        """The trajectory as the interaction log stored it (itself when the log is off); its
        time is booked to the "log" stage."""
        if self.log is None:
            return trajectory
        stored: Trajectory = yield Call(self.log.append, (trajectory,), stage="log")
        return stored

    def _embed_ahead(self, turns: Sequence[Turn]) -> Generator[Effect, Any, float]:
        """Embed ``turns`` as their episodic records will be embedded (words and headers), in
        one call, before they are ingested one by one: each then finds its vectors in the cache,
        and an embedder that gains from batches (a GPU) gets one. Returns the seconds per turn,
        which each turn's timings book. Nothing is gained where the bank embeds through another
        cache (an injected bank)."""
        if len(turns) < 2 or self.bank.embedder is not self._embedder:
            return 0.0
        started = time.perf_counter()
        yield Call(self.bank.shown_vectors, ([turn_parts(t) for t in turns],), stage="embedding")
        return (time.perf_counter() - started) / len(turns)

    @staticmethod
    def _check_question(question: str) -> str:
        as_query(question, "question")
        if len(question) > QUESTION_MAX_CHARS:
            raise InvalidInput("question", f"is {len(question)} characters, the limit is {QUESTION_MAX_CHARS}")
        return question

    def _answer_k(self, trained: int | None) -> int:
        """Memories an answer is shown: the app's ``answer_k`` when it set one, else the k the
        answerer version's manifest serves it at (``trained``: `PolicyManifest.answer_k`), else
        the default. The packaged adapter, trained at 30, scores F1 .337 at 20 end to end on
        LoCoMo val, .293 at 30 and .227 at 60 (README)."""
        if "answer_k" in self.config.model_fields_set or trained is None:
            return self.config.answer_k
        return trained

    # -- policies ---------------------------------------------------------------------------

    @property
    def policies(self) -> dict[str, PolicyInfo]:
        """The version each role runs now (``"base"``: the base model, no adapter), what serves it
        and why (`PolicyInfo.why`)."""
        return self._policies.info()

    @property
    def policy_stats(self) -> dict[str, dict[str, int]]:
        """Failure counters per role: parse failures, repairs, re-asks, rejected ops, fallbacks."""
        return self._policies.stats()

    @property
    def registry(self) -> PolicyRegistry:
        """The published checkpoints, their gate decisions and the promotion audit trail."""
        return self._policies.registry
