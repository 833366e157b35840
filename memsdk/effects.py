"""Every effect the pipelines and the policies yield, and the one runner that carries them out.

The pipelines (`memsdk.pipeline`) and the policies (`memsdk.policies`) do no I/O: they are
generators that *yield* an effect, receive its result, and go on. An effect is plain data:

    Chat      send a policy's `Request` to an LLM backend          -> Completion
    Call      a blocking call: a policy whose code is someone else's,
              or the client's own store / log / registry call      -> its result
    Lookup    a policy asks to see memories before it decides      (the ingest pipeline turns it into a Search)
    Search    the top memories of some scopes for a query          -> list[ScoredMemory]
    Adjacent  the turns said right before / after some records     -> list[MemoryRecord]
    Apply     ops through the bank's transition function           -> Transition

`Runner` carries them out, blocking (`Runner.run`) or awaited (`Runner.arun`), and it is the
only code that does: both clients, the trainers (over a forked bank, answering `Chat` with
what they sample), the release gate, and a policy used on its own (`run`, `arun`). So a
search embeds its query the same way, an error is thrown back into the pipeline the same
way, and an LLM call is timed the same way everywhere. An effect whose error is one of the
runner's ``thrown`` types is thrown back into the generator at its ``yield``: the pipeline
decides what a failure costs (a dead store costs the turn, a dead LLM backend only the
decision, which the role's fallback then makes).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Generator, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Protocol, TypeVar

from memsdk.errors import MemsdkError
from memsdk.llm.base import Completion, SamplingParams
from memsdk.types import Actor, MemoryRecord, Op, Scope, Tier, split_header

if TYPE_CHECKING:
    from memsdk.bank import MemoryBank
    from memsdk.bank.transition import Transition
    from memsdk.embedding.base import Embedder

__all__ = [
    "Request", "Chat", "Call", "Lookup", "Search", "Apply", "Adjacent", "Effect", "Steps", "Done", "resume",
    "chat", "achat", "acall", "Observer", "UNOBSERVED", "Runner", "run", "arun", "QUERY_CHARS",
]  # fmt: skip

R = TypeVar("R")
Y = TypeVar("Y")

#: the characters of a query a search embeds and matches: MiniLM reads 256 word pieces, so
#: more is cost without signal, and BM25 would count a pasted document's words
QUERY_CHARS = 2000


# -- the effects ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Request:
    """One request as a policy sends it: messages (ending in the response prefix, if any),
    the prefix itself, and the call options."""

    messages: list[dict[str, str]]
    prefix: str
    params: SamplingParams
    model: str | None
    schema: dict[str, Any] | None

    @property
    def options(self) -> dict[str, Any]:
        return {"params": self.params, "model": self.model, "schema": self.schema}


@dataclass(frozen=True)
class Chat:
    """Send ``request`` to ``backend``; its result is the `Completion` (a backend failure is
    thrown back in at the yield)."""

    backend: Any
    request: Request
    #: the policy role asking (traces name it)
    role: str = ""


@dataclass(frozen=True)
class Call:
    """Run ``fn(*args, **kwargs)``: a policy whose code is someone else's (a plugged policy),
    a built-in policy without a model, or a blocking call of the client's own (the
    interaction log, the registry, a store call no other effect names). The blocking runner
    calls ``fn``; the awaited one awaits ``afn`` (its async twin) when there is one, else runs
    ``fn`` in a worker thread so the event loop never blocks on it. ``stage`` is where its
    time is booked (`Observer.stage`)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    afn: Callable[..., Awaitable[Any]] | None = None
    stage: str = "llm"


@dataclass(frozen=True)
class Lookup:
    """A policy that searches before it decides (DeltaMem's manager) asks for the ``limit``
    semantic memories of the scope being ingested most similar to ``query``. Only the ingest
    pipeline knows that scope, so it turns a Lookup into a `Search`; one that reaches a
    runner is refused. The memories found count as shown to the policy, for the guard."""

    query: str
    limit: int


@dataclass(frozen=True)
class Search:
    """The top ``limit_each`` live memories of each scope for ``query`` (of one tier, or all)."""

    scopes: Sequence[Scope]
    query: str
    limit_each: int
    tier: Tier | None = None
    hybrid: bool = False
    #: embed ``query`` as the bank embeds a memory that says it (`MemoryBank.shown_vectors`):
    #: a fact about to be written is searched for with the vector it will be stored with
    as_memory: bool = False


@dataclass(frozen=True)
class Apply:
    scope: Scope
    ops: Sequence[Op]
    actor: Actor


@dataclass(frozen=True)
class Adjacent:
    """The live episodic turns of ``scopes`` said right before or after one of ``records``
    (`MemoryBank.adjacent` of each scope)."""

    scopes: Sequence[Scope]
    records: Sequence[MemoryRecord]


Effect = Search | Apply | Adjacent | Chat | Call | Lookup
#: a policy's decision as steps: yields `Chat` (or `Call`, `Lookup`) effects, receives their results, returns R
Steps = Generator[Chat | Call | Lookup, Any, R]


@dataclass(frozen=True)
class Done(Generic[R]):
    """Steps that have returned ``value``."""

    value: R


def resume(steps: Generator[Y, Any, R], result: Any = None, error: BaseException | None = None) -> Y | Done[R]:
    """Hand steps their last effect's result (or throw that effect's error into them) and get
    the next effect, or `Done` when they return. Every driver steps generators with it."""
    try:
        return steps.throw(error) if error is not None else steps.send(result)
    except StopIteration as done:
        return Done(done.value)


def chat(effect: Chat) -> Completion:
    """A `Chat` effect with a blocking backend."""
    completion: Completion = effect.backend.chat(effect.request.messages, **effect.request.options)  # either kind of backend: Any
    return completion


async def achat(effect: Chat) -> Completion:
    """A `Chat` effect with an async backend."""
    completion: Completion = await effect.backend.chat(effect.request.messages, **effect.request.options)
    return completion


async def acall(effect: Call) -> Any:
    if effect.afn is not None:
        return await effect.afn(*effect.args, **effect.kwargs)
    return await asyncio.to_thread(effect.fn, *effect.args, **effect.kwargs)


# -- the runner -----------------------------------------------------------------------------


class Observer(Protocol):
    """What a caller learns of each effect as it runs: the client books its time to a stage
    ("retrieval", "store", "llm") and traces each LLM call; nobody else needs to."""

    def stage(self, name: str) -> AbstractContextManager[object]: ...

    def chat(self, effect: Chat) -> AbstractContextManager[Callable[[Completion], None]]: ...


class _Unobserved:
    def stage(self, name: str) -> AbstractContextManager[object]:
        return nullcontext()

    @contextmanager
    def chat(self, effect: Chat) -> Iterator[Callable[[Completion], None]]:
        yield lambda completion: None


UNOBSERVED: Observer = _Unobserved()


class Runner:
    """Carries out a pipeline's (or a policy's) effects against ``bank``.

    ``embedder`` embeds search queries (default: the bank's own); a client passes its cached,
    timed one. ``chat`` / ``achat`` answer a `Chat` (a trainer passes its sampler).
    ``applied`` sees each `Transition` an `Apply` made before the pipeline does (the client
    forgets deleted turns from its recent context). ``threads``: the awaited runner runs the
    bank's effects in worker threads (a real store blocks); without it they run in place (a
    bank in memory, a fork). An error of a ``thrown`` type is thrown into the steps; any other
    propagates to the caller. A runner without a bank runs a policy's own effects only."""

    def __init__(
        self,
        bank: MemoryBank | None = None,
        *,
        embedder: Embedder | None = None,
        chat: Callable[[Chat], Completion] = chat,
        achat: Callable[[Chat], Awaitable[Completion]] = achat,
        applied: Callable[[Transition], Transition] | None = None,
        threads: bool = False,
        thrown: type[BaseException] | tuple[type[BaseException], ...] = MemsdkError,
    ) -> None:
        self.bank = bank
        self.embedder = embedder if embedder is not None or bank is None else bank.embedder
        self._chat, self._achat = chat, achat
        self._applied = applied
        self._threads = threads
        self._thrown = thrown

    def run(self, steps: Generator[Any, Any, R], observer: Observer = UNOBSERVED) -> R:
        """Drive ``steps`` to their return value with blocking calls."""
        step = resume(steps)
        while not isinstance(step, Done):
            try:
                result = self._blocking(step, observer)
            except self._thrown as exc:
                step = resume(steps, error=exc)
                continue
            step = resume(steps, result)
        return step.value

    async def arun(self, steps: Generator[Any, Any, R], observer: Observer = UNOBSERVED) -> R:
        """`run` with the LLM calls awaited on async backends."""
        step = resume(steps)
        while not isinstance(step, Done):
            try:
                result = await self._awaited(step, observer)
            except self._thrown as exc:
                step = resume(steps, error=exc)
                continue
            step = resume(steps, result)
        return step.value

    def _blocking(self, effect: Effect, observer: Observer) -> Any:
        if isinstance(effect, (Search, Adjacent, Apply)):
            return self._on_bank(effect, observer)
        if isinstance(effect, Call):
            with observer.stage(effect.stage):
                return effect.fn(*effect.args, **effect.kwargs)
        if isinstance(effect, Chat):
            with observer.stage("llm"), observer.chat(effect) as traced:
                completion = self._chat(effect)
                traced(completion)
                return completion
        return _refuse(effect)

    async def _awaited(self, effect: Effect, observer: Observer) -> Any:
        if isinstance(effect, (Search, Adjacent, Apply)):
            if self._threads:
                return await asyncio.to_thread(self._on_bank, effect, observer)
            return self._on_bank(effect, observer)
        if isinstance(effect, Call):
            with observer.stage(effect.stage):
                return await acall(effect)
        if isinstance(effect, Chat):
            with observer.stage("llm"), observer.chat(effect) as traced:
                completion = await self._achat(effect)
                traced(completion)
                return completion
        return _refuse(effect)

    def _on_bank(self, effect: Search | Adjacent | Apply, observer: Observer) -> Any:
        bank = self.bank
        if bank is None:
            raise TypeError(f"{type(effect).__name__} needs a bank: this runner drives a policy on its own")
        if isinstance(effect, Apply):
            with observer.stage("store"):
                transition = bank.apply(effect.scope, effect.ops, actor=effect.actor)
                return transition if self._applied is None else self._applied(transition)
        with observer.stage("retrieval"):
            if isinstance(effect, Adjacent):
                return [r for scope in effect.scopes for r in bank.adjacent(scope, effect.records)]
            # embedded once for every scope, and cut as every search cuts it
            query = effect.query[:QUERY_CHARS]
            assert self.embedder is not None  # set whenever there is a bank
            vector = bank.shown_vectors([split_header(query)], self.embedder)[0] if effect.as_memory else self.embedder.embed([query])[0]
            text = query if effect.hybrid else None
            return [h for scope in effect.scopes for h in bank.search_vector(scope, vector, limit=effect.limit_each, tier=effect.tier, text=text)]


def _refuse(effect: object) -> Any:
    if isinstance(effect, Lookup):
        raise TypeError(f"a Lookup ({effect.query!r}) needs the ingest pipeline, which knows the scope to search: drive this policy with it")
    raise TypeError(f"unknown effect {effect!r}")


#: a policy used on its own: its own effects only, and any failure is the policy's to handle
_ON_ITS_OWN = Runner(thrown=Exception)


def run(steps: Steps[R]) -> R:
    """Drive a policy's steps with blocking calls (a policy used on its own)."""
    return _ON_ITS_OWN.run(steps)


async def arun(steps: Steps[R]) -> R:
    """`run` with the calls awaited (an `AsyncLLMBackend`)."""
    return await _ON_ITS_OWN.arun(steps)
