"""``memsdk serve`` (the `memsdk.server` app under uvicorn, over one client it owns) and
``memsdk mcp`` (its memory tools over MCP on stdio, for an agent host that starts them)."""

from __future__ import annotations

import argparse
import os
import signal
from typing import Any, NoReturn

from memsdk.errors import InvalidInput
from memsdk.server.limits import KEEP_ALIVE_S, MAX_HEADER_BYTES, ServerLimits

__all__ = ["add_parser"]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="serve the memory over HTTP to apps in other processes (needs memsdk[server])")
    p.add_argument("--host", default=os.environ.get("MEMSDK_HOST", "127.0.0.1"), help="address to bind (default 127.0.0.1; 0.0.0.0 for every interface)")
    p.add_argument("--port", type=int, default=int(os.environ.get("MEMSDK_PORT", "8080")))
    p.add_argument("--keys-file", default=os.environ.get("MEMSDK_KEYS_FILE"), help="a keys file (hashed keys, tenants, admin flags); default: MEMSDK_API_KEYS='key=tenant,...'")
    p.add_argument("--max-body-bytes", type=int, default=ServerLimits().max_body_bytes, help="a larger body is refused with 413 (an import: 256 MiB)")
    p.add_argument("--body-timeout-s", type=float, default=ServerLimits().body_idle_s, help="a request body that stops arriving for this long is answered 408 and its connection closed")
    p.add_argument("--keep-alive-s", type=int, default=KEEP_ALIVE_S, help="an idle connection between requests is closed after this long")
    p.add_argument("--max-header-bytes", type=int, default=MAX_HEADER_BYTES, help="a request line and headers larger than this are refused (400)")
    p.add_argument("--cors-origin", action="append", default=[], help="allow browser calls from this origin (repeatable; default: CORS off)")
    p.set_defaults(handler=serve)
    p = sub.add_parser("mcp", help="the memory tools over MCP on stdio, for an agent host (needs memsdk[server])")
    p.add_argument("--user", help="user_id of the memory the tools reach")
    p.add_argument("--agent", help="agent_id")
    p.add_argument("--run", help="run_id")
    p.set_defaults(handler=mcp_stdio)


def mcp_stdio(args: argparse.Namespace, settings: dict[str, Any]) -> NoReturn:
    """Serve the tools on stdin / stdout until the host closes them; the scope is the flags'."""
    try:
        from memsdk.server.mcp import memory_server
    except ImportError:
        raise InvalidInput("mcp", "needs the server extra: pip install 'memsdk[server]'") from None
    from memsdk.client import MemoryClient
    from memsdk.types import Scope

    ids = {k: v for k, v in {"user_id": args.user, "agent_id": args.agent, "run_id": args.run}.items() if v}
    if not ids:
        raise InvalidInput("scope", "give --user, --agent or --run: the memory the tools reach")
    scope = Scope(**ids)
    with MemoryClient(**settings) as client:
        memory_server(client, lambda ctx: scope).run("stdio")
    raise SystemExit(0)  # not the command's JSON result: stdout carries the protocol only


def serve(args: argparse.Namespace, settings: dict[str, Any]) -> Any:
    try:
        import uvicorn
    except ImportError:
        raise InvalidInput("serve", "needs the server extra: pip install 'memsdk[server]'") from None
    from memsdk.client import MemoryClient
    from memsdk.server import Keyring, create_app

    keys = Keyring.from_env(keys_file=args.keys_file)  # before the client: a server without keys starts nothing
    # uvicorn finishes the requests in flight on SIGINT / SIGTERM, then raises the signal
    # again under the handlers it found: these make that a clean exit through the `with`
    # below (the store closed), where the default ones would end the process on the spot
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, _stop)
    try:
        with MemoryClient(**settings) as client:
            limits = ServerLimits(max_body_bytes=args.max_body_bytes, body_idle_s=args.body_timeout_s)
            app = create_app(client, keys, limits=limits, cors_origins=args.cors_origin)
            # h11, not httptools where it is installed: the header limit is h11's. A request
            # that stalls is the app's to time out (body_idle_s); uvicorn times out idle
            # connections only, and a slow request line or headers only a reverse proxy does
            uvicorn.run(
                app, host=args.host, port=args.port, log_level="info", http="h11",
                timeout_keep_alive=args.keep_alive_s, h11_max_incomplete_event_size=args.max_header_bytes,
            )  # fmt: skip
    except _Stopped:
        pass
    return {"stopped": f"http://{args.host}:{args.port}"}


class _Stopped(Exception):
    pass


def _stop(signum: int, frame: Any) -> None:
    raise _Stopped
