"""Published policy checkpoints on disk: ``<checkpoint_dir>/<role>/<version>/``.

Each version folder holds a peft LoRA adapter and a ``manifest.json``. An adapter only
works with the prompt it was trained on, so the manifest may name that prompt. The trainer
publishes with `publish`, which builds the folder under a temporary name and renames it
into place, so a client watching the directory never sees half a checkpoint.

Serving is decided apart from publishing: the release gate's decision is written beside the
manifest (``gate.json``, `record_decision`), and every promotion, gated or forced, is a line
of ``<role>/promotions.jsonl``, the role's audit trail. A watching client follows that trail
(`latest_promoted`), not the folders: publishing alone makes nothing serve, except a
manifest published with ``promote=True`` (the trainers' old way), which the trail lists as
a forced promotion at the manifest's time. It is read from the manifest rather than
appended at publish, so a publish killed after its rename cannot leave it half promoted.

A registry may also read a second, read-only root: the adapters shipped inside the package
(`PACKAGED_DIR`, same layout). They are listed, loaded and gated like published versions, a
published version of the same name shadows one, and nothing is ever written there: a gate
decision about a packaged candidate goes under the registry's own root. `packaged_default`
names the one a client serves when nothing else was chosen (README, *Defaults, measured*).
"""

from __future__ import annotations

import json
import os
import re
import shutil
from datetime import datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memsdk.errors import InvalidInput, PolicyError
from memsdk.gate.stats import GateDecision
from memsdk.llm.models import model_key
from memsdk.policies import llm_policy_class
from memsdk.types import utcnow


__all__ = ["PolicyManifest", "PolicyRegistry", "Promotion", "ROLES", "BASE_VERSION", "PACKAGED_DIR", "model_key"]

ROLES = ("extractor", "manager", "answerer")
#: the version name of "no adapter": the base model with the shipped prompts
BASE_VERSION = "base"
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
#: adapters trained by the project and shipped with it, as ``<role>/<version>/`` folders
PACKAGED_DIR = Path(__file__).parent / "packaged"


class PolicyManifest(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str
    version: str
    base_model: str
    adapter_path: str = Field(".", description="Adapter folder, relative to the manifest's folder.")
    created_at: datetime = Field(default_factory=utcnow)
    training_data_hash: str | None = None
    eval_metrics: dict[str, float] = Field(default_factory=dict)
    config: dict[str, Any] = Field(default_factory=dict)
    serve_answer_k: int | None = Field(
        None, ge=1, le=200, description="The memories per question an answerer version serves at when that was measured apart from "
        "its training k (end to end, and its gate run again there); None: the k it was trained at.",
    )
    promote: bool = Field(False, description="A watching client may switch to it without being asked.")
    prompt: str | None = Field(
        None,
        description="The prompt id the adapter was trained with (``r2_manager/v2``); the client renders the role's "
        "requests with it while this version serves. None: the role's default prompt.",
    )

    def adapter_dir(self, root: Path) -> Path:
        return (root / self.role / self.version / self.adapter_path).resolve()

    @property
    def answer_k(self) -> int | None:
        """The memories per question an answerer version is served at unless the app sets
        ``answer_k``: ``serve_answer_k`` where measured, else the k it was trained and gated
        at (its training config's ``answer_k``); None: not an answerer, or not recorded."""
        k = (self.serve_answer_k or self.config.get("answer_k")) if self.role == "answerer" else None
        return k if isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= 200 else None


class Promotion(BaseModel):
    """One line of a role's audit trail: who was made to serve, against what, and how."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    role: str
    version: str
    against: str | None = None  # the incumbent the gate compared it with
    forced: bool = False  # promoted without a passing gate decision
    reason: str = ""
    at: datetime = Field(default_factory=utcnow)


def _check(role: str, version: str) -> None:
    if role not in ROLES:
        raise InvalidInput("role", f"must be one of {', '.join(ROLES)}, got {role!r}")
    if not isinstance(version, str) or not _VERSION.match(version) or version == BASE_VERSION:
        raise InvalidInput("version", f"{version!r} is not a valid checkpoint version name")


def _check_prompt(manifest: PolicyManifest) -> None:
    """A prompt the role cannot run would fail every request after the swap; refuse it at publish."""
    try:
        llm_policy_class(manifest.role, manifest.prompt)
    except ValueError as exc:
        raise InvalidInput("prompt", str(exc)) from None


class PolicyRegistry:
    def __init__(self, root: str | os.PathLike[str], *, packaged: str | os.PathLike[str] | None = None) -> None:
        self.root = Path(root)
        self.packaged = Path(packaged) if packaged is not None else None

    def _roots(self) -> list[Path]:
        return [self.root] + ([self.packaged] if self.packaged is not None else [])

    def versions(self, role: str) -> list[PolicyManifest]:
        """Published (and packaged) versions of a role, oldest first; unreadable folders are skipped."""
        found: dict[str, PolicyManifest] = {}
        for root in reversed(self._roots()):  # the registry's own root last: its versions shadow packaged ones
            folder = root / role
            for manifest in folder.glob("*/manifest.json") if folder.is_dir() else []:
                if manifest.parent.name.startswith("."):
                    continue  # a publish in progress
                try:
                    found[manifest.parent.name] = PolicyManifest.model_validate_json(manifest.read_text())
                except (ValidationError, OSError):
                    continue
        return sorted(found.values(), key=lambda m: m.created_at)

    def _home(self, role: str, version: str) -> Path:
        """The root that holds ``role/version``: the registry's own, else the packaged one."""
        for root in self._roots():
            if (root / role / version / "manifest.json").exists():
                return root
        return self.root

    def is_packaged(self, role: str, version: str) -> bool:
        return self.packaged is not None and self._home(role, version) == self.packaged

    def get(self, role: str, version: str) -> PolicyManifest:
        _check(role, version)
        path = self._home(role, version) / role / version / "manifest.json"
        try:
            return PolicyManifest.model_validate_json(path.read_text())
        except FileNotFoundError:
            raise PolicyError(f"no published {role} checkpoint {version!r} under {self.root}") from None
        except ValidationError as exc:
            raise PolicyError(f"the manifest of {role} {version!r} is invalid: {exc.errors()[0]['msg']}") from None

    def packaged_default(self, role: str, model: str) -> PolicyManifest | None:
        """The newest packaged ``role`` adapter trained over ``model`` (`model_key`), or None."""
        if self.packaged is None:
            return None
        shipped = [m for m in self.versions(role) if self.is_packaged(role, m.version) and model_key(m.base_model) == model_key(model)]
        return shipped[-1] if shipped else None

    def latest(self, role: str, *, promotable_only: bool = False) -> PolicyManifest | None:
        candidates = [m for m in self.versions(role) if m.promote or not promotable_only]
        return candidates[-1] if candidates else None

    def adapter_dir(self, manifest: PolicyManifest) -> Path:
        return manifest.adapter_dir(self._home(manifest.role, manifest.version))

    # -- the release gate's records -----------------------------------------------------------

    def record_decision(self, decision: GateDecision) -> Path:
        """Write a `gate.GateDecision` beside its candidate's manifest (``gate.json``)."""
        self.get(decision.role, decision.candidate.version)  # a published candidate only
        path = self.root / decision.role / decision.candidate.version / "gate.json"  # never into the package
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(decision.model_dump_json(indent=2))
        tmp.replace(path)
        return path

    def decision(self, role: str, version: str) -> GateDecision | None:
        """The gate decision recorded for ``version``, or None."""
        _check(role, version)
        own = self.root / role / version / "gate.json"
        path = own if own.exists() else self._home(role, version) / role / version / "gate.json"
        try:
            return GateDecision.model_validate_json(path.read_text())
        except FileNotFoundError:
            return None
        except ValidationError as exc:
            raise PolicyError(f"the gate decision of {role} {version!r} is invalid: {exc.errors()[0]['msg']}") from None

    def promote(self, promotion: Promotion) -> Promotion:
        """Append to the role's audit trail (flushed to disk before it returns)."""
        if promotion.version != BASE_VERSION:
            self.get(promotion.role, promotion.version)
        folder = self.root / promotion.role
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / "promotions.jsonl", "a", encoding="utf-8") as trail:
            trail.write(promotion.model_dump_json() + "\n")
            trail.flush()
            os.fsync(trail.fileno())
        return promotion

    def promotions(self, role: str) -> list[Promotion]:
        """The role's audit trail, oldest first: the promotions file (a torn last line, from a
        killed writer, is skipped) and every manifest published with ``promote=True``."""
        path = self.root / role / "promotions.jsonl"
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        found = [Promotion(role=role, version=m.version, forced=True, reason="published with promote=True, no gate decision", at=m.created_at) for m in self.versions(role) if m.promote]
        for line in lines:
            try:
                found.append(Promotion.model_validate(json.loads(line)))
            except (ValueError, ValidationError):
                continue
        return sorted(found, key=lambda p: p.at)

    def latest_promoted(self, role: str) -> Promotion | None:
        trail = self.promotions(role)
        return trail[-1] if trail else None

    def publish(self, adapter_dir: str | os.PathLike[str], manifest: PolicyManifest) -> PolicyManifest:
        """Copy an adapter folder in as ``<role>/<version>`` with its manifest, atomically."""
        _check(manifest.role, manifest.version)
        _check_prompt(manifest)
        source = Path(adapter_dir)
        if not (source / "adapter_config.json").exists():
            raise InvalidInput("adapter_dir", f"{source} is not a peft adapter folder (no adapter_config.json)")
        final = self.root / manifest.role / manifest.version
        if final.exists() or self.is_packaged(manifest.role, manifest.version):
            raise InvalidInput("version", f"{manifest.role} {manifest.version!r} is already published")
        tmp = final.with_name(f".{manifest.version}.tmp-{os.getpid()}")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(source, tmp)
        (tmp / "manifest.json").write_text(manifest.model_dump_json(indent=2))
        os.rename(tmp, final)
        return manifest
