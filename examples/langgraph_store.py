"""memsdk as LangGraph's long-term store, on the embedded default (Qdrant engine + MiniLM
in-process, no server; no LLM is called):

    .venv/bin/python examples/langgraph_store.py

1. A `MemsdkStore` over a `MemoryClient`: a namespace is a scope, an item a memory.
2. LangMem's manage and search tools, unchanged, called the way a graph's tool node would.
3. The client sees the same memory: the history (actor ``api``), a soft delete and a restore.
4. The namespaces, read back from the scopes in the store.

Needs ``pip install -e '.[langchain,test]'`` (langmem comes with the test extra).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from langgraph.func import entrypoint
from langmem import create_manage_memory_tool, create_search_memory_tool

from memsdk import MemoryClient
from memsdk_adapters.langchain.store import MemsdkStore, escape_label, namespace_to_scope

HERE = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("MEMSDK_STORE_DEMO_DIR", HERE.parent / "build" / "store-demo-data"))


def main() -> None:
    shutil.rmtree(DATA_DIR, ignore_errors=True)  # a fresh run each time
    with MemoryClient(data_dir=DATA_DIR) as client:
        store = MemsdkStore(client)
        user = escape_label("maya@example.com")  # LangGraph forbids "." in a label: maya@example%2Ecom
        namespace = ("memories", user)
        scope = namespace_to_scope(namespace)
        print(f"== 1. namespace {namespace} is {scope}")
        store.put(namespace, "city", {"content": "Maya lives in Lyon"})
        store.put(namespace, "job", {"content": "Maya works as a nurse"})
        store.put(namespace, "job", {"content": "Maya works as a pilot since May"})  # the same memory, updated
        hits = store.search(namespace, query="Where does Maya work?", limit=2)
        for hit in hits:
            print(f"  {hit.score:.3f}  {hit.key}: {hit.value}")
        assert hits[0].key == "job", "the job memory should rank first"

        print("\n== 2. LangMem's tools on the same store")
        tools = {
            "manage": create_manage_memory_tool(namespace=("memories", "{langgraph_user_id}")),
            "search": create_search_memory_tool(namespace=("memories", "{langgraph_user_id}")),
        }

        @entrypoint(store=store)
        def call_tools(calls: list[tuple[str, dict[str, Any]]]) -> list[Any]:
            return [tools[name].invoke(args) for name, args in calls]

        config = {"configurable": {"langgraph_user_id": user}}
        created, found = call_tools.invoke([("manage", {"content": "Maya is allergic to peanuts"}), ("search", {"query": "food allergies", "limit": 1})], config=config)
        print(f"  {created}\n  search: {found}")
        assert "peanuts" in found

        print("\n== 3. the client's view: one memory, its history, a soft delete")
        job = next(r for r in client.list(scope=scope) if "pilot" in r.text)
        for event in client.history(job.id, scope=scope):
            print(f"  {event.event:7} by {event.actor}: {event.before!r} -> {event.after!r}")
        store.delete(namespace, "city")
        print(f"  after store.delete: {store.get(namespace, 'city')}")
        city = next(r for r in client.list(scope=scope, include_deleted=True) if r.deleted)
        client.restore(city.id, scope=scope)
        print(f"  after client.restore: {store.get(namespace, 'city').value}")

        print("\n== 4. namespaces")
        store.put(("memories", "leo"), "pet", {"content": "Leo has a cat named Luna"})
        print(f"  {store.list_namespaces(prefix=('memories',))}")
        assert store.list_namespaces(prefix=("memories",)) == [("memories", "leo"), namespace]


if __name__ == "__main__":
    main()
