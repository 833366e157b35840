"""memsdk inside LangChain 1.x agents and LangGraph (``pip install memsdk[langchain]``).

- `MemsdkRetriever`: a `BaseRetriever` over ``client.search`` (sync and async).
- `memory_tools`: remember / recall / forget as `StructuredTool`s.
- `MemsdkMiddleware`: an `AgentMiddleware` for ``create_agent`` that recalls memories into
  the model request and ingests the turns in the background after the agent finishes.
- `MemsdkStore`: a LangGraph `BaseStore` whose namespaces are memsdk scopes.

The scope is never a model-visible argument: see `scope.py`.
"""

from memsdk_adapters.langchain.middleware import MemsdkMiddleware
from memsdk.outbox import DeadLetter, Outbox, QueueFull
from memsdk_adapters.langchain.retriever import MemsdkRetriever, memory_document
from memsdk_adapters.langchain.scope import ScopeSource, resolve_scope
from memsdk_adapters.langchain.store import MemsdkStore, escape_label, namespace_to_scope, scope_to_namespace, unescape_label
from memsdk_adapters.langchain.tools import forget_tool, memory_tools, recall_tool, remember_tool

__all__ = [
    "DeadLetter",
    "MemsdkMiddleware",
    "MemsdkRetriever",
    "MemsdkStore",
    "Outbox",
    "QueueFull",
    "ScopeSource",
    "escape_label",
    "forget_tool",
    "memory_document",
    "memory_tools",
    "namespace_to_scope",
    "recall_tool",
    "remember_tool",
    "resolve_scope",
    "scope_to_namespace",
    "unescape_label",
]
