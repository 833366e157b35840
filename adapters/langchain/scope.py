"""Whose memory a LangChain component reads and writes: bound in code, never chosen by a model.

Every adapter takes ``scope=`` at construction, as one of:

- a `memsdk.Scope` or a dict (``{"user_id": "alice"}``): every call uses it;
- a callable ``context -> Scope | dict``: called with the agent's runtime context
  (``agent.invoke(..., context=...)``) on every call, so one agent serves many users;
- ``None`` (the default): the runtime context itself is read: a mapping or an object with
  any of ``user_id`` / ``agent_id`` / ``run_id`` (a dataclass, a TypedDict, a pydantic model).

No tool schema has a scope argument, so a model cannot name another user's scope: what it
writes into a tool call's arguments is validated against the schema, and the scope comes
from here (Mem0's LangChain example puts ``user_id`` in the tool arguments, LangMem cannot
read it from the runtime context: langmem #108).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeAlias

from memsdk import Scope
from memsdk.bank import as_scope
from memsdk.errors import ScopeRequired

__all__ = ["ScopeSource", "resolve_scope"]

ScopeSource: TypeAlias = Scope | Mapping[str, Any] | Callable[[Any], Scope | Mapping[str, Any]] | None

_FIELDS = ("user_id", "agent_id", "run_id")


def _from_context(context: Any) -> Scope:
    if isinstance(context, Scope):
        return context
    if isinstance(context, Mapping):
        found = {f: context[f] for f in _FIELDS if context.get(f) is not None}
    else:
        found = {f: getattr(context, f) for f in _FIELDS if getattr(context, f, None) is not None}
    if not found:
        raise ScopeRequired(
            "scope",
            "no scope was bound at construction and the runtime context has none of user_id, agent_id, run_id "
            f"(context: {type(context).__name__}); pass scope=... or invoke the agent with context={{'user_id': ...}}",
        )
    return as_scope(found, "context")


def resolve_scope(source: ScopeSource, context: Any) -> Scope:
    """The scope for one call: ``source`` as documented above, ``context`` the runtime's."""
    if source is None:
        return _from_context(context)
    if isinstance(source, Scope):
        return source
    if isinstance(source, Mapping):
        return as_scope(dict(source))
    chosen = source(context)
    return as_scope(dict(chosen) if isinstance(chosen, Mapping) else chosen)
