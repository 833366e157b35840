"""LangGraph's `BaseStore` over memsdk: a namespace is a scope, an item is a memory.

    store = MemsdkStore(client)             # a MemoryClient or an AsyncMemoryClient
    graph = builder.compile(store=store)    # or entrypoint(store=store), create_agent(..., store=store)

**Namespaces.** ``("memories", "alice")`` is ``Scope(user_id="memories.alice")``: the labels
joined by ".". LangGraph forbids "." inside a label, so the join is reversible, and
``("alice",)`` is the very memory the client and the agent middleware use for
``{"user_id": "alice"}``. An id that holds a "." (an email) becomes one label escaped:
``escape_label("maya@example.com") == "maya@example%2Ecom"`` ("%" -> "%25", "." -> "%2E");
`unescape_label` reverses it. A scope with an ``agent_id`` or ``run_id`` is no namespace:
the store neither lists nor searches it. ``to_scope=`` / ``to_namespace=`` replace the
mapping; they must be each other's inverse (``to_namespace`` returns None for a scope that
is none of the store's).

**Items.** A put is a direct write (actor ``api``) of a semantic memory. Its text is what
memsdk embeds, searches and shows the answerer: the ``index`` (or ``fields``) paths of the
value, else its one field when it has one (LangMem writes ``{"content": ...}``), else the
value as JSON. Its metadata holds the key and the value. Another put of the key updates
that memory (the history keeps the old text); a put of ``None`` soft-deletes it, and
``client.restore`` brings it back. A memory the store did not write (ingested, or added by
the client) reads as key = its id, value ``{"content": text, "tier": tier}``; a put on that
key rewrites it (an episodic turn is verbatim: the bank refuses).

**Differences from InMemoryStore** (tests/adapters/test_store_contract.py asserts them):
search ranks by memsdk's retrieval (hybrid dense + BM25 when the client's config says so,
the score is then the fused one); without a query, items come oldest first across
namespaces (InMemoryStore: namespace by namespace); a namespace is listed while it holds a
live memory; an update keeps ``created_at`` and a put of the same value writes nothing;
every item is embedded (``index=False`` is ignored); values must be JSON within the bank's
limits (text 4,000 characters, value 16 KB), else `InvalidInput` naming ``value``; TTLs
are refused with ``NotImplementedError``, as `BaseStore` does for any store without them.
A batch reads before it writes (as InMemoryStore does) and writes each namespace in one
atomic bank batch, not all namespaces at once.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import defaultdict
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from typing import Any, Literal, NamedTuple

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    get_text_at_path,
    validate_op_namespace,
)

# LangGraph's own filter and namespace-pattern semantics, private to InMemoryStore: reused,
# not copied, so a filter means here what it means there (the contract suite pins them)
from langgraph.store.memory import _compare_values, _does_match
from pydantic import ValidationError

from memsdk import AsyncMemoryClient, MemoryClient
from memsdk.errors import InvalidInput
from memsdk.types import API_ACTOR, MemoryRecord, Scope
from memsdk.types import Op as MemoryOp

__all__ = ["MemsdkStore", "namespace_to_scope", "scope_to_namespace", "escape_label", "unescape_label", "indexed_text", "ITEM_FIELD"]

#: the metadata field a put writes: ``{"key": ..., "value": ...}``
ITEM_FIELD = "langgraph"

Namespace = tuple[str, ...]


def namespace_to_scope(namespace: Namespace) -> Scope:
    """``("memories", "alice")`` -> ``Scope(user_id="memories.alice")``."""
    if not namespace:
        raise InvalidNamespaceError("a namespace needs at least one label")
    try:
        return Scope(user_id=".".join(namespace))
    except ValidationError as exc:
        raise InvalidNamespaceError(f"namespace {namespace} is no memsdk user_id: {exc.errors()[0]['msg']}") from None


def scope_to_namespace(scope: Scope) -> Namespace | None:
    """The inverse of `namespace_to_scope`; None for a scope no namespace maps to (an
    ``agent_id`` or ``run_id``, or a user_id with an empty label such as ``"a..b"``)."""
    if scope.user_id is None or scope.agent_id is not None or scope.run_id is not None:
        return None
    labels = tuple(scope.user_id.split("."))
    return labels if all(labels) else None


_ESCAPED = re.compile(r"%(25|2E)")


def escape_label(text: str) -> str:
    """An id as one namespace label: "%" -> "%25", then "." -> "%2E"."""
    return text.replace("%", "%25").replace(".", "%2E")


def unescape_label(label: str) -> str:
    """The id an `escape_label` label stands for (one pass, so "%252E" gives "%2E")."""
    return _ESCAPED.sub(lambda m: "%" if m[1] == "25" else ".", label)


def indexed_text(value: Mapping[str, Any], paths: Sequence[str] | None = None) -> str:
    """The memory text of a value: the text at ``paths`` (LangGraph's path syntax), else the
    value's one field, else the whole value as JSON."""
    texts = [t for p in paths or () for t in get_text_at_path(value, p) if t.strip()]
    if texts:
        return "\n".join(texts)
    if len(value) == 1:
        (only,) = value.values()
        if isinstance(only, str) and only.strip():
            return only
        if only is not None and not isinstance(only, str):
            return json.dumps(only, ensure_ascii=False, sort_keys=True)
    return json.dumps(dict(value), ensure_ascii=False, sort_keys=True)


class _Call(NamedTuple):
    """A bank call a batch needs. `_Plan` yields them and does no I/O (the pattern of
    memsdk.pipeline): `batch` makes each call, `abatch` awaits it."""

    name: Literal["list", "search", "scopes", "apply"]
    kwargs: dict[str, Any]


Steps = Generator[_Call, Any, Any]


class MemsdkStore(BaseStore):
    """A LangGraph store whose namespaces are memsdk scopes (see the module docstring).

    ``supports_ttl`` is False on purpose: an expiring memory would be deleted without a
    request or an audited forget, against the bank's "nothing is lost silently".

    ``fields``: the value paths whose text is a memory's text (LangGraph's ``IndexConfig``
    ``fields``; a put's ``index=[...]`` overrides them). ``hybrid``: search dense + BM25;
    default: the client's ``config.hybrid``.
    """

    supports_ttl = False

    def __init__(
        self,
        client: MemoryClient | AsyncMemoryClient,
        *,
        fields: Sequence[str] | None = None,
        hybrid: bool | None = None,
        to_scope: Callable[[Namespace], Scope] = namespace_to_scope,
        to_namespace: Callable[[Scope], Namespace | None] = scope_to_namespace,
    ) -> None:
        if not isinstance(client, (MemoryClient, AsyncMemoryClient)):
            raise InvalidInput("client", f"expected a MemoryClient or an AsyncMemoryClient, got {type(client).__name__}")
        self.client = client
        self._fields = list(fields) if fields else None
        self._hybrid = client.config.hybrid if hybrid is None else hybrid
        self._to_scope, self._to_namespace = to_scope, to_namespace

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        self.client._check_open()
        steps, reply = _Plan(self, list(ops)).run(), None
        while True:
            try:
                call = steps.send(reply)
            except StopIteration as done:
                return done.value
            reply = getattr(self.client.bank, call.name)(**call.kwargs)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        self.client._check_open()
        steps, reply = _Plan(self, list(ops)).run(), None
        while True:
            try:
                call = steps.send(reply)
            except StopIteration as done:
                return done.value
            reply = await self._acall(call)

    async def _acall(self, call: _Call) -> Any:
        if isinstance(self.client, AsyncMemoryClient) and call.name in ("list", "search"):
            return await getattr(self.client, call.name)(**call.kwargs)
        # the clients have no scope listing and no update that carries metadata, so these go
        # to the bank, in a worker thread as the async client runs its own bank calls
        return await asyncio.to_thread(getattr(self.client.bank, call.name), **call.kwargs)

    def _ops_for(self, put: PutOp, found: list[MemoryRecord]) -> list[MemoryOp]:
        """The bank ops one put becomes, given the live memories holding its key, newest first."""
        if put.value is None:
            return [MemoryOp.delete(r.id) for r in found]
        try:
            text = indexed_text(put.value, put.index or self._fields)
        except (TypeError, ValueError) as exc:  # json.dumps of a value that is not JSON
            raise InvalidInput("value", f"must be JSON: {exc}") from None
        stored = {"key": put.key, "value": dict(put.value)}
        try:
            op = MemoryOp.add(text, metadata={ITEM_FIELD: stored}) if not found else MemoryOp.update(found[0].id, text, metadata={ITEM_FIELD: stored})
        except ValidationError as exc:
            raise InvalidInput.from_pydantic(exc, "value") from None
        self._check_size(text, stored)
        # two writers that added one key at once leave two memories: the newest one stays
        stale = [MemoryOp.delete(r.id) for r in found[1:]]
        unchanged = bool(found) and found[0].text == text and found[0].metadata.get(ITEM_FIELD) == stored
        return stale if unchanged else [op, *stale]

    def _check_size(self, text: str, stored: dict[str, Any]) -> None:
        # the bank checks these too, but names the field of its own batch (ops[3].text)
        limits = self.client.bank.limits
        if len(text) > limits.max_text_chars:
            raise InvalidInput("value", f"its text is {len(text)} characters, the limit is {limits.max_text_chars}; index fewer fields")
        size = len(json.dumps({ITEM_FIELD: stored}, ensure_ascii=False).encode())
        if size > limits.max_metadata_bytes:
            raise InvalidInput("value", f"is {size} bytes as JSON, the limit is {limits.max_metadata_bytes}")


class _Plan:
    """One batch as InMemoryStore runs it: every read sees the memory as it was before the
    batch, then the puts are written, the last put of a key winning."""

    def __init__(self, store: MemsdkStore, ops: list[Op]) -> None:
        self.store, self.ops = store, ops
        self.listed: dict[Namespace, list[MemoryRecord]] = {}
        self.keyed: dict[Namespace, dict[str, list[MemoryRecord]]] = {}
        self.namespaces: list[Namespace] | None = None

    def run(self) -> Steps:
        for op in self.ops:
            validate_op_namespace(op)  # ops handed to batch() directly skip BaseStore's checks
            # a deliberate refusal, the one BaseStore.put raises for a store whose supports_ttl
            # is False: a memory lives until deleted or erased, never silently expires
            if isinstance(op, PutOp) and op.ttl is not None and not self.store.supports_ttl:
                raise NotImplementedError("MemsdkStore does not support TTL: memories live until deleted")
        results: list[Result] = []
        puts: dict[tuple[Namespace, str], PutOp] = {}
        for op in self.ops:
            if isinstance(op, GetOp):
                found = (yield from self.by_key(op.namespace)).get(op.key)
                results.append(_item(found[0], op.namespace) if found else None)
            elif isinstance(op, SearchOp):
                results.append((yield from self.search(op)))
            elif isinstance(op, ListNamespacesOp):
                results.append(_list_namespaces(op, (yield from self.all_namespaces())))
            elif isinstance(op, PutOp):
                puts[(op.namespace, op.key)] = op
                results.append(None)
            else:
                raise TypeError(f"unknown store operation {type(op).__name__}")
        yield from self.write(puts.values())
        return results

    def records(self, namespace: Namespace) -> Steps:
        if namespace not in self.listed:
            self.listed[namespace] = yield _Call("list", {"scope": self.store._to_scope(namespace)})
        return self.listed[namespace]

    def by_key(self, namespace: Namespace) -> Steps:
        if namespace not in self.keyed:
            keyed: dict[str, list[MemoryRecord]] = defaultdict(list)
            for r in sorted((yield from self.records(namespace)), key=lambda r: r.updated_at, reverse=True):
                keyed[_key_value(r)[0]].append(r)
            self.keyed[namespace] = keyed
        return self.keyed[namespace]

    def all_namespaces(self) -> Steps:
        if self.namespaces is None:
            scopes = yield _Call("scopes", {})
            self.namespaces = sorted(ns for s in scopes if (ns := self.store._to_namespace(s)) is not None)
        return self.namespaces

    def search(self, op: SearchOp) -> Steps:
        if op.limit <= 0:
            return []
        depth = self.store.client.bank.limits.max_search_limit
        # a filter applies after retrieval, so it sees the best `depth` memories of each namespace
        depth = depth if op.filter else min(depth, op.offset + op.limit)
        query = op.query if op.query and op.query.strip() else None
        found: list[SearchItem] = []
        for namespace in (yield from self.all_namespaces()):
            if namespace[: len(op.namespace_prefix)] != op.namespace_prefix:
                continue
            if query is None:
                found += [_search_item(r, namespace) for r in (yield from self.records(namespace))]
                continue
            hits = yield _Call("search", {"query": query, "scope": self.store._to_scope(namespace), "limit": depth, "hybrid": self.store._hybrid})
            found += [_search_item(h.record, namespace, h.score) for h in hits]
        found = [i for i in found if all(_compare_values(i.value.get(k), v) for k, v in (op.filter or {}).items())]
        found.sort(key=(lambda i: -(i.score or 0.0)) if query else (lambda i: i.created_at))
        return found[op.offset : op.offset + op.limit]

    def write(self, puts: Iterable[PutOp]) -> Steps:
        grouped: dict[Namespace, list[PutOp]] = defaultdict(list)
        for put in puts:
            grouped[put.namespace].append(put)
        # every put is checked before the first write, so a bad value writes nothing
        planned = []
        for namespace, group in grouped.items():
            keyed = yield from self.by_key(namespace)
            planned.append((self.store._to_scope(namespace), [o for put in group for o in self.store._ops_for(put, keyed.get(put.key, []))]))
        most = self.store.client.bank.limits.max_ops_per_batch
        for scope, ops in planned:
            for start in range(0, len(ops), most):
                yield _Call("apply", {"scope": scope, "ops": ops[start : start + most], "actor": API_ACTOR})


def _key_value(record: MemoryRecord) -> tuple[str, dict[str, Any]]:
    stored = record.metadata.get(ITEM_FIELD)
    if isinstance(stored, dict) and isinstance(stored.get("key"), str) and isinstance(stored.get("value"), dict):
        return stored["key"], stored["value"]
    return str(record.id), {"content": record.text, "tier": record.tier.value}  # not written by a put


def _item(record: MemoryRecord, namespace: Namespace) -> Item:
    key, value = _key_value(record)
    return Item(value=value, key=key, namespace=namespace, created_at=record.created_at, updated_at=record.updated_at)


def _search_item(record: MemoryRecord, namespace: Namespace, score: float | None = None) -> SearchItem:
    key, value = _key_value(record)
    return SearchItem(namespace, key, value, record.created_at, record.updated_at, score)


def _list_namespaces(op: ListNamespacesOp, namespaces: list[Namespace]) -> list[Namespace]:
    kept = [ns for ns in namespaces if all(_does_match(c, ns) for c in op.match_conditions or ())]
    if op.max_depth is not None:
        kept = sorted({ns[: op.max_depth] for ns in kept})
    return kept[op.offset : op.offset + op.limit]
