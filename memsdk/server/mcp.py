"""memsdk as an MCP server: remember / recall / forget / answer for agent hosts (IDEs, desktop assistants).

Built on the official SDK (``mcp`` 2.x, `MCPServer`). Two transports, one set of tools:

- **stdio** (``memsdk mcp --user bob``): the host starts the command; the client is the
  embedded one (or a remote one with ``MEMSDK_*`` settings), the scope the command's flags.
- **streamable HTTP**, mounted at ``/mcp`` in ``memsdk serve``: the host sends the
  server's API key (``Authorization: Bearer``) and, optionally, ``X-Memsdk-User``; the
  scope is ``{"user_id": <that header, else "default">}`` bound into the key's tenant, as
  every REST call is. A request without a valid key is refused before MCP sees it.

Either way the scope is never a tool argument: a model cannot name another user's memory,
and a memory id of another scope is "not found" (the same words as an unknown one). The
tools reply as the LangChain tools do (`memsdk.tool_replies`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from memsdk.client import MemoryClient
from memsdk.errors import MemoryNotFound, MemsdkError, NotAuthorized
from memsdk.server.keys import KEY_REQUIRED, Keyring
from memsdk.server.tenancy import bind
from memsdk.tool_replies import forgotten, recalled, remembered
from memsdk.types import Scope

__all__ = ["memory_server", "scope_from_key", "MCP_PATH", "USER_HEADER", "RECALL_K"]

MCP_PATH = "/mcp"
USER_HEADER = "x-memsdk-user"
#: memories a recall returns (the LangChain tools' default)
RECALL_K = 5

INSTRUCTIONS = (
    "Long-term memory for this user. remember(text) stores one fact as a short self-contained sentence; "
    "recall(query) lists what memory holds about it, each line starting with [memory id]; "
    "forget(memory_id) removes one memory recall showed; answer(question) answers from memory."
)

ScopeOf = Callable[[Context], Scope]


def scope_from_key(keys: Keyring) -> ScopeOf:
    """The HTTP transport's scope: the key's tenant, the user the host names (module docstring)."""

    def scope_of(ctx: Context) -> Scope:
        headers: Mapping[str, str] = ctx.headers or {}
        tenant = keys.tenant_of(headers.get("authorization"))
        if tenant is None:
            raise NotAuthorized(KEY_REQUIRED)
        return bind(tenant.name, {"user_id": headers.get(USER_HEADER) or "default"})

    return scope_of


def memory_server(client: MemoryClient, scope_of: ScopeOf) -> MCPServer:
    """The four tools over ``client``, each call's scope from ``scope_of`` (its request context).
    The tools are plain functions: the SDK runs them on worker threads, as the sync client wants."""
    server: MCPServer = MCPServer(name="memsdk", instructions=INSTRUCTIONS)

    def scoped(ctx: Context, call: Callable[[Scope], str]) -> str:
        try:
            return call(scope_of(ctx))
        except MemoryNotFound:
            raise ToolError("No such memory in this user's memory.") from None
        except MemsdkError as exc:  # bad input, a deleted memory, a refused key: the model reads why
            raise ToolError(str(exc)) from None

    @server.tool(description="Store one fact about the user, as a short self-contained sentence.")
    def remember(text: str, ctx: Context) -> str:
        return scoped(ctx, lambda scope: remembered(client.add(text, scope=scope)))

    @server.tool(description="List what memory holds about a query, one memory per line, each starting with its [id].")
    def recall(query: str, ctx: Context) -> str:
        return scoped(ctx, lambda scope: recalled(client.search(query, scope=scope, limit=RECALL_K, hybrid=True)))

    @server.tool(description="Forget one memory by the id recall showed (it can be restored by the app).")
    def forget(memory_id: str, ctx: Context) -> str:
        return scoped(ctx, lambda scope: forgotten(client.delete(memory_id, scope=scope)))

    @server.tool(description="Answer a question from the user's memory.")
    def answer(question: str, ctx: Context) -> str:
        return scoped(ctx, lambda scope: client.answer(question, scope=scope).text)

    return server


def http_asgi(server: MCPServer) -> Any:
    """The streamable-HTTP endpoint of ``server`` as an ASGI app for ``MCP_PATH``; the caller
    runs ``server.session_manager.run()`` in its lifespan. Hosts are not checked (the SDK's
    DNS-rebinding guard): every request must carry an API key a browser page does not have,
    and the server may be reached under any name its operator gives it."""
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp

    server.streamable_http_app(streamable_http_path=MCP_PATH, transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))
    return StreamableHTTPASGIApp(server.session_manager)
