"""OpenTelemetry spans and metrics from the embedded client, captured in memory."""

from __future__ import annotations

import asyncio
import re

import pytest

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402

from memsdk import AsyncMemoryClient, MemoryClient  # noqa: E402
from memsdk.embedding import HashEmbedder  # noqa: E402
from memsdk.telemetry import Telemetry, scope_hash  # noqa: E402
from memsdk.types import Scope  # noqa: E402

from tests.client.conftest import ScriptedBackend  # noqa: E402

BOB = {"user_id": "bob"}


@pytest.fixture
def otel():
    spans, reader = InMemorySpanExporter(), InMemoryMetricReader()
    tracer_provider = sdk_trace.TracerProvider()
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    return Telemetry(tracer_provider=tracer_provider, meter_provider=MeterProvider(metric_readers=[reader])), spans, reader


def metric_points(reader: InMemoryMetricReader) -> dict[str, list]:
    data = reader.get_metrics_data()
    return {m.name: list(m.data.data_points) for rm in data.resource_metrics for sm in rm.scope_metrics for m in sm.metrics}


def test_an_ingest_and_an_answer_are_span_trees_with_hashed_scopes_and_metrics(tmp_path, otel) -> None:
    telemetry, spans, reader = otel
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic", telemetry=telemetry) as client:
        client.ingest({"speaker": "Bob", "text": "I live in Boston"}, scope=BOB)
        client.answer("Where does Bob live?", scope=BOB)
        client.retrieve("Boston?", scope=BOB)
    finished = spans.get_finished_spans()
    by_name = {}
    for s in finished:
        by_name.setdefault(s.name, []).append(s)
    ingest, answer = by_name["memsdk ingest"][0], by_name["memsdk answer"][0]
    assert "memsdk retrieve" in by_name
    # the pipeline's stages are children of the call that ran them
    children = {s.name for s in finished if s.parent is not None and s.parent.span_id == ingest.context.span_id}
    assert {"memsdk.store", "memsdk.retrieval"} <= children
    attrs = dict(ingest.attributes or {})
    assert attrs["memsdk.operation"] == "ingest" and attrs["memsdk.fallback"] is False and attrs["memsdk.failures"] == 0
    assert attrs["memsdk.scope.hash"] == scope_hash([Scope(**BOB)]) and re.fullmatch(r"[0-9a-f]{16}", attrs["memsdk.scope.hash"])
    assert attrs["memsdk.policy.manager.version"] and all("bob" not in str(v) for s in finished for v in (s.attributes or {}).values())
    assert dict(answer.attributes or {})["memsdk.operation"] == "answer"
    points = metric_points(reader)
    operations = {p.attributes["memsdk.operation"]: p.count for p in points["memsdk.operation.duration"]}
    assert operations == {"ingest": 1, "answer": 1}


def test_an_llm_policy_call_is_a_chat_span_with_the_genai_conventions(tmp_path, otel) -> None:
    telemetry, spans, reader = otel
    backend = ScriptedBackend('{"facts": ["Bob lives in Boston"]}')
    with MemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), backend=backend, policies={"extractor": "llm", "manager": "heuristic", "answerer": "heuristic"}, telemetry=telemetry) as client:
        client.ingest({"speaker": "Bob", "text": "I live in Boston"}, scope=BOB)
    chats = [s for s in spans.get_finished_spans() if s.name.startswith("chat ")]
    assert len(chats) == 1
    attrs = dict(chats[0].attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat" and attrs["memsdk.role"] == "extractor"
    assert attrs["gen_ai.usage.input_tokens"] == 100 and attrs["gen_ai.usage.output_tokens"] > 0 and attrs["gen_ai.request.model"]
    tokens = {p.attributes["gen_ai.token.type"]: p.sum for p in metric_points(reader)["gen_ai.client.token.usage"]}
    assert tokens["input"] == 100


def test_the_async_client_reports_the_same_spans(tmp_path, otel) -> None:
    telemetry, spans, _ = otel

    async def run() -> None:
        async with AsyncMemoryClient(data_dir=tmp_path / "d", embedder=HashEmbedder(64), policies="heuristic", telemetry=telemetry) as client:
            await client.ingest({"speaker": "Bob", "text": "I live in Boston"}, scope=BOB)
            await client.answer("Where does Bob live?", scope=BOB)

    asyncio.run(run())
    finished = spans.get_finished_spans()
    ingest = next(s for s in finished if s.name == "memsdk ingest")
    assert {"memsdk ingest", "memsdk answer", "memsdk.store"} <= {s.name for s in finished}
    assert any(s.parent is not None and s.parent.span_id == ingest.context.span_id and s.name == "memsdk.store" for s in finished)
