"""`memsdk serve` over a live loopback socket: the API, keys, tenants and bad input."""

from __future__ import annotations

import json
import random
import time
import uuid

import httpx
import pytest

from memsdk.server import ServerLimits
from memsdk.server.tenancy import bind

from tests.server.conftest import KEYS, REVOKED

BOB = {"user_id": "bob"}


def turn(text: str, i: int = 1, speaker: str = "Bob") -> dict[str, str]:
    return {"speaker": speaker, "text": text, "turn_id": f"D1:{i}", "timestamp": "8 May 2023"}


def is_problem(r: httpx.Response, status: int, title: str, field: str | None = None) -> dict:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    body = r.json()
    assert body["title"] == title and body["status"] == status and body["type"].endswith(title)
    if field is not None:
        assert body["field"] == field, body
    return body


def test_the_api_mirrors_the_client_and_returns_scopes_as_the_app_named_them(serve) -> None:
    s = serve()
    with s.http() as h:
        r = h.post("/v1/ingest", json={"scope": BOB, "turn": turn("I live in Boston with my two cats")})
        assert r.status_code == 200 and r.json()["episodic_id"] and r.json()["facts"]
        r = h.post("/v1/ingest", json={"scope": BOB, "turns": [turn("I work as a nurse", 2), turn("My sister is Anna", 3)]})
        assert [len(x["ops"]) > 0 for x in r.json()] == [True, True]
        listed = h.get("/v1/memories", params={**BOB, "tier": "episodic"}).json()
        assert [m["text"] for m in listed] == ["I live in Boston with my two cats", "I work as a nurse", "My sister is Anna"]
        assert all(m["scope"] == {"user_id": "bob", "agent_id": None, "run_id": None} for m in listed)  # not "alpha/bob"
        # the same calls through the embedded client see the same memories, bound to the tenant
        inside = s.client.list(scope=bind("alpha", BOB), tier="episodic")
        assert [m.id for m in inside] == [uuid.UUID(m["id"]) for m in listed]

        answer = h.post("/v1/answer", json={"question": "Where does Bob live?", "scope": BOB}).json()
        assert answer["trajectory_id"] and answer["retrieved"] > 0 and all(e["scope"]["user_id"] == "bob" for e in answer["evidence"])
        shown = h.post("/v1/retrieve", json={"question": "Where does Bob live?", "scopes": [BOB, {"user_id": "sue"}]}).json()
        assert shown and shown[0]["record"]["scope"]["user_id"] == "bob"
        found = h.post("/v1/search", json={"query": "nurse", "scope": BOB, "limit": 2, "tier": "episodic"}).json()
        assert len(found) == 2 and found[0]["record"]["text"] == "I work as a nurse"
        assert h.post("/v1/feedback", json={"trajectory_id": answer["trajectory_id"], "correct": True}).status_code == 204

        added = h.post("/v1/memories", json={"text": "Bob likes jazz", "scope": BOB, "metadata": {"source": "app"}})
        assert added.status_code == 201
        mid = added.json()["id"]
        assert h.get(f"/v1/memories/{mid}", params=BOB).json()["metadata"] == {"source": "app"}
        assert h.patch(f"/v1/memories/{mid}", json={"text": "Bob loves jazz", "scope": BOB}).json()["version"] == 2
        assert h.delete(f"/v1/memories/{mid}", params=BOB).json()["deleted"] is True
        is_problem(h.get(f"/v1/memories/{mid}", params=BOB), 404, "MemoryNotFound", "memory_id")
        assert h.post(f"/v1/memories/{mid}/restore", json={"scope": BOB}).json()["deleted"] is False
        events = h.get("/v1/history", params={**BOB, "memory_id": mid}).json()
        assert [e["event"] for e in events] == ["ADD", "UPDATE", "DELETE", "RESTORE"] and events[0]["scope"]["user_id"] == "bob"

        exported = h.post("/v1/export", json={"scope": BOB})
        assert exported.headers["content-type"].startswith("application/x-ndjson")
        lines = exported.text.splitlines()
        assert json.loads(lines[0])["scope"]["user_id"] == "bob" and "alpha/" not in exported.text
        imported = h.post("/v1/import", params={"user_id": "bob-copy"}, content=exported.content, headers={"content-type": "application/x-ndjson"})
        assert imported.json() == {"imported": json.loads(lines[0])["records"]}
        assert len(h.get("/v1/memories", params={"user_id": "bob-copy"}).json()) == json.loads(lines[0])["records"]

        assert h.post("/v1/erase", json={"scope": BOB}).json()["erased"] > 0
        assert h.get("/v1/memories", params=BOB).json() == []
        assert h.get("/v1/policies").json()["answerer"]["version"]
        assert h.get("/healthz").json() == {"status": "ok"} and h.get("/readyz").json() == {"status": "ready"}
        spec = h.get("/openapi.json").json()
        assert {"/v1/ingest", "/v1/answer", "/v1/memories/{memory_id}", "/v1/import"} <= set(spec["paths"])


@pytest.mark.parametrize(
    "headers",
    [{}, {"Authorization": "key-alpha"}, {"Authorization": "Basic a2V5LWFscGhh"}, {"Authorization": "Bearer"}, {"Authorization": f"Bearer {REVOKED}"}, {"Authorization": "Bearer key-alphaX"}],
    ids=["missing", "no-scheme", "basic", "empty", "revoked", "unknown"],
)
def test_a_request_without_a_valid_key_is_401_and_stores_nothing(serve, headers) -> None:
    s = serve()
    with httpx.Client(base_url=s.url, headers=headers) as h:
        r = h.post("/v1/ingest", json={"scope": BOB, "turn": turn("I live in Boston")})
        is_problem(r, 401, "Unauthorized")
        assert r.headers["www-authenticate"] == "Bearer"
        is_problem(h.get("/v1/memories", params=BOB), 401, "Unauthorized")
    assert s.client.list(scope=bind("alpha", BOB)) == []
    with s.http() as h:  # the health checks need no key
        assert httpx.get(f"{s.url}/healthz").status_code == 200 and h.get("/v1/memories", params=BOB).json() == []


def test_another_tenants_memory_is_404_exactly_like_one_that_does_not_exist(serve) -> None:
    s = serve()
    with s.http("key-alpha") as a, s.http("key-beta") as b:
        mid = a.post("/v1/memories", json={"text": "alpha's secret", "scope": BOB}).json()["id"]
        trajectory_id = a.post("/v1/answer", json={"question": "secret?", "scope": BOB}).json()["trajectory_id"]
        nowhere = str(uuid.uuid4())
        for memory in (mid, nowhere):
            replies = [
                b.get(f"/v1/memories/{memory}", params=BOB),
                b.patch(f"/v1/memories/{memory}", json={"text": "overwritten", "scope": BOB}),
                b.delete(f"/v1/memories/{memory}", params=BOB),
                b.post(f"/v1/memories/{memory}/restore", json={"scope": BOB}),
                b.get("/v1/history", params={**BOB, "memory_id": memory}),
            ]
            assert [r.status_code for r in replies] == [404] * 5
            assert len({r.text for r in replies[:4]}) == 1  # the same words whoever owns it
        for answer in (trajectory_id, nowhere):
            is_problem(b.post("/v1/feedback", json={"trajectory_id": answer, "correct": False}), 404, "MemoryNotFound", "trajectory_id")
        # the bank routes the LangGraph store uses: another tenant's id is not found, its scopes not listed
        for memory in (mid, nowhere):
            is_problem(b.post("/v1/apply", json={"scope": BOB, "ops": [{"op": "DELETE", "target": memory}]}), 404, "MemoryNotFound", "memory_id")
        b.post("/v1/memories", json={"text": "beta's own", "scope": {"user_id": "zed"}})
        assert a.get("/v1/scopes").json() == [{"user_id": "bob", "agent_id": None, "run_id": None}]
        assert {s["user_id"] for s in b.get("/v1/scopes").json()} == {"zed"}
        # a scope that names the other tenant's prefix is a scope of the caller's own
        b.post("/v1/memories", json={"text": "beta writes", "scope": {"user_id": "alpha/bob"}})
        assert [m["text"] for m in a.get("/v1/memories", params=BOB).json()] == ["alpha's secret"]
        assert a.get(f"/v1/memories/{mid}", params=BOB).json()["version"] == 1
        # no field can name a tenant
        is_problem(b.post("/v1/memories", json={"text": "x", "scope": {**BOB, "tenant": "alpha"}}), 422, "InvalidInput", "scope.tenant")
        assert b.get("/v1/memories", params={**BOB, "tenant": "alpha"}).json() == []  # an unknown query field is ignored: beta's own bob
        # an export of another tenant's scope imported as one's own stays one's own: with its
        # ids kept (into the scope it names) they clash, and nothing is imported; into
        # another scope it is a copy with fresh ids, in the importer's tenant
        dump = a.post("/v1/export", json={"scope": BOB}).content
        is_problem(b.post("/v1/import", content=dump), 409, "ImportConflict")
        assert b.post("/v1/import", params={"user_id": "bob-copy"}, content=dump).json()["imported"] == 1
        assert [m["text"] for m in a.get("/v1/memories", params=BOB).json()] == ["alpha's secret"]
        assert [m["text"] for m in b.get("/v1/memories", params={"user_id": "bob-copy"}).json()] == ["alpha's secret"]
        assert a.get("/v1/memories", params={"user_id": "bob-copy"}).json() == []


def test_only_an_admin_key_switches_policies(serve) -> None:
    s = serve()
    with s.http("key-beta") as b, s.http("key-alpha") as a:
        is_problem(b.post("/v1/policies/answerer/use", json={"version": "base"}), 403, "Forbidden")
        is_problem(b.post("/v1/policies/answerer/rollback"), 403, "Forbidden")
        # the admin gets through to the client, which says why a heuristic cannot switch
        is_problem(a.post("/v1/policies/answerer/use", json={"version": "v2"}), 409, "PolicyError")


@pytest.mark.parametrize(
    ("content", "status", "title", "field"),
    [
        (b'{"scope": {"user_id": "bob"}, "turn": ', 422, "InvalidInput", "body"),  # truncated JSON
        (b'{"scope": {"user_id": "bob"}, "turn": {"speaker": "Bob", "text": "caf\xe9"}}', 400, "InvalidInput", "body"),  # latin-1, not UTF-8
        (b'{"scope": {"user_id": 7}, "turn": {"speaker": "Bob", "text": "hi"}}', 422, "InvalidInput", "scope.user_id"),
        (b'{"scope": {}, "turn": {"speaker": "Bob", "text": "hi"}}', 422, "ScopeRequired", "scope"),
        (b'{"scope": {"user_id": "bob"}, "turn": {"speaker": "Bob", "text": ""}}', 422, "InvalidInput", None),
        (b'{"scope": {"user_id": "bob"}, "turn": {"speaker": "Bob"}}', 422, "InvalidInput", None),
        (b'{"scope": {"user_id": "bob"}}', 422, "InvalidInput", "turn"),
        (b'[1, 2]', 422, "InvalidInput", None),
    ],
    ids=["truncated", "latin1", "wrong-type", "empty-scope", "empty-text", "no-text", "no-turn", "not-object"],
)
def test_bad_input_is_a_typed_422_that_stores_nothing(serve, content, status, title, field) -> None:
    s = serve()
    with s.http() as h:
        is_problem(h.post("/v1/ingest", content=content, headers={"content-type": "application/json"}), status, title, field)
        assert h.get("/healthz").status_code == 200
    assert s.client.list(scope=bind("alpha", BOB)) == []


def test_oversized_bodies_are_413_declared_or_streamed_and_the_server_keeps_serving(serve) -> None:
    s = serve(limits=ServerLimits(max_body_bytes=4096, max_import_bytes=8192))
    big = json.dumps({"scope": BOB, "turn": turn("x" * 10_000)}).encode()
    with s.http() as h:
        is_problem(h.post("/v1/ingest", content=big, headers={"content-type": "application/json"}), 413, "PayloadTooLarge", "body")

        def chunks():  # no Content-Length: the limit is counted as the bytes arrive
            for i in range(0, len(big), 1000):
                yield big[i : i + 1000]

        is_problem(h.post("/v1/ingest", content=chunks(), headers={"content-type": "application/json"}), 413, "PayloadTooLarge")
        assert h.post("/v1/import", content=b"{}\n" * 2000).status_code == 422  # an import may be larger: parsed, refused as no export
        assert h.post("/v1/ingest", json={"scope": BOB, "turn": turn("small")}).status_code == 200
    assert [m.text for m in s.client.list(scope=bind("alpha", BOB), tier="episodic")] == ["small"]


def test_sixteen_look_alike_tenants_never_see_each_others_data(serve) -> None:
    """Every tenant uses the same user ids and runs a seeded random sequence over the API
    (ingest, add, update, delete, restore, answer with feedback, search, export into an
    import); every text it writes carries its name. Then no tenant's list, search, answer,
    history or export holds another's text, and an erase in one leaves the others whole."""
    tenants = {f"key-{i:02d}": f"t{i:02d}" for i in range(16)}
    s = serve(tenants=tenants)
    users = ["bob", "sue", "ann"]
    rng = random.Random(7)
    written: dict[str, set[str]] = {t: set() for t in tenants.values()}
    clients = {t: s.http(k) for k, t in tenants.items()}
    try:
        for step in range(160):
            name = rng.choice(sorted(clients))
            h, user = clients[name], {"user_id": rng.choice(users)}
            text = f"{name} fact {step}: lives in city {rng.randrange(50)}"
            action = rng.choice(["ingest", "add", "update", "delete", "restore", "answer", "search", "copy"])
            if action == "copy":  # export one user, import into another of the same tenant
                dump = h.post("/v1/export", json={"scope": user}).content
                copy = {"user_id": f"copy-{step}"}
                assert h.post("/v1/import", params=copy, content=dump).status_code == 200
            elif action == "restore" and (gone := [m for m in h.get("/v1/memories", params={**user, "include_deleted": True}).json() if m["deleted"]]):
                assert h.post(f"/v1/memories/{rng.choice(gone)['id']}/restore", json={"scope": user}).status_code == 200
            elif action == "ingest":
                assert h.post("/v1/ingest", json={"scope": user, "turn": turn(text, step)}).status_code == 200
                written[name].add(text)
            elif action == "add":
                assert h.post("/v1/memories", json={"text": text, "scope": user}).status_code == 201
                written[name].add(text)
            elif (mine := h.get("/v1/memories", params={**user, "tier": "semantic"}).json()) and action in ("update", "delete"):
                target = rng.choice(mine)["id"]
                if action == "update":
                    assert h.patch(f"/v1/memories/{target}", json={"text": text, "scope": user}).status_code == 200
                    written[name].add(text)
                else:
                    assert h.delete(f"/v1/memories/{target}", params=user).status_code == 200
            elif action == "answer":
                r = h.post("/v1/answer", json={"question": "where does she live?", "scopes": [{"user_id": u} for u in users]}).json()
                assert all(e["text"].startswith(name) or name in e["text"] for e in r["evidence"])
                assert h.post("/v1/feedback", json={"trajectory_id": r["trajectory_id"], "correct": True}).status_code == 204
            else:
                hits = h.post("/v1/search", json={"query": "lives in city", "scope": user, "limit": 50}).json()
                assert all(name in m["record"]["text"] for m in hits)
        for name, h in clients.items():
            mine = [s["user_id"] for s in h.get("/v1/scopes").json()]  # the copies too
            seen = " ".join(
                [m["text"] for u in mine for m in h.get("/v1/memories", params={"user_id": u, "include_deleted": True}).json()]
                + [e["after"] or "" for u in mine for e in h.get("/v1/history", params={"user_id": u}).json()]
                + [h.post("/v1/export", json={"scope": {"user_id": u}}).text for u in mine]
            )
            others = [t for t in tenants.values() if t != name and f"{t} fact" in seen]
            assert others == [], (name, others)
        victim, bystander = "t00", "t01"
        before = clients[bystander].get("/v1/memories", params={"user_id": "bob"}).json()
        clients[victim].post("/v1/erase", json={"scope": {"user_id": "bob"}})
        assert clients[bystander].get("/v1/memories", params={"user_id": "bob"}).json() == before
        assert clients[victim].get("/v1/memories", params={"user_id": "bob"}).json() == []
    finally:
        for h in clients.values():
            h.close()


def test_an_accepted_ingest_is_202_with_tickets_that_end_done_and_only_for_their_tenant(serve) -> None:
    s = serve()
    with s.http("key-alpha") as a, s.http("key-beta") as b:
        r = a.post("/v1/ingest/accepted", json={"scope": BOB, "turns": [turn("I live in Boston", 1), turn("I work as a nurse", 2), turn("I live in Boston", 1)]})
        assert r.status_code == 202
        tickets = r.json()["tickets"]
        # a turn_id the scope queued already is not queued again: it gets the first ticket
        assert len(tickets) == 3 and tickets[2] == tickets[0] != tickets[1] and [t["repeat"] for t in r.json()["turns"]] == [False, False, True]
        deadline = time.monotonic() + 30
        while {a.get(f"/v1/ingest/accepted/{t}").json()["state"] for t in tickets} != {"done"}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert [m["text"] for m in a.get("/v1/memories", params={**BOB, "tier": "episodic"}).json()] == ["I live in Boston", "I work as a nurse"]
        is_problem(b.get(f"/v1/ingest/accepted/{tickets[0]}"), 404, "MemoryNotFound", "ticket")  # another tenant's ticket
        is_problem(a.get("/v1/ingest/accepted/nope"), 404, "MemoryNotFound", "ticket")
        is_problem(a.post("/v1/ingest/accepted", json={"scope": BOB, "turn": {"speaker": "Bob"}}), 422, "InvalidInput", "turn.text")
        is_problem(a.post("/v1/ingest/accepted", json={"scope": BOB}), 422, "InvalidInput", "turn")


def test_a_request_is_a_span_around_the_clients_and_the_queue_depth_a_gauge(serve) -> None:
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from memsdk.telemetry import Telemetry

    spans, reader, provider = InMemorySpanExporter(), InMemoryMetricReader(), sdk_trace.TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(spans))
    s = serve(telemetry=Telemetry(tracer_provider=provider, meter_provider=MeterProvider(metric_readers=[reader])))
    with s.http() as h:
        assert h.post("/v1/ingest", json={"scope": BOB, "turn": turn("I live in Boston")}).status_code == 200
        assert h.get("/v1/memories/not-an-id", params=BOB).status_code in (404, 422)
    # the server ends a request's span after the response has left: on a busy machine the
    # client can read the spans first, so wait (bounded) for the last request's span
    deadline = time.monotonic() + 10
    while not any(x.name == "HTTP GET" for x in spans.get_finished_spans()) and time.monotonic() < deadline:
        time.sleep(0.05)
    finished = spans.get_finished_spans()
    http = [x for x in finished if x.name == "HTTP POST"]
    ingest = next(x for x in finished if x.name == "memsdk ingest")
    assert len(http) == 1 and dict(http[0].attributes or {})["http.response.status_code"] == 200
    assert ingest.parent is not None and ingest.parent.span_id == http[0].context.span_id  # the client's call inside the request's
    assert any(dict(x.attributes or {}).get("http.response.status_code") in (404, 422) for x in finished if x.name == "HTTP GET")
    gauges = {m.name for rm in reader.get_metrics_data().resource_metrics for sm in rm.scope_metrics for m in sm.metrics}
    assert {"memsdk.queue.depth", "memsdk.operation.duration"} <= gauges
