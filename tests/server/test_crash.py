"""SIGKILL `memsdk serve` while it takes accepted ingests: after a restart, every turn it
accepted is stored, and none twice."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from tests.server.crash_server import KEY  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 30
AUTH = {"Authorization": f"Bearer {KEY}"}
SCOPE = {"user_id": "bob"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    proc = subprocess.Popen([sys.executable, "-m", "tests.server.crash_server", str(data_dir), str(port)], cwd=ROOT, env={**os.environ, "HF_HUB_OFFLINE": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while True:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        assert proc.poll() is None and time.monotonic() < deadline, "the crash server did not start"
        time.sleep(0.05)


def test_no_accepted_ingest_is_lost_or_applied_twice_across_kills(tmp_path: Path) -> None:
    rng = random.Random(41)
    port, data_dir = free_port(), tmp_path / "data"
    url = f"http://127.0.0.1:{port}"
    accepted: dict[str, str] = {}  # ticket -> text: the server said 202
    sent: list[str] = []
    proc = start(data_dir, port)
    for trial in range(TRIALS):
        stop = threading.Event()

        def post_turns(trial: int = trial) -> None:
            with httpx.Client(base_url=url, headers=AUTH, timeout=5) as h:
                n = 0
                while not stop.is_set():
                    text = f"trial {trial} turn {n}: I went to city {n} on day {trial}"
                    sent.append(text)
                    try:
                        r = h.post("/v1/ingest/accepted", json={"scope": SCOPE, "turn": {"speaker": "Bob", "text": text}})
                    except httpx.TransportError:
                        return  # killed mid-request: neither accepted nor refused
                    assert r.status_code == 202, r.text
                    accepted[r.json()["tickets"][0]] = text
                    n += 1

        poster = threading.Thread(target=post_turns)
        poster.start()
        time.sleep(rng.uniform(0.05, 0.4))  # a seeded point: with turns queued, and one in hand
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        stop.set()
        poster.join()
        proc = start(data_dir, port)  # replays what the killed one left
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as h:
            deadline = time.monotonic() + 120
            states = {}
            while time.monotonic() < deadline:
                states = {t: h.get(f"/v1/ingest/accepted/{t}").json()["state"] for t in accepted}
                if all(s == "done" for s in states.values()):
                    break
                time.sleep(0.2)
            assert set(states.values()) == {"done"}, {s: list(states.values()).count(s) for s in set(states.values())}
            stored = [m["text"] for m in h.get("/v1/memories", params={**SCOPE, "tier": "episodic"}).json()]
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    log = (tmp_path / "server.log").read_text() if (tmp_path / "server.log").exists() else ""
    print(f"\n{len(accepted)} accepted, {len(stored)} stored, {len(sent)} sent; replays recognised as stored: {log.count('in the store already')}; lives that replayed: {log.count('replaying')}")
    assert len(accepted) >= TRIALS  # the kills fell among accepted turns
    assert not set(accepted.values()) - set(stored), "an accepted turn was lost"
    assert len(stored) == len(set(stored)), "a turn was applied twice"
    assert set(stored) <= set(sent)
