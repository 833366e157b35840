"""Crash probe of accepted ingests: `memsdk serve` SIGKILLed at random moments while writers
send turns, restarted on the same data dir each time; every turn that got a 202 must end
stored exactly once, its ticket ``done``.

    .venv/bin/python benchmarks/accepted_probe.py [--turns 600] [--kills 10] [--writers 6] [--seed 7]

Writers are threads, one scope each, over two tenants (keys), each with its own
`MemoryClient(url=...)`. Each sends its share of the turns one at a time with
``ingest_accepted`` and its own turn_ids, pausing a random moment between turns (up to
``--pause``, short enough for the queue to outgrow the ingest); half the turns are one of ten
short replies ("ok", "thanks", ...), whose texts repeat in every scope.
A writer whose server is down keeps sending the same turn (the client retries; past its
retries the writer does): the turn_id makes that safe. A turn counts as accepted once a 202
for it came back.

The server runs with the defaults `memsdk serve` has (real MiniLM, ``--policies auto``) and
is killed ``--kills`` times, each a random moment after it said ready: while turns stream
in, and while a restarted server replays the queue the dead one left (its turns, in hand
or waiting). After the last restart the writers finish, the queue drains, and each scope's
episodic records are counted by turn_id. Printed: the table (accepted / stored once /
missing / duplicated / dead / not done), the turns queued at each kill and how many kills
fell while a server was still replaying what the one before it left, and, per life, the
seconds to ready and the queue it started with.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

import httpx

from memsdk import MemoryClient
from memsdk.errors import StoreUnavailable

ROOT = Path(__file__).resolve().parents[1]
SHORT = ["ok", "thanks", "sounds good", "yes", "no", "sure", "great", "got it", "lol", "ok thanks"]
KEYS = {"probe-key-a": "tenant-a", "probe-key-b": "tenant-b"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """`memsdk serve` on ``data_dir``, started, killed and started again."""

    def __init__(self, data_dir: Path, port: int, policies: str) -> None:
        self.data_dir, self.port, self.policies = data_dir, port, policies
        self.url = f"http://127.0.0.1:{port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.lives: list[tuple[float, int]] = []  # (seconds to ready, turns queued at the start)
        self.inherited = 0  # the last row a dead server left: replaying until the queue is past it

    def start(self) -> None:
        env = {**os.environ, "MEMSDK_API_KEYS": ",".join(f"{k}={t}" for k, t in KEYS.items()), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        queued, _, self.inherited = self.queue()
        started = time.monotonic()
        log = open(self.data_dir.parent / f"server-{len(self.lives)}.log", "wb")
        cmd = [sys.executable, "-m", "memsdk.cli", "--data-dir", str(self.data_dir), "--policies", self.policies, "serve", "--port", str(self.port)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if self.proc.poll() is not None:
                raise SystemExit(f"memsdk serve exited with {self.proc.returncode}; see {log.name}")
            time.sleep(0.05)
        self.lives.append((time.monotonic() - started, queued))

    def kill(self) -> tuple[int, bool]:
        """SIGKILL the server's process group; returns the turns queued at that moment, and
        whether it was still replaying what the server before it left."""
        assert self.proc is not None
        queued, oldest, _ = self.queue()
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait()
        return queued, queued > 0 and oldest <= self.inherited

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(timeout=120)

    def queue(self) -> tuple[int, int, int]:
        """The rows waiting in the server's outbox: how many, the oldest's and the newest's
        sequence numbers (read beside the server; sqlite allows the reader)."""
        path = self.data_dir / "server-outbox.sqlite3"
        if not path.exists():
            return 0, 0, 0
        with sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30) as db:
            count, oldest, newest = db.execute("SELECT COUNT(*), MIN(seq), MAX(seq) FROM pending").fetchone()
        return int(count), int(oldest or 0), int(newest or 0)


class Writer(threading.Thread):
    """One scope's turns, sent one at a time until each got its 202."""

    def __init__(self, i: int, turns: int, server: Server, rng: random.Random, local: Path, pause_s: float) -> None:
        super().__init__(name=f"writer-{i}")
        self.key = list(KEYS)[i % len(KEYS)]
        self.scope = {"user_id": f"user-{i}"}
        self.turns = [{"speaker": f"User{i}", "text": rng.choice(SHORT) if rng.random() < 0.5 else f"turn {n} of writer {i}: I went to city {rng.randrange(10_000)} on day {n}", "turn_id": f"w{i}-{n}"} for n in range(turns)]
        self.pauses = [rng.uniform(0.0, pause_s) for _ in range(turns)]
        self.server, self.local = server, local
        self.accepted: dict[str, str] = {}  # turn_id -> ticket

    def run(self) -> None:
        with MemoryClient(url=self.server.url, api_key=self.key, data_dir=self.local, timeout=30) as client:
            for turn, pause in zip(self.turns, self.pauses):
                while turn["turn_id"] not in self.accepted:
                    try:
                        (got,) = client.ingest_accepted(turn, scope=self.scope)
                        self.accepted[got.turn_id] = got.ticket
                    except StoreUnavailable:  # down past the client's retries: the same turn again
                        time.sleep(0.5)
                time.sleep(pause)


def settle(writers: list[Writer], server: Server, timeout: float) -> tuple[Counter[str], dict[str, int]]:
    """Each accepted ticket's state once none is pending (or ``timeout``), and each turn_id's
    count of episodic records."""
    deadline, states = time.monotonic() + timeout, Counter[str]()
    stored: dict[str, int] = {}
    for w in writers:
        with MemoryClient(url=server.url, api_key=w.key, data_dir=w.local, timeout=60) as client:
            for ticket in w.accepted.values():
                while (state := client.ingest_status(ticket).state) == "pending" and time.monotonic() < deadline:
                    time.sleep(0.2)
                states[state] += 1
            for record in client.list(scope=w.scope, tier="episodic", include_deleted=True):
                for turn_id in record.source_turn_ids:
                    stored[turn_id] = stored.get(turn_id, 0) + 1
    return states, stored


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--kills", type=int, default=10)
    parser.add_argument("--writers", type=int, default=6)
    parser.add_argument("--policies", default="auto", help="the server's --policies (default: what memsdk serve runs)")
    parser.add_argument("--kill-after", type=float, nargs=2, default=(0.3, 6.0), metavar=("MIN_S", "MAX_S"), help="a kill comes this long after the server said ready")
    parser.add_argument("--pause", type=float, default=0.1, help="a writer pauses up to this long between turns (short: the queue outgrows the ingest)")
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="memsdk-accepted-probe-"))
    server = Server(work / "data", free_port(), args.policies)
    started = time.monotonic()
    server.start()
    writers = [Writer(i, args.turns // args.writers, server, random.Random(rng.random()), work / f"local-{i}", args.pause) for i in range(args.writers)]
    for w in writers:
        w.start()
    queued_at_kill = []
    for _ in range(args.kills):
        time.sleep(rng.uniform(*args.kill_after))
        queued_at_kill.append(server.kill())
        server.start()
    for w in writers:
        w.join()
    states, stored = settle(writers, server, timeout=1800)
    server.stop()
    accepted = {turn_id for w in writers for turn_id in w.accepted}
    once = sum(1 for t in accepted if stored.get(t, 0) == 1)
    missing = sum(1 for t in accepted if stored.get(t, 0) == 0)
    twice = sum(1 for t in accepted if stored.get(t, 0) > 1)
    short = sum(1 for w in writers for t in w.turns if t["text"] in SHORT and t["turn_id"] in accepted)
    print(f"\naccepted ingests under SIGKILL: {len(accepted)} turns ({short} of them short replies that repeat), {args.writers} writers, {len(KEYS)} tenants, "
          f"{args.kills} kills, policies {args.policies}, {time.monotonic() - started:.0f} s in all\n")
    print("| accepted | stored once | missing | duplicated | dead | not done |")
    print("|---|---|---|---|---|---|")
    print(f"| {len(accepted)} | {once} | {missing} | {twice} | {states['dead']} | {states['pending']} |")
    print(f"\nturns queued at each kill: {[q for q, _ in queued_at_kill]}; kills while replaying what a dead server left: {sum(r for _, r in queued_at_kill)} of {len(queued_at_kill)}")
    print(f"lives: seconds to ready and turns queued at the start: {[(round(s, 1), q) for s, q in server.lives]}")
    print(f"data and server logs: {work}")


if __name__ == "__main__":
    main()
