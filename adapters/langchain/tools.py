"""remember / recall / forget as LangChain tools, each with a sync and an async function.

    tools = memory_tools(client, aclient=aclient)            # scope from the runtime context
    agent = create_agent(model, tools, context_schema=UserContext)
    agent.invoke({"messages": [...]}, context=UserContext(user_id="alice"))

The model sees three arguments in all: ``text``, ``query`` and ``memory_id``. The scope is
bound at construction or read from the agent's runtime context (`scope.py`), never from the
model's arguments: a tool call that adds ``user_id`` is refused by the schema, and a memory
id from another scope is not found in this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.tools import BaseTool, StructuredTool, ToolException
from pydantic import BaseModel, ConfigDict, Field

from memsdk import AsyncMemoryClient, MemoryClient, Scope
from memsdk.errors import InvalidInput, MemoryNotFound
from memsdk.bank import BankLimits
from memsdk.tool_replies import forgotten, recalled, remembered
from memsdk.types import QUESTION_MAX_CHARS

from memsdk_adapters.langchain.scope import ScopeSource, resolve_scope

__all__ = ["memory_tools", "remember_tool", "recall_tool", "forget_tool"]


# The model-visible arguments. extra="forbid": an argument the model invents (a user_id, a
# scope) is an error it sees, not something silently dropped or, worse, used. ``runtime`` is
# declared so that the forbid lets LangGraph's ToolNode inject it; a directly injected type,
# it is left out of the schema the model sees, and ToolNode drops any value a model sends.
class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    runtime: ToolRuntime = Field(default=None, exclude=True)  # type: ignore[assignment]


class RememberArgs(_Args):
    text: str = Field(min_length=1, max_length=BankLimits().max_text_chars, description="One fact to keep, as a short self-contained sentence.")


class RecallArgs(_Args):
    query: str = Field(min_length=1, max_length=QUESTION_MAX_CHARS, description="What to look for in memory.")


class ForgetArgs(_Args):
    memory_id: str = Field(min_length=1, max_length=64, description="The id of a memory that recall returned.")


@dataclass(frozen=True)
class _Memory:
    """What the three tools share: the clients, where the scope comes from, and ``k``."""

    client: MemoryClient | None
    aclient: AsyncMemoryClient | None
    scope: ScopeSource
    k: int

    def _scope(self, runtime: ToolRuntime | None) -> Scope:
        return resolve_scope(self.scope, runtime.context if runtime is not None else None)

    def _sync(self) -> MemoryClient:
        if self.client is None:
            raise ToolException("these memory tools were built with aclient only: call them asynchronously")
        return self.client

    def _async(self) -> AsyncMemoryClient:
        if self.aclient is None:
            # the blocking client is never run in a thread on the agent's event loop
            raise ToolException("these memory tools have no aclient: pass aclient=AsyncMemoryClient(...) to use them in an async agent")
        return self.aclient

    # ``runtime`` is injected by LangGraph's ToolNode (by name and type) and hidden from the
    # model's schema; called outside an agent it is None and the bound scope is used.

    def remember(self, text: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        return remembered(self._sync().add(text, scope=self._scope(runtime)))

    async def aremember(self, text: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        return remembered(await self._async().add(text, scope=self._scope(runtime)))

    def recall(self, query: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        return recalled(self._sync().search(query, scope=self._scope(runtime), limit=self.k, hybrid=True))

    async def arecall(self, query: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        return recalled(await self._async().search(query, scope=self._scope(runtime), limit=self.k, hybrid=True))

    def forget(self, memory_id: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        with _not_found(memory_id):
            return forgotten(self._sync().delete(memory_id, scope=self._scope(runtime)))

    async def aforget(self, memory_id: str, runtime: ToolRuntime = None) -> str:  # type: ignore[assignment]
        with _not_found(memory_id):
            return forgotten(await self._async().delete(memory_id, scope=self._scope(runtime)))


class _not_found:
    """A bad or foreign id is the model's mistake: a `ToolException` it reads, not a crash.
    The message is the same whether the id exists in another scope or nowhere."""

    def __init__(self, memory_id: str) -> None:
        self.memory_id = memory_id

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: Any) -> bool:
        if isinstance(exc, (MemoryNotFound, InvalidInput)):
            raise ToolException(f"no memory {self.memory_id!r} here; use an id that recall returned") from None
        return False


def _tool(name: str, description: str, args: type[BaseModel], func: Any, coroutine: Any) -> BaseTool:
    return StructuredTool.from_function(
        func=func, coroutine=coroutine, name=name, description=description, args_schema=args, handle_tool_error=True
    )


def _memory(client: MemoryClient | None, aclient: AsyncMemoryClient | None, scope: ScopeSource, k: int) -> _Memory:
    if client is None and aclient is None:
        raise ValueError("memory tools need client= (a MemoryClient), aclient= (an AsyncMemoryClient), or both")
    if not isinstance(k, int) or isinstance(k, bool) or k < 1:
        raise ValueError(f"k: expected a positive int, got {k!r}")
    return _Memory(client, aclient, scope, k)


def remember_tool(client: MemoryClient | None = None, *, aclient: AsyncMemoryClient | None = None, scope: ScopeSource = None) -> BaseTool:
    """A tool that stores one fact in the scope's semantic memory (a direct write, actor ``api``)."""
    m = _memory(client, aclient, scope, 1)
    return _tool("remember", "Store one fact about the user for later conversations.", RememberArgs, m.remember, m.aremember)


def recall_tool(client: MemoryClient | None = None, *, aclient: AsyncMemoryClient | None = None, scope: ScopeSource = None, k: int = 5) -> BaseTool:
    """A tool that returns the ``k`` memories nearest to a query, one per line with its id."""
    m = _memory(client, aclient, scope, k)
    return _tool("recall", "Search the user's memories. Returns one memory per line as [id] text.", RecallArgs, m.recall, m.arecall)


def forget_tool(client: MemoryClient | None = None, *, aclient: AsyncMemoryClient | None = None, scope: ScopeSource = None) -> BaseTool:
    """A tool that soft-deletes one memory by id: restorable (``client.restore``) until ``erase``."""
    m = _memory(client, aclient, scope, 1)
    return _tool("forget", "Forget one memory by the id that recall returned.", ForgetArgs, m.forget, m.aforget)


def memory_tools(client: MemoryClient | None = None, *, aclient: AsyncMemoryClient | None = None, scope: ScopeSource = None, k: int = 5) -> list[BaseTool]:
    """[remember, recall, forget], sharing one scope source."""
    return [
        remember_tool(client, aclient=aclient, scope=scope),
        recall_tool(client, aclient=aclient, scope=scope, k=k),
        forget_tool(client, aclient=aclient, scope=scope),
    ]
