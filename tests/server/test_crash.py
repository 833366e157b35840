"""SIGKILL `memsdk serve` while it takes accepted ingests: after a restart, every turn it
accepted is stored, and none twice. Kills from outside land anywhere; the server's crash
point (`memsdk.server.faults`) lands one in the narrow window where a replay must decide:
a turn in the store, its outbox row not marked done."""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

pytest.importorskip("fastapi")

from memsdk.server.faults import ENV as CRASH_AT, STORED  # noqa: E402
from tests.server.crash_server import KEY  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
TRIALS = 30
AUTH = {"Authorization": f"Bearer {KEY}"}
SCOPE = {"user_id": "bob"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(data_dir: Path, port: int, crash_at: str | None = None) -> subprocess.Popen[bytes]:
    """The server on ``data_dir``, once its /readyz says ready; ``crash_at`` arms its crash point."""
    env = {k: v for k, v in os.environ.items() if k != CRASH_AT} | {"HF_HUB_OFFLINE": "1"} | ({CRASH_AT: crash_at} if crash_at else {})
    proc = subprocess.Popen([sys.executable, "-m", "tests.server.crash_server", str(data_dir), str(port)], cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
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


#: turns that all say "ok", queued in one request; the server kills itself right after it
#: stored the KILLED-th, before the outbox marked it done
OKS, KILLED = 40, 12


def test_a_turn_stored_just_before_a_kill_is_stored_once_whatever_its_text_and_the_restart_drains_the_queue(tmp_path: Path) -> None:
    """The replay asks the store by the turn's identity: a search by its text would meet the
    eleven other "ok"s first and store the turn again."""
    port, data_dir = free_port(), tmp_path / "data"
    url = f"http://127.0.0.1:{port}"
    turns = [{"speaker": "Bob", "text": "ok", "turn_id": f"ok-{i}"} for i in range(OKS)]
    proc = start(data_dir, port, crash_at=f"{STORED}:{KILLED}")
    tickets: list[str] = []
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as h:
            tickets = h.post("/v1/ingest/accepted", json={"scope": SCOPE, "turns": turns}).json()["tickets"]
    except httpx.TransportError:
        pass  # the kill beat the reply out: the retry below gets the same tickets
    assert proc.wait(timeout=120) == -signal.SIGKILL  # it killed itself at the crash point
    proc = start(data_dir, port)  # the queue is what the dead one left: its suspect row, then the rest
    try:
        with httpx.Client(base_url=url, headers=AUTH, timeout=10) as h:
            retried = h.post("/v1/ingest/accepted", json={"scope": SCOPE, "turns": turns}).json()  # a writer that retries
            assert all(t["repeat"] for t in retried["turns"]) and (not tickets or retried["tickets"] == tickets)
            deadline, states = time.monotonic() + 120, {}
            while time.monotonic() < deadline:  # a bound for a failure, not a speed figure
                states = {t: h.get(f"/v1/ingest/accepted/{t}").json()["state"] for t in retried["tickets"]}
                if "pending" not in states.values():
                    break
                time.sleep(0.1)
            stored = h.get("/v1/memories", params={**SCOPE, "tier": "episodic", "include_deleted": True}).json()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    assert set(states.values()) == {"done"}
    assert Counter(tuple(m["source_turn_ids"]) for m in stored) == {(t["turn_id"],): 1 for t in turns}
    log = (tmp_path / "server.log").read_text()
    assert log.count("in the store already") == 1 and f"replaying {OKS - KILLED + 1} turns" in log
