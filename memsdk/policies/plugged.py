"""Policies you write: how memsdk runs them, whatever their role.

A policy takes one of two forms, per role (each role's module holds its rules protocol and
its plugged class: `memsdk.policies.extractor.ExtractorRules` / `PluggedExtractor`, the
manager's and the answerer's likewise; `memsdk.policies.plug` picks the class for a role):

- **Rules** (no LLM), one plain method:
  ``extract(turn, context) -> list[str]`` (facts), ``decide(facts, related, *,
  source_turn_ids) -> list[Op]`` (ops on the ``related`` memories it was shown, or ADDs),
  ``answer(question, memories) -> str``. The built-in result types (`Extraction`,
  `Decision`, `Answer`) are accepted too, and so are dicts for ops. An async twin
  (``aextract`` / ``adecide`` / ``aanswer``) is used by `AsyncMemoryClient` when present;
  otherwise the plain method runs in a worker thread.
- **Prompt** (an LLM, without I/O of its own): ``request(*inputs) -> messages`` builds the
  chat request and ``read(reply, *inputs)`` turns the model's reply text into what the rules
  form returns. The inputs are the rules form's: ``(turn, context)``, ``(facts, related)``,
  ``(question, memories)``. memsdk sends the request to the role's backend, records the
  call in the interaction log, counts what failed, and falls back when the backend is down.

Whatever a policy returns then goes the way a built-in policy's decision goes: the pipeline's
op guard (`memsdk.policies.manager.check_ops`: only memories it was shown, one op each, the
semantic tier), the bank's transition function (the caller's scope, tiers, versions),
history with the policy's version as the actor, and the interaction log. A policy cannot
name a scope at all: the pipeline applies its ops to the scope being ingested.

Exceptions a policy raises, and results of the wrong type, become `PolicyError`: the
pipeline reports them in ``failures`` and the turn stays in the episodic tier.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, Protocol, TypeVar, runtime_checkable

from abc import ABC, abstractmethod

from memsdk.effects import Call, Chat, Request, Steps
from memsdk.errors import MemsdkError, PolicyError
from memsdk.llm.base import Completion, SamplingParams
from memsdk.policies.calling.caller import PolicyCall, PolicyStats

__all__ = ["PromptPolicy", "Plugged", "RULE_METHOD", "check_policy_object", "is_prompt_policy"]


@runtime_checkable
class PromptPolicy(Protocol):
    """An LLM policy of any role, without I/O: build the request, read the reply."""

    role: str

    def request(self, *inputs: Any) -> Sequence[dict[str, str]]: ...

    def read(self, reply: str, *inputs: Any) -> Any: ...


#: the rules form's method per role
RULE_METHOD = {"extractor": "extract", "manager": "decide", "answerer": "answer"}


def is_prompt_policy(obj: Any) -> bool:
    return callable(getattr(obj, "request", None)) and callable(getattr(obj, "read", None))


def check_policy_object(obj: Any, role: str) -> None:
    """ValueError unless ``obj`` can serve ``role`` (the rules method, or request + read)."""
    declared = getattr(obj, "role", None)
    if isinstance(declared, str) and declared != role:
        raise ValueError(f"{type(obj).__qualname__} is a {declared} policy (its role attribute), not a {role}")
    method = RULE_METHOD.get(role)
    if method is None:
        raise ValueError(f"no role {role!r}")
    if not callable(getattr(obj, method, None)) and not is_prompt_policy(obj):
        raise ValueError(f"a {role} policy needs {method}(...) (rules) or request(...) and read(reply, ...) (an LLM prompt); {type(obj).__qualname__} has neither")


class _Decided(Protocol):
    calls: list[PolicyCall]


D = TypeVar("D", bound=_Decided)  # the role's result: Extraction, Decision or Answer


class Plugged(ABC, Generic[D]):
    """Runs a user's policy of one role behind the interface the pipeline calls.

    Subclasses say which method the role has (``rule``) and how a result is checked
    (``_coerce``); the running, error mapping, logging and fallback are here, once.
    """

    role: str
    rule: str

    def __init__(
        self,
        policy: Any,
        *,
        name: str | None = None,
        backend: Any = None,
        model: str | None = None,
        params: SamplingParams | None = None,
        fallback: Any = None,
    ) -> None:
        check_policy_object(policy, self.role)
        self.policy, self.backend, self.model, self.fallback = policy, backend, model, fallback
        self.params = params or SamplingParams(max_tokens=256)
        self.stats = PolicyStats()
        self.prompted = not callable(getattr(policy, self.rule, None))
        if self.prompted and backend is None:
            raise ValueError(f"{type(policy).__qualname__} is an LLM prompt policy (request/read) and needs a backend")
        own = getattr(policy, "version", None)
        self.name = name or type(policy).__qualname__
        self.version = f"{self.name}@{own}" if isinstance(own, str) and own else self.name

    # -- the two forms, as one policy's steps ---------------------------------------------------

    def steps(self, *inputs: Any, **kw: Any) -> Steps[D]:
        """Rules: one `Call` of the policy's method. Prompt: its request as one `Chat`, the
        reply read by its ``read``. Either way the result is checked (`_coerce`)."""
        if not self.prompted:
            twin = getattr(self.policy, "a" + self.rule, None)
            value = yield Call(self._guarded, (getattr(self.policy, self.rule), *inputs), kw, afn=self._aguarded if callable(twin) else None)
            return self._coerce(value, inputs, kw)
        messages, started = self._request(inputs), time.perf_counter()
        completion = yield Chat(self.backend, Request(messages, "", self.params, self.model, None), self.role)
        return self._read(messages, completion, started, inputs, kw)

    async def _aguarded(self, method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        # the async twin of the rules method (``adecide`` for ``decide``) is awaited instead
        twin = getattr(self.policy, "a" + method.__name__)
        try:
            return await twin(*args, **kw)
        except MemsdkError:
            raise
        except Exception as exc:
            raise self._raised(exc) from exc

    def _request(self, inputs: tuple[Any, ...]) -> list[dict[str, str]]:
        messages = self._guarded(self.policy.request, *inputs)
        if not isinstance(messages, (list, tuple)) or not all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in messages) or not messages:
            raise PolicyError(f"{self.version}.request returned {type(messages).__name__}, not a non-empty list of {{'role': ..., 'content': ...}} messages")
        return list(messages)

    def _read(self, messages: list[dict[str, str]], completion: Completion, started: float, inputs: tuple[Any, ...], kw: dict[str, Any]) -> D:
        if not completion.choices:
            raise PolicyError("the backend returned no choices")
        choice = completion.choices[0]
        call = PolicyCall(
            role=self.role, policy_version=f"{self.version}@{self.model or self.backend.model}", messages=messages, raw_output=choice.text, parsed=None,
            prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens, latency_s=time.perf_counter() - started,
            token_ids=choice.token_ids, finish_reason=choice.finish_reason,
        )
        self.stats.add("calls")
        try:
            result = self._coerce(self._guarded(self.policy.read, choice.text, *inputs), inputs, kw)
        except PolicyError as exc:  # an unreadable reply costs this decision, as a built-in's does
            self.stats.add("parse_failures")
            call.failure = str(exc)
            result = self._empty(call.failure)
        else:
            call.parsed = self._summary(result)
        result.calls = [call, *result.calls]
        return result

    # -- errors and results ------------------------------------------------------------------

    def _guarded(self, method: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        try:
            return method(*args, **kw)
        except MemsdkError:
            raise
        except Exception as exc:
            raise self._raised(exc) from exc

    def _raised(self, exc: Exception) -> PolicyError:
        self.stats.add("raised")
        return PolicyError(f"{self.version} raised {type(exc).__name__}: {exc}")

    def _wrong(self, what: str, value: Any, expected: str) -> PolicyError:
        self.stats.add("bad_results")
        return PolicyError(f"{self.version} returned {what} of type {type(value).__name__}; expected {expected}")

    @abstractmethod
    def _coerce(self, value: Any, inputs: tuple[Any, ...], kw: dict[str, Any]) -> D:
        """The role's result from what the policy returned, checked (`PolicyError` if wrong)."""

    @abstractmethod
    def _empty(self, why: str) -> D:
        """The safe decision when a reply could not be read."""

    @abstractmethod
    def _summary(self, result: D) -> dict[str, Any]:
        """The logged ``parsed`` field of a call that was read."""
