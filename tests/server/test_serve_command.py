"""`memsdk serve` as a user starts it: a process of its own, keys from the environment."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def memsdk(*args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "memsdk.cli", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def read_until_closed(sock: socket.socket) -> bytes:
    """What the server sends until it closes the connection (a 30 s bound for a failure)."""
    sock.settimeout(30)
    data = b""
    while chunk := sock.recv(65536):
        data += chunk
    return data


def test_serve_starts_on_the_keys_in_the_environment_cuts_off_stalled_connections_and_stops_on_sigterm(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "MEMSDK_API_KEYS": "k1=acme,k2=globex"}
    flags = ("--body-timeout-s", "1", "--keep-alive-s", "1")
    proc = memsdk("--data-dir", str(tmp_path / "data"), "--policies", "heuristic", "serve", "--port", str(port), *flags, env=env)
    try:
        url, deadline = f"http://127.0.0.1:{port}", time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            assert time.monotonic() < deadline, "memsdk serve did not become ready"
            time.sleep(0.25)
        turn = {"scope": {"user_id": "bob"}, "turn": {"speaker": "Bob", "text": "I live in Boston"}}
        # the first ingest loads the embedder: on a busy 2-core runner that took more than
        # httpx's default 5 s, and this test is about keys and shutdown, not speed
        with httpx.Client(base_url=url, timeout=60) as http:
            assert http.post("/v1/ingest", json=turn, headers={"Authorization": "Bearer k1"}).status_code == 200
            assert http.post("/v1/ingest", json=turn).status_code == 401
            assert len(http.get("/v1/memories", params={"user_id": "bob"}, headers={"Authorization": "Bearer k1"}).json()) == 2
            assert http.get("/v1/memories", params={"user_id": "bob"}, headers={"Authorization": "Bearer k2"}).json() == []
        # a body promised and never sent: 408, and the connection is closed, not held
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"POST /v1/ingest HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer k1\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"scope\":")
            stalled = read_until_closed(sock)
        assert stalled.startswith(b"HTTP/1.1 408") and b'"field":"body"' in stalled
        # a connection left idle after its reply is closed after the keep-alive time
        with socket.create_connection(("127.0.0.1", port)) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert read_until_closed(sock).startswith(b"HTTP/1.1 200")
    finally:
        proc.send_signal(signal.SIGTERM)
        out = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0, out
    assert "k1" not in out and "k2" not in out  # keys are never logged


def test_serve_without_keys_refuses_to_start(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "MEMSDK_API_KEYS"}
    proc = memsdk("--data-dir", str(tmp_path / "data"), "serve", "--port", str(free_port()), env=env)
    out = proc.communicate(timeout=120)[0]
    assert proc.returncode == 2 and "MEMSDK_API_KEYS" in out
    assert not (tmp_path / "data").exists()  # no client was opened
