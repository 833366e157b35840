"""MemsdkStore beyond the shared contract: the namespace mapping, that the store and the
client see one memory (history, soft delete, ingested turns), how a batch writes, and that
abatch leaves the event loop free."""

from __future__ import annotations

import asyncio
import time
from datetime import datetime
from typing import Any

import pytest
from langgraph.store.base import InvalidNamespaceError, PutOp

from memsdk import AsyncMemoryClient, MemoryClient, Scope
from memsdk.errors import ClientClosed, InvalidInput
from memsdk.types import Op
from memsdk_adapters.langchain.store import ITEM_FIELD, MemsdkStore, escape_label, namespace_to_scope, scope_to_namespace, unescape_label

ALICE = Scope(user_id="alice")


# -- the mapping --------------------------------------------------------------------------------


@pytest.mark.parametrize("namespace", [("alice",), ("memories", "alice"), ("a", "b", "c", "d"), ("maya@example%2Ecom",), ("zoë", "chat 1")])
def test_namespace_and_scope_map_both_ways(namespace: tuple[str, ...]) -> None:
    scope = namespace_to_scope(namespace)
    assert scope == Scope(user_id=".".join(namespace))
    assert scope_to_namespace(scope) == namespace


@pytest.mark.parametrize("scope", [Scope(user_id="alice", agent_id="support"), Scope(run_id="chat-1"), Scope(user_id="a..b"), Scope(user_id=".a")])
def test_scopes_no_namespace_maps_to(scope: Scope) -> None:
    assert scope_to_namespace(scope) is None


@pytest.mark.parametrize("namespace", [(), ("x" * 300,), ("tab\there",)])
def test_namespaces_that_are_no_scope_id_are_invalid(namespace: tuple[str, ...]) -> None:
    with pytest.raises(InvalidNamespaceError):
        namespace_to_scope(namespace)


@pytest.mark.parametrize("text", ["maya@example.com", "100%", "%2E", "a.b%c", "...", "%252E", "plain"])
def test_escaped_labels_hold_no_dot_and_come_back(text: str) -> None:
    label = escape_label(text)
    assert "." not in label and unescape_label(label) == text
    assert escape_label("maya@example.com") == "maya@example%2Ecom"


# -- one memory for the store and the client ---------------------------------------------------------


def test_the_store_and_the_client_share_one_memory(client: MemoryClient) -> None:
    store = MemsdkStore(client)
    added = client.add("Likes green tea", scope=ALICE)
    item = store.get(("alice",), str(added.id))
    assert item.value == {"content": "Likes green tea", "tier": "semantic"}
    assert (item.created_at, item.updated_at) == (added.created_at, added.updated_at)
    store.put(("alice",), "chess", {"content": "Plays chess on Sundays"})
    (written,) = [r for r in client.list(scope=ALICE) if r.text == "Plays chess on Sundays"]
    assert written.metadata[ITEM_FIELD] == {"key": "chess", "value": {"content": "Plays chess on Sundays"}}
    assert [(e.event, str(e.actor)) for e in client.history(written.id, scope=ALICE)] == [("ADD", "api")]


def test_a_put_updates_in_place_and_a_delete_is_restorable(client: MemoryClient) -> None:
    store = MemsdkStore(client)
    store.put(("alice",), "job", {"content": "Works as a nurse"})
    store.put(("alice",), "job", {"content": "Works as a pilot"})
    (record,) = client.list(scope=ALICE)
    assert [(e.event, e.before, e.after) for e in client.history(record.id, scope=ALICE)] == [
        ("ADD", None, "Works as a nurse"),
        ("UPDATE", "Works as a nurse", "Works as a pilot"),
    ]
    store.delete(("alice",), "job")
    assert store.get(("alice",), "job") is None
    assert client.list(scope=ALICE, include_deleted=True)[0].deleted
    client.restore(record.id, scope=ALICE)
    assert store.get(("alice",), "job").value == {"content": "Works as a pilot"}


def test_ingested_memories_are_items_and_episodic_turns_stay_verbatim(client: MemoryClient) -> None:
    client.ingest({"speaker": "alice", "text": "I adopted a dog named Buddy"}, scope=ALICE)
    store = MemsdkStore(client)
    items = {i.value["tier"]: i for i in store.search(("alice",), query="dog Buddy")}
    assert set(items) == {"episodic", "semantic"}
    assert items["episodic"].value["content"] == "I adopted a dog named Buddy"
    fact = items["semantic"]
    store.put(("alice",), fact.key, {"content": "Has a dog named Buddy and a cat"})
    assert client.get(fact.key, scope=ALICE).text == "Has a dog named Buddy and a cat"
    assert store.get(("alice",), fact.key).value == {"content": "Has a dog named Buddy and a cat"}
    with pytest.raises(InvalidInput):
        store.put(("alice",), items["episodic"].key, {"content": "rewritten"})


def test_scopes_the_store_cannot_name_are_neither_listed_nor_searched(client: MemoryClient) -> None:
    client.add("Prefers email", scope={"user_id": "alice", "agent_id": "support"})
    client.add("Likes tea", scope=ALICE)
    store = MemsdkStore(client)
    assert store.list_namespaces() == [("alice",)]
    assert [i.value["content"] for i in store.search((), query="email tea")] == ["Likes tea"]


def test_a_custom_mapping_puts_the_user_last(client: MemoryClient) -> None:
    def to_scope(ns: tuple[str, ...]) -> Scope:
        return Scope(user_id=unescape_label(ns[-1]), agent_id=".".join(ns[:-1]) or None)

    def to_namespace(scope: Scope) -> tuple[str, ...] | None:
        return None if scope.user_id is None or scope.run_id else (*(scope.agent_id.split(".") if scope.agent_id else ()), escape_label(scope.user_id))

    store = MemsdkStore(client, to_scope=to_scope, to_namespace=to_namespace)
    store.put(("memories", escape_label("maya@example.com")), "k", {"content": "Lives in Lyon"})
    assert [r.text for r in client.list(scope={"user_id": "maya@example.com", "agent_id": "memories"})] == ["Lives in Lyon"]
    assert store.list_namespaces() == [("memories", "maya@example%2Ecom")]


# -- how a batch writes ---------------------------------------------------------------------------


def test_the_puts_of_a_namespace_are_one_bank_batch(client: MemoryClient) -> None:
    store = MemsdkStore(client)
    store.batch([PutOp(("alice",), k, {"content": f"fact {k}"}) for k in "abc"])
    assert len({e.batch_id for e in client.history(scope=ALICE)}) == 1


def test_a_bad_value_anywhere_writes_nothing(client: MemoryClient) -> None:
    store = MemsdkStore(client)
    with pytest.raises(InvalidInput) as err:
        store.batch([PutOp(("alice",), "ok", {"content": "fine"}), PutOp(("bob",), "big", {"content": "x" * 5000})])
    assert err.value.field == "value"
    assert store.list_namespaces() == []


@pytest.mark.parametrize("value", [{"when": datetime(2024, 5, 1)}, {"a": 1, "tags": {"x", "y"}}, {"n": float("nan")}])
def test_a_value_that_is_not_json_is_refused(client: MemoryClient, value: dict[str, Any]) -> None:
    with pytest.raises(InvalidInput) as err:
        MemsdkStore(client).put(("alice",), "k", value)
    assert err.value.field.startswith("value")


def test_a_key_two_writers_added_at_once_converges_on_the_newest(client: MemoryClient) -> None:
    for text in ("first writer", "second writer"):  # as two processes racing on one new key would
        client.bank.apply(ALICE, [Op.add(text, metadata={ITEM_FIELD: {"key": "k", "value": {"content": text}}})])
    store = MemsdkStore(client)
    assert store.get(("alice",), "k").value == {"content": "second writer"}
    store.put(("alice",), "k", {"content": "settled"})
    assert [r.text for r in client.list(scope=ALICE)] == ["settled"]


def test_the_store_needs_a_memsdk_client() -> None:
    with pytest.raises(InvalidInput) as err:
        MemsdkStore(object())  # type: ignore[arg-type]
    assert err.value.field == "client"


def test_a_closed_client_is_reported(client: MemoryClient) -> None:
    store = MemsdkStore(client)
    client.close()
    with pytest.raises(ClientClosed):
        store.get(("alice",), "k")


@pytest.fixture(params=["client", "aclient"])
def either_client(request: pytest.FixtureRequest) -> MemoryClient | AsyncMemoryClient:
    return request.getfixturevalue(request.param)


async def test_abatch_leaves_the_event_loop_free(either_client: MemoryClient | AsyncMemoryClient, monkeypatch: pytest.MonkeyPatch) -> None:
    chosen = either_client
    store = MemsdkStore(chosen)
    blocking_list = chosen.bank.list

    def slow_list(*args: Any, **kwargs: Any) -> Any:
        time.sleep(0.3)  # a slow engine: it must hold up a worker thread, not the loop
        return blocking_list(*args, **kwargs)

    monkeypatch.setattr(chosen.bank, "list", slow_list)
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            await asyncio.sleep(0.01)
            ticks += 1

    ticker = asyncio.create_task(tick())
    assert await store.aget(("alice",), "k") is None
    ticker.cancel()
    assert ticks >= 10
