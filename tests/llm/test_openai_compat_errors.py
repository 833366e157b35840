"""Error paths of the HTTP backends against local stub servers (fast; no model, no vLLM).

Each case runs on the sync and the async twin: they share the retry logic, and these
tests make sure both loops drive it the same way.
"""

from __future__ import annotations

import asyncio
import socket
import time
from typing import Any

import httpx
import pytest

from memsdk.errors import BackendError, BackendTimeout, Conflict, ContextTooLong, ModelNotFound, PolicyUnavailable
from memsdk.llm import AsyncOpenAICompatibleBackend, CircuitBreaker, Limits, OpenAICompatibleBackend, RetryPolicy, SamplingParams, Timeout
from memsdk.llm.openai_compat import _retry_after_s

from ._stub_server import Reply, StubServer, chat_body

MSGS = [{"role": "user", "content": "hi"}]
PARAMS = SamplingParams(max_tokens=4)
FAST_RETRY = RetryPolicy(max_retries=2, initial_backoff_s=0.05, max_backoff_s=0.1)


@pytest.fixture(params=["sync", "async"])
def make(request: pytest.FixtureRequest) -> Any:
    """make(url, **kwargs) -> an object whose methods run synchronously on either twin."""
    opened: list[Any] = []
    loop = asyncio.new_event_loop() if request.param == "async" else None

    class Runner:
        def __init__(self, backend: Any) -> None:
            self.backend = backend

        def __getattr__(self, name: str) -> Any:
            method = getattr(self.backend, name)
            if loop is None:
                return method
            return lambda *a, **k: loop.run_until_complete(method(*a, **k))

    def factory(url: str, **kwargs: Any) -> Runner:
        kwargs.setdefault("retry", FAST_RETRY)
        cls = AsyncOpenAICompatibleBackend if loop is not None else OpenAICompatibleBackend
        backend = cls(url, model="stub", **kwargs)
        opened.append(backend)
        return Runner(backend)

    yield factory
    for backend in opened:
        if loop is not None:
            loop.run_until_complete(backend.aclose())
        else:
            backend.close()
    if loop is not None:
        loop.close()


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again when the socket goes


def test_server_down_is_unavailable_after_bounded_retries(make: Any) -> None:
    llm = make(f"http://127.0.0.1:{_closed_port()}")
    started = time.monotonic()
    with pytest.raises(PolicyUnavailable, match="after 3 attempts") as info:
        llm.chat(MSGS, params=PARAMS)
    assert isinstance(info.value.__cause__, httpx.ConnectError)
    assert 0.05 < time.monotonic() - started < 2.0  # two short backoffs, then give up


def test_slow_server_times_out_without_retrying(make: Any) -> None:
    with StubServer([Reply(delay_s=2.0)]) as stub:
        llm = make(stub.url, timeout=Timeout(connect=1.0, read=0.3))
        started = time.monotonic()
        with pytest.raises(BackendTimeout):
            llm.chat(MSGS, params=PARAMS)
        assert time.monotonic() - started < 1.5
        assert len(stub.requests) == 1  # a read timeout is not retried by default


def test_429_then_200_is_retried_honouring_retry_after(make: Any) -> None:
    replies = [Reply(429, {"error": {"message": "slow down"}}, {"retry-after": "0.2"}), Reply(200, chat_body("fine"))]
    with StubServer(replies) as stub:
        llm = make(stub.url, retry=RetryPolicy(max_retries=2, initial_backoff_s=5.0))  # backoff would be 5 s
        started = time.monotonic()
        c = llm.chat(MSGS, params=PARAMS)
        assert c.text == "fine" and c.choices[0].token_ids == [1, 2]
        assert 0.2 <= time.monotonic() - started < 2.0  # waited what retry-after said
        assert len(stub.requests) == 2


def test_persistent_503_gives_up_after_max_retries(make: Any) -> None:
    with StubServer([Reply(503, {"error": {"message": "overloaded"}})]) as stub:
        with pytest.raises(PolicyUnavailable, match="503"):
            make(stub.url).chat(MSGS, params=PARAMS)
        assert len(stub.requests) == 3


@pytest.mark.parametrize(
    ("status", "message", "error"),
    [
        (404, "The model `x` does not exist.", ModelNotFound),
        (400, "This model's maximum context length is 2048 tokens", ContextTooLong),
        (401, "bad key", BackendError),
    ],
)
def test_client_errors_map_to_the_tree_and_are_not_retried(make: Any, status: int, message: str, error: type) -> None:
    with StubServer([Reply(status, {"error": {"message": message}})]) as stub:
        with pytest.raises(error) as info:
            make(stub.url).chat(MSGS, params=PARAMS, model="x")
        assert info.value.status_code == status
        assert len(stub.requests) == 1


def test_lora_admin_routes_and_errors(make: Any) -> None:
    replies = [
        Reply(200, "Success"),
        Reply(400, {"error": {"message": "The lora adapter 'a' has already been loaded."}}),
        Reply(404, {"error": {"message": "The lora adapter 'b' cannot be found."}}),
        Reply(200, {"data": [{"id": "stub"}, {"id": "a"}]}),
    ]
    with StubServer(replies) as stub:
        llm = make(stub.url)
        llm.load_lora_adapter("a", "/adapters/a")
        with pytest.raises(Conflict):
            llm.load_lora_adapter("a", "/adapters/a")
        with pytest.raises(ModelNotFound):
            llm.unload_lora_adapter("b")
        assert llm.list_models() == ["stub", "a"]
        assert stub.requests[0] == ("POST", "/v1/load_lora_adapter", {"lora_name": "a", "lora_path": "/adapters/a"})


def test_schema_falls_back_to_json_object_once(make: Any) -> None:
    replies = [Reply(400, {"error": {"message": "response_format json_schema is not supported"}}), Reply(200, chat_body("{}"))]
    with StubServer(replies) as stub:
        llm = make(stub.url)
        schema = {"type": "object", "properties": {}}
        assert llm.chat(MSGS, params=PARAMS, schema=schema).text == "{}"
        llm.chat(MSGS, params=PARAMS, schema=schema)
        formats = [body["response_format"]["type"] for _, _, body in stub.requests]
        assert formats == ["json_schema", "json_object", "json_object"]  # remembered


def test_request_body_carries_sampling_params(make: Any) -> None:
    with StubServer([Reply()]) as stub:
        params = SamplingParams(max_tokens=7, temperature=0.5, top_p=0.9, n=2, seed=3, stop="\n", logprobs=True, repetition_penalty=1.1)
        make(stub.url).chat(MSGS, params=params, model="my-lora")
        make(stub.url).chat(MSGS, params=SamplingParams())
        _, path, body = stub.requests[0]
        assert path == "/v1/chat/completions"
        assert body["model"] == "my-lora" and body["max_tokens"] == 7 and body["n"] == 2 and body["seed"] == 3
        assert body["stop"] == ["\n"] and body["logprobs"] is True and body["top_logprobs"] == 0
        assert body["repetition_penalty"] == 1.1
        assert "repetition_penalty" not in stub.requests[1][2]  # 1.0 is off: not sent at all


def test_concurrency_limit_caps_requests_in_flight(make: Any) -> None:
    # the cap is an upper bound: on a loaded machine two requests need not overlap at all, so
    # "exactly 2 in flight" would test the scheduler, not the limit
    with StubServer([Reply(delay_s=0.15)]) as stub:
        llm = make(stub.url, limits=Limits(max_concurrency=2))
        out = llm.chat_batch([MSGS] * 6, params=PARAMS)
        assert len(out) == 6
        assert 1 <= stub.max_in_flight <= 2


def test_retry_after_parsing_and_backoff_cap() -> None:
    assert _retry_after_s(httpx.Response(429, headers={"retry-after": "3"})) == 3.0
    assert _retry_after_s(httpx.Response(429, headers={"retry-after-ms": "250"})) == 0.25
    assert _retry_after_s(httpx.Response(429, headers={"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"})) == 0.0
    assert _retry_after_s(httpx.Response(429, headers={"retry-after": "soon"})) is None
    policy = RetryPolicy(initial_backoff_s=0.5, max_backoff_s=4.0, jitter=0.25)
    assert [policy.backoff(i, rng=_Fixed(0.0)) for i in range(5)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert policy.backoff(0, rng=_Fixed(1.0)) == 0.375  # jitter shortens by up to 25 %
    assert policy.backoff(3, retry_after_s=1.5) == 1.5
    assert policy.backoff(0, retry_after_s=600, rng=_Fixed(0.0)) == 0.5  # absurd retry-after ignored


class _Fixed:
    def __init__(self, value: float) -> None:
        self.value = value

    def random(self) -> float:
        return self.value


def test_a_circuit_breaker_stops_asking_a_dead_server_then_probes_it(make: Any) -> None:
    now, down, sent = [0.0], [True], []

    def server(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        if down[0]:
            raise httpx.ConnectError("connection refused", request=request)
        return httpx.Response(200, json=chat_body())

    llm = make("http://llm.test", transport=httpx.MockTransport(server), retry=RetryPolicy(max_retries=0), breaker=CircuitBreaker(failures=2, cooldown_s=30.0, clock=lambda: now[0]))
    for _ in range(2):
        with pytest.raises(PolicyUnavailable, match="ConnectError"):
            llm.chat(MSGS, params=PARAMS)
    with pytest.raises(PolicyUnavailable, match="circuit breaker"):  # open: nothing is sent
        llm.chat(MSGS, params=PARAMS)
    assert len(sent) == 2
    now[0], down[0] = 31.0, False  # the cooldown is over, and the server is back: the probe closes it
    assert llm.chat(MSGS, params=PARAMS).text and llm.chat(MSGS, params=PARAMS).text
    assert len(sent) == 4


def test_a_failed_probe_opens_the_breaker_again() -> None:
    now = [0.0]
    breaker = CircuitBreaker(failures=3, cooldown_s=10.0, clock=lambda: now[0])
    for _ in range(3):
        assert breaker.allow() is None
        breaker.failed()
    assert breaker.allow() == 10.0
    now[0] = 10.0
    assert breaker.allow() is None and breaker.allow() == 0.0  # one probe at a time
    breaker.failed()  # the probe failed: a new cooldown, not three more failures
    assert breaker.allow() == 10.0
    now[0] = 20.0
    assert breaker.allow() is None
    breaker.succeeded()
    assert breaker.allow() is None and breaker.allow() is None
