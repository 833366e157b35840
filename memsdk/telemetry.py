"""OpenTelemetry traces and metrics for every client call, a no-op until an app configures an SDK.

memsdk depends on the OpenTelemetry *API* only when it is installed (``pip install
'memsdk[otel]'``); the API does nothing until the app installs an SDK with a tracer and a
meter provider, so an app that does not trace pays a few attribute lookups per call, and
one without the package pays nothing. The embedded client and `memsdk serve` (which adds a
span per HTTP request around the client's) emit the same spans:

    memsdk ingest | answer | retrieve       one per call; attributes memsdk.operation,
                                           memsdk.scope.hash (a hash: scope ids are personal
                                           data and never leave the process), memsdk.fallback,
                                           memsdk.failures, memsdk.policy.<role>.version
      memsdk.retrieval | memsdk.store      each stage of the pipeline that ran
      chat <model>                         each LLM policy call, with the GenAI semantic
                                           conventions: gen_ai.operation.name, gen_ai.request.model,
                                           gen_ai.usage.input_tokens / output_tokens, memsdk.role

`memsdk serve` puts a span per HTTP request (``HTTP <method>``: http.request.method,
url.path, http.response.status_code) around them.

Metrics: ``memsdk.operation.duration`` (s, per operation), ``gen_ai.client.token.usage``
(per token type and model), ``memsdk.fallbacks`` and ``memsdk.failures`` (per operation),
and in the server ``memsdk.queue.depth`` (accepted turns waiting).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from memsdk.types import Scope

__all__ = ["Telemetry", "scope_hash", "NAME"]

NAME = "memsdk"


def scope_hash(scopes: Sequence[Scope]) -> str:
    """What a span says about whose memory it touched: 16 hex digits of sha256 over the scopes."""
    return hashlib.sha256("|".join(s.key for s in scopes).encode("utf-8")).hexdigest()[:16]


class Telemetry:
    """The tracer and the instruments of one client (module docstring). Without the
    OpenTelemetry API installed every method is a no-op.

    ``tracer_provider`` / ``meter_provider``: the SDK providers to report to; None (the
    usual case) is whatever the app set globally (`opentelemetry.trace.set_tracer_provider`),
    which is a no-op until it sets one. ``MemoryClient(telemetry=Telemetry(...))`` passes
    explicit ones, so two clients in one process can report to two places."""

    def __init__(self, *, tracer_provider: Any = None, meter_provider: Any = None) -> None:
        try:
            from opentelemetry import metrics, trace
        except ImportError:
            self._tracer: Any = None
            return
        from memsdk._version import __version__

        self._tracer = trace.get_tracer(NAME, __version__, tracer_provider=tracer_provider)
        self._meter = meter = metrics.get_meter(NAME, __version__, meter_provider=meter_provider)
        self._duration = meter.create_histogram("memsdk.operation.duration", unit="s", description="Wall time of one client call.")
        self._tokens = meter.create_histogram("gen_ai.client.token.usage", unit="{token}", description="Tokens per LLM policy call.")
        self._fallbacks = meter.create_counter("memsdk.fallbacks", description="Calls where a heuristic stood in for an unavailable LLM.")
        self._failures = meter.create_counter("memsdk.failures", description="Parse failures and rejected ops, none of which lost a turn.")

    def gauge(self, name: str, description: str, read: Callable[[], int]) -> None:
        """An observable gauge (``memsdk.queue.depth``: the server's accepted turns waiting)."""
        if self._tracer is None:
            return
        from opentelemetry.metrics import Observation

        self._meter.create_observable_gauge(name, callbacks=[lambda options: [Observation(read())]], description=description)

    @contextmanager
    def span(self, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Any]:
        """A child span of whatever span is current (None without the API)."""
        if self._tracer is None:
            yield None
            return
        with self._tracer.start_as_current_span(name, attributes=dict(attributes or {})) as span:
            yield span

    @contextmanager
    def operation(self, operation: str, scopes: Sequence[Scope]) -> Iterator[Any]:
        """The span of one client call (``ingest``, ``answer``, ``retrieve``)."""
        with self.span(f"{NAME} {operation}", {"memsdk.operation": operation, "memsdk.scope.hash": scope_hash(scopes)}) as span:
            yield span

    @contextmanager
    def chat(self, role: str, model: str) -> Iterator[Callable[[Any], None]]:
        """The span of one LLM call; the caller hands the `Completion` to the function it gets."""
        with self.span(f"chat {model}", {"gen_ai.operation.name": "chat", "gen_ai.request.model": model, "memsdk.role": role}) as span:

            def done(completion: Any) -> None:
                if span is None:
                    return
                span.set_attribute("gen_ai.response.model", completion.model)
                span.set_attribute("gen_ai.usage.input_tokens", completion.prompt_tokens)
                span.set_attribute("gen_ai.usage.output_tokens", completion.completion_tokens)
                for kind, n in (("input", completion.prompt_tokens), ("output", completion.completion_tokens)):
                    self._tokens.record(n, {"gen_ai.token.type": kind, "gen_ai.request.model": model, "gen_ai.operation.name": "chat"})

            yield done

    def record_outcome(self, operation: str, *, latency_s: float, versions: Mapping[str, str], fallback: bool, failures: int) -> None:
        """What a call came to: on its span (the current one), and in the metrics."""
        if self._tracer is None:
            return
        from opentelemetry import trace

        span = trace.get_current_span()
        attributes = {"memsdk.operation": operation}
        self._duration.record(latency_s, attributes)
        if fallback:
            self._fallbacks.add(1, attributes)
        if failures:
            self._failures.add(failures, attributes)
        if span.is_recording():
            span.set_attribute("memsdk.fallback", fallback)
            span.set_attribute("memsdk.failures", failures)
            for role, version in versions.items():
                span.set_attribute(f"memsdk.policy.{role}.version", version)
