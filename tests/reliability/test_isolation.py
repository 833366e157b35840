"""Randomized multi-tenant isolation (the reliability issue, "isolation").

Sixteen tenants whose ids look alike (``alice``, ``Alice``, ``alice `` with a space, a dotless
ı, fullwidth ａｌｉｃｅ, é composed and decomposed, ``alice`` as a user, an agent and a run,
``alice`` with an agent or a run added, two speakers sharing a ``run_id``, the JSON text of
another scope's key...) each get memories whose text carries a token naming their tenant
(``zq07k00042``: tenant 7). A seeded random sequence then calls every public method, each
from one tenant's scope, often with another tenant's memory ids, tokens as queries, or both
tenants' scopes mixed; a leak is a foreign token in what a call returns, exports or writes.
After every call, every tenant the call had no right to touch must be exactly as it was
(records, versions, deleted flags, history), and every record must hold only its tenant's
tokens. The same holds for the CLI (in-process ``main()``), export / import into another
scope, and the LangChain adapters (retriever, tools, `MemsdkStore`).
"""

from __future__ import annotations

import asyncio
import inspect
import io
import json
import random
import re
import uuid
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from memsdk import AsyncMemoryClient, InvalidInput, MemoryClient, MemoryNotFound, MemoryRecord, Scope, Tier
from memsdk.embedding import HashEmbedder
from memsdk.errors import ImportConflict
from memsdk.bank import as_scope

DIM = 64
TENANTS: list[dict[str, str]] = [
    {"user_id": "alice"},
    {"user_id": "Alice"},
    {"user_id": "alice "},
    {"user_id": "al\u0131ce"},  # dotless i
    {"user_id": "ａｌｉｃｅ"},  # fullwidth
    {"user_id": "\u00e9lise"},  # é composed
    {"user_id": "e\u0301lise"},  # é decomposed: looks the same, is another id
    {"agent_id": "alice"},
    {"run_id": "alice"},
    {"user_id": "alice", "agent_id": "support"},
    {"user_id": "alice.support"},  # what MemsdkStore's ("alice", "support") maps to
    {"user_id": "alice", "run_id": "chat-1"},
    {"user_id": "bob", "run_id": "chat-1"},  # shares alice's run_id: one conversation, two memories
    {"user_id": '["alice", null, null]'},  # the text of alice's partition key
    {"user_id": "李", "agent_id": "客服"},
    {"user_id": "alice", "agent_id": "support", "run_id": "chat-1"},
]
TOKEN = re.compile(r"zq(\d\d)k\d{5}")


def owners(text: str) -> set[int]:
    return {int(m) for m in TOKEN.findall(text)}


def texts_of(value: Any) -> Iterator[str]:
    """Every string inside a result (records, hits, answers, documents, JSON), to look for tokens."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from texts_of(v)
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from texts_of(v)
    elif hasattr(value, "model_dump"):
        yield from texts_of(value.model_dump(mode="json"))
    elif hasattr(value, "page_content"):
        yield value.page_content
        yield from texts_of(value.metadata)


def assert_only(allowed: Iterable[int], value: Any, what: str) -> None:
    seen = {i for t in texts_of(value) for i in owners(t)}
    assert seen <= set(allowed), f"{what} shows tokens of tenants {sorted(seen - set(allowed))} (allowed {sorted(allowed)})"


@dataclass
class Tenancy:
    """The client under test, the tenants' scopes, a token counter, and the reads that check
    them. Sync and async alike: calls go through `call`, checks read the bank."""

    client: MemoryClient | AsyncMemoryClient
    rng: random.Random
    root: Path
    n: int = 0
    erases: int = 0
    loop: asyncio.AbstractEventLoop | None = None

    def __post_init__(self) -> None:
        self.scopes = [as_scope(t) for t in TENANTS]
        self.bank = self.client.bank
        self.copies: list[tuple[int, Scope]] = []  # (source tenant, scope it was imported into)

    def call(self, value: Any) -> Any:
        return self.loop.run_until_complete(value) if inspect.isawaitable(value) else value

    def token(self, tenant: int) -> str:
        self.n += 1
        return f"zq{tenant:02d}k{self.n:05d}"

    def fact(self, tenant: int) -> str:
        return f"Tenant {tenant} keeps note {self.token(tenant)} about tea"

    def state(self) -> list[tuple[tuple[MemoryRecord, ...], int]]:
        return [(tuple(self.bank.list(s, include_deleted=True)), len(self.bank.history(s))) for s in self.scopes]

    def records(self, tenant: int, *, deleted: bool | None = None) -> list[MemoryRecord]:
        found = self.bank.list(self.scopes[tenant], include_deleted=True)
        return [r for r in found if deleted is None or r.deleted == deleted]

    def pick(self, tenant: int, *, deleted: bool | None = None) -> MemoryRecord | None:
        found = self.records(tenant, deleted=deleted)
        return self.rng.choice(found) if found else None

    def other(self, tenant: int) -> int:
        return self.rng.choice([i for i in range(len(TENANTS)) if i != tenant])

    def check_every_tenant(self) -> None:
        for i, scope in enumerate(self.scopes):
            assert_only({i}, self.bank.list(scope, include_deleted=True), f"tenant {i}'s records")
            assert_only({i}, self.bank.history(scope), f"tenant {i}'s history")
        for source, scope in self.copies:
            assert_only({source}, self.bank.list(scope, include_deleted=True), f"the copy of tenant {source}")


# -- one step of the sequence: a public method called from tenant `a`'s scope ---------------------


def step(t: Tenancy, op: str, a: int) -> set[int]:
    """Run ``op`` as tenant ``a`` and check what it returned; returns the tenants it may write."""
    c, rng, A = t.client, t.rng, t.scopes[a]
    b = t.other(a)
    foreign = t.pick(b)
    if op == "add":
        rec = t.call(c.add(t.fact(a), scope=A, tier=rng.choice(["semantic", "semantic", "episodic"])))
        assert rec.scope == A
        return {a}
    if op in ("update", "delete", "restore", "get", "history") and foreign is not None and rng.random() < 0.5:
        # another tenant's id, as is or in another spelling, from this tenant's scope: not found here
        mid = rng.choice([foreign.id, str(foreign.id), str(foreign.id).upper(), foreign.id.urn])
        calls: dict[str, Callable[[], Any]] = {
            "update": lambda: c.update(mid, t.fact(a), scope=A),
            "delete": lambda: c.delete(mid, scope=A),
            "restore": lambda: c.restore(mid, scope=A),
            "get": lambda: c.get(mid, scope=A),
            "history": lambda: c.history(mid, scope=A),
        }
        with pytest.raises(MemoryNotFound):
            t.call(calls[op]())
        return set()
    if op == "update":
        own = t.pick(a, deleted=False)
        if own is None or own.tier is Tier.EPISODIC:
            return set()
        assert t.call(c.update(own.id, t.fact(a), scope=A)).scope == A
        return {a}
    if op == "delete":
        own = t.pick(a, deleted=False)
        if own is not None:
            assert t.call(c.delete(own.id, scope=A)).deleted
        return {a}
    if op == "restore":
        own = t.pick(a, deleted=True)
        if own is not None:
            assert not t.call(c.restore(own.id, scope=A)).deleted
        return {a}
    if op == "get":
        own = t.pick(a, deleted=False)
        if own is not None:
            assert_only({a}, t.call(c.get(own.id, scope=A)), "get")
        return set()
    if op == "history":
        own = t.pick(a)
        assert_only({a}, t.call(c.history(own.id if own and rng.random() < 0.5 else None, scope=A)), "history")
        return set()
    if op == "list":
        found = t.call(c.list(scope=A, include_deleted=rng.random() < 0.5, tier=rng.choice([None, "semantic", "episodic"])))
        assert_only({a}, found, "list")
        return set()
    if op == "search":
        # the query is a foreign token half the time: BM25 would find it anywhere it could look
        query = foreign.text if foreign is not None and rng.random() < 0.5 else t.fact(a)
        assert_only({a}, t.call(c.search(query, scope=A, limit=rng.choice([1, 5, 50]), hybrid=rng.random() < 0.5)), "search")
        return set()
    if op in ("retrieve", "answer"):
        group = sorted({a, *rng.sample(range(len(TENANTS)), rng.choice([0, 1, 2]))})
        question = f"What note does tenant {b} keep? {foreign.text if foreign else ''}"
        scopes = [t.scopes[i] for i in group]
        if op == "retrieve":
            assert_only(group, t.call(c.retrieve(question, scope=scopes if len(scopes) > 1 else scopes[0])), "retrieve")
            return set()
        result = t.call(c.answer(question, scope=scopes))
        assert_only(group, result.evidence, "answer evidence")
        # the question is the caller's own text: the answer and its log may quote it
        asked = set(group) | owners(question)
        assert_only(asked, result.text, "answer")
        assert_only(asked, [tr.model_dump(mode="json") for tr in c.log.read(kind="answer") if tr.id == result.trajectory_id], "the logged answer")
        t.call(c.feedback(result.trajectory_id, correct=rng.random() < 0.5))
        return set()
    if op == "ingest":
        # a conversation of tenants sharing a run_id, or any two tenants: each turn goes to its speaker's scope
        pair = rng.choice([(11, 12), (11, 15), (a, b)])
        speakers = {f"S{i}": i for i in pair}
        turns = [{"speaker": f"S{i}", "text": f"I keep note {t.token(i)} in my diary"} for i in rng.choices(pair, k=rng.choice([1, 2, 4]))]
        results = t.call(c.ingest(turns, scope=lambda turn: t.scopes[speakers[turn.speaker]], progress=False))
        for turn, r in zip(turns, results):
            assert owners(t.bank.get(t.scopes[speakers[turn["speaker"]]], r.episodic_id).text) == {speakers[turn["speaker"]]}
        return set(pair)
    if op == "export":
        out = io.StringIO()
        n = t.call(c.export(out, scope=A))
        assert n == len(t.records(a))
        assert_only({a}, out.getvalue(), "export")
        return set()
    if op == "import":
        return import_step(t, a, b)
    if op == "erase":
        t.erases += 1
        t.call(c.erase(scope=A))
        assert t.records(a) == [] and t.bank.history(A) == [] and list(c.log.read(scope=A)) == []
        return {a}
    if op == "bank":
        assert t.bank.count(A, include_deleted=True) == len(t.records(a))
        forked = t.bank.fork(A)
        assert_only({a}, forked.list(A, include_deleted=True), "fork")
        assert forked.list(t.scopes[b], include_deleted=True) == []  # a fork holds one scope
        assert {s.key for s in t.bank.scopes()} >= {t.scopes[i].key for i in range(len(TENANTS)) if t.records(i, deleted=False)}
        return set()
    raise AssertionError(op)


def import_step(t: Tenancy, a: int, b: int) -> set[int]:
    """Export tenant ``a``: into a fresh scope it is a copy with fresh ids; back into ``a`` it
    is a conflict; relabelled as tenant ``b``'s (header and records) it is still refused,
    because its ids are ``a``'s. None of it changes ``b``."""
    c, A = t.client, t.scopes[a]
    out = io.StringIO()
    t.call(c.export(out, scope=A))
    text = out.getvalue()
    if not t.records(a):
        return set()
    copy = Scope(user_id=f"copy-{uuid.UUID(int=t.n)}", agent_id=str(a))
    t.n += 1
    assert t.call(c.import_(io.StringIO(text), scope=copy)) == len(t.records(a))
    copied = t.bank.list(copy, include_deleted=True)
    assert sorted(r.text for r in copied) == sorted(r.text for r in t.records(a))
    assert not {r.id for r in copied} & {r.id for r in t.records(a)}
    t.copies.append((a, copy))
    with pytest.raises(ImportConflict):
        t.call(c.import_(io.StringIO(text)))
    lines = [json.loads(line) for line in text.splitlines()]
    stolen = t.scopes[b].model_dump(mode="json")
    lines[0]["scope"] = stolen
    for line in lines[1:]:
        line.get("record", line.get("event"))["scope"] = stolen
    relabelled = "".join(json.dumps(line) + "\n" for line in lines)
    with pytest.raises((ImportConflict, InvalidInput)):
        t.call(c.import_(io.StringIO(relabelled)))
    return set()


OPS = ["add"] * 6 + ["update", "delete", "restore", "get", "history", "list", "search", "search", "retrieve", "answer", "ingest", "export", "import", "bank"] * 2


def unquoted(state: tuple[tuple[MemoryRecord, ...], int]) -> tuple[tuple[MemoryRecord, ...], int]:
    records, events = state
    return tuple(r.model_copy(update={"context_hash": None}) for r in records), events


def run_sequence(t: Tenancy, steps: int, erase_at: Iterable[int]) -> None:
    for i in range(len(TENANTS)):  # every tenant starts with a few memories, one of them deleted
        rec = t.call(t.client.add(t.fact(i), scope=t.scopes[i]))
        t.call(t.client.add(t.fact(i), scope=t.scopes[i]))
        t.call(t.client.delete(rec.id, scope=t.scopes[i]))
    erase_at = set(erase_at)
    for k in range(steps):
        op = "erase" if k in erase_at else t.rng.choice(OPS)
        a = t.rng.randrange(len(TENANTS))
        before = t.state()
        written = step(t, op, a)
        after = t.state()
        if op in ("erase", "delete"):  # the one change an erase or a turn's delete makes elsewhere: its conversation's turns forget it was their context
            same_run = {i for i, s in enumerate(t.scopes) if s.run_id is not None and s.run_id == t.scopes[a].run_id}
            before, after = ([unquoted(x) if i in same_run else x for i, x in enumerate(state)] for state in (before, after))
        untouched = [i for i in range(len(TENANTS)) if i not in written and before[i] != after[i]]
        assert untouched == [], f"step {k}: {op} as tenant {a} changed tenants {untouched}"
    t.check_every_tenant()
    assert t.erases == len(erase_at)


def test_randomized_tenants_never_see_or_change_each_other(tmp_path: Path) -> None:
    with MemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(DIM), policies="heuristic", context_turns=2) as client:
        # erases rewrite the shard (0.2-1 s each), so a few, at fixed steps: they must keep every other tenant
        run_sequence(Tenancy(client, random.Random(0), tmp_path), steps=300, erase_at=[80, 200])


def test_randomized_tenants_on_the_async_client(tmp_path: Path) -> None:
    loop = asyncio.new_event_loop()
    client = AsyncMemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(DIM), policies="heuristic")
    try:
        run_sequence(Tenancy(client, random.Random(7), tmp_path, loop=loop), steps=100, erase_at=[70])
    finally:
        loop.run_until_complete(client.aclose())
        loop.close()


# -- the CLI ------------------------------------------------------------------------------------


def test_the_cli_keeps_tenants_apart(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """Each command opens its own client (the hashing embedder stands in for MiniLM), as
    separate shell invocations would; what one tenant's flags name is all it sees."""
    from memsdk.cli import main

    monkeypatch.setattr("memsdk.embedding.minilm.SentenceTransformerEmbedder", lambda threads=None: HashEmbedder(DIM))
    base = ["--data-dir", str(tmp_path / "data"), "--policies", "heuristic"]
    flags = {0: ["--user", "alice"], 1: ["--user", "Alice"], 9: ["--user", "alice", "--agent", "support"], 11: ["--user", "alice", "--run", "chat-1"], 12: ["--user", "bob", "--run", "chat-1"]}
    rng = random.Random(3)

    def run(*args: str) -> Any:
        code = main([*base, *args])
        out, err = capsys.readouterr()
        assert code == 0, err
        return json.loads(out)

    for tenant, flag in flags.items():
        turns = tmp_path / f"turns-{tenant}.jsonl"
        turns.write_text("".join(json.dumps({"speaker": "S", "text": f"I keep note zq{tenant:02d}k{n:05d} safe", "turn_id": f"t{n}"}) + "\n" for n in range(2)))
        run("ingest", str(turns), *flag)
    copied = rng.sample(sorted(flags), 2)  # each command opens a client (~0.2 s): two tenants do the round trip
    for tenant, flag in rng.sample(sorted(flags.items()), len(flags)):
        listed = run("list", *flag, "--include-deleted")
        assert listed and all(owners(m["text"]) == {tenant} for m in listed)
        assert_only({tenant}, run("history", *flag), "history")
        other = rng.choice([f for f in flags.values() if f != flag])
        code = main([*base, "history", listed[0]["id"], *other])  # its id from another tenant's flags
        assert code == 2 and "not found" in capsys.readouterr().err
        assert_only({tenant}, run("ask", f"Which note? zq{(tenant + 1) % 16:02d}k00001", *flag), "ask")
        if tenant in copied:
            export = tmp_path / f"export-{tenant}.jsonl"
            assert run("export", str(export), *flag) == {"records": len(listed)}
            assert_only({tenant}, export.read_text(), "export")
            assert run("import", str(export), "--user", f"copy-of-{tenant}") == {"records": len(listed)}
            assert_only({tenant}, run("list", "--user", f"copy-of-{tenant}", "--include-deleted"), "the imported copy")
    # two --user flags: an answer over both scopes, and only those
    assert_only({0, 1}, run("ask", "Which notes are kept?", "--user", "alice", "--user", "Alice"), "ask over two users")
    assert run("list", "--user", "alice", "--agent", "nobody") == []


# -- the LangChain adapters ---------------------------------------------------------------------


def test_the_langchain_adapters_keep_tenants_apart(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core", reason="the adapters need memsdk[langchain]")
    from langchain_core.tools import ToolException

    from memsdk_adapters.langchain import MemsdkRetriever, MemsdkStore, memory_tools, namespace_to_scope, scope_to_namespace

    rng = random.Random(11)
    with MemoryClient(data_dir=tmp_path / "data", embedder=HashEmbedder(DIM), policies="heuristic") as client:
        t = Tenancy(client, rng, tmp_path)
        current = {"tenant": 0}  # the agent's runtime context: whose request this is
        by_context = memory_tools(client, scope=lambda context: t.scopes[current["tenant"]], k=50)
        for i in range(len(TENANTS)):
            client.add(t.fact(i), scope=t.scopes[i])
        for k in range(120):
            a = rng.randrange(len(TENANTS))
            b = t.other(a)
            before = t.state()
            current["tenant"] = a
            remember, recall, forget = rng.choice([by_context, memory_tools(client, scope=TENANTS[a], k=50)])
            foreign = t.pick(b, deleted=False)
            op = rng.choice(["retriever", "remember", "recall", "forget-own", "forget-foreign", "model-names-user"])
            written: set[int] = set()
            if op == "retriever":
                docs = MemsdkRetriever(client=client, scope=TENANTS[a], k=50, hybrid=rng.random() < 0.5).invoke(foreign.text if foreign else "tea")
                assert_only({a}, docs, "retriever")
            elif op == "remember":
                remember.invoke({"text": t.fact(a)})
                written = {a}
            elif op == "recall":
                assert_only({a}, recall.invoke({"query": foreign.text if foreign else "tea"}), "recall")
            elif op == "forget-own" and (own := t.pick(a, deleted=False)) is not None:
                forget.invoke({"memory_id": str(own.id)})
                written = {a}
            elif op == "forget-foreign" and foreign is not None:
                said = forget.invoke({"memory_id": str(foreign.id)})  # a model passing another user's id
                assert "no memory" in said
            elif op == "model-names-user" and foreign is not None:
                # a model that adds a scope argument is refused by the schema, not obeyed
                with pytest.raises((ToolException, ValueError)):
                    recall.invoke({"query": foreign.text, "user_id": TENANTS[b].get("user_id", "x")})
            after = t.state()
            assert [i for i in range(len(TENANTS)) if i not in written and before[i] != after[i]] == [], (k, op, a)
        t.check_every_tenant()

        # MemsdkStore: a namespace is a user_id; ("alice", "support") is user_id "alice.support",
        # not {"user_id": "alice", "agent_id": "support"}, and scopes with an agent or a run are no namespace
        store = MemsdkStore(client)
        namespaces = {0: ("alice",), 1: ("Alice",), 10: ("alice", "support"), 5: ("\u00e9lise",), 6: ("e\u0301lise",)}
        for i, ns in namespaces.items():
            assert namespace_to_scope(ns) == t.scopes[i]
            store.put(ns, f"key-{i}", {"content": t.fact(i)})
        for i, ns in namespaces.items():
            found = store.search(ns, query=f"note {t.token(rng.choice(list(namespaces)))}", limit=50)
            # a prefix search of ("alice",) reaches ("alice", "support"): LangGraph's namespace tree
            allowed = {j for j, other in namespaces.items() if other[: len(ns)] == ns}
            assert_only(allowed, [x.value for x in found], f"store search in {ns}")
            assert {x.namespace for x in found} <= {namespaces[j] for j in allowed}
            assert_only({i}, store.get(ns, f"key-{i}").value, f"store get in {ns}")
            assert store.get(ns, f"key-{rng.choice([j for j in namespaces if j != i])}") is None
        # scopes with an agent_id or a run_id are no namespace: never listed, never searched
        mapped = {i for i, scope in enumerate(t.scopes) if scope_to_namespace(scope) is not None}
        assert mapped.isdisjoint({7, 8, 9, 11, 12, 14, 15})
        assert set(store.list_namespaces(limit=1000)) <= {scope_to_namespace(t.scopes[i]) for i in mapped}
        assert_only(mapped, [x.value for x in store.search((), query="note about tea", limit=1000)], "a search of every namespace")
        before = t.state()
        store.put(("alice",), "key-0", None)  # a delete in one namespace
        after = t.state()
        assert [i for i in range(len(TENANTS)) if before[i] != after[i]] == [0]
        t.check_every_tenant()
