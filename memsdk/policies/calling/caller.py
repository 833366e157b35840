"""What every LLM policy shares: the record of one LLM call, failure counters, and the call
itself as pure steps (the effects it yields live in `memsdk.effects`).

A policy is prompt + schema + backend + model name, and it does no I/O. `LLMCaller.steps`
renders the prompt, *yields* a `Chat` effect (the request, and the backend to send it to),
receives the `Completion`, parses it with one repair, yields a second `Chat` to re-ask once
if that failed, and returns the value with a `PolicyCall` record that the interaction log
stores and the trainer later reads back (messages, raw output, token counts, logprobs when
asked for). Whoever drives the steps does the I/O: the clients' pipelines (blocking or
awaited), `memsdk.effects.run` / ``arun`` for a policy on its own, and the trainers (which answer a `Chat`
with a sampled group instead).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from memsdk.effects import Chat, Request, Steps
from memsdk.errors import PolicyError
from memsdk.llm.base import AsyncLLMBackend, Choice, Completion, LLMBackend, SamplingParams
from memsdk.policies.calling.parsing import Parsed, parse
from memsdk.policies.calling.prompts import PromptTemplate
from memsdk.policies.calling.schema import json_schema

__all__ = ["PolicyConfig", "PolicyCall", "PolicyStats", "LLMCaller"]

log = logging.getLogger("memsdk.policies")
T = TypeVar("T", bound=BaseModel)

REASK = "Your reply was not valid: {error}. Reply again with only the JSON object, nothing else."


@dataclass(frozen=True)
class PolicyConfig:
    """How an LLM policy calls its model.

    ``model`` is the served model or LoRA adapter name (None: the backend's default);
    ``params`` None means the role's default (a short, greedy generation); ``constrained``
    sends the output schema for constrained decoding where the backend supports it;
    ``reask`` allows one second request when the first reply cannot be parsed.
    """

    model: str | None = None
    prompt_version: str | None = None  # None: the role's default (prompts.DEFAULT_PROMPTS)
    params: SamplingParams | None = None
    constrained: bool = True
    reask: bool = True


@dataclass
class PolicyCall:
    """One policy decision as it happened; the unit of the interaction log and of training data."""

    role: str
    policy_version: str
    messages: list[dict[str, str]]
    raw_output: str
    parsed: dict[str, Any] | None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    failure: str | None = None
    repaired: bool = False
    reasked: bool = False
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None
    finish_reason: str | None = None  # of the last reply: "length" means it was cut by max_tokens
    salvaged: list[str] = field(default_factory=list)  # fields the reader dropped or mended (parsing.Parsed.notes)

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class PolicyStats:
    """Counters of what went wrong, per failure kind; thread-safe."""

    counts: Counter[str] = field(default_factory=Counter)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self.counts[kind] += n

    def __getitem__(self, kind: str) -> int:
        return self.counts[kind]


class LLMCaller(Generic[T]):
    """Prompt + schema + backend + model: one reusable, logged, parse-safe LLM call."""

    def __init__(self, prompt: PromptTemplate, schema: type[T], config: PolicyConfig, *, default_max_tokens: int, stats: PolicyStats | None = None) -> None:
        self.prompt, self.schema = prompt, schema
        self.params = config.params or SamplingParams(max_tokens=default_max_tokens)
        self.model, self.constrained, self.reask = config.model, config.constrained, config.reask
        self.stats = stats if stats is not None else PolicyStats()

    def version(self, backend: LLMBackend | AsyncLLMBackend) -> str:
        return f"{self.prompt.role}.{self.prompt.version}@{self.model or backend.model}"

    def _schema_for(self, backend: LLMBackend | AsyncLLMBackend) -> dict[str, Any] | None:
        return json_schema(self.schema) if self.constrained and backend.supports_schema else None

    def _record(self, backend: Any, request: Request, completions: Sequence[Completion], parsed: Parsed[T], started: float) -> PolicyCall:
        last = completions[-1].choices[0]
        call = PolicyCall(
            role=self.prompt.role,
            policy_version=self.version(backend),
            messages=request.messages,
            raw_output=(request.prefix if len(completions) == 1 else "") + last.text,
            parsed=None if parsed.value is None else parsed.value.model_dump(mode="json"),
            prompt_tokens=sum(c.prompt_tokens for c in completions),
            completion_tokens=sum(c.completion_tokens for c in completions),
            latency_s=time.perf_counter() - started,
            failure=parsed.error,
            repaired=parsed.repaired,
            reasked=len(completions) > 1,
            token_ids=last.token_ids,
            logprobs=None if last.logprobs is None else [t.logprob for t in last.logprobs],
            finish_reason=last.finish_reason,
            salvaged=list(parsed.notes),
        )
        self.stats.add("calls")
        if call.finish_reason == "length":
            self.stats.add("truncated")  # a runaway reply: the schema bounds or the budget are too loose
        if call.salvaged:
            self.stats.add("salvaged_fields", len(call.salvaged))
            log.info("%s: kept a reply field by field: %s", call.policy_version, "; ".join(call.salvaged))
        if call.repaired:
            self.stats.add("repaired")
        if call.reasked:
            self.stats.add("reasked")
        if call.failure:
            self.stats.add("parse_failures")
            log.warning("%s: unparseable output (%s): %.200r", call.policy_version, call.failure, call.raw_output)
        return call

    def request(self, backend: LLMBackend | AsyncLLMBackend, values: Mapping[str, str], *, max_tokens: int | None = None) -> Request:
        """The request the policy sends for these prompt values.

        Without constrained decoding a small model often answers in prose; starting its
        reply with the prompt's ``response_prefix`` (e.g. ``{"facts": ["``) keeps it in JSON,
        and the prompt's ``stop`` string ends it where the JSON ends. With a schema the
        server enforces the format, and neither is sent. Trainers use the same request.
        ``max_tokens`` replaces the role's reply budget for this request (MemAgent's reply is
        a memory whose size the caller chooses).
        """
        messages = self.prompt.render(**values)
        base = self.params if max_tokens is None else self.params.model_copy(update={"max_tokens": max_tokens})
        schema = self._schema_for(backend)
        if schema is not None:
            return Request(messages, "", base, self.model, schema)
        prefix, params = self.prompt.response_prefix, base
        if prefix:
            messages = [*messages, {"role": "assistant", "content": prefix}]
        if self.prompt.stop and self.prompt.stop not in params.stop:
            params = params.model_copy(update={"stop": (*params.stop, self.prompt.stop)})
        return Request(messages, prefix, params, self.model, None)

    def reply_text(self, request: Request, choice: Choice) -> str:
        """The whole reply as the model meant it: prefix + generated text, and the stop
        string put back when the reply ended on it and is valid JSON with it."""
        text = request.prefix + choice.text
        if self.prompt.stop and choice.finish_reason == "stop" and request.schema is None:
            if parse(text + self.prompt.stop, self.schema, repair=False).ok:
                return text + self.prompt.stop
        return text

    def follow_up(self, request: Request, reply: str, user: str, *, prefix: bool = True) -> Request:
        """``request`` continued: the reply it got (whole), a new user turn, and the response
        prefix again unless ``prefix=False`` (a DeltaMem search's results; the re-ask, which
        lets the model start its second reply freely)."""
        messages = request.messages[:-1] if request.prefix else request.messages  # the whole reply instead of its prefix
        messages = [*messages, {"role": "assistant", "content": reply[:2000]}, {"role": "user", "content": user}]
        if prefix and request.prefix:
            messages.append({"role": "assistant", "content": request.prefix})
        return Request(messages, request.prefix if prefix else "", request.params, request.model, request.schema)

    def steps(self, backend: LLMBackend | AsyncLLMBackend, values: Mapping[str, str], *, max_tokens: int | None = None) -> Steps[tuple[T | None, PolicyCall]]:
        """Ask, parse, maybe re-ask once. Backend failures are thrown in and propagate."""
        return (yield from self.ask(backend, self.request(backend, values, max_tokens=max_tokens)))

    def ask(self, backend: LLMBackend | AsyncLLMBackend, request: Request) -> Steps[tuple[T | None, PolicyCall]]:
        """`steps` for a request already built (a conversation that goes on: `follow_up`)."""
        started = time.perf_counter()
        completions = [_checked((yield Chat(backend, request, self.prompt.role)))]
        parsed = parse(self.reply_text(request, completions[0].choices[0]), self.schema)
        if not parsed.ok and self.reask:
            again = self.follow_up(request, self.reply_text(request, completions[0].choices[0]), REASK.format(error=parsed.error), prefix=False)
            completions.append(_checked((yield Chat(backend, again, self.prompt.role))))
            parsed = parse(self.reply_text(again, completions[-1].choices[0]), self.schema)
        return parsed.value, self._record(backend, request, completions, parsed, started)

    def read(self, backend: LLMBackend | AsyncLLMBackend, request: Request, text: str) -> tuple[T | None, PolicyCall]:
        """A whole reply to ``request`` (its prefix included: `reply_text`) parsed as `steps`
        parses a first reply, with its record: the trainers' reading of each sampled reply
        (no re-ask, and nothing counted in the serving stats)."""
        parsed = parse(text, self.schema)
        call = PolicyCall(
            role=self.prompt.role, policy_version=self.version(backend), messages=request.messages, raw_output=text,
            parsed=None if parsed.value is None else parsed.value.model_dump(mode="json"),
            failure=parsed.error, repaired=parsed.repaired, salvaged=list(parsed.notes),
        )
        return parsed.value, call


def _checked(completion: Completion) -> Completion:
    if not completion.choices:
        raise PolicyError("the backend returned no choices")
    return completion
