"""Save and resume without kills: what a checkpoint restores, the layout on disk (a link to
one version folder), checkpoints of the older layout, and a lost link
(test_checkpoint_crash.py kills saves)."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest
import torch

from memsdk_training.checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from tests.training._checkpoint_child import FakeLoRAModel, save, save_older_layout


def only_beside(target: Path) -> set[str]:
    return {p.name for p in target.parent.iterdir()}


def resumed_step(target: Path) -> int:
    policy = FakeLoRAModel()
    step = load_checkpoint(target, policy=policy, restore_rng=False).step
    assert policy.step == step, "adapter and trainer state come from different saves"
    return step


def test_a_resume_restores_weights_optimizer_modules_and_rng(tmp_path: Path) -> None:
    torch.manual_seed(0)
    head = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(head.parameters(), lr=0.1, momentum=0.9)
    head(torch.ones(2, 3)).sum().backward()
    optimizer.step()  # momentum buffers: state a fresh optimizer does not have
    target = tmp_path / "checkpoints" / "last"  # the folder does not exist yet, as in a fresh run
    assert latest_checkpoint(target) is None
    saved = save_checkpoint(target, policy=FakeLoRAModel(7), optimizer=optimizer, step=7, config={"lr": 0.1}, extra={"best": 0.5}, modules={"head": head})
    draws = (random.random(), torch.rand(2))

    fresh_head = torch.nn.Linear(3, 1)
    fresh_optimizer, policy = torch.optim.SGD(fresh_head.parameters(), lr=0.1, momentum=0.9), FakeLoRAModel()
    assert saved == target and latest_checkpoint(target) == target
    state = load_checkpoint(target, policy=policy, optimizer=fresh_optimizer, modules={"head": fresh_head})
    assert (state.step, state.extra, policy.step) == (7, {"best": 0.5}, 7)
    torch.testing.assert_close(fresh_head.state_dict(), head.state_dict(), rtol=0, atol=0)
    torch.testing.assert_close(fresh_optimizer.state_dict()["state"], optimizer.state_dict()["state"], rtol=0, atol=0)
    assert random.random() == draws[0] and torch.equal(torch.rand(2), draws[1])  # the run draws on as it would have
    with pytest.raises(ValueError, match="has no 'critic'"):
        load_checkpoint(target, policy=FakeLoRAModel(), modules={"critic": torch.nn.Linear(3, 1)})


def test_a_save_repoints_the_path_and_deletes_the_version_it_replaced(tmp_path: Path) -> None:
    target = tmp_path / "last"
    save(target, 1)
    first = os.readlink(target)
    save(target, 2)
    assert target.is_symlink() and os.readlink(target) != first
    assert only_beside(target) == {"last", os.readlink(target)}
    assert resumed_step(target) == 2


def test_a_checkpoint_of_the_older_layout_resumes_and_the_next_save_replaces_it(tmp_path: Path) -> None:
    target = tmp_path / "last"
    target.mkdir()
    save_older_layout(target, 5)
    assert latest_checkpoint(target) == target and resumed_step(target) == 5
    save(target, 6)
    assert resumed_step(target) == 6 and only_beside(target) == {"last", os.readlink(target)}


def test_a_lost_link_falls_back_to_the_newest_complete_version(tmp_path: Path) -> None:
    """What a power cut that lost the link's rename could leave; a newer, unfinished save beside it."""
    target = tmp_path / "last"
    save(target, 1)
    save(target, 2)
    (tmp_path / ".last.v9" / "adapter").mkdir(parents=True)  # killed before its marker
    target.unlink()
    assert latest_checkpoint(target) == target and resumed_step(target) == 2
    assert only_beside(target) == {"last", os.readlink(target)}
