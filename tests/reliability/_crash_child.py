"""The workloads `test_crash.py` kills with SIGKILL, one per child process.

A child is forked from multiprocessing's forkserver, which imported this module (and so
memsdk) once: a trial costs a fork, not an interpreter start, and since the server never
opens a store no engine thread is forked half-way through anything. A child reports a call
on ``conn`` only after the call returned, so what the parent reads is exactly what an app
would have been told; it never returns on its own (the parent kills it).
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memsdk import MemoryClient
from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.registry import PolicyRegistry
from memsdk.registry.registry import PolicyManifest
from memsdk.store import InMemoryTransport

from tests.reliability._workloads import ChurnManager, token, turn, use_manager

__all__ = ["INGEST_SCOPES", "LoraStub", "victim", "bystander", "SECRET", "secret", "ingest", "import_", "erase", "publish"]

#: two speakers of one conversation (their ingests show each other's turns as context) and a third user
INGEST_SCOPES = ({"user_id": "alice", "run_id": "chat"}, {"user_id": "bob", "run_id": "chat"}, {"user_id": "carol"})


def victim(trial: int) -> dict[str, str]:
    return {"user_id": f"v{trial:03d}", "run_id": f"chat{trial:03d}"}


def bystander(trial: int) -> dict[str, str]:
    return {"user_id": f"b{trial:03d}", "run_id": f"chat{trial:03d}"}


#: in every erased turn: a byte search of the data dir for it finds any copy of any of them
SECRET = "quokkazanzibar"


def secret(trial: int) -> str:
    return f"{SECRET}{trial:03d}"  # one word: stored verbatim wherever it is stored


class LoraStub:
    """A backend that loads adapters instantly: the swap itself is what a kill interrupts."""

    model = "stub"

    def load_lora_adapter(self, name: str, path: str) -> None:
        pass


def _client(data_dir: Path) -> MemoryClient:
    return MemoryClient(data_dir=data_dir, embedder=HashEmbedder(64), policies="heuristic")


def _reporting(work: Callable[..., None]) -> Callable[..., None]:
    """A child that fails on its own says why, instead of looking like a kill."""

    @functools.wraps(work)  # keeps the name the forkserver unpickles it by
    def run(conn: Connection, *args: Any) -> None:
        # tqdm's default lock is a multiprocessing semaphore, which a killed child never
        # unregisters: the resource tracker would warn about one per trial at exit
        tqdm.set_lock(threading.RLock())
        try:
            work(conn, *args)
        except BaseException:
            conn.send(("error", traceback.format_exc()))
            raise

    return run


@_reporting
def ingest(conn: Connection, data_dir: Path, trial: int) -> None:
    with _client(data_dir) as client:
        use_manager(client, ChurnManager(seed=trial))
        conn.send(("open",))
        for i in itertools.count():
            scope = INGEST_SCOPES[i % len(INGEST_SCOPES)]
            client.ingest(turn(trial, i, speaker=scope["user_id"].title()), scope=scope)
            conn.send(("ingested", i))


@_reporting
def import_(conn: Connection, data_dir: Path, export: Path, trial: int) -> None:
    with _client(data_dir) as client:
        conn.send(("open",))
        for k in itertools.count():
            n = client.import_(export, scope={"user_id": f"imp{trial:03d}-{k}"})
            conn.send(("imported", k, n))


@_reporting
def erase(conn: Connection, data_dir: Path, trial: int) -> None:
    with _client(data_dir) as client:
        use_manager(client, ChurnManager(seed=trial))
        for i in range(6):
            if i % 2 == 0:
                client.ingest({"speaker": "Vic", "text": f"Vic wrote down note {token(trial, i)} about {secret(trial)}"}, scope=victim(trial))
            else:
                client.ingest(turn(trial, i, speaker="Ben"), scope=bystander(trial))
        client.answer(f"What did Vic write about {secret(trial)}?", scope=[bystander(trial), victim(trial)])  # logged under Ben
        conn.send(("erasing",))
        started = time.perf_counter()
        client.erase(scope=victim(trial))
        conn.send(("erased", time.perf_counter() - started))
        time.sleep(3600)


@_reporting
def publish(conn: Connection, data_dir: Path, adapter: Path, trial: int, watch: bool) -> None:
    registry = PolicyRegistry(data_dir / "checkpoints")
    # the swap needs no store: an in-memory bank keeps the trial to the registry and the state file
    bank = MemoryBank(InMemoryTransport(64), HashEmbedder(64))
    with MemoryClient(data_dir=data_dir, bank=bank, backend=LoraStub(), policies="llm") as client:
        conn.send(("open", client.policies["manager"].version))
        if watch:
            client.watch_policies(interval_s=0.002)
        for n in itertools.count():
            version = f"t{trial:03d}v{n:03d}"
            registry.publish(adapter, PolicyManifest(role="manager", version=version, base_model="stub", promote=watch))
            conn.send(("published", version))
            if not watch:
                client.use_policy("manager", version)
                conn.send(("active", version))

