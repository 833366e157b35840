"""MCP sessions from the official client (``mcp`` 2.x) over both transports: stdio
(``memsdk mcp``) and streamable HTTP (``/mcp`` in ``memsdk serve``)."""

from __future__ import annotations

import asyncio
import os
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")
import httpx2  # noqa: E402
from mcp import Client  # noqa: E402
from mcp.client.stdio import StdioServerParameters  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

from memsdk.server.tenancy import bind  # noqa: E402

TOOLS = {"remember", "recall", "forget", "answer"}


def text(result: Any) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


async def session_script(client: Client) -> list[str]:
    """List the tools, then remember -> recall -> answer -> forget -> recall; the transcript."""
    listed = (await client.list_tools()).tools
    assert {t.name for t in listed} == TOOLS
    for tool in listed:  # the scope is the transport's: no tool takes one
        assert set(tool.input_schema.get("properties", {})) & {"user_id", "scope", "agent_id", "run_id"} == set(), tool.input_schema
    out = [f"tools: {sorted(t.name for t in listed)}"]
    stored = text(await client.call_tool("remember", {"text": "Bob's sister is called Hanna"}))
    memory_id = stored.rsplit(" ", 1)[-1].rstrip(".")
    found = text(await client.call_tool("recall", {"query": "Bob's sister"}))
    assert f"[{memory_id}]" in found and "Hanna" in found
    said = text(await client.call_tool("answer", {"question": "What is Bob's sister called?"}))
    dropped = text(await client.call_tool("forget", {"memory_id": memory_id}))
    assert "Forgot memory" in dropped
    after = text(await client.call_tool("recall", {"query": "Bob's sister"}))
    assert f"[{memory_id}]" not in after
    again = await client.call_tool("forget", {"memory_id": memory_id})
    assert again.is_error and "is deleted" in text(again)
    unknown = await client.call_tool("forget", {"memory_id": str(uuid.uuid4())})
    assert unknown.is_error and "No such memory" in text(unknown)
    return out + [
        f"remember -> {stored}", f"recall -> {found}", f"answer -> {said}", f"forget -> {dropped}", f"recall -> {after}",
        f"forget again -> {text(again)}", f"forget an unknown id -> {text(unknown)}",
    ]


def test_a_stdio_session_with_memsdk_mcp(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "memsdk.cli", "--data-dir", str(tmp_path / "data"), "--policies", "heuristic", "mcp", "--user", "bob"],
        env={**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"},
    )

    async def run() -> list[str]:
        async with Client(params) as client:
            return await session_script(client)

    transcript = asyncio.run(run())
    (tmp_path / "transcript.txt").write_text("\n".join(transcript))
    assert transcript[0] == f"tools: {sorted(TOOLS)}"


def http_client(url: str, key: str, user: str | None = None) -> Client:
    headers = {"Authorization": f"Bearer {key}"} | ({"X-Memsdk-User": user} if user else {})
    return Client(streamable_http_client(f"{url}/mcp", http_client=httpx2.AsyncClient(headers=headers, timeout=30)))


def test_a_streamable_http_session_in_memsdk_serve_is_bound_to_its_keys_tenant(serve) -> None:
    s = serve()

    async def run() -> None:
        async with http_client(s.url, "key-alpha") as alpha:
            await session_script(alpha)
            kept = text(await alpha.call_tool("remember", {"text": "Alpha's launch code is 1234"}))
        memory_id = kept.rsplit(" ", 1)[-1].rstrip(".")
        async with http_client(s.url, "key-beta") as beta:  # another tenant, the same (default) user
            assert "1234" not in text(await beta.call_tool("recall", {"query": "launch code"}))
            assert (await beta.call_tool("forget", {"memory_id": memory_id})).is_error
        async with http_client(s.url, "key-alpha", user="carol") as carol:  # another user of the tenant
            assert "1234" not in text(await carol.call_tool("recall", {"query": "launch code"}))

    asyncio.run(run())
    assert [m.text for m in s.client.list(scope=bind("alpha", {"user_id": "default"}), tier="semantic")] == ["Alpha's launch code is 1234"]
    assert s.client.list(scope=bind("beta", {"user_id": "default"})) == []


def test_an_mcp_request_without_a_valid_key_is_refused_before_mcp(serve) -> None:
    s = serve()
    reply = httpx2.post(f"{s.url}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}, headers={"Authorization": "Bearer wrong"})
    assert reply.status_code == 401 and reply.headers["content-type"].startswith("application/problem+json")

    async def run() -> None:
        async with http_client(s.url, "wrong") as client:
            await client.list_tools()

    with pytest.raises(BaseException):  # the SDK surfaces the 401 as its own error
        asyncio.run(run())
    assert s.client.list(scope=bind("alpha", {"user_id": "default"})) == []
