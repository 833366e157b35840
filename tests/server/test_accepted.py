"""Accepted ingests over a live `memsdk serve`: what a 202 promises (`memsdk.server.accepted`).

A turn the store would refuse is refused at the door, named by the caller's field, with
nothing queued, and on the synchronous route alike; a turn at the limits gets its 202 and
ends ``done``. A repeated turn_id gets the ticket of its first acceptance, over REST and from
the remote client, which sends an accepted ingest again when its reply is lost. ``/readyz``
waits for the warm-up. (The kill between a turn's store write and its done mark, and a
restart under a queue, are tests/server/test_crash.py's.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import httpx
import numpy as np
import pytest

from memsdk import AsyncMemoryClient, InvalidInput, MemoryClient, MemoryNotFound
from memsdk.bank import BankLimits
from memsdk.client._remote_plans import ACCEPTED_RETRIES, retry_in
from memsdk.embedding import HashEmbedder

from tests.server.test_server import is_problem

BOB = {"user_id": "bob"}
LIMIT = BankLimits().max_text_chars
OK = {"speaker": "Bob", "text": "ok"}

#: what is refused at the door: (what the body holds besides the scope, status, title, field)
REFUSED: list[tuple[dict, int, str, str]] = [
    ({"turn": {"speaker": "Bob", "text": "x" * (LIMIT + 1)}}, 422, "InvalidInput", "turn.text"),
    ({"turns": [OK, {"speaker": "Bob", "text": "x" * (LIMIT + 1)}]}, 422, "InvalidInput", "turns[1].text"),
    ({"turn": {**OK, "timestamp": "t" * (BankLimits().max_metadata_bytes + 1)}}, 422, "InvalidInput", "turn.timestamp"),
    ({"turn": {"speaker": "Bob"}}, 422, "InvalidInput", "turn.text"),
    ({"turn": {"speaker": "Bob", "text": " \t"}}, 422, "InvalidInput", "turn.text"),
    ({"turn": {"speaker": "Bob", "text": "a\x00b"}}, 422, "InvalidInput", "turn.text"),
    ({"turn": {"text": "ok"}}, 422, "InvalidInput", "turn.speaker"),
    ({"turn": {**OK, "turn_id": "x" * 257}}, 422, "InvalidInput", "turn.turn_id"),
    ({"turn": {**OK, "mood": "happy"}}, 422, "InvalidInput", "turn.mood"),
    ({"turn": OK, "turns": [OK]}, 422, "InvalidInput", "turn"),
    ({}, 422, "InvalidInput", "turn"),
    ({"turns": []}, 422, "InvalidInput", "turns"),
    ({"turns": [OK] * 1001}, 422, "InvalidInput", "turns"),
]
#: the same for the scope: (scope, status, title, field)
REFUSED_SCOPES: list[tuple[dict, int, str, str]] = [
    ({}, 422, "ScopeRequired", "scope"),
    ({"user_id": "x" * 300}, 422, "InvalidInput", "scope"),
    ({"user_id": 5}, 422, "InvalidInput", "scope.user_id"),
    ({"user_id": "bob", "tenant": "beta"}, 422, "InvalidInput", "scope.tenant"),
]


def wait_done(h: httpx.Client, tickets: Sequence[str], timeout: float = 60) -> dict[str, str]:
    """Each ticket's state once none is pending (bounded: a failure, not a speed figure)."""
    deadline, states = time.monotonic() + timeout, {}
    while time.monotonic() < deadline:
        states = {t: h.get(f"/v1/ingest/accepted/{t}").json()["state"] for t in tickets}
        if "pending" not in states.values():
            break
        time.sleep(0.05)
    return states


@pytest.mark.parametrize("route", ["/v1/ingest/accepted", "/v1/ingest"])
def test_a_turn_the_store_would_refuse_is_refused_at_the_door_naming_the_callers_field(serve, route: str) -> None:
    s = serve()
    with s.http() as h:
        for body, status, title, field in REFUSED:
            is_problem(h.post(route, json={"scope": BOB, **body}), status, title, field)
        for scope, status, title, field in REFUSED_SCOPES:
            is_problem(h.post(route, json={"scope": scope, "turn": OK}), status, title, field)
        assert h.get("/v1/memories", params=BOB).json() == []  # nothing stored
        # at the limits: accepted, and stored (the store's limit is the door's)
        at_limits = [{"speaker": "Bob", "text": "x" * LIMIT, "turn_id": "long"}, {**OK, "timestamp": "t" * 1000, "turn_id": "dated"}]
        r = h.post(route, json={"scope": BOB, "turns": at_limits})
        assert r.status_code == (202 if route.endswith("accepted") else 200), r.text
        if route.endswith("accepted"):
            assert set(wait_done(h, r.json()["tickets"]).values()) == {"done"}
        stored = h.get("/v1/memories", params={**BOB, "tier": "episodic"}).json()
    assert sorted(m["source_turn_ids"][0] for m in stored) == ["dated", "long"]
    assert s.client.bank.count(s.client.bank.scopes()[0], tier="episodic") == 2


def test_a_repeated_turn_id_gets_the_ticket_and_state_of_its_first_acceptance(serve) -> None:
    s = serve()
    with s.http("key-alpha") as a, s.http("key-beta") as b:
        first = a.post("/v1/ingest/accepted", json={"scope": BOB, "turn": {**OK, "turn_id": "t-1"}}).json()
        assert first["turns"][0]["state"] == "pending" and not first["turns"][0]["repeat"]
        assert set(wait_done(a, first["tickets"]).values()) == {"done"}
        again = a.post("/v1/ingest/accepted", json={"scope": BOB, "turns": [{**OK, "turn_id": "t-1"}, {**OK, "turn_id": "t-2"}]}).json()
        assert again["tickets"][0] == first["tickets"][0] and again["turns"][0] == {**first["turns"][0], "state": "done", "repeat": True}
        assert not again["turns"][1]["repeat"]
        # the same turn_id in another scope, or of another tenant, is another turn
        other = a.post("/v1/ingest/accepted", json={"scope": {"user_id": "sue"}, "turn": {**OK, "turn_id": "t-1"}}).json()
        beta = b.post("/v1/ingest/accepted", json={"scope": BOB, "turn": {**OK, "turn_id": "t-1"}}).json()
        assert len({first["tickets"][0], other["tickets"][0], beta["tickets"][0]}) == 3 and not other["turns"][0]["repeat"] and not beta["turns"][0]["repeat"]
        wait_done(a, again["tickets"] + other["tickets"])
        assert [m["source_turn_ids"] for m in a.get("/v1/memories", params={**BOB, "tier": "episodic"}).json()] == [["t-1"], ["t-2"]]


class _LosesFirstReply(httpx.HTTPTransport):
    """A real connection whose first accepted-ingest reply is lost after the server acted on
    the request (a reset connection, a proxy's timeout)."""

    lost = 0

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = super().handle_request(request)
        if request.url.path == "/v1/ingest/accepted" and not self.lost:
            self.lost += 1
            response.read()
            raise httpx.ReadError("the connection was reset before the reply arrived", request=request)
        return response


class _AsyncLosesFirstReply(httpx.AsyncHTTPTransport):
    lost = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await super().handle_async_request(request)
        if request.url.path == "/v1/ingest/accepted" and not self.lost:
            self.lost += 1
            await response.aread()
            raise httpx.ReadError("the connection was reset before the reply arrived", request=request)
        return response


def _stored_once(s, scope: dict) -> Counter:
    from memsdk.server.tenancy import bind

    return Counter(r.source_turn_ids for r in s.client.list(scope=bind("alpha", scope), tier="episodic"))


def test_the_remote_client_sends_an_accepted_ingest_again_when_its_reply_is_lost_and_each_turn_is_stored_once(serve, tmp_path: Path) -> None:
    s = serve()
    transport = _LosesFirstReply()
    with MemoryClient(url=s.url, api_key="key-alpha", data_dir=tmp_path / "local", transport=transport) as c:
        turns = [OK, OK, {**OK, "turn_id": "mine"}]  # two without an id: the client gives them one before the first attempt
        accepted = c.ingest_accepted(turns, scope=BOB)
        assert transport.lost == 1 and [t.repeat for t in accepted] == [True, True, True]  # the lost attempt had queued them
        assert accepted[2].turn_id == "mine" and len({t.turn_id for t in accepted}) == 3
        deadline = time.monotonic() + 60
        while {c.ingest_status(t.ticket).state for t in accepted} != {"done"}:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        with pytest.raises(InvalidInput) as err:  # checked by the server, named as the caller sent it
            c.ingest_accepted({"speaker": "Bob", "text": "x" * (LIMIT + 1)}, scope=BOB)
        assert err.value.field == "turn.text"
        with pytest.raises(InvalidInput) as err:  # malformed: refused before it is sent
            c.ingest_accepted([OK, {"speaker": "Bob"}], scope=BOB)
        assert err.value.field == "turns[1].text"
        with pytest.raises(MemoryNotFound):
            c.ingest_status("no-such-ticket")
    assert _stored_once(s, BOB) == Counter({(t.turn_id,): 1 for t in accepted})


def test_the_async_remote_client_does_the_same(serve, tmp_path: Path) -> None:
    s = serve()
    transport = _AsyncLosesFirstReply()

    async def main() -> list:
        async with AsyncMemoryClient(url=s.url, api_key="key-alpha", data_dir=tmp_path / "local", transport=transport) as c:
            accepted = await c.ingest_accepted([OK, OK], scope=BOB)
            deadline = time.monotonic() + 60
            while {(await c.ingest_status(t.ticket)).state for t in accepted} != {"done"}:
                assert time.monotonic() < deadline
                await asyncio.sleep(0.05)
            return accepted

    accepted = asyncio.run(main())
    assert transport.lost == 1 and all(t.repeat for t in accepted)
    assert _stored_once(s, BOB) == Counter({(t.turn_id,): 1 for t in accepted})


def test_an_accepted_ingest_is_sent_again_only_after_a_connection_error_or_a_not_now_reply() -> None:
    def reply(status: int) -> httpx.Response:
        return httpx.Response(status)

    assert retry_in(0, ACCEPTED_RETRIES, None) is not None  # connection refused, reset, timed out
    assert all(retry_in(0, ACCEPTED_RETRIES, reply(code)) is not None for code in (502, 503, 504))
    assert all(retry_in(0, ACCEPTED_RETRIES, reply(code)) is None for code in (202, 401, 404, 413, 422, 500))
    assert retry_in(ACCEPTED_RETRIES, ACCEPTED_RETRIES, None) is None  # out of retries
    waits = [retry_in(n, 10, None) for n in range(10)]
    assert all(w is not None and 0 < w <= 8.0 for w in waits) and waits[-1] > waits[0]  # type: ignore[operator]


class _LoadingEmbedder(HashEmbedder):
    """The hashing embedder, whose calls from the warm-up wait for `loaded`: a model that is
    still loading when the server starts."""

    def __init__(self) -> None:
        super().__init__(64)
        self.loaded, self.warmed = threading.Event(), 0

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if threading.current_thread().name == "memsdk-warm-up":
            self.loaded.wait(60)
            self.warmed += 1
        return super().embed(texts)


def test_readyz_says_ready_only_once_the_warm_up_has_run_and_the_warm_up_writes_nothing(serve) -> None:
    embedder = _LoadingEmbedder()
    s = serve(embedder=embedder)
    try:
        with s.http(None) as h:
            assert h.get("/healthz").status_code == 200  # up
            is_problem(h.get("/readyz"), 503, "NotReady")  # not ready: the model is loading
            embedder.loaded.set()
            deadline = time.monotonic() + 60
            while h.get("/readyz").status_code != 200:
                assert time.monotonic() < deadline
                time.sleep(0.05)
    finally:
        embedder.loaded.set()
    assert embedder.warmed > 0  # the warm-up went through the embedder
    assert s.client.bank.scopes() == [] and s.client.log is not None and s.client.log.count() == 0  # nothing stored, nothing logged
