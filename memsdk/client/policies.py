"""Which policy version serves each role, and switching it while the client runs.

Switching is two steps around one I/O call: `plan` looks the version up in the registry
(no I/O beyond reading its manifest), the client loads the adapter on its backend
(`/v1/load_lora_adapter` on vLLM, peft in-process), and only then `commit` swaps the
policy object. A failed load never reaches `commit`, so the old version stays active.
A version whose manifest names a prompt is served with that prompt (the one its adapter
was trained with), and a rollback returns to the previous version's prompt with it.
Requests capture the policy objects when they start, so in-flight work finishes on the
version it began with.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memsdk.client.pipeline import ActivePolicies
from memsdk.client.results import PolicyInfo
from memsdk.config import ClientConfig
from memsdk.errors import InvalidInput, PolicyError
from memsdk.policies import ExtractiveAnswerer, HeuristicExtractor, HeuristicManager, LLMWriter, PolicyConfig, llm_policy_class
from memsdk.registry import BASE_VERSION, ROLES, PolicyRegistry

__all__ = ["PolicySet", "Switch"]

log = logging.getLogger("memsdk.client")

_HEURISTIC = {"extractor": HeuristicExtractor, "manager": HeuristicManager, "answerer": ExtractiveAnswerer}


@dataclass(frozen=True)
class Switch:
    role: str
    version: str
    adapter_name: str | None  # None: the base model, nothing to load
    adapter_path: Path | None
    prompt: str | None = None  # the manifest's prompt id; None: the role's default prompt


class PolicySet:
    def __init__(self, backend: Any, config: ClientConfig, registry: PolicyRegistry, state_path: Path) -> None:
        self._backend, self._config, self.registry, self._state_path = backend, config, registry, state_path
        self._lock = threading.Lock()
        self._versions = {role: BASE_VERSION for role in ROLES}
        self._history: dict[str, list[str]] = {role: [] for role in ROLES}
        self._policies = {role: self._build(role, None, None) for role in ROLES}
        # Mem-alpha's writer serves the base model with its default prompt: it is not a
        # registry role yet, so it has no versions to switch between
        self._writer = LLMWriter(backend, PolicyConfig()) if config.writer else None

    @property
    def heuristic(self) -> bool:
        return self._config.policies == "heuristic"

    def _build(self, role: str, adapter_name: str | None, prompt: str | None) -> Any:
        if self.heuristic:
            return _HEURISTIC[role]()
        fallback = _HEURISTIC[role]() if self._config.fallback_to_heuristic else None
        cls, prompt_version = llm_policy_class(role, prompt)
        return cls(self._backend, PolicyConfig(model=adapter_name, prompt_version=prompt_version), fallback=fallback)

    def version_label(self, role: str) -> str:
        if self.heuristic:
            return self._policies[role].version
        return self._versions[role]

    def active(self) -> ActivePolicies:
        with self._lock:
            return ActivePolicies(
                extractor=self._policies["extractor"],
                manager=self._policies["manager"],
                answerer=self._policies["answerer"],
                versions={role: self.version_label(role) for role in ROLES} | ({"writer": BASE_VERSION} if self._writer else {}),
                writer=self._writer,
            )

    def info(self) -> dict[str, PolicyInfo]:
        with self._lock:
            return {
                role: PolicyInfo(
                    role=role,
                    version=self.version_label(role),
                    model="none (heuristic)" if self.heuristic else (self._policies[role].caller.model or self._config.model),
                    prompt=None if self.heuristic else self._policies[role].caller.prompt.id,
                    previous=list(self._history[role]),
                )
                for role in ROLES
            }

    def stats(self) -> dict[str, dict[str, int]]:
        # the writer too, when it ingests: its parse failures and refused calls are otherwise
        # counted where no caller can see them
        policies = {**self._policies, **({"writer": self._writer} if self._writer else {})}
        return {role: dict(getattr(p, "stats", None).counts) if hasattr(p, "stats") else {} for role, p in policies.items()}

    # -- switching ------------------------------------------------------------------------

    @staticmethod
    def check_role(role: str) -> None:
        if role not in ROLES:
            raise InvalidInput("role", f"must be one of {', '.join(ROLES)}, got {role!r}")

    def plan(self, role: str, version: str) -> Switch:
        self.check_role(role)
        if self.heuristic:
            raise PolicyError("the heuristic policies have no checkpoints to switch to (policies='heuristic')")
        if version == BASE_VERSION:
            return Switch(role, version, None, None)
        manifest = self.registry.get(role, version)
        path = self.registry.adapter_dir(manifest)
        if not (path / "adapter_config.json").exists():
            raise PolicyError(f"{role} {version!r}: no adapter at {path}")
        try:
            llm_policy_class(role, manifest.prompt)  # checked before the adapter is loaded: a bad prompt changes nothing
        except ValueError as exc:
            raise PolicyError(f"{role} {version!r}: {exc}") from None
        return Switch(role, version, f"{role}-{version}", path, manifest.prompt)

    def plan_rollback(self, role: str) -> Switch:
        self.check_role(role)  # before the lookup: an unhashable role is a TypeError there
        with self._lock:
            if not self._history.get(role):
                raise PolicyError(f"{role} has no previous version to roll back to")
            previous = self._history[role][-1]
        return self.plan(role, previous)

    def build(self, switch: Switch) -> Any:
        """The policy object a switch would serve, without serving it (the release gate's candidate)."""
        return self._build(switch.role, switch.adapter_name, switch.prompt)

    def commit(self, switch: Switch, *, rollback: bool = False) -> None:
        policy = self.build(switch)
        with self._lock:
            if rollback:
                self._history[switch.role].pop()
            else:
                self._history[switch.role].append(self._versions[switch.role])
            self._versions[switch.role] = switch.version
            self._policies[switch.role] = policy
            self._save()
        log.info("%s now serves version %s", switch.role, switch.version)

    # -- persistence of the active versions ---------------------------------------------------

    def _save(self) -> None:
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"versions": self._versions, "history": self._history}))
        tmp.replace(self._state_path)

    def saved_versions(self) -> dict[str, str]:
        """Versions active when the client last ran (restored at start)."""
        try:
            data = json.loads(self._state_path.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        self._history.update({r: list(v) for r, v in data.get("history", {}).items() if r in ROLES})
        return {r: v for r, v in data.get("versions", {}).items() if r in ROLES and v != BASE_VERSION}
