"""AsyncMemoryClient: the same surface as MemoryClient, awaited, with scopes ingested concurrently."""

from __future__ import annotations

import ast
import asyncio
import inspect
import threading
from collections.abc import Callable
from typing import Any

import pytest

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.bank import MemoryBank
from memsdk.client import _base, memory_steps, promotion, read_steps, result_steps, watcher
from memsdk.errors import ClientClosed
from memsdk.embedding import HashEmbedder
from memsdk.store.memory import InMemoryTransport

from .conftest import CAROLINE, MELANIE


def public(cls: type) -> set[str]:
    return {n for n, v in vars(cls).items() if not n.startswith("_") and callable(v)}


def test_the_twins_have_the_same_methods() -> None:
    sync, aio = public(MemoryClient), public(AsyncMemoryClient)
    assert sync - {"close"} == aio - {"aclose", "start"}
    for name in sync - {"close", "watch_policies"}:
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryClient, name)), name
        assert inspect.signature(getattr(MemoryClient, name)).parameters.keys() == inspect.signature(getattr(AsyncMemoryClient, name)).parameters.keys(), name


def test_async_client_end_to_end(tmp_path) -> None:
    async def scenario() -> None:
        async with AsyncMemoryClient(data_dir=tmp_path, policies="heuristic", embedder=HashEmbedder(64)) as client:
            topics = ["painting sunsets", "adopted kittens", "studies counseling", "visited Sweden", "plays violin"]
            caroline = [{"speaker": "Caroline", "text": f"Caroline {t} recently"} for t in topics]
            melanie = [{"speaker": "Melanie", "text": f"Melanie {t}"} for t in ["runs marathons", "bakes bread", "teaches yoga", "drives trucks", "grows tomatoes"]]
            a, b = await asyncio.gather(client.ingest(caroline, scope=CAROLINE, progress=False), client.ingest(melanie, scope=MELANIE, progress=False))
            assert len(a) == len(b) == 5
            assert len(await client.list(scope=CAROLINE, tier="semantic")) == 5 and len(await client.list(scope=MELANIE, tier="episodic")) == 5
            answer = await client.answer("Who is painting sunsets?", scope=[CAROLINE, MELANIE])
            assert answer.retrieved == 10 and answer.evidence[0].scope.user_id == "caroline"
            await client.feedback(answer.trajectory_id, correct=True)
            rec = await client.add("Likes tea", scope=CAROLINE)
            await client.delete(rec.id, scope=CAROLINE)
            await client.restore(rec.id, scope=CAROLINE)
            assert [e.event for e in await client.history(rec.id, scope=CAROLINE)] == ["ADD", "DELETE", "RESTORE"]
            assert await client.erase(scope=MELANIE) == 10  # five turns, each kept verbatim and as a fact
        with pytest.raises(ClientClosed):
            await client.search("x", scope=CAROLINE)

    asyncio.run(scenario())


def test_the_async_client_keeps_the_store_and_the_log_off_the_event_loop(tmp_path) -> None:
    """Every write the shared core asks for (an op, an erase, a log row, feedback) is an effect
    the async runner carries out in a worker thread: a slow disk never stalls the app's loop."""
    bank = MemoryBank(InMemoryTransport(64), HashEmbedder(64))
    seen: dict[str, set[int]] = {}

    def watched(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            seen.setdefault(name, set()).add(threading.get_ident())
            return fn(*args, **kwargs)

        return call

    for name in ("apply", "delete_all"):
        setattr(bank, name, watched(name, getattr(bank, name)))

    async def scenario() -> int:
        async with AsyncMemoryClient(data_dir=tmp_path, policies="heuristic", bank=bank) as client:
            assert client.log is not None
            for name in ("append", "add_feedback", "erase"):
                setattr(client.log, name, watched(name, getattr(client.log, name)))
            await client.ingest({"speaker": "Caroline", "text": "I adopted a dog named Buddy"}, scope=CAROLINE)
            answer = await client.answer("What is the dog called?", scope=CAROLINE)
            rec = await client.add("Likes tea", scope=CAROLINE)
            await client.update(rec.id, "Likes green tea", scope=CAROLINE)
            await client.delete(rec.id, scope=CAROLINE)
            await client.feedback(answer.trajectory_id, correct=True)
            await client.erase(scope=CAROLINE)
        return threading.get_ident()

    loop_thread = asyncio.run(scenario())
    assert set(seen) == {"apply", "delete_all", "append", "add_feedback", "erase"}
    assert all(loop_thread not in threads for threads in seen.values()), seen


def test_the_shared_core_makes_no_blocking_call_itself() -> None:
    """`BaseClient` and the steps beside it say what to do to the store, the log and the
    registry as effects; only construction (a constructor cannot await) and its undoing call
    them directly."""
    tree = ast.parse(inspect.getsource(_base))
    (core,) = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "BaseClient"]
    steps = [n for module in (memory_steps, promotion, read_steps, result_steps, watcher) for n in ast.parse(inspect.getsource(module)).body]
    constructing = {"__init__", "_registry", "_release_bank", "_close_backends_now"}
    io_objects = {"bank", "log", "_embedder", "registry"}
    calls = []
    for method in [*core.body, *steps]:
        if isinstance(method, ast.FunctionDef) and method.name not in constructing:
            # a step is handed the store or the log as an argument, a method reaches it on self
            passed = {a.arg for a in method.args.args} & io_objects
            for node in ast.walk(method):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                    owner = node.func.value
                    if (isinstance(owner, ast.Attribute) and owner.attr in io_objects) or (isinstance(owner, ast.Name) and owner.id in passed):
                        calls.append(f"{method.name}: {ast.unparse(node.func)}")
    assert calls == []
