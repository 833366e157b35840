"""A save killed at any point never costs the run its checkpoint: `latest_checkpoint` then finds
the newest complete one (never none once one was written, never a step older than the one
before the killed save)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from memsdk_training.checkpoint import latest_checkpoint, save_checkpoint

SAVER = r"""
import sys, time
from pathlib import Path
from memsdk_training.checkpoint import save_checkpoint

class Policy:  # an adapter folder of a few files, like peft's
    def save_adapter(self, path):
        path.mkdir(parents=True)
        (path / "adapter_config.json").write_text("{}")
        (path / "adapter_model.safetensors").write_bytes(b"x" * 200_000)

target, start = Path(sys.argv[1]), int(sys.argv[2])
for step in range(start, start + 10_000):
    save_checkpoint(target, policy=Policy(), optimizer=None, step=step, config={})
    print(step, flush=True)
"""


class Policy:
    def save_adapter(self, path: Path) -> None:
        path.mkdir(parents=True)
        (path / "adapter_config.json").write_text("{}")


def step_of(folder: Path) -> int:
    import torch

    return int(torch.load(folder / "trainer.pt", weights_only=False)["step"])


def test_a_kill_between_the_two_renames_recovers_the_new_checkpoint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "last"
    save_checkpoint(target, policy=Policy(), optimizer=None, step=1, config={})
    real_rename, renames = Path.rename, []

    def dies_after_the_first(self: Path, dest: Path) -> Path:
        renames.append(dest)
        if len(renames) == 2:  # the old one is aside, the new one not yet in: the process dies here
            raise SystemExit("killed")
        return real_rename(self, dest)

    monkeypatch.setattr(Path, "rename", dies_after_the_first)
    with pytest.raises(SystemExit):
        save_checkpoint(target, policy=Policy(), optimizer=None, step=2, config={})
    monkeypatch.undo()
    assert not target.exists()  # the window the old code restarted from step 0 in
    found = latest_checkpoint(target)
    assert found == target and step_of(found) == 2
    assert [p.name for p in tmp_path.iterdir()] == ["last"]  # leftovers cleaned


@pytest.mark.parametrize("seed", [0])
def test_saves_killed_at_random_points_always_leave_a_checkpoint_no_older_than_before(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    target, last_seen = tmp_path / "ckpt" / "last", -1
    target.parent.mkdir()
    kills = 0
    for trial in range(25):
        proc = subprocess.Popen([sys.executable, "-c", SAVER, str(target), str(last_seen + 1)], stdout=subprocess.PIPE, text=True)
        assert proc.stdout is not None
        printed = proc.stdout.readline()  # wait for the first finished save, then kill somewhere in a later one
        time.sleep(rng.uniform(0.0, 0.05))
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        found = latest_checkpoint(target)
        assert found is not None, f"trial {trial}: the kill left no checkpoint"
        step = step_of(found)
        assert step >= max(last_seen, int(printed)), f"trial {trial}: went back to step {step}"
        last_seen = step
    assert kills == 25 and last_seen >= 25
