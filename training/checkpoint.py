"""Training checkpoints (resume) and published policies (export to the client's registry).

A checkpoint is a folder, written under a temporary name, marked complete, and renamed
into place:

    <dir>/adapter/        the peft LoRA adapter (adapter_config.json + safetensors)
    <dir>/trainer.pt      {"step", "optimizer", "rng", "config", "extra", "modules"}   a plain dict, as nanoGPT's
    <dir>/COMPLETE        written last: a folder without it is a save that was killed

Replacing an older checkpoint takes two renames (old aside, new in). A kill between them
leaves no folder at ``<dir>``, so `latest_checkpoint` recovers: the new checkpoint when it
was complete, else the old one. A resumed run never falls back to step 0 because of where
a kill landed (tests/training/test_checkpoint_crash.py kills saves at random points).

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
    """Write adapter + trainer state (and ``modules``' weights) to ``path`` atomically (replacing an older one there)."""
    final = Path(path)
    latest_checkpoint(final)  # first finish what a killed save left behind, so its leftovers are not mistaken for ours
    tmp = final.with_name(f".{final.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    policy.save_adapter(tmp / ADAPTER)
    torch.save(
        {
            "step": step, "optimizer": None if optimizer is None else optimizer.state_dict(), "rng": rng_state(), "config": config,
            "extra": extra or {}, "modules": {name: m.state_dict() for name, m in (modules or {}).items()},
        },
        tmp / TRAINER,
    )
    _mark_complete(tmp)
    old = final.with_name(f".{final.name}.old-{os.getpid()}")
    if final.exists():
        final.rename(old)
    tmp.rename(final)
    shutil.rmtree(old, ignore_errors=True)
    return final


def _mark_complete(folder: Path) -> None:
    """fsync what was written, then the marker: after a power cut the marker never precedes the data."""
    for f in folder.rglob("*"):
        if f.is_file():
            with open(f, "rb+") as fh:
                os.fsync(fh.fileno())
    with open(folder / COMPLETE, "w") as fh:
        fh.write("ok\n")
        fh.flush()
        os.fsync(fh.fileno())


def _complete(folder: Path) -> bool:
    return (folder / COMPLETE).is_file() and (folder / TRAINER).is_file() and (folder / ADAPTER).is_dir()


def load_checkpoint(
    path: str | os.PathLike[str], *, policy: Any, optimizer: torch.optim.Optimizer | None = None, restore_rng: bool = True,
    modules: Mapping[str, torch.nn.Module] | None = None,
) -> TrainerState:  # fmt: skip
    """Load the adapter weights into ``policy`` and, when given, the optimizer, RNG and ``modules``' states.

    Every module asked for must be in the checkpoint (a PPO run cannot resume from a GRPO
    checkpoint with a fresh critic by accident); modules saved but not asked for are ignored.
    """
    folder = Path(path)
    policy.load_adapter_weights(folder / ADAPTER)
    # our own file: it holds the optimizer state and RNG tuples, which weights_only refuses
    state = torch.load(folder / TRAINER, map_location="cpu", weights_only=False)
    saved = state.get("modules", {})  # checkpoints written before modules existed have none
    for name, module in (modules or {}).items():
        if name not in saved:
            raise ValueError(f"checkpoint {folder} has no {name!r} (it has {sorted(saved)})")
        module.load_state_dict(saved[name])
    if optimizer is not None and state["optimizer"] is not None:
        optimizer.load_state_dict(state["optimizer"])
    if restore_rng:
        set_rng_state(state["rng"])
    return TrainerState(step=int(state["step"]), extra=dict(state["extra"]))


def latest_checkpoint(path: str | os.PathLike[str]) -> Path | None:
    """The checkpoint at ``path``, or None when there is none.

    When a save was killed between its two renames, ``path`` is missing: the newer
    checkpoint (complete) or else the older one is moved back into place first. Incomplete
    leftovers are removed. Checkpoints written before the COMPLETE marker are accepted.
    """
    folder = Path(path)
    # the newer checkpoint (a killed save's .tmp-*) before the older (.old-*)
    leftovers = [p for kind in ("tmp", "old") for p in sorted(folder.parent.glob(f".{folder.name}.{kind}-*"))]
    if not folder.exists():
        survivor = next((c for c in leftovers if _complete(c)), None)
        if survivor is not None:
            survivor.rename(folder)
    for leftover in leftovers:
        shutil.rmtree(leftover, ignore_errors=True)
    # a folder at ``path`` only ever arrives complete (renamed in), so this also accepts
    # checkpoints written before the COMPLETE marker existed
    return folder if (folder / TRAINER).is_file() and (folder / ADAPTER).is_dir() else None


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
