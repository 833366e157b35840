"""SIGKILL at random points of ingest, import, erase and publish/hot-swap: afterwards the bank,
its history, the interaction log, the registry and the hot-swap state are consistent, and
nothing a call acknowledged is lost.

Each trial forks a child from multiprocessing's forkserver (`_crash_child`: memsdk is
imported once, so a trial costs a fork, not an interpreter start), lets it run one
workload on a data dir shared by every trial of its kind (each trial reopens what the kill
before it left), and kills it at a seeded random point: after a random number of
acknowledged calls, a random part of one more call's duration later (measured as the trials
run, so the kills land inside calls on a fast or a slow machine). The parent opens the data
dir only once the child is dead: the embedded store locks its folder per process.

What counts as acknowledged is what the child reported after a call returned; what was in
flight at the kill may be there or not, but whole: never a half-applied batch (the
manager stub's merges and moves are two-op batches that lose or double a fact when split),
never a history that does not explain its record, never a log row ahead of the bank.
"""

from __future__ import annotations

import json
import mmap
import os
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import random
import signal
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from memsdk import MemoryClient
from memsdk.bank import MemoryBank
from memsdk.embedding import HashEmbedder
from memsdk.registry import PolicyRegistry
from memsdk.registry.registry import PolicyManifest
from memsdk.store import InMemoryTransport
from memsdk.types import Op, Scope, Tier
from tests.reliability import _crash_child as child
from tests.reliability._workloads import TOKEN, ChurnManager, check_scope, token, token_counts, turn, use_manager

CTX = multiprocessing.get_context("forkserver")
CTX.set_forkserver_preload(["tests.reliability._crash_child"])

INGEST_TRIALS, IMPORT_TRIALS, ERASE_TRIALS, PUBLISH_TRIALS = 25, 20, 15, 45
#: other kill points, same checks: MEMSDK_CRASH_SEED=7 make test
SEED = int(os.environ.get("MEMSDK_CRASH_SEED", "0"))


@dataclass
class Pace:
    """How long the child took to get ready and to make one call, from the trials so far."""

    ready_s: float = 0.1
    step_s: float = 0.01

    def learn(self, started: float, times: list[float]) -> None:
        """``times``: when each report arrived, the first one saying the child is ready."""
        if times:
            self.ready_s = times[0] - started
        if len(times) >= 2:
            self.step_s = (times[-1] - times[0]) / (len(times) - 1)


@dataclass
class Run:
    reports: list[tuple[Any, ...]] = field(default_factory=list)

    def of(self, kind: str) -> list[tuple[Any, ...]]:
        return [r for r in self.reports if r[0] == kind]


def kill_during(target: Callable[..., None], *args: Any, rng: random.Random, pace: Pace, calls: int, ready: str = "open") -> Run:
    """Run ``target`` in a child until it has reported ``ready`` and then ``calls`` more calls,
    then SIGKILL it up to 1.5 calls later (``calls`` < 0: while it gets ready). Returns every
    report the child made before it died."""
    reader, writer = CTX.Pipe(duplex=False)
    proc = CTX.Process(target=target, args=(writer, *args), daemon=True)
    started = time.monotonic()
    proc.start()
    writer.close()  # the child's copy is the last one: its death is our end of file
    run, times = Run(), []
    try:
        while calls >= 0 and len(run.reports) < calls + 1:
            ready_now = multiprocessing.connection.wait([reader, proc.sentinel], timeout=60)
            assert reader in ready_now, f"the child {'died' if ready_now else 'hung'} after {run.reports[-1:]}: exit code {proc.exitcode}"
            run.reports.append(reader.recv())
            times.append(time.monotonic())
            assert run.reports[-1][0] != "error", run.reports[-1][1]
            assert run.reports[0][0] == ready, run.reports[0]
        time.sleep(rng.uniform(0, 1.5 * pace.step_s) if calls >= 0 else rng.uniform(0, pace.ready_s))
    finally:
        proc.kill()
        proc.join()
    while True:  # what it reported between the decision and the kill counts too
        try:
            run.reports.append(reader.recv())
        except (EOFError, OSError):
            break
    reader.close()
    errors = [r[1] for r in run.reports if r[0] == "error"]
    assert proc.exitcode == -signal.SIGKILL and not errors, f"the child died on its own: {errors or proc.exitcode}"
    pace.learn(started, times)
    return run


def on_disk(root: Path, needle: str) -> list[Path]:
    """The files under ``root`` that hold ``needle`` (mapped, not read: the engine's files are
    tens of MB each, mostly holes)."""
    found = []
    for p in root.rglob("*"):
        if p.is_file() and p.stat().st_size:
            with open(p, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
                if data.find(needle.encode()) >= 0:
                    found.append(p)
    return found


def open_client(data: Path) -> MemoryClient:
    return MemoryClient(data_dir=data, embedder=HashEmbedder(64), policies="heuristic")


def report(kind: str, trials: int, started: float, **counts: int) -> None:
    detail = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
    print(f"\n{kind}: {trials} SIGKILL trials in {time.monotonic() - started:.1f} s: {detail}")


# -- ingest ------------------------------------------------------------------------------------


def test_ingest_killed_at_random_points_loses_no_acknowledged_turn(tmp_path: Path) -> None:
    rng, pace, started = random.Random(f"ingest:{SEED}"), Pace(), time.monotonic()
    data = tmp_path / "data"
    scopes = {s["user_id"]: s for s in child.INGEST_SCOPES}
    acked: dict[str, set[str]] = defaultdict(set)  # user -> tokens whose ingest returned
    found: dict[str, set[str]] = defaultdict(set)  # cut short by a kill, found stored: must stay so
    in_flight: dict[str, set[str]] = defaultdict(set)  # cut short, not stored (yet)
    before_ready = 0
    for trial in range(INGEST_TRIALS):
        calls = rng.randint(-1, 12)
        before_ready += calls < 0
        run = kill_during(child.ingest, data, trial, rng=rng, pace=pace, calls=calls)
        done = [r[1] for r in run.of("ingested")]
        assert done == list(range(len(done)))
        for i in done:
            acked[child.INGEST_SCOPES[i % 3]["user_id"]].add(token(trial, i))
        in_flight[child.INGEST_SCOPES[len(done) % 3]["user_id"]].add(token(trial, len(done)))

        with open_client(data) as client:
            for key, scope in scopes.items():
                durable = acked[key] | found[key]
                problems = check_scope(client.bank, scope, durable, in_flight[key])
                assert problems == [], f"trial {trial} ({key}): {problems[:5]}"
                turns = [t for r in client.bank.list(scope, tier=Tier.EPISODIC) for t in TOKEN.findall(r.text)]
                assert durable <= set(turns) <= durable | in_flight[key] and len(turns) == len(set(turns)), f"trial {trial}: episodic tier of {key}"
                stored = in_flight[key] & set(token_counts(client.bank, scope))
                found[key] |= stored
                in_flight[key] -= stored
            check_log(client, acked, {k: found[k] | in_flight[k] for k in scopes}, trial)
    cut = sum(map(len, found.values())) + sum(map(len, in_flight.values()))
    report("ingest", INGEST_TRIALS, started, acknowledged_turns=sum(map(len, acked.values())), killed_before_ready=before_ready, cut_short_but_stored=sum(map(len, found.values())), cut_short=cut)


def check_log(client: MemoryClient, acked: dict[str, set[str]], unacked: dict[str, set[str]], trial: int) -> None:
    """One row per acknowledged ingest, at most one for an ingest a kill cut short, and no
    row that names a memory the bank does not hold (the log is written after the bank)."""
    assert client.log is not None
    logged: dict[str, list[str]] = defaultdict(list)
    versions = {str(r.id): r.version for s in child.INGEST_SCOPES for r in client.bank.list(s, include_deleted=True)}
    for t in client.log.read(kind="ingest"):
        logged[t.scope.user_id or ""] += TOKEN.findall(t.input["turn"]["text"])
        assert t.output["episodic_id"] in versions, f"trial {trial}: the log holds a turn the bank does not"
        for op in t.ops:
            if op.memory_id is not None:
                assert versions.get(str(op.memory_id), 0) >= (op.version or 1), f"trial {trial}: the log is ahead of the bank"
    for key, tokens in logged.items():
        assert len(tokens) == len(set(tokens)) and acked[key] <= set(tokens) <= acked[key] | unacked[key], f"trial {trial}: log of {key}"


# -- import ------------------------------------------------------------------------------------


def shape(bank: MemoryBank, scope: Scope | dict[str, str]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """A scope's records and events without ids, which an import into another scope renews."""
    records = sorted((r.text, r.version, r.deleted, str(r.tier)) for r in bank.list(scope, include_deleted=True))
    events = sorted((str(e.event), e.version, e.before or "", e.after or "") for e in bank.history(scope))
    return records, events


def test_import_killed_at_random_points_is_all_or_nothing(tmp_path: Path) -> None:
    rng, pace, started = random.Random(f"import:{SEED}"), Pace(), time.monotonic()
    source, export = {"user_id": "src"}, tmp_path / "src.jsonl"
    with open_client(tmp_path / "src") as client:  # records with UPDATE and DELETE history, several tiers
        use_manager(client, ChurnManager())
        client.ingest([turn(999, i) for i in range(40)], scope=source, progress=False)
        client.export(export, scope=source)
        expected = shape(client.bank, source)
    data, whole, empty = tmp_path / "data", 0, 0
    for trial in range(IMPORT_TRIALS):
        run = kill_during(child.import_, data, export, trial, rng=rng, pace=pace, calls=rng.randint(0, 3))
        done = [r[1] for r in run.of("imported")]
        with open_client(data) as client:
            for k in range(len(done) + 1):  # the acknowledged imports and the one in flight
                scope = {"user_id": f"imp{trial:03d}-{k}"}
                got = shape(client.bank, scope)
                if k < len(done) or got != ([], []):
                    assert got == expected, f"trial {trial}: import {k} {'acknowledged' if k < len(done) else 'in flight'} but not whole"
                    assert client.bank.snapshot(scope).violations() == []
                whole += k == len(done) and got == expected
                empty += k == len(done) and got == ([], [])
    report("import", IMPORT_TRIALS, started, records_per_import=len(expected[0]), in_flight_whole=whole, in_flight_absent=empty)


# -- erase -------------------------------------------------------------------------------------


def test_an_erase_killed_after_its_first_delete_leaves_no_history_without_records(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The window the random kills found: records and history were two deletes, and a kill
    between them left events of memories that no longer existed (`BankSnapshot.violations`, and an
    export of the scope that import refuses) until the erase was run again."""
    scope = {"user_id": "vic"}
    with MemoryBank.open(tmp_path / "store", embedder=HashEmbedder(64)) as bank:
        first = bank.apply(scope, [Op.add("Vic has a secret"), Op.add("Vic likes tea")]).records[0]
        bank.apply(scope, [Op.update(first.id, "Vic had a secret", expected_version=1)])
        real_delete = bank.transport.delete

        def dies_after_one(where: Any) -> int:
            real_delete(where)
            raise SystemExit("killed")

        monkeypatch.setattr(bank.transport, "delete", dies_after_one)
        with pytest.raises(SystemExit):
            bank.delete_all(scope)
        monkeypatch.undo()
        assert bank.snapshot(scope).violations() == []
        assert bank.list(scope, include_deleted=True) == [] and bank.history(scope) == []


def test_erase_killed_at_random_points_leaves_the_scope_whole_or_gone_and_a_retry_finishes(tmp_path: Path) -> None:
    rng, pace, started = random.Random(f"erase:{SEED}"), Pace(step_s=0.3), time.monotonic()
    data, finished, retried = tmp_path / "data", 0, 0
    for trial in range(ERASE_TRIALS):
        run = kill_during(child.erase, data, trial, rng=rng, pace=pace, calls=0, ready="erasing")
        erased = run.of("erased")
        if erased:  # acknowledged: gone from disk at once, though the process never closed anything
            finished += 1
            pace.step_s = erased[0][1]
            assert on_disk(data, child.secret(trial)) == [], f"trial {trial}: erase returned, its text is still on disk"
        victim, bystander = child.victim(trial), child.bystander(trial)
        with open_client(data) as client:
            assert client.log is not None
            if erased:
                assert client.bank.list(victim, include_deleted=True) == [] and client.bank.history(victim) == []
            else:  # the app was not told it is done: what is left is consistent, and erasing again finishes
                assert client.bank.snapshot(victim).violations() == [], f"trial {trial}"
                retried += 1
                again = time.monotonic()
                client.erase(scope=victim)
                pace.step_s = time.monotonic() - again  # so the next kill lands inside an erase, or just after
            assert [t for t in client.log.read() if Scope(**victim) in (t.scope, *t.involves)] == []
            # the other speaker of the conversation keeps every memory
            assert check_scope(client.bank, bystander, {token(trial, i) for i in (1, 3, 5)}) == []
        assert on_disk(data, child.SECRET) == [], f"trial {trial}: erased text (of this trial or an earlier one) is on disk"
    report("erase", ERASE_TRIALS, started, acknowledged=finished, killed_mid_erase_then_retried=retried)


# -- publish / hot-swap ---------------------------------------------------------------------------


def test_publish_and_hot_swap_killed_at_random_points_show_whole_versions_only(tmp_path: Path) -> None:
    rng, pace, started = random.Random(f"publish:{SEED}"), Pace(), time.monotonic()
    data, adapter = tmp_path / "data", tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text(json.dumps({"r": 8}))
    weights = random.Random(0).randbytes(256 * 1024)  # big enough that a kill lands inside the copy
    (adapter / "adapter_model.safetensors").write_bytes(weights)
    role_dir, state_file = data / "checkpoints" / "manager", data / "active_policies.json"
    active, swaps, hidden = "base", 0, 0
    for trial in range(PUBLISH_TRIALS):
        watch = trial % 2 == 1  # odd trials: the watcher promotes; even: the app switches itself
        run = kill_during(child.publish, data, adapter, trial, watch, rng=rng, pace=pace, calls=rng.randint(0, 8))
        published, switched = [r[1] for r in run.of("published")], [r[1] for r in run.of("active")]
        folders = [p for p in role_dir.iterdir() if p.is_dir()] if role_dir.exists() else []  # beside them: the promotion trail
        visible = sorted(p.name for p in folders if not p.name.startswith("."))
        hidden = len(folders) - len(visible)
        for name in visible:  # whole or invisible: manifest, config and every byte of the weights
            folder = role_dir / name
            PolicyManifest.model_validate_json((folder / "manifest.json").read_text())
            assert (folder / "adapter_config.json").exists() and (folder / "adapter_model.safetensors").read_bytes() == weights, f"trial {trial}: {name} half published"
        assert set(published) <= set(visible), f"trial {trial}: an acknowledged publish is not visible"
        assert {m.version for m in PolicyRegistry(data / "checkpoints").versions("manager")} == set(visible)

        state = json.loads(state_file.read_text()) if state_file.exists() else {"versions": {"manager": "base"}, "history": {}}
        now = state["versions"]["manager"]
        assert now == "base" or now in visible
        assert set(state["history"].get("manager", [])) <= {"base", *visible}
        if not watch:  # the last switch acknowledged, or the one in flight after it
            last = switched[-1] if switched else active
            in_flight = published[-1] if published and published[-1] != last else None
            assert now in (last, in_flight), f"trial {trial}: serving {now}, acknowledged {last}"
        swaps += now != active
        active = now
        bank = MemoryBank(InMemoryTransport(64), HashEmbedder(64))
        with MemoryClient(data_dir=data, bank=bank, backend=child.LoraStub(), policies="llm") as client:
            assert client.policies["manager"].version == now, f"trial {trial}: the restarted client did not restore {now}"
    report("publish/hot-swap", PUBLISH_TRIALS, started, versions_visible=len(visible), swaps_seen=swaps, hidden_leftovers=hidden)


@pytest.fixture(autouse=True, scope="module")
def _forkserver_up() -> None:
    """Start the forkserver (an interpreter importing memsdk) before the first trial is timed."""
    multiprocessing.forkserver.ensure_running()
