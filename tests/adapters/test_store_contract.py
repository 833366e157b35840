"""The LangGraph store contract: LangGraph ships no conformance suite for stores, so this is
one, run on `InMemoryStore` (the reference) and on `MemsdkStore`, each called as a sync
graph calls it (``store.put``) and as an async one does (``await store.aput``).

Both embed the same text (``fields=["text"]``) with the same hashing embedder and memsdk
searches dense only, so even the scores agree. Where the two differ on purpose, the test
states both answers (`DIFFERENCES`); the README lists the same ones.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from datetime import datetime
from typing import Any

import pytest
import pytest_asyncio
from langgraph.store.base import BaseStore, GetOp, InvalidNamespaceError, PutOp, SearchOp
from langgraph.store.memory import InMemoryStore

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.errors import InvalidInput
from memsdk_adapters.langchain.store import MemsdkStore

DIM = 64
#: memsdk-remote: `MemsdkStore` over ``MemoryClient(url=...)`` to a live `memsdk serve`
KINDS = ["reference", "memsdk", "memsdk-remote"]
MODES = ["sync", "async"]


def hash_embed(texts: list[str]) -> list[list[float]]:
    return HashEmbedder(DIM).embed(texts).tolist()


class Driver:
    """A store called the way a sync graph calls it (``store.put``) or an async one
    (``await store.aput``): every test is written once, for both."""

    def __init__(self, store: BaseStore, kind: str, mode: str) -> None:
        # the remote store is memsdk's, with the same answers where they differ from LangGraph's
        self.store, self.kind, self.mode = store, kind.removesuffix("-remote"), mode

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.mode == "async":
                return await getattr(self.store, "a" + name)(*args, **kwargs)
            return getattr(self.store, name)(*args, **kwargs)

        return call


@pytest.fixture(params=[(k, m) for k in KINDS for m in MODES], ids=[f"{k}-{m}" for k in KINDS for m in MODES])
def store(request: pytest.FixtureRequest) -> Driver:
    kind, mode = request.param
    if kind == "reference":
        made: BaseStore = InMemoryStore(index={"dims": DIM, "embed": hash_embed, "fields": ["text"]})
    elif kind == "memsdk-remote":
        made = MemsdkStore(request.getfixturevalue("remote_client" if mode == "sync" else "remote_aclient"), fields=["text"], hybrid=False)
    else:
        client = request.getfixturevalue("client" if mode == "sync" else "aclient")
        made = MemsdkStore(client, fields=["text"], hybrid=False)
    return Driver(made, kind, mode)


@pytest.fixture
def served(tmp_path: Any) -> Iterator[Any]:
    pytest.importorskip("fastapi")
    from tests.server.serving import Servers

    servers = Servers(tmp_path)
    yield servers.start()
    servers.stop_all()


@pytest.fixture
def remote_client(served: Any, tmp_path: Any) -> Iterator[MemoryClient]:
    with MemoryClient(url=served.url, api_key="key-alpha", data_dir=tmp_path / "local") as c:
        yield c


@pytest_asyncio.fixture
async def remote_aclient(served: Any, tmp_path: Any) -> AsyncIterator[AsyncMemoryClient]:
    async with AsyncMemoryClient(url=served.url, api_key="key-alpha", data_dir=tmp_path / "local") as c:
        yield c


def keys(items: list[Any]) -> list[str]:
    return [i.key for i in items]


# -- identical expectations -------------------------------------------------------------------


async def test_put_then_get_returns_the_value(store: Driver) -> None:
    value = {"text": "Maya moved to Lyon", "tags": ["move", "city"], "n": 3, "ok": True, "nested": {"zoë": 1.5}}
    await store.put(("users", "maya"), "city", value)
    item = await store.get(("users", "maya"), "city")
    assert (item.namespace, item.key, item.value) == (("users", "maya"), "city", value)
    assert isinstance(item.created_at, datetime) and item.created_at.tzinfo is not None
    assert item.created_at <= item.updated_at
    assert await store.get(("users", "maya"), "job") is None
    assert await store.get(("users", "leo"), "city") is None


async def test_a_second_put_replaces_the_value(store: Driver) -> None:
    await store.put(("users", "maya"), "job", {"text": "Maya is a nurse"})
    first = await store.get(("users", "maya"), "job")
    await store.put(("users", "maya"), "job", {"text": "Maya is a pilot", "since": 2024})
    second = await store.get(("users", "maya"), "job")
    assert second.value == {"text": "Maya is a pilot", "since": 2024}
    assert second.updated_at >= first.updated_at
    assert [(i.key, i.value["text"]) for i in await store.search(("users", "maya"))] == [("job", "Maya is a pilot")]


async def test_delete_removes_the_item(store: Driver) -> None:
    await store.put(("users", "maya"), "phone", {"text": "555-0100"})
    await store.put(("users", "maya"), "city", {"text": "Lyon"})
    await store.delete(("users", "maya"), "phone")
    assert await store.get(("users", "maya"), "phone") is None
    assert keys(await store.search(("users",))) == ["city"]
    await store.delete(("users", "maya"), "never-written")  # not an error


async def test_namespaces_keep_their_items_apart(store: Driver) -> None:
    await store.put(("users", "maya"), "pet", {"text": "a cat"})
    await store.put(("users", "leo"), "pet", {"text": "a dog"})
    assert (await store.get(("users", "maya"), "pet")).value == {"text": "a cat"}
    assert (await store.get(("users", "leo"), "pet")).value == {"text": "a dog"}


async def test_search_covers_every_namespace_under_the_prefix(store: Driver) -> None:
    for ns, key in [(("docs", "a"), "1"), (("docs", "a", "deep"), "2"), (("docs", "b"), "3"), (("other",), "4")]:
        await store.put(ns, key, {"text": f"document {key}"})
    found = {(i.namespace, i.key) for i in await store.search(("docs",))}
    assert found == {(("docs", "a"), "1"), (("docs", "a", "deep"), "2"), (("docs", "b"), "3")}
    assert {i.key for i in await store.search(("docs", "a"))} == {"1", "2"}
    assert {i.key for i in await store.search(())} == {"1", "2", "3", "4"}
    assert await store.search(("nothing",)) == []


async def test_search_without_a_query_filters_and_pages_in_insertion_order(store: Driver) -> None:
    rows = [("a", "red", 1), ("b", "blue", 5), ("c", "red", 7), ("d", "green", 9), ("e", "red", 12)]
    for key, color, size in rows:
        await store.put(("shop",), key, {"text": f"item {key}", "color": color, "size": size, "meta": {"color": color}})
    assert keys(await store.search(("shop",))) == ["a", "b", "c", "d", "e"]
    assert keys(await store.search(("shop",), limit=2, offset=1)) == ["b", "c"]
    assert keys(await store.search(("shop",), filter={"color": "red"})) == ["a", "c", "e"]
    assert keys(await store.search(("shop",), filter={"color": "red", "size": {"$gt": 5}})) == ["c", "e"]
    assert keys(await store.search(("shop",), filter={"size": {"$gte": 5, "$lt": 12}, "color": {"$ne": "blue"}})) == ["c", "d"]
    assert keys(await store.search(("shop",), filter={"meta": {"color": "green"}})) == ["d"]
    assert keys(await store.search(("shop",), filter={"color": "red"}, limit=1, offset=1)) == ["c"]
    assert all(i.score is None for i in await store.search(("shop",)))


async def test_search_with_a_query_ranks_alike(store: Driver) -> None:
    # graded overlap with the query, so no two scores tie (engines order ties as they like)
    texts = {"four": "green tea morning cup", "three": "green tea morning", "two": "green tea", "one": "tea", "none": "black coffee"}
    for key, text in texts.items():
        await store.put(("users", "maya"), key, {"text": text, "topic": key})
    hits = await store.search(("users",), query="green tea morning cup", limit=3)
    assert keys(hits) == ["four", "three", "two"]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    assert keys(await store.search(("users",), query="green tea morning cup", limit=2, offset=1)) == ["three", "two"]
    assert keys(await store.search(("users",), query="green tea morning cup", filter={"topic": {"$ne": "three"}}, limit=3)) == ["four", "two", "one"]
    assert keys(await store.search(("users", "maya"), query="coffee", limit=1)) == ["none"]


async def test_query_scores_are_the_same_cosines(store: Driver) -> None:
    for key, text in {"a": "green tea every morning", "b": "black coffee at noon", "c": "tea with milk"}.items():
        await store.put(("drinks",), key, {"text": text})
    scored = {h.key: h.score for h in await store.search(("drinks",), query="green tea")}
    expected = {k: float(v) for k, v in zip("abc", HashEmbedder(DIM).embed(["green tea every morning", "black coffee at noon", "tea with milk"]) @ HashEmbedder(DIM).embed(["green tea"])[0])}
    assert scored == pytest.approx(expected, abs=1e-5)


async def test_list_namespaces_matches_prefix_suffix_depth_and_pages(store: Driver) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"), ("x", "v1")]:
        await store.put(ns, "k", {"text": "t"})
    every = [("a", "b", "c"), ("a", "b", "d", "e"), ("a", "b", "d", "i"), ("a", "b", "f"), ("a", "c", "f"), ("x", "v1")]
    assert await store.list_namespaces() == every
    assert await store.list_namespaces(prefix=("a", "b"), max_depth=3) == [("a", "b", "c"), ("a", "b", "d"), ("a", "b", "f")]
    assert await store.list_namespaces(suffix=("f",)) == [("a", "b", "f"), ("a", "c", "f")]
    assert await store.list_namespaces(prefix=("a", "*", "f")) == [("a", "b", "f"), ("a", "c", "f")]
    assert await store.list_namespaces(prefix=("a",), suffix=("e",)) == [("a", "b", "d", "e")]
    assert await store.list_namespaces(max_depth=1) == [("a",), ("x",)]
    assert await store.list_namespaces(limit=2, offset=1) == every[1:3]


async def test_a_batch_reads_before_it_writes_and_the_last_put_wins(store: Driver) -> None:
    await store.put(("users", "maya"), "city", {"text": "Paris"})
    got = await store.batch(
        [
            PutOp(("users", "maya"), "city", {"text": "Lyon"}),
            GetOp(("users", "maya"), "city"),
            SearchOp(("users",)),
            PutOp(("users", "maya"), "city", {"text": "Nice"}),
            PutOp(("users", "maya"), "pet", {"text": "a cat"}),
        ]
    )
    assert got[0] is None and got[3] is None and got[4] is None
    assert got[1].value == {"text": "Paris"} and [i.value for i in got[2]] == [{"text": "Paris"}]
    assert (await store.get(("users", "maya"), "city")).value == {"text": "Nice"}
    assert keys(await store.search(("users", "maya"))) == ["city", "pet"]


@pytest.mark.parametrize("namespace", [("a.b",), (), ("langgraph", "x"), ("ok", "")])
async def test_invalid_namespaces_are_refused(store: Driver, namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.put(namespace, "k", {"text": "t"})


async def test_dotted_labels_are_refused_on_every_read(store: Driver) -> None:
    with pytest.raises(InvalidNamespaceError):
        await store.get(("a.b",), "k")
    with pytest.raises(InvalidNamespaceError):
        await store.search(("a.b",))
    with pytest.raises(InvalidNamespaceError):
        await store.list_namespaces(prefix=("a.b",))


async def test_ttl_is_refused(store: Driver) -> None:
    with pytest.raises(NotImplementedError):
        await store.put(("users",), "k", {"text": "t"}, ttl=5)
    await store.put(("users",), "k", {"text": "t"}, ttl=None)  # None: no expiry, accepted


# -- documented differences: each test states both stores' answers ----------------------------------

#: what differs on purpose, and why (the README's list)
DIFFERENCES = {
    "created_at": "an update keeps created_at (a memory is updated, not re-created); InMemoryStore resets it",
    "listing": "a namespace is listed while it holds a live memory; InMemoryStore keeps listing emptied ones",
    "unchanged put": "a put of the value already stored writes nothing (no history entry), so updated_at stays",
    "order": "without a query, items come oldest first across namespaces; InMemoryStore goes namespace by namespace",
    "index=False": "every memory is embedded (the bank has no unindexed records); InMemoryStore leaves it unscored",
    "batch namespaces": "batch() checks namespace labels itself (the scope id is the joined labels); InMemoryStore trusts its caller",
    "values": "values must be JSON within the bank's limits (InvalidInput naming 'value'); InMemoryStore keeps any object",
}


async def test_difference_created_at_survives_an_update(store: Driver) -> None:
    await store.put(("u",), "k", {"text": "one"})
    first = await store.get(("u",), "k")
    await store.put(("u",), "k", {"text": "two"})
    second = await store.get(("u",), "k")
    assert (second.created_at == first.created_at) is (store.kind == "memsdk"), DIFFERENCES["created_at"]


async def test_difference_an_emptied_namespace_is_not_listed(store: Driver) -> None:
    await store.put(("u", "gone"), "k", {"text": "t"})
    await store.put(("u", "kept"), "k", {"text": "t"})
    await store.delete(("u", "gone"), "k")
    expected = [("u", "kept")] if store.kind == "memsdk" else [("u", "gone"), ("u", "kept")]
    assert await store.list_namespaces() == expected, DIFFERENCES["listing"]


async def test_difference_an_unchanged_put_writes_nothing(store: Driver) -> None:
    await store.put(("u",), "k", {"text": "same"})
    first = await store.get(("u",), "k")
    await store.put(("u",), "k", {"text": "same"})
    second = await store.get(("u",), "k")
    assert (second.updated_at == first.updated_at) is (store.kind == "memsdk"), DIFFERENCES["unchanged put"]


async def test_difference_listing_order_across_namespaces(store: Driver) -> None:
    await store.put(("u", "a"), "1", {"text": "t"})
    await store.put(("u", "b"), "2", {"text": "t"})
    await store.put(("u", "a"), "3", {"text": "t"})
    expected = ["1", "2", "3"] if store.kind == "memsdk" else ["1", "3", "2"]
    assert keys(await store.search(("u",))) == expected, DIFFERENCES["order"]


async def test_difference_index_false_is_still_embedded(store: Driver) -> None:
    await store.put(("u",), "k", {"text": "green tea"}, index=False)
    (hit,) = await store.search(("u",), query="green tea")
    assert (hit.score is not None) is (store.kind == "memsdk"), DIFFERENCES["index=False"]


async def test_difference_batch_checks_labels(store: Driver) -> None:
    op = PutOp(("a.b",), "k", {"text": "t"})
    if store.kind == "memsdk":
        with pytest.raises(InvalidNamespaceError):
            await store.batch([op])
    else:
        await store.batch([op])  # DIFFERENCES["batch namespaces"]


@pytest.mark.parametrize("value", [{"text": "t", "when": datetime(2024, 5, 1)}, {"text": "x" * 20_000}, {"text": "t", "blob": "y" * 20_000}])
async def test_difference_values_are_json_within_limits(store: Driver, value: dict[str, Any]) -> None:
    if store.kind == "memsdk":
        with pytest.raises(InvalidInput) as err:
            await store.put(("u",), "k", value)
        assert err.value.field.startswith("value"), DIFFERENCES["values"]
        assert await store.get(("u",), "k") is None
    else:
        await store.put(("u",), "k", value)
