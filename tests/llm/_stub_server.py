"""A scripted local HTTP server standing in for an OpenAI-compatible endpoint (error paths).

Each request takes the next step of the script (the last one repeats): a ``Reply``, or a
function of the request body that returns one, for a server whose answer depends on what
it was asked (the prompt's length, the role a schema names). The server records what it got
and the highest number of requests in flight at once.

A ``Reply`` can misbehave below JSON too: ``raw`` bytes sent as the body (garbage, JSON cut
short), or ``reset_after`` bytes of the body and then a TCP reset, as a server that dies
mid-reply does.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

#: SO_LINGER on with a zero timeout: close() drops the connection with a reset, not a FIN
_RESET = struct.pack("ii", 1, 0)


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    delay_s: float = 0.0
    raw: bytes | None = None  # sent as is instead of JSON(body), with a matching content-length
    reset_after: int | None = None  # send the headers and this many body bytes, then reset the connection


Step = Reply | Callable[[Any], Reply]


def chat_body(text: str = "ok", model: str = "stub", finish_reason: str = "stop") -> dict[str, Any]:
    return {
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": finish_reason, "token_ids": [1, 2]}],
        "usage": {"prompt_tokens": 3, "completion_tokens": 2},
    }


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def shutdown_request(self, request: Any) -> None:
        # the base class half-closes first (a FIN, a clean end of the body); a reset must not
        if request.getsockopt(socket.SOL_SOCKET, socket.SO_LINGER, len(_RESET)) == _RESET:
            request.close()
        else:
            super().shutdown_request(request)


class StubServer:
    def __init__(self, replies: list[Step]) -> None:
        self.replies = list(replies)
        self.requests: list[tuple[str, str, Any]] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else None
                with stub._lock:
                    stub.requests.append((self.command, self.path, body))
                    step = stub.replies.pop(0) if len(stub.replies) > 1 else stub.replies[0]
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                counted = True
                try:
                    reply = step if isinstance(step, Reply) else step(body)
                    time.sleep(reply.delay_s)
                    # out of flight before the reply goes out: once the client has read it, its
                    # next request may arrive before this thread would run a later decrement
                    with stub._lock:
                        stub.in_flight -= 1
                        counted = False
                    payload = reply.raw if reply.raw is not None else json.dumps(reply.body if reply.body is not None else chat_body()).encode()
                    self.send_response(reply.status)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(payload)))
                    for k, v in reply.headers.items():
                        self.send_header(k, v)
                    self.end_headers()
                    if reply.reset_after is None:
                        self.wfile.write(payload)
                    else:
                        self.wfile.write(payload[: reply.reset_after])
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _RESET)
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass
                finally:
                    if counted:
                        with stub._lock:
                            stub.in_flight -= 1

            do_GET = do_POST = _handle

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        # a short poll: shutdown() waits up to one interval, 0.5 s by default, per server
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> "StubServer":
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
