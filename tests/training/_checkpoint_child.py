"""The saves `test_checkpoint_crash.py` kills with SIGKILL, one child process per trial.

A child is forked from multiprocessing's forkserver, which imported this module (and torch
with it) once: a trial costs a fork, not an interpreter start. A child reports a save on
``conn`` only after `save_checkpoint` returned, so what the parent reads is exactly what a
training run would have been told.
"""

from __future__ import annotations

import itertools
import os
import signal
import sys
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import torch

from memsdk_training.checkpoint import COMPLETE, rng_state, save_checkpoint

from tests.reliability._crash_child import _reporting  # the same error reporting as the store's crash children

__all__ = ["FILE_EVENTS", "FakeLoRAModel", "weights", "save", "save_older_layout", "save_forever", "save_killed_at"]

#: the audit events (PEP 578) of the file operations a save makes; `save_killed_at` dies before one of them
FILE_EVENTS = frozenset({"open", "os.mkdir", "os.rename", "os.symlink", "os.remove", "os.rmdir", "shutil.rmtree"})


def weights(step: int) -> bytes:
    """The adapter of a save: big enough that a random kill lands inside its write, and
    telling which step wrote it, so a checkpoint whose adapter and trainer.pt come from
    different saves shows."""
    return f"{step:08d}".encode() * 25_000


class FakeLoRAModel:
    """The two methods the checkpoint calls, over an adapter folder shaped like peft's."""

    def __init__(self, step: int = 0) -> None:
        self.step = step

    def save_adapter(self, path: Path) -> None:
        path.mkdir(parents=True)
        (path / "adapter_config.json").write_text("{}")
        (path / "adapter_model.safetensors").write_bytes(weights(self.step))

    def load_adapter_weights(self, path: Path) -> None:
        data = (path / "adapter_model.safetensors").read_bytes()
        self.step = int(data[:8])
        assert data == weights(self.step), f"{path}: torn adapter"


def save(target: Path, step: int) -> None:
    save_checkpoint(target, policy=FakeLoRAModel(step), optimizer=None, step=step, config={"run": "crash"})


def save_older_layout(folder: Path, step: int, *, marked: bool = False) -> None:
    """A checkpoint as the code before versioned saves left it: a plain folder, with the
    COMPLETE marker only where that code was killed between its renames (``marked``)."""
    FakeLoRAModel(step).save_adapter(folder / "adapter")
    state = {"step": step, "optimizer": None, "rng": rng_state(), "config": {}, "extra": {}, "modules": {}}
    torch.save(state, folder / "trainer.pt")
    if marked:
        (folder / COMPLETE).write_text("ok\n")


@_reporting
def save_forever(conn: Connection, target: Path, start: int) -> None:
    for step in itertools.count(start):
        save(target, step)
        conn.send(("saved", step))


@_reporting
def save_killed_at(conn: Connection, target: Path, step: int, k: int) -> None:
    """Save ``step``, SIGKILLed just before the save's ``k``-th file operation; a save with
    fewer operations returns and reports."""
    seen = 0

    def die_at_k(event: str, args: tuple[Any, ...]) -> None:
        nonlocal seen
        if event in FILE_EVENTS:
            seen += 1
            if seen == k:
                os.kill(os.getpid(), signal.SIGKILL)

    sys.addaudithook(die_at_k)  # for good: this process only lives for this one save
    save(target, step)
    conn.send(("saved", step))
