"""LLM faults through the public client, against a real local HTTP server that misbehaves on
purpose (`tests/llm/_stub_server.py`, on a free port): down, reset mid-body, slower than the
timeout, 429 with retry-after, 500, garbage and truncated bodies and replies, hallucinated
aliases, delete-everything, a context-length 400.

Every fault runs on both ingest paths (Memory-R1's extractor + manager, and Mem-alpha's
writer, `writer=True`) and the answerer, sync, and async for a subset. Each run seeds 33
memories, ingests three turns, asks one question, and must end in bounded retries (every
request the server saw is counted, and a retry re-sends the same body), bounded time, then
the model's decision, the heuristic fallback or a typed `PolicyError`, with every turn kept
verbatim, every seeded memory still said and nothing deleted, and the failure visible
(`result.failures`, the fallback flag, `client.policy_stats`). ``-s`` prints a line per run.

The client is built from its config (``llm_base_url``, ``llm_timeout_s``); only the
default backoff between retries is shortened (`short_backoff`): the number of retries is
under test, not the length of the pause, which would make this file take minutes.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import pytest

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.types import Op
from memsdk.client.results import AnswerResult, IngestResult
from memsdk.embedding import HashEmbedder
from memsdk.errors import BackendError, ContextTooLong, PolicyError, PolicyUnavailable
from memsdk.llm import RetryPolicy
from memsdk.types import API_ACTOR, EventType, HistoryEvent

from tests.llm._stub_server import Reply, Step, StubServer, chat_body

SAM = {"user_id": "sam"}
#: memories before the faults begin: a few facts, and enough notes that an answer prompt (up
#: to 60 memories) is the longest one sent, as in real use
SEEDS = ["Sam grows tomatoes in the garden", "Sam's sister Anne lives in Paris", "Sam drinks green tea every morning"] + [
    f"Sam wrote down errand number {i}: return the {thing} borrowed from a neighbour" for i, thing in enumerate(["ladder", "drill", "kettle", "tent", "bicycle pump", "rake"] * 5)
]
SEED_OPS = [Op.add(text) for text in SEEDS]  # one batch: 33 single adds would cost more than most faults
TURNS = [
    {"speaker": "Sam", "text": "I keep three beehives on the roof"},
    {"speaker": "Sam", "text": "My brother Tom flies cargo planes"},
    {"speaker": "Sam", "text": "We are planning a trip to Lisbon in June"},
]
QUESTION = "Where is Sam's trip in June?"
ATTEMPTS = 1 + RetryPolicy().max_retries  # what the client's default policy allows per request
ANSWER_SIZES = 7  # 60 memories, the most an answer shows, then 30, 15, 7, 3, 1, none
WALL_BOUND_S = 12.0  # a hang would run into the default 60 s timeout; a healthy run takes ~1 s


# -- the model behind the server: a rule per role, read off the request ----------------------

Rule = Callable[[str], Any]


def fenced(prompt: str) -> str:
    """The data a prompt fences in <<< >>>: the turn, the fact, or the chunk."""
    return re.findall(r"<<<\s*(.*?)\s*>>>", prompt, re.S)[-1]


def aliases(prompt: str) -> list[int]:
    """The memory numbers a prompt shows, ``[0] ...``."""
    return [int(n) for n in re.findall(r"^\[(\d+)\]", prompt, re.M)]


def said(prompt: str) -> str:
    return fenced(prompt).split(": ", 1)[1]  # a chunk line is "Sam: text"


SOUND: dict[str, Rule] = {  # keyed by the schema the request names for constrained decoding
    "ExtractedFacts": lambda p: {"facts": [fenced(p)]},
    "ManagerDecision": lambda p: {"ops": [{"op": "ADD", "text": fenced(p)}]},
    "WriterCalls": lambda p: {"calls": [{"fn": "memory_insert", "tier": "semantic", "text": said(p)}]},
    "AnswerOut": lambda p: {"answer": "Lisbon in June", "evidence": [0]},
}
HALLUCINATED: dict[str, Rule] = {
    "ManagerDecision": lambda p: {"ops": [{"op": "UPDATE", "id": 99, "text": fenced(p)}, {"op": "DELETE", "id": 98}]},
    "WriterCalls": lambda p: {"calls": [{"fn": "memory_update", "id": 99, "text": said(p)}, {"fn": "memory_delete", "id": 98}]},
    "AnswerOut": lambda p: {"answer": "Lisbon in June", "evidence": [99]},
}
DELETE_ALL: dict[str, Rule] = {
    "ManagerDecision": lambda p: {"ops": [{"op": "DELETE", "id": i} for i in aliases(p)]},
    "WriterCalls": lambda p: {"calls": [{"fn": "memory_delete", "id": i} for i in aliases(p)]},
}


def model(rules: dict[str, Rule] | None = None) -> Callable[[Any], Reply]:
    """A server whose model answers each role by ``rules`` (`SOUND` where they say nothing)."""
    by_schema = {**SOUND, **(rules or {})}

    def respond(body: Any) -> Reply:
        prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")  # a re-ask's too
        return Reply(body=chat_body(json.dumps(by_schema[body["response_format"]["json_schema"]["name"]](prompt))))

    return respond


def context_window(tokens: int) -> Callable[[Any], Reply]:
    """vLLM's 400 for a prompt over ``tokens`` (~4 characters a token), else the sound model."""
    sound = model()

    def respond(body: Any) -> Reply:
        asked = sum(len(m["content"]) for m in body["messages"]) // 4 + body["max_tokens"]
        if asked <= tokens:
            return sound(body)
        message = f"This model's maximum context length is {tokens} tokens. However, you requested {asked} tokens. Please reduce the length of the messages or completion."
        return Reply(400, {"object": "error", "message": message, "type": "BadRequestError", "param": None, "code": 400})

    return respond


def every_first(fault: Reply) -> list[Step]:
    """Each request fails once with ``fault``, and its retry (the same body) succeeds."""
    return [fault, model()] * 40


# -- the faults -------------------------------------------------------------------------------

Ending = Literal["llm", "fallback", "error"]


@dataclass(frozen=True)
class Fault:
    name: str
    script: Callable[[], list[Step]] | None  # None: nothing listens on the port
    attempts: int | None  # how many times the server sees each request; None: it sees none
    ends: Ending  # what a call the fault hits ends in: the model's decision, the heuristic, or an error
    error: type[PolicyError] | None = None  # the typed error an answer raises (ends == "error")
    note: str = ""  # a phrase the ingest results' failures hold
    counted: tuple[str, ...] = ()  # policy_stats counters that must have moved
    timeout_s: float = 2.0
    fallback: bool = True
    waits_s: float = 0.0  # the least pause before each retry (a retry-after the client must honour)


TRUNCATED_BODY = json.dumps(chat_body('{"facts": ["I keep three beehives"]}')).encode()[:60]
TOO_LONG = "maximum context length is"

FAULTS = [
    Fault("down", None, None, "fallback", counted=("fallbacks",)),
    Fault("down, no fallback", None, None, "error", PolicyUnavailable, note="ConnectError", fallback=False),
    Fault("reset mid-body", lambda: [Reply(reset_after=30)], ATTEMPTS, "fallback", counted=("fallbacks",)),
    Fault("slower than the timeout", lambda: [Reply(delay_s=1.0)], 1, "fallback", counted=("fallbacks",), timeout_s=0.2),
    Fault("429 with retry-after", lambda: every_first(Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0.06"})), 2, "llm", waits_s=0.06),
    Fault("500 always", lambda: [Reply(500, {"error": {"message": "internal error"}})], ATTEMPTS, "fallback", counted=("fallbacks",)),
    Fault("500 once, then OK", lambda: every_first(Reply(500, {"error": {"message": "internal error"}})), 2, "llm"),
    Fault("garbage body", lambda: [Reply(raw=b"<html><body>502 Bad Gateway</body></html>")], 1, "error", BackendError, note="malformed response"),
    Fault("truncated JSON body", lambda: [Reply(raw=TRUNCATED_BODY)], 1, "error", BackendError, note="malformed response"),
    Fault("JSON body of the wrong shape", lambda: [Reply(body={"choices": ["garbage"], "usage": 5})], 1, "error", BackendError, note="malformed response"),
    Fault("garbage reply", lambda: [Reply(body=chat_body("Sure! Sam keeps bees, I will remember that."))], 1, "llm", note="unparseable output", counted=("parse_failures", "reasked")),
    Fault("truncated JSON reply", lambda: [Reply(body=chat_body('{"facts": ["I keep three beehives on the ro', finish_reason="length"))], 1, "llm", note="unparseable output", counted=("truncated", "parse_failures")),
    Fault("hallucinated aliases", lambda: [model(HALLUCINATED)], 1, "llm", note="unknown memory [99]", counted=("rejected_ops", "unknown_evidence")),
    Fault("delete everything", lambda: [model(DELETE_ALL)], 1, "llm", note="delete storm", counted=("rejected_ops",)),
    Fault("context-length 400 on long prompts", lambda: [context_window(700)], 1, "llm", counted=("context_trims",)),
    Fault("context-length 400 on every prompt", lambda: [context_window(0)], 1, "error", ContextTooLong, note=TOO_LONG, counted=("context_trims",)),
]
ASYNC = {"down", "reset mid-body", "429 with retry-after", "garbage body", "delete everything", "context-length 400 on long prompts"}
#: the writer's names for the manager's counters
WRITER_COUNTERS = {"rejected_ops": "rejected_calls"}


# -- running one fault --------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def short_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """The default policy's retries and retry-after handling, with backoffs of 20-50 ms."""
    real = RetryPolicy.backoff

    def short(self: RetryPolicy, retries_done: int, retry_after_s: float | None = None, rng: Any = None) -> float:
        return real(replace(self, initial_backoff_s=0.02, max_backoff_s=0.05), retries_done, retry_after_s, rng)

    monkeypatch.setattr(RetryPolicy, "backoff", short)


@dataclass
class Run:
    """What one scenario did, as the public API shows it."""

    results: list[IngestResult]
    answer: AnswerResult | None
    error: PolicyError | None
    elapsed_s: float
    stats: dict[str, dict[str, int]]
    episodic: list[str]
    live: list[str]
    deletes: list[HistoryEvent]
    requests: list[Any] = field(default_factory=list)


@contextmanager
def serve(fault: Fault) -> Iterator[tuple[str, list[Any]]]:
    """The server's URL and the list it records requests in."""
    if fault.script is None:
        with socket.socket() as s:  # a free port, closed again: connections are refused
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        yield f"http://127.0.0.1:{port}", []
        return
    with StubServer(fault.script()) as stub:
        yield stub.url, stub.requests


def settings(tmp_path: Path, url: str, fault: Fault, writer: bool) -> dict[str, Any]:
    return {
        "data_dir": tmp_path / "d",
        "embedder": HashEmbedder(64),
        "llm_base_url": url,
        "policies": "llm",  # every role on the faulty server (the default over SmolLM2 sends it only the answerer)
        "packaged_adapters": False,  # the faults are counted per chat request; a start-up adapter load is another test's
        "llm_timeout_s": fault.timeout_s,
        "fallback_to_heuristic": fault.fallback,
        "writer": writer,
    }


def run_sync(tmp_path: Path, fault: Fault, writer: bool) -> Run:
    with serve(fault) as (url, requests), MemoryClient(**settings(tmp_path, url, fault, writer)) as client:
        client.bank.apply(SAM, SEED_OPS, actor=API_ACTOR)
        started = time.monotonic()
        results = client.ingest(TURNS, scope=SAM, progress=False)
        answer, error = None, None
        try:
            answer = client.answer(QUESTION, scope=SAM)
        except PolicyError as exc:
            error = exc
        elapsed = time.monotonic() - started
        episodic = [r.text for r in client.list(scope=SAM, tier="episodic")]
        live = [r.text for r in client.list(scope=SAM)]
        history = client.history(scope=SAM)
        stats = client.policy_stats
        return Run(results, answer, error, elapsed, stats, episodic, live, [e for e in history if e.event is EventType.DELETE], list(requests))


def run_async(tmp_path: Path, fault: Fault, writer: bool) -> Run:
    async def main(url: str, requests: list[Any]) -> Run:
        async with AsyncMemoryClient(**settings(tmp_path, url, fault, writer)) as client:
            client.bank.apply(SAM, SEED_OPS, actor=API_ACTOR)
            started = time.monotonic()
            results = await client.ingest(TURNS, scope=SAM, progress=False)
            answer, error = None, None
            try:
                answer = await client.answer(QUESTION, scope=SAM)
            except PolicyError as exc:
                error = exc
            elapsed = time.monotonic() - started
            episodic = [r.text for r in await client.list(scope=SAM, tier="episodic")]
            live = [r.text for r in await client.list(scope=SAM)]
            history = await client.history(scope=SAM)
            stats = client.policy_stats
            return Run(results, answer, error, elapsed, stats, episodic, live, [e for e in history if e.event is EventType.DELETE], list(requests))

    with serve(fault) as (url, requests):
        return asyncio.run(main(url, requests))


def check(fault: Fault, run: Run, writer: bool, log: str) -> None:
    failures = [f for r in run.results for f in r.failures]
    # every turn kept, once, verbatim; every seeded memory still said; nothing deleted
    assert run.episodic == [t["text"] for t in TURNS]
    assert [s for s in SEEDS if not any(s in m for m in run.live)] == []
    assert run.deletes == []
    # bounded: each request tried at most the policy's attempts (a retry re-sends the same
    # body), and the whole run within a bound that a hang would blow
    tries = Counter(json.dumps(body, sort_keys=True) for _, _, body in run.requests)
    if fault.attempts is None:
        assert run.requests == [] and f"after {ATTEMPTS} attempts" in log + "\n".join(failures)
    else:
        assert set(tries.values()) == {fault.attempts}, tries.values()
    assert fault.waits_s * len(tries) <= run.elapsed_s < WALL_BOUND_S
    asked = Counter(body["response_format"]["json_schema"]["name"] for _, _, body in run.requests)
    if trims := run.stats["answerer"].get("context_trims", 0):  # a request per size: the first, then each half
        assert asked["AnswerOut"] == trims + 1 <= ANSWER_SIZES
    # the ending: the model's decision, the heuristic standing in, or a typed error
    fell_back = [r.fallback for r in run.results]
    if fault.ends == "error":
        assert isinstance(run.error, fault.error), run.error
        assert fault.note in str(run.error) and run.answer is None
        kept_only = "writer failed" if writer else "extractor failed"
        assert all(any(kept_only in f and fault.note in f for f in r.failures) for r in run.results), failures
    else:
        assert run.error is None and run.answer is not None
        assert run.answer.fallback is (fault.ends == "fallback")
        if fault.ends == "fallback" and writer:  # the writer has no heuristic twin: each chunk says it failed
            assert all(any("writer failed" in f for f in r.failures) for r in run.results), failures
        else:
            assert fell_back == [fault.ends == "fallback"] * len(TURNS)
    assert fault.note in "\n".join(failures)
    for name in fault.counted:
        name = WRITER_COUNTERS.get(name, name) if writer else name
        assert sum(counts.get(name, 0) for counts in run.stats.values()) > 0, (name, run.stats)
    print(
        f"\n{fault.name:38s} {'writer' if writer else 'r1':6s} requests={len(run.requests):3d} distinct={len(tries):2d} "
        f"ends={fault.ends:8s} turns kept={len(run.episodic)}/{len(TURNS)} lost=0 {run.elapsed_s:.2f}s"
    )


@pytest.mark.parametrize("writer", [False, True], ids=["r1", "writer"])
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
def test_llm_fault_ends_bounded_and_loses_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture, fault: Fault, writer: bool) -> None:
    check(fault, run_sync(tmp_path, fault, writer), writer, caplog.text)


@pytest.mark.parametrize("writer", [False, True], ids=["r1", "writer"])
@pytest.mark.parametrize("fault", [f for f in FAULTS if f.name in ASYNC], ids=[f.name for f in FAULTS if f.name in ASYNC])
def test_llm_fault_ends_the_same_on_the_async_client(tmp_path: Path, caplog: pytest.LogCaptureFixture, fault: Fault, writer: bool) -> None:
    check(fault, run_async(tmp_path, fault, writer), writer, caplog.text)
