"""LangMem's memory tools run unchanged on MemsdkStore.

No model is needed: the tools are called directly, inside an `entrypoint` that carries the
store and the user's config, as a graph's tool node calls them after a model asked to.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from typing import Any

import pytest
from pydantic import BaseModel

from memsdk import AsyncMemoryClient, MemoryClient, Scope
from memsdk_adapters.langchain.store import MemsdkStore

langmem = pytest.importorskip("langmem", reason="the LangMem test needs langmem (extra test)")
from langgraph.func import entrypoint  # noqa: E402

NAMESPACE = ("memories", "{langgraph_user_id}")
CONFIG = {"configurable": {"langgraph_user_id": "alice"}}
ALICE = Scope(user_id="memories.alice")  # what ("memories", "alice") maps to

Calls = list[tuple[str, dict[str, Any]]]


def tools(schema: type = str) -> dict[str, Any]:
    return {
        "manage": langmem.create_manage_memory_tool(namespace=NAMESPACE, schema=schema),
        "search": langmem.create_search_memory_tool(namespace=NAMESPACE),
    }


def sync_workflow(store: MemsdkStore, schema: type = str) -> Callable[[Calls], list[Any]]:
    found = tools(schema)

    @entrypoint(store=store)
    def workflow(calls: Calls) -> list[Any]:
        return [found[name].invoke(args) for name, args in calls]

    return lambda calls: workflow.invoke(calls, config=CONFIG)


def memory_id(reply: str) -> str:
    return str(uuid.UUID(reply.rsplit(" ", 1)[1]))


def test_manage_and_search_tools_on_memsdk(client: MemoryClient) -> None:
    run = sync_workflow(MemsdkStore(client))
    (created,) = run([("manage", {"content": "Alice prefers green tea"})])
    key = memory_id(created)
    (record,) = client.list(scope=ALICE)
    assert record.text == "Alice prefers green tea"

    (found,) = run([("search", {"query": "what tea does Alice like"})])
    assert [(m["namespace"], m["key"], m["value"]) for m in json.loads(found)] == [(["memories", "alice"], key, {"content": "Alice prefers green tea"})]

    updated, _ = run([("manage", {"action": "update", "id": key, "content": "Alice prefers black tea"}), ("search", {"query": "tea"})])
    assert updated == f"updated memory {key}"
    assert [(e.event, e.after, str(e.actor)) for e in client.history(record.id, scope=ALICE)] == [
        ("ADD", "Alice prefers green tea", "api"),
        ("UPDATE", "Alice prefers black tea", "api"),
    ]

    deleted, after = run([("manage", {"action": "delete", "id": key}), ("search", {"query": "tea"})])
    assert deleted == f"Deleted memory {key}"
    assert json.loads(after) == []
    assert client.list(scope=ALICE, include_deleted=True)[0].deleted  # soft: restorable


class Profile(BaseModel):
    name: str
    age: int | None = None


def test_a_schema_memory_is_stored_as_json_text(client: MemoryClient) -> None:
    run = sync_workflow(MemsdkStore(client), schema=Profile)
    run([("manage", {"content": {"name": "Alice", "age": 61}})])
    (record,) = client.list(scope=ALICE)
    assert json.loads(record.text) == {"name": "Alice", "age": 61}


async def test_the_async_tools_await_the_async_client(aclient: AsyncMemoryClient) -> None:
    found = tools()

    @entrypoint(store=MemsdkStore(aclient))
    async def workflow(calls: Calls) -> list[Any]:
        return [await found[name].ainvoke(args) for name, args in calls]

    (created,) = await workflow.ainvoke([("manage", {"content": "Alice lives in Lyon"})], config=CONFIG)
    key = memory_id(created)
    (found_json,) = await workflow.ainvoke([("search", {"query": "where does Alice live"})], config=CONFIG)
    assert [m["key"] for m in json.loads(found_json)] == [key]
    await workflow.ainvoke([("manage", {"action": "delete", "id": key})], config=CONFIG)
    assert await aclient.list(scope=ALICE) == []
