"""A policy's decision as effects, with the role's fallback, and the policies one request runs on."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from memsdk.effects import Call, Steps
from memsdk.errors import PolicyUnavailable
from memsdk.pipeline.forget_head import ForgetReading
from memsdk.policies import Answerer, Extractor, Manager
from memsdk.policies.writer import Writer

__all__ = ["ActivePolicies", "decide_with_fallback"]

log = logging.getLogger("memsdk.policies")


@dataclass(frozen=True)
class ActivePolicies:
    """The policies one call runs on, captured once per call: a policy swapped in while a
    request is in flight takes effect from the next request on."""

    extractor: Extractor
    manager: Manager
    answerer: Answerer
    versions: dict[str, str]
    #: set: ingest runs Mem-alpha's writer (`write_steps`) instead of extractor + manager
    writer: Writer | None = None
    #: the memories per question the serving answerer version was trained at; None: the client's answer_k
    answer_k: int | None = None
    #: the trained forget heads over their embedder; None: the forget rules alone
    forget: ForgetReading | None = None


def decide_with_fallback(policy: Any, method: str, *args: Any, **kw: Any) -> Steps[Any]:
    """A policy's decision as effects, with the role's fallback: an LLM policy's ``steps``
    (its `Chat` requests), a policy without a model called as it is (``method``). When the
    backend is unavailable (`PolicyUnavailable`, after the backend's own retries) and the
    policy has a ``fallback``, the fallback decides instead, and the result says
    ``fallback=True`` so the log shows the degraded decision; without one it propagates."""
    try:
        return (yield from _steps_of(policy, method, *args, **kw))
    except PolicyUnavailable as exc:
        fallback = getattr(policy, "fallback", None)
        if fallback is None:
            raise
        policy.stats.add("fallbacks")
        log.warning("%s backend unavailable, using %s: %s", policy.role, type(fallback).__name__, exc)
    result = yield from _steps_of(fallback, method, *args, **kw)
    result.fallback = True
    return result


def _steps_of(policy: Any, method: str, *args: Any, **kw: Any) -> Steps[Any]:
    if callable(steps := getattr(policy, "steps", None)):
        return (yield from steps(*args, **kw))
    # a built-in policy without a model (the heuristics): quick and pure, so the async client
    # runs it in place; a `Call` all the same, so its time is the policy stage's, as an LLM's is
    decide = getattr(policy, method)
    return (yield Call(decide, args, kw, afn=_in_place(decide)))


def _in_place(fn: Callable[..., Any]) -> Callable[..., Awaitable[Any]]:
    async def call(*args: Any, **kw: Any) -> Any:
        return fn(*args, **kw)

    return call
