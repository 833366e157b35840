"""SIGKILL inside `save_checkpoint`: afterwards `latest_checkpoint` finds one whole checkpoint,
the one saved before the killed save or the one it was writing: never none, never adapter
and trainer state from different saves, never anything older. The next save then goes on
from it, and what the killed save left beside it is gone.

The children (`_checkpoint_child`) are forked from multiprocessing's forkserver, which
imported torch once, so a trial costs a fork, not an interpreter start. Kills land two ways:

- before each file operation of a save in turn: the child's audit hook (PEP 578) counts the
  save's opens, mkdirs, renames, symlinks and deletes and SIGKILLs the child before the
  k-th, for k = 1, 2, ... until a save finishes; starting from a checkpoint of the current
  layout and from the two states the older layout could leave.
- at random times: a child saves in a loop and is killed a random part of a save after a
  random number of finished ones, so kills also land inside a write or an fsync.
"""

from __future__ import annotations

import itertools
import multiprocessing
import multiprocessing.connection
import multiprocessing.forkserver
import os
import random
import shutil
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from memsdk_training.checkpoint import latest_checkpoint, load_checkpoint
from tests.training import _checkpoint_child as child

CTX = multiprocessing.get_context("forkserver")
# a session has one forkserver, started with the preload set last: name both crash suites' children
CTX.set_forkserver_preload(["tests.reliability._crash_child", "tests.training._checkpoint_child"])

RANDOM_TRIALS = 25
#: other kill points, same checks: MEMSDK_CRASH_SEED=7 make test
SEED = int(os.environ.get("MEMSDK_CRASH_SEED", "0"))


def start(work: Callable[..., None], *args: Any) -> tuple[multiprocessing.process.BaseProcess, multiprocessing.connection.Connection]:
    reader, writer = CTX.Pipe(duplex=False)
    proc = CTX.Process(target=work, args=(writer, *args), daemon=True)
    proc.start()
    writer.close()  # the child's copy is the last one: its death is our end of file
    return proc, reader


def saved_steps(reader: multiprocessing.connection.Connection) -> list[int]:
    """What the child reported until it died: the steps whose save returned."""
    reports = []
    while True:
        try:
            reports.append(reader.recv())
        except (EOFError, OSError):
            break
    reader.close()
    errors = [r[1] for r in reports if r[0] == "error"]
    assert not errors, f"the child failed on its own: {errors[0]}"
    return [r[1] for r in reports]


def resumed_step(target: Path) -> int:
    """The step a resume finds at ``target``, once it has checked that it is one whole save
    with nothing left beside it."""
    assert latest_checkpoint(target) == target, "a kill left no checkpoint"
    policy = child.FakeLoRAModel()
    step = load_checkpoint(target, policy=policy, restore_rng=False).step
    assert policy.step == step, f"adapter of step {policy.step}, trainer state of step {step}"
    assert {p.name for p in target.parent.iterdir()} == {target.name, os.readlink(target)}, "a killed save's leftovers survived"
    return step


def report(kind: str, trials: int, started: float, **counts: int) -> None:
    detail = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in counts.items())
    print(f"\n{kind}: {trials} SIGKILL trials in {time.monotonic() - started:.1f} s: {detail}")


def current_layout(target: Path) -> None:
    child.save(target, 1)


def older_layout(target: Path) -> None:
    target.mkdir()
    child.save_older_layout(target, 1)


def older_layout_killed_between_its_renames(target: Path) -> None:
    """The older save had moved step 0 aside and not yet moved step 1 in."""
    for name, step in ((".last.old-4242", 0), (".last.tmp-4242", 1)):
        (target.parent / name).mkdir()
        child.save_older_layout(target.parent / name, step, marked=True)


@pytest.mark.parametrize("before", [current_layout, older_layout, older_layout_killed_between_its_renames], ids=lambda f: f.__name__)
def test_a_save_killed_before_any_of_its_file_operations_leaves_the_old_or_the_new_checkpoint(scratch: Path, before: Callable[[Path], None]) -> None:
    started, target = time.monotonic(), scratch / "ckpt" / "last"
    found: list[int] = []  # by kill point: step 1 until the link is switched, then step 2
    for k in itertools.count(1):
        shutil.rmtree(target.parent, ignore_errors=True)
        target.parent.mkdir()
        before(target)
        proc, reader = start(child.save_killed_at, target, 2, k)
        proc.join(60)
        finished = saved_steps(reader) == [2]
        assert proc.exitcode == (0 if finished else -signal.SIGKILL), f"kill point {k}: exit code {proc.exitcode}"
        found.append(resumed_step(target))
        assert found[-1] in ((2,) if finished else (1, 2)), f"kill point {k}: resumed at step {found[-1]}"
        child.save(target, 3)  # the run goes on from whatever the kill left
        assert resumed_step(target) == 3, f"kill point {k}: the next save"
        if finished:
            break
    assert found == sorted(found) and found.count(1) > 3, f"the switch is one instant, after the new save is whole: {found}"
    report(f"save from {before.__name__}", len(found) - 1, started, resumed_at_the_old_step=found.count(1), at_the_new_step=found.count(2) - 1)


def test_saves_killed_at_random_times_resume_from_the_last_acknowledged_save_or_the_one_in_flight(scratch: Path) -> None:
    rng, started = random.Random(f"checkpoint:{SEED}"), time.monotonic()
    target = scratch / "ckpt" / "last"
    child.save(target, 1)
    before = time.monotonic()
    for step in (2, 3, 4):
        child.save(target, step)
    save_s = (time.monotonic() - before) / 3  # so the kills land inside a save on a fast or a slow disk
    last, in_flight_kept = 4, 0
    for trial in range(RANDOM_TRIALS):
        proc, reader = start(child.save_forever, target, last + 1)
        acked: list[int] = []
        try:
            for _ in range(rng.randint(0, 3)):
                ready = multiprocessing.connection.wait([reader, proc.sentinel], timeout=60)
                assert reader in ready, f"trial {trial}: the child {'died' if ready else 'hung'}: exit code {proc.exitcode}"
                acked.append(reader.recv()[1])
            time.sleep(rng.uniform(0, 1.5 * save_s))
        finally:
            proc.kill()
            proc.join()
        acked += saved_steps(reader)  # what it reported between the decision and the kill counts too
        assert proc.exitcode == -signal.SIGKILL, f"trial {trial}: the child died on its own: {proc.exitcode}"
        last = acked[-1] if acked else last
        step = resumed_step(target)
        assert step in (last, last + 1), f"trial {trial}: resumed at step {step}, the last acknowledged save was {last}"
        in_flight_kept += step == last + 1
        last = step
    report("save at random times", RANDOM_TRIALS, started, saves_acknowledged=last - 4, in_flight_save_found_whole=in_flight_kept)


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    """A folder on tmpfs where there is one. A SIGKILL keeps the page cache, so these kills
    test the order of a save's steps, not its fsyncs; on tmpfs an fsync costs nothing and
    a trial takes a fraction of the time."""
    if not Path("/dev/shm").is_dir():
        yield tmp_path
        return
    with tempfile.TemporaryDirectory(dir="/dev/shm", prefix="memsdk-checkpoint-") as folder:
        yield Path(folder)


@pytest.fixture(autouse=True, scope="module")
def _forkserver_up() -> None:
    """Start the forkserver (an interpreter importing torch) before the first trial is timed."""
    multiprocessing.forkserver.ensure_running()
