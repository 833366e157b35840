"""Training checkpoints (resume) and published policies (export to the client's registry).

A checkpoint path ``<dir>`` is a symlink to the sibling folder of the save it stands for:

    <dir> -> .<name>.v<n>/
        adapter/        the peft LoRA adapter (adapter_config.json + safetensors)
        trainer.pt      {"step", "optimizer", "rng", "config", "extra", "modules"}   a plain dict, as nanoGPT's
        COMPLETE        written last, once everything above is on disk

A save writes a new ``.<name>.v<n+1>`` beside the one ``<dir>`` points to, fsyncs it, and
only then repoints ``<dir>`` with one `os.replace` of a symlink. So at every instant
``<dir>`` is a whole checkpoint, the previous save's or the new one's: a kill anywhere in a
save costs at most that save, never the run its progress (tests/training/test_checkpoint_crash.py
kills a save before each of its file operations, and at random times). The next save or
`latest_checkpoint` deletes what a killed save left. One run owns a checkpoint path: a save
deletes the versions it replaced, so a second process must not be reading them.

``modules`` holds the state dicts of training-only modules beside the adapter (PPO's value
head): they resume with the run but are never part of the adapter a client loads.

``rng`` holds Python's, torch's CPU and (when present) CUDA generator states, so a resumed
run draws the same states, seeds and samples as the run it continues.

`export_policy` publishes an adapter with its manifest (role, base model, config, data hash,
validation metrics) through `PolicyRegistry.publish`, the same atomic folder-rename a
running client's `use_policy` / `watch_policies` read from.
"""

from __future__ import annotations

import hashlib
import os
import random
import re
import shutil
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from memsdk.registry import PolicyManifest, PolicyRegistry

__all__ = [
    "TrainerState",
    "rng_state",
    "set_rng_state",
    "save_checkpoint",
    "load_checkpoint",
    "latest_checkpoint",
    "data_hash",
    "export_policy",
]

ADAPTER = "adapter"
TRAINER = "trainer.pt"
COMPLETE = "COMPLETE"


@dataclass(frozen=True)
class TrainerState:
    step: int
    extra: dict[str, Any]


def rng_state() -> dict[str, Any]:
    state: dict[str, Any] = {"python": random.getstate(), "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def save_checkpoint(
    path: str | os.PathLike[str], *, policy: Any, optimizer: torch.optim.Optimizer | None, step: int,
    config: dict[str, Any], extra: dict[str, Any] | None = None, modules: Mapping[str, torch.nn.Module] | None = None,
) -> Path:  # fmt: skip
    """Write adapter + trainer state (and ``modules``' weights) as the checkpoint at ``path``, atomically (replacing an older one there)."""
    link = Path(path)
    latest_checkpoint(link)  # a killed save's leftovers go first, and an older layout's folder becomes a version
    version = _next_version(link)
    version.mkdir(parents=True)
    policy.save_adapter(version / ADAPTER)
    torch.save(
        {
            "step": step, "optimizer": None if optimizer is None else optimizer.state_dict(), "rng": rng_state(), "config": config,
            "extra": extra or {}, "modules": {name: m.state_dict() for name, m in (modules or {}).items()},
        },
        version / TRAINER,
    )
    _mark_complete(version)
    _point(link, version)
    _remove_leftovers(link, keep=version)
    return link


def load_checkpoint(
    path: str | os.PathLike[str], *, policy: Any, optimizer: torch.optim.Optimizer | None = None, restore_rng: bool = True,
    modules: Mapping[str, torch.nn.Module] | None = None,
) -> TrainerState:  # fmt: skip
    """Load the adapter weights into ``policy`` and, when given, the optimizer, RNG and ``modules``' states.

    Every module asked for must be in the checkpoint (a PPO run cannot resume from a GRPO
    checkpoint with a fresh critic by accident); modules saved but not asked for are ignored.
    """
    folder = Path(path).resolve()  # once: both files then come from the same save
    policy.load_adapter_weights(folder / ADAPTER)
    # our own file: it holds the optimizer state and RNG tuples, which weights_only refuses
    state = torch.load(folder / TRAINER, map_location="cpu", weights_only=False)
    saved = state.get("modules", {})  # checkpoints written before modules existed have none
    for name, module in (modules or {}).items():
        if name not in saved:
            raise ValueError(f"checkpoint {path} has no {name!r} (it has {sorted(saved)})")
        module.load_state_dict(saved[name])
    if optimizer is not None and state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    if restore_rng:
        set_rng_state(state["rng"])
    return TrainerState(step=int(state["step"]), extra=dict(state["extra"]))


def latest_checkpoint(path: str | os.PathLike[str]) -> Path | None:
    """``path`` once it stands for a whole checkpoint, or None when no save ever completed.

    Repairs before it answers: a checkpoint of the older layout is taken in as a version, a
    missing or broken ``path`` is pointed at the newest complete version, and what killed
    saves left beside it is deleted.
    """
    link = Path(path)
    _adopt_older_layout(link)
    current = _pointed_to(link)
    if current is None:
        # a path never saved to; else only a kill inside the adoption above, or a power cut
        # that lost the link, gets here
        whole = [v for v in _versions(link) if _complete(v)]
        if not whole:
            return None  # nothing to fall back to, and nothing newer to justify deleting leftovers
        current = whole[-1]
        _point(link, current)
    _remove_leftovers(link, keep=current)
    return link


# -- the versions behind a checkpoint path ------------------------------------------------------


def _leftovers(link: Path) -> list[Path]:
    """What saves put beside ``link``: its versions (oldest first), a link being swapped in,
    and the older layout's folders renamed aside."""
    if not link.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(link.name)}\.(?:v(?P<n>\d+)|link-\d+|tmp-\d+|old-\d+)")
    found = [(int(m["n"] or -1), p) for p in link.parent.iterdir() if (m := pattern.fullmatch(p.name)) is not None]
    return [p for _, p in sorted(found)]


def _versions(link: Path) -> list[Path]:
    return [p for p in _leftovers(link) if p.name.startswith(f".{link.name}.v")]


def _next_version(link: Path) -> Path:
    """Numbered past every version there, complete or not: a killed save's number is never
    reused, so the newest complete version is always the latest save."""
    versions = _versions(link)
    n = int(versions[-1].name.rpartition(".v")[2]) + 1 if versions else 1
    return link.with_name(f".{link.name}.v{n}")


def _pointed_to(link: Path) -> Path | None:
    if not link.is_symlink():
        return None
    target = link.parent / os.readlink(link)
    return target if _complete(target) else None


def _point(link: Path, version: Path) -> None:
    """Make ``link`` name ``version`` in one step: rename(2) replaces the old symlink atomically."""
    swap = link.with_name(f".{link.name}.link-{os.getpid()}")
    swap.unlink(missing_ok=True)
    os.symlink(version.name, swap)  # relative: the run's folder can be moved or copied whole
    os.replace(swap, link)
    _fsync(link.parent)  # the link and the version's own entry survive a power cut before old versions go


def _remove_leftovers(link: Path, *, keep: Path) -> None:
    for p in _leftovers(link):
        if p == keep:
            continue
        if p.is_symlink() or not p.is_dir():
            p.unlink(missing_ok=True)
            continue
        # the marker first: a deletion cut short must not leave a folder that looks complete
        (p / COMPLETE).unlink(missing_ok=True)
        shutil.rmtree(p, ignore_errors=True)


def _adopt_older_layout(link: Path) -> None:
    """Take a checkpoint of the older layout in as a version: a plain folder at ``link``, or,
    where that code was killed between its two renames, the complete one of the folders it
    had renamed aside (the new one, ``.tmp-*``, before the old one, ``.old-*``)."""
    if link.is_symlink():
        return
    if link.is_dir():
        folder = link
    elif _versions(link):
        return  # taken in already, and a kill came before the link: what is still aside is older
    else:
        aside = [p for kind in ("tmp", "old") for p in _leftovers(link) if p.name.startswith(f".{link.name}.{kind}-") and _complete(p)]
        if not aside:
            return
        folder = aside[0]
    if (folder / TRAINER).is_file() and (folder / ADAPTER).is_dir():  # that layout only ever renamed whole folders in
        _mark_complete(folder)
    folder.rename(_next_version(link))
    _fsync(link.parent)


def _mark_complete(folder: Path) -> None:
    """fsync what was written, then the marker: after a power cut the marker never precedes the data."""
    for f in sorted(folder.rglob("*"), reverse=True):  # a folder after what it holds
        _fsync(f)
    with open(folder / COMPLETE, "w") as fh:
        fh.write("ok\n")
        fh.flush()
        os.fsync(fh.fileno())
    _fsync(folder)


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)  # a folder too: its entries are what a power cut loses
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _complete(folder: Path) -> bool:
    return (folder / COMPLETE).is_file() and (folder / TRAINER).is_file() and (folder / ADAPTER).is_dir()


def data_hash(keys: Iterable[str]) -> str:
    """sha256 over the training items' keys, in order: which data a checkpoint was trained on."""
    digest = hashlib.sha256()
    for key in keys:
        digest.update(key.encode())
        digest.update(b"\n")
    return f"sha256:{digest.hexdigest()}"


def export_policy(
    adapter_dir: str | os.PathLike[str], registry_dir: str | os.PathLike[str], *, role: str, version: str, base_model: str,
    config: dict[str, Any] | None = None, eval_metrics: dict[str, float] | None = None, training_data_hash: str | None = None,
    promote: bool = False, prompt: str | None = None,
) -> PolicyManifest:  # fmt: skip
    """Publish ``adapter_dir`` as ``<registry_dir>/<role>/<version>`` with its manifest; ``prompt``
    is the prompt id the adapter was trained with, which clients then serve it with."""
    manifest = PolicyManifest(
        role=role, version=version, base_model=base_model, config=dict(config or {}),
        eval_metrics={k: float(v) for k, v in (eval_metrics or {}).items()}, training_data_hash=training_data_hash, promote=promote,
        prompt=prompt,
    )  # fmt: skip
    return PolicyRegistry(registry_dir).publish(adapter_dir, manifest)
