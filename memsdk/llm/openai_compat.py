"""OpenAI-compatible HTTP backends (vLLM, or any server speaking ``/v1/chat/completions``).

    _BaseOpenAIBackend             no I/O: build requests, parse responses, decide retries,
    │                              map errors onto memsdk.errors
    ├── OpenAICompatibleBackend        httpx.Client      + threading semaphore
    └── AsyncOpenAICompatibleBackend   httpx.AsyncClient + asyncio semaphore

The twins add only I/O (httpx's ``BaseClient`` pattern): each has one ``_send`` loop of a
dozen lines that asks ``_Attempts`` (pure logic) whether to accept, retry after a delay, or
raise. Everything else, including the public methods' argument handling, is shared.

vLLM specifics used when talking to a vLLM server (``vllm_extensions=True``, the default):
``return_token_ids`` for generated token ids, and the LoRA admin routes
``/v1/load_lora_adapter`` / ``/v1/unload_lora_adapter`` (the server needs
``VLLM_ALLOW_RUNTIME_LORA_UPDATING=True``). A loaded adapter is selected per request with
``model=<adapter name>``. Turn the extensions off for endpoints that reject unknown fields.
"""

from __future__ import annotations

import asyncio
import email.utils
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

import httpx

from memsdk.errors import (
    BackendError,
    BackendTimeout,
    Conflict,
    ContextTooLong,
    InvalidInput,
    ModelNotFound,
    PolicyUnavailable,
)
from memsdk.llm.base import Choice, Completion, Message, SamplingParams, TokenLogprob
from memsdk.llm.config import (
    CircuitBreaker,
    DEFAULT_LIMITS,
    DEFAULT_RETRY,
    DEFAULT_TIMEOUT,
    Limits,
    RetryPolicy,
    TimeoutTypes,
    Timeout,
)

__all__ = ["OpenAICompatibleBackend", "AsyncOpenAICompatibleBackend", "SchemaMode"]

SchemaMode = Literal["auto", "json_schema", "json_object"]
"""How ``schema=`` is sent: ``json_schema`` (strict), ``json_object`` (any JSON object), or
``auto``: json_schema, falling back to json_object for good once the server rejects it."""

_CHAT = "/v1/chat/completions"
_COMPLETIONS = "/v1/completions"


class _Request:
    """One logical request: what to send, and what the error messages should name."""

    __slots__ = ("method", "path", "body", "model")

    def __init__(self, method: str, path: str, body: dict[str, Any] | None = None, model: str | None = None) -> None:
        self.method, self.path, self.body, self.model = method, path, body, model


class _Attempts:
    """Retry bookkeeping for one logical request; no I/O, so both twins share it.

    ``on_response`` returns None to accept the response or a delay before the next attempt,
    and raises the mapped memsdk error when the response is final and not a success;
    ``on_transport_error`` does the same for an httpx exception.
    """

    def __init__(self, policy: RetryPolicy, request: _Request) -> None:
        self.policy = policy
        self.request = request
        self.retries = 0

    def _may_retry(self) -> bool:
        return self.retries < self.policy.max_retries

    def on_response(self, response: httpx.Response) -> float | None:
        if response.is_success:
            return None
        should = response.headers.get("x-should-retry")
        retryable = response.status_code in self.policy.retry_statuses if should is None else should == "true"
        if retryable and self._may_retry():
            delay = self.policy.backoff(self.retries, _retry_after_s(response))
            self.retries += 1
            return delay
        raise _status_error(response, self.request, retried=self.retries if retryable else None)

    def on_transport_error(self, exc: httpx.TransportError) -> float:
        read_side = isinstance(exc, (httpx.ReadTimeout, httpx.WriteTimeout))
        retryable = self.policy.retry_read_timeouts or not read_side
        if retryable and self._may_retry():
            delay = self.policy.backoff(self.retries)
            self.retries += 1
            return delay
        where = f"{self.request.method} {self.request.path}"
        tries = f" after {self.retries + 1} attempts" if self.retries else ""
        if isinstance(exc, httpx.TimeoutException):
            raise BackendTimeout(f"{where}: {type(exc).__name__}{tries}") from exc
        raise PolicyUnavailable(f"{where}: {type(exc).__name__}: {exc}{tries}") from exc


def _or_broken(backend: _BaseOpenAIBackend, attempts: _Attempts, exc: httpx.TransportError) -> float:
    """The retry delay after a transport error; when no retry is left, the failure counts
    against the circuit breaker (one per logical request, not per attempt)."""
    try:
        return attempts.on_transport_error(exc)
    except PolicyUnavailable:
        backend._outcome(up=False)
        raise


def _retry_after_s(response: httpx.Response) -> float | None:
    """``retry-after-ms`` or ``retry-after`` (seconds or an HTTP date), as openai-python reads them."""
    headers = response.headers
    try:
        if (ms := headers.get("retry-after-ms")) is not None:
            return float(ms) / 1000.0
        value = headers.get("retry-after")
        if value is None:
            return None
        try:
            return float(value)
        except ValueError:
            when = email.utils.parsedate_to_datetime(value)
            return max(0.0, when.timestamp() - time.time())
    except (TypeError, ValueError, OverflowError):
        return None


def _error_message(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text[:500]
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict):
            return str(err.get("message") or err.get("detail") or err)[:500]
        return str(body.get("message") or body.get("detail") or err)[:500]
    return str(body)[:500]


def _status_error(response: httpx.Response, request: _Request, *, retried: int | None) -> Exception:
    """The memsdk error for a final non-2xx response (openai's ``_make_status_error``)."""
    status = response.status_code
    message = _error_message(response)
    text = f"{request.method} {request.path} -> {status}: {message}"
    low = message.lower()
    if retried is not None:  # a retryable status that stayed so: the server is refusing
        return PolicyUnavailable(f"{text} (after {retried + 1} attempts)")
    if status == 404 or (status == 400 and "does not exist" in low):
        return ModelNotFound(request.model or "?", text, status_code=status)
    if status == 400 and ("context length" in low or "too long" in low or "max_model_len" in low or "maximum context" in low):
        return ContextTooLong(text, status_code=status)
    if status == 400 and request.path.endswith("load_lora_adapter") and "already" in low:
        return Conflict("lora_name", message)
    return BackendError(text, status_code=status)


class _BaseOpenAIBackend:
    """Everything the sync and async backends share; no I/O."""

    def __init__(
        self,
        base_url: str,
        *,
        model: str,
        api_key: str | None = None,
        timeout: TimeoutTypes = DEFAULT_TIMEOUT,
        limits: Limits = DEFAULT_LIMITS,
        retry: RetryPolicy = DEFAULT_RETRY,
        schema_mode: SchemaMode = "auto",
        vllm_extensions: bool = True,
        headers: dict[str, str] | None = None,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        """``breaker``: fail fast while the server is down (`CircuitBreaker`); None: never."""
        base = base_url.rstrip("/")
        self._base_url = base[: -len("/v1")] if base.endswith("/v1") else base
        self._model = model
        self._timeout = Timeout.of(timeout)
        self._limits = limits
        self._retry = retry
        self._breaker = breaker
        self._schema_mode: SchemaMode = schema_mode
        self._vllm = vllm_extensions
        self._headers = {"content-type": "application/json", **(headers or {})}
        if api_key:
            self._headers["authorization"] = f"Bearer {api_key}"

    # -- properties --------------------------------------------------------------------------
    @property
    def model(self) -> str:
        return self._model

    @property
    def base_url(self) -> str:
        return self._base_url

    @property
    def supports_schema(self) -> bool:
        return True

    def _check_breaker(self, request: _Request) -> None:
        if self._breaker is not None and (wait := self._breaker.allow()) is not None:
            raise PolicyUnavailable(f"{request.method} {request.path}: {self._base_url} failed {self._breaker.failures} requests in a row; not asked again for {wait:.0f} s (circuit breaker)")

    def _outcome(self, up: bool) -> None:
        if self._breaker is not None:
            (self._breaker.succeeded if up else self._breaker.failed)()

    def _client_kwargs(self) -> dict[str, Any]:
        return {
            "base_url": self._base_url,
            "timeout": self._timeout.to_httpx(),
            "limits": self._limits.to_httpx(),
            "headers": self._headers,
        }

    # -- request building --------------------------------------------------------------------
    def _sampling_body(self, params: SamplingParams, model: str | None, schema: dict[str, Any] | None) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model or self._model,
            "max_tokens": params.max_tokens,
            "temperature": params.temperature,
            "top_p": params.top_p,
            "n": params.n,
        }
        if params.seed is not None:
            body["seed"] = params.seed
        if params.stop:
            body["stop"] = list(params.stop)
        if self._vllm:
            body["return_token_ids"] = True
            if params.repetition_penalty != 1.0:  # a vLLM extension: a plain OpenAI endpoint would reject it
                body["repetition_penalty"] = params.repetition_penalty
        if schema is not None:
            if not isinstance(schema, dict):
                raise InvalidInput("schema", "must be a JSON schema object (dict)")
            if self._schema_mode == "json_object":
                body["response_format"] = {"type": "json_object"}
            else:
                name = str(schema.get("title") or "output")[:64]
                body["response_format"] = {
                    "type": "json_schema",
                    "json_schema": {"name": name, "schema": schema, "strict": True},
                }
        return body

    def _chat_request(self, messages: Sequence[Message], params: SamplingParams, model: str | None, schema: dict[str, Any] | None) -> _Request:
        if not messages:
            raise InvalidInput("messages", "at least one message is required")
        body = self._sampling_body(params, model, schema)
        body["messages"] = [dict(m) for m in messages]
        if messages[-1].get("role") == "assistant":  # a response prefix to continue
            if not self._vllm:
                raise InvalidInput("messages", "continuing a final assistant message needs vllm_extensions=True")
            body.update(continue_final_message=True, add_generation_prompt=False)
        if params.logprobs:
            body["logprobs"] = True
            body["top_logprobs"] = 0
        return _Request("POST", _CHAT, body, body["model"])

    def _completion_request(self, prompt: str, params: SamplingParams, model: str | None, schema: dict[str, Any] | None) -> _Request:
        body = self._sampling_body(params, model, schema)
        body["prompt"] = prompt
        if params.logprobs:
            body["logprobs"] = 0  # the sampled token only
        return _Request("POST", _COMPLETIONS, body, body["model"])

    def _schema_fallback(self, request: _Request, exc: BackendError) -> _Request | None:
        """In ``auto`` mode, a 400 about json_schema downgrades to json_object for good."""
        body = request.body or {}
        fmt = body.get("response_format")
        if self._schema_mode != "auto" or not fmt or fmt.get("type") != "json_schema" or exc.status_code != 400:
            return None
        low = str(exc).lower()
        if "json_schema" not in low and "response_format" not in low and "schema" not in low:
            return None
        self._schema_mode = "json_object"
        return _Request(request.method, request.path, {**body, "response_format": {"type": "json_object"}}, request.model)

    # -- response parsing --------------------------------------------------------------------
    @staticmethod
    def _parse(request: _Request, response: httpx.Response, latency_s: float) -> Completion:
        # all of it inside the try: a body of the wrong shape ({"choices": ["x"]}, "usage": 5)
        # fails on attribute access or int(), and must surface as BackendError, not as an
        # AttributeError that escapes the error tree and every caller's handling of it
        try:
            data = response.json()
            choices = [_parse_choice(c, chat=request.path == _CHAT) for c in data["choices"]]
            usage = data.get("usage") or {}
            return Completion(
                model=str(data.get("model") or request.model),
                choices=sorted(choices, key=lambda c: c.index),
                prompt_tokens=int(usage.get("prompt_tokens") or 0),
                completion_tokens=int(usage.get("completion_tokens") or 0),
                latency_s=latency_s,
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise BackendError(f"{request.path}: malformed response: {response.text[:300]!r}", status_code=response.status_code) from exc

    @staticmethod
    def _parse_models(response: httpx.Response) -> list[str]:
        return [str(m["id"]) for m in response.json().get("data", [])]


def _parse_choice(raw: dict[str, Any], *, chat: bool) -> Choice:
    token_ids = raw.get("token_ids")
    logprobs: list[TokenLogprob] | None = None
    lp = raw.get("logprobs")
    if chat:
        text = (raw.get("message") or {}).get("content") or ""
        if lp and lp.get("content") is not None:
            logprobs = [TokenLogprob(token=t.get("token", ""), logprob=float(t["logprob"])) for t in lp["content"]]
    else:
        text = raw.get("text") or ""
        if lp and lp.get("token_logprobs") is not None:
            tokens = lp.get("tokens") or [""] * len(lp["token_logprobs"])
            logprobs = [TokenLogprob(token=t, logprob=float(v)) for t, v in zip(tokens, lp["token_logprobs"])]
    if logprobs is not None and token_ids is not None and len(token_ids) == len(logprobs):
        logprobs = [p.model_copy(update={"token_id": int(i)}) for p, i in zip(logprobs, token_ids)]
    return Choice(
        index=int(raw.get("index", 0)),
        text=text,
        token_ids=[int(i) for i in token_ids] if token_ids is not None else None,
        logprobs=logprobs,
        finish_reason=str(raw.get("finish_reason") or "stop"),
    )


class OpenAICompatibleBackend(_BaseOpenAIBackend):
    """Synchronous backend over ``httpx.Client``; thread-safe, pooled, concurrency-capped.

    >>> llm = OpenAICompatibleBackend("http://127.0.0.1:8000", model="smollm2")
    >>> llm.chat([{"role": "user", "content": "hi"}], params=SamplingParams(max_tokens=8)).text
    """

    def __init__(self, base_url: str, *, model: str, transport: httpx.BaseTransport | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, model=model, **kwargs)
        self._client = httpx.Client(transport=transport, **self._client_kwargs())
        self._gate = threading.BoundedSemaphore(self._limits.max_concurrency)

    def _send(self, request: _Request) -> httpx.Response:
        self._check_breaker(request)
        attempts = _Attempts(self._retry, request)
        while True:
            try:
                with self._gate:
                    response = self._client.request(request.method, request.path, json=request.body)
                self._outcome(up=True)
                delay = attempts.on_response(response)
            except httpx.TransportError as exc:
                delay = _or_broken(self, attempts, exc)
            else:
                if delay is None:
                    return response
            time.sleep(delay)

    def _generate(self, request: _Request) -> Completion:
        started = time.perf_counter()
        try:
            response = self._send(request)
        except BackendError as exc:
            if (fallback := self._schema_fallback(request, exc)) is None:
                raise
            request, response = fallback, self._send(fallback)
        return self._parse(request, response, time.perf_counter() - started)

    def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self._generate(self._chat_request(messages, params, model, schema))

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self._generate(self._completion_request(prompt, params, model, schema))

    def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:  # fmt: skip
        """Sends the conversations concurrently (up to ``max_concurrency``); the server batches them."""
        if len(conversations) <= 1:
            return [self.chat(c, params=params, model=model, schema=schema) for c in conversations]
        with ThreadPoolExecutor(min(len(conversations), self._limits.max_concurrency)) as pool:
            return list(pool.map(lambda c: self.chat(c, params=params, model=model, schema=schema), conversations))

    # -- admin ------------------------------------------------------------------------------
    def list_models(self) -> list[str]:
        """Served model ids, LoRA adapters included."""
        return self._parse_models(self._send(_Request("GET", "/v1/models")))

    def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        """Load a peft adapter folder (a path *on the server*) under ``name``. Twice -> Conflict unless replace."""
        body = {"lora_name": name, "lora_path": str(path), **({"load_inplace": True} if replace else {})}
        self._send(_Request("POST", "/v1/load_lora_adapter", body, name))

    def unload_lora_adapter(self, name: str) -> None:
        """Unload an adapter; unknown name -> ModelNotFound."""
        self._send(_Request("POST", "/v1/unload_lora_adapter", {"lora_name": name}, name))

    def health(self) -> bool:
        """True when ``/health`` answers 200 (one attempt, no retries)."""
        try:
            return self._client.get("/health").status_code == 200
        except httpx.TransportError:
            return False

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> "OpenAICompatibleBackend":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncOpenAICompatibleBackend(_BaseOpenAIBackend):
    """The async twin over ``httpx.AsyncClient``; same arguments, methods awaited."""

    def __init__(self, base_url: str, *, model: str, transport: httpx.AsyncBaseTransport | None = None, **kwargs: Any) -> None:
        super().__init__(base_url, model=model, **kwargs)
        self._client = httpx.AsyncClient(transport=transport, **self._client_kwargs())
        self._gate = asyncio.Semaphore(self._limits.max_concurrency)

    async def _send(self, request: _Request) -> httpx.Response:
        self._check_breaker(request)
        attempts = _Attempts(self._retry, request)
        while True:
            try:
                async with self._gate:
                    response = await self._client.request(request.method, request.path, json=request.body)
                self._outcome(up=True)
                delay = attempts.on_response(response)
            except httpx.TransportError as exc:
                delay = _or_broken(self, attempts, exc)
            else:
                if delay is None:
                    return response
            await asyncio.sleep(delay)

    async def _generate(self, request: _Request) -> Completion:
        started = time.perf_counter()
        try:
            response = await self._send(request)
        except BackendError as exc:
            if (fallback := self._schema_fallback(request, exc)) is None:
                raise
            request, response = fallback, await self._send(fallback)
        return self._parse(request, response, time.perf_counter() - started)

    async def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return await self._generate(self._chat_request(messages, params, model, schema))

    async def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return await self._generate(self._completion_request(prompt, params, model, schema))

    async def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:  # fmt: skip
        """Concurrent requests, capped by the backend's semaphore."""
        return list(await asyncio.gather(*(self.chat(c, params=params, model=model, schema=schema) for c in conversations)))

    async def list_models(self) -> list[str]:
        return self._parse_models(await self._send(_Request("GET", "/v1/models")))

    async def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        body = {"lora_name": name, "lora_path": str(path), **({"load_inplace": True} if replace else {})}
        await self._send(_Request("POST", "/v1/load_lora_adapter", body, name))

    async def unload_lora_adapter(self, name: str) -> None:
        await self._send(_Request("POST", "/v1/unload_lora_adapter", {"lora_name": name}, name))

    async def health(self) -> bool:
        try:
            return (await self._client.get("/health")).status_code == 200
        except httpx.TransportError:
            return False

    async def aclose(self) -> None:
        await self._client.aclose()

    async def __aenter__(self) -> "AsyncOpenAICompatibleBackend":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
