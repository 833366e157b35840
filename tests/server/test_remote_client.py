"""``MemoryClient(url=...)``: the client's contract over a live `memsdk serve`, sync and async.

One scenario runs on an embedded client and on a remote one whose server has the same
settings (heuristic policies, the hashing embedder), and every result must match: the same
texts, ops, evidence and history, and the same typed errors for the same bad calls.
"""

from __future__ import annotations

import asyncio
import io
import socket
from pathlib import Path
from typing import Any

import pytest

from memsdk import AsyncMemoryClient, InvalidInput, MemoryClient, MemoryNotFound
from memsdk.errors import NotAuthorized, ScopeRequired, StoreUnavailable
from memsdk.client.remote import AsyncRemoteMemoryClient, RemoteMemoryClient
from memsdk.embedding import HashEmbedder

BOB, SUE = {"user_id": "bob", "run_id": "chat"}, {"user_id": "sue", "run_id": "chat"}
TURNS = [
    {"speaker": "Bob", "text": "I live in Boston with my two cats", "turn_id": "D1:1", "timestamp": "8 May 2023"},
    {"speaker": "Bob", "text": "I work as a nurse at St. Mary's", "turn_id": "D1:2", "timestamp": "8 May 2023"},
    {"speaker": "Bob", "text": "Please forget that I live in Boston", "turn_id": "D1:3", "timestamp": "9 May 2023"},
]


def _shape(value: Any) -> Any:
    """What must agree between the two transports: everything but ids, times and latencies."""
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if isinstance(value, dict):
        drop = {"id", "memory_id", "batch_id", "trajectory_id", "episodic_id", "trajectory_id", "created_at", "updated_at", "at", "deleted_at", "latency_s", "timings", "superseded_by", "invalid_at", "occurred_at", "seq"}
        return {k: _shape(v) for k, v in value.items() if k not in drop}
    return value


def scenario(c: MemoryClient) -> list[Any]:
    out: list[Any] = []
    out.append(c.ingest(TURNS[0], scope=BOB))
    out.append(c.ingest(TURNS[1:], scope=BOB))
    out.append(c.ingest({"speaker": "Sue", "text": "I moved to Denver last year"}, scope=SUE))
    out.append(c.list(scope=BOB, include_deleted=True))
    out.append(c.answer("Where does Bob work?", scope=[BOB, SUE]))
    out.append(c.retrieve("Where does Sue live?", scope=[BOB, SUE]))
    out.append(c.search("nurse", scope=BOB, limit=3, tier="semantic"))
    added = c.add("Bob likes jazz", scope=BOB, metadata={"source": "app"})
    out += [added, c.update(added.id, "Bob loves jazz", scope=BOB), c.delete(added.id, scope=BOB), c.restore(added.id, scope=BOB)]
    out.append(c.history(added.id, scope=BOB))
    c.add("Call me on 555-0134 after six", scope=BOB)
    out += [c.forget("my phone number", scope=BOB, dry_run=True), c.forget("my phone number", scope=BOB)]
    buffer = io.StringIO()
    out.append(c.export(buffer, scope=BOB))
    out.append(c.import_(io.StringIO(buffer.getvalue()), scope={"user_id": "bob-copy"}))
    out.append(c.list(scope={"user_id": "bob-copy"}))
    out.append(c.erase(scope=SUE))
    for bad in (lambda: c.get(added.id, scope=SUE), lambda: c.add("", scope=BOB), lambda: c.list(scope={}), lambda: c.ingest({"speaker": "Bob"}, scope=BOB)):
        with pytest.raises((MemoryNotFound, InvalidInput)) as caught:
            bad()
        out.append((type(caught.value).__name__, getattr(caught.value, "field", None)))
    return out


@pytest.fixture
def embedded(tmp_path: Path):
    with MemoryClient(data_dir=tmp_path / "embedded", embedder=HashEmbedder(64), policies="heuristic") as client:
        yield client


def test_the_remote_client_returns_what_the_embedded_one_returns(serve, embedded) -> None:
    s = serve()
    with MemoryClient(url=s.url, api_key="key-alpha", data_dir=s.client.config.data_dir.parent / "local") as remote:
        assert isinstance(remote, RemoteMemoryClient) and isinstance(remote, MemoryClient)
        assert _shape(scenario(remote)) == _shape(scenario(embedded))
        assert remote.policies["answerer"].version == embedded.policies["answerer"].version
        assert set(remote.policy_stats) == set(embedded.policy_stats)


def test_the_async_remote_client_returns_what_the_sync_one_returns(serve, tmp_path: Path) -> None:
    s = serve()

    async def run() -> list[Any]:
        async with AsyncMemoryClient(url=s.url, api_key="key-beta", data_dir=tmp_path / "local") as c:
            assert isinstance(c, AsyncRemoteMemoryClient)
            out: list[Any] = [await c.ingest(TURNS[0], scope=BOB), await c.ingest(TURNS[1:], scope=BOB), await c.list(scope=BOB, include_deleted=True)]
            out += [await c.answer("Where does Bob work?", scope=BOB), await c.search("nurse", scope=BOB, limit=3)]
            added = await c.add("Bob likes jazz", scope=BOB)
            out += [await c.delete(added.id, scope=BOB), await c.history(added.id, scope=BOB), c.policies["answerer"].version]
            with pytest.raises(MemoryNotFound):
                await c.get(added.id, scope=SUE)
            return out

    with MemoryClient(url=s.url, api_key="key-gamma", data_dir=tmp_path / "local") as c:
        expected: list[Any] = [c.ingest(TURNS[0], scope=BOB), c.ingest(TURNS[1:], scope=BOB), c.list(scope=BOB, include_deleted=True)]
        expected += [c.answer("Where does Bob work?", scope=BOB), c.search("nurse", scope=BOB, limit=3)]
        added = c.add("Bob likes jazz", scope=BOB)
        expected += [c.delete(added.id, scope=BOB), c.history(added.id, scope=BOB), c.policies["answerer"].version]
    assert _shape(asyncio.run(run())) == _shape(expected)


def test_a_refused_key_a_dead_server_and_a_bad_scope_are_typed_errors(serve, tmp_path: Path) -> None:
    s = serve()
    with MemoryClient(url=s.url, api_key="wrong", data_dir=tmp_path / "local") as c:
        with pytest.raises(NotAuthorized) as caught:
            c.list(scope=BOB)
        assert caught.value.status_code == 401
    with MemoryClient(url=s.url, api_key="key-beta", data_dir=tmp_path / "local") as c:
        with pytest.raises(NotAuthorized) as caught:
            c.use_policy("answerer", "v2")  # not an admin key
        assert caught.value.status_code == 403
        with pytest.raises(ScopeRequired.__mro__[1]) as bad:  # InvalidInput, naming the field
            c.ingest(TURNS[0], scope="bob")  # type: ignore[arg-type]
        assert bad.value.field == "scope"
        with pytest.raises(InvalidInput, match="checkpoints"):
            c.registry  # noqa: B018  (the server's files)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with MemoryClient(url=f"http://127.0.0.1:{port}", api_key="key-alpha", data_dir=tmp_path / "local", timeout=5) as c:
        with pytest.raises(StoreUnavailable, match="cannot be reached"):
            c.answer("anything?", scope=BOB)


def test_the_langchain_retriever_runs_unchanged_over_the_remote_client(serve, tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from memsdk_adapters.langchain import MemsdkRetriever

    s = serve()
    with MemoryClient(url=s.url, api_key="key-alpha", data_dir=tmp_path / "local") as c:
        c.ingest(TURNS[:2], scope=BOB)
        docs = MemsdkRetriever(client=c, scope=BOB).invoke("Where does Bob work?")
        assert any("nurse" in d.page_content for d in docs)


@pytest.mark.parametrize(("remote", "local"), [(RemoteMemoryClient, MemoryClient), (AsyncRemoteMemoryClient, AsyncMemoryClient)])
def test_every_public_call_of_the_client_goes_to_the_server(remote: type, local: type) -> None:
    """No public method falls through to the embedded client's, which would touch a store
    this process does not have; each is documented by its embedded twin's text."""
    inherited = {"__enter__", "__exit__", "__aenter__", "__aexit__"}
    public = {n for n in dir(local) if not n.startswith("_") and n not in inherited}
    own = {n: m for c in reversed(remote.__mro__) if c not in local.__mro__ for n, m in vars(c).items()}
    assert public - set(own) <= {"config"}, public - set(own)  # config: an attribute, set in __init__
    for name in public & set(own):
        member = own[name]
        doc = (member.fget if isinstance(member, property) else member).__doc__
        assert doc and doc.strip(), name
