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
from typing import Any, Generic

from pydantic import BaseModel, ConfigDict, Field

from memsdk.config import ClientConfig
from memsdk.config.roles import LLMSpec, MEASURED_DEFAULTS, RolePolicies, label
from memsdk.embedding import Embedder
from memsdk.errors import InvalidInput, PolicyError
from memsdk.llm.models import model_key
from memsdk.pipeline.decisions import ActivePolicies
from memsdk.policies import ExtractiveAnswerer, HeuristicExtractor, HeuristicManager, LLMWriter, Manager, NAMED, PolicyConfig, llm_policy_class, load_prompt, plug, split_prompt_id
from memsdk.policies.cross_encoder import load_relations
from memsdk.policies.plugged import is_prompt_policy
from memsdk.pipeline.forget_cross import packaged_reader
from memsdk.policies.pair_manager import PairManager
from memsdk.policies.reader import LLMReader, WindowReader
from memsdk.registry import BASE_VERSION, PACKAGED_DIR, PolicyRegistry, ROLES
from memsdk.serving.backends import B, Backends, Endpoint
from memsdk.serving.plugins import load_installed

__all__ = ["Backends", "Endpoint", "PolicySet", "Switch", "rules_manager", "trained_pair_manager", "PolicyInfo"]

log = logging.getLogger("memsdk.client")

_HEURISTIC = {"extractor": HeuristicExtractor, "manager": HeuristicManager, "answerer": ExtractiveAnswerer}

#: trained policies without an LLM that a role can name, with the registry version serving
#: each (``policies={"manager": "pairs"}``: `PairManager`); a version published under the
#: client's checkpoints shadows the packaged one of that name. "pairs" is the pair head mixed
#: with a cross-encoder that also learned from pairs written outside the generator;
#: "pairs-head" the head alone, which generalises less and costs no MiniLM pass on a pair the
#: head cannot rule out (docs/training.md, "Data written outside the generator")
TRAINED = {"manager": {"pairs": "pairs-v6", "pairs-head": "pairs-v5"}}


class PolicyInfo(BaseModel):
    """What serves one role (`MemoryClient.policies`): its version, model, prompt, where it
    runs, the versions `rollback` returns to, and why it serves."""

    model_config = ConfigDict(frozen=True)

    role: str
    version: str
    model: str = Field(description="The model or adapter name requests are routed to.")
    prompt: str | None = Field(None, description="The prompt id requests are rendered with (None: heuristic, no prompt).")
    served_by: str = Field("llm", description="'heuristic', 'rules' (a policy without an LLM) or 'llm at URL' / 'llm at in-process'.")
    previous: list[str] = Field(default_factory=list, description="Versions `rollback` returns to, most recent last.")
    why: str = Field("", description="Why this serves: the choice (policies='auto' and what measured best, or what was asked for) and where its version came from.")


def trained_pair_manager(role: str, version: str, registry: PolicyRegistry, embedder: Embedder | None = None) -> PairManager:
    """The pair manager of registry ``version``: ``registry``'s checkpoints, else its packaged
    folder, else the heads memsdk ships (a client whose packaged folder is another's still
    serves the default manager). ``embedder`` is shared when the head was trained on it."""
    shipped = PolicyRegistry(registry.root, packaged=PACKAGED_DIR)
    found = next((r for r in (registry, shipped) if any(m.version == version for m in r.versions(role))), shipped)
    manifest = found.get(role, version)
    try:
        head = load_relations(found.adapter_dir(manifest))
        shared = embedder if embedder is not None and embedder.name == head.embedder else None
        return PairManager(head, shared)
    except ValueError as exc:
        raise PolicyError(f"{role} {version!r}: {exc}") from None


def rules_manager(name: str, embedder: Embedder | None = None, registry: PolicyRegistry | None = None) -> Manager:
    """A manager that needs no LLM, by the name ``policies={"manager": ...}`` takes:
    ``"heuristic"``, or a trained one (``"pairs"``: the packaged pair classifier, from
    ``registry``'s checkpoints first when given). What the gate's and the trainers' LoCoMo
    states are built with."""
    if name == "heuristic":
        return HeuristicManager()
    if name not in TRAINED["manager"]:
        raise InvalidInput("manager", f"expected 'heuristic' or a trained manager without an LLM ({', '.join(TRAINED['manager'])}), got {name!r}")
    return trained_pair_manager("manager", TRAINED["manager"][name], registry or PolicyRegistry(PACKAGED_DIR), embedder)


@dataclass(frozen=True)
class Switch:
    role: str
    version: str
    adapter_name: str | None  # None: the base model, nothing to load
    adapter_path: Path | None
    prompt: str | None = None  # the manifest's prompt id; None: the role's default prompt
    answer_k: int | None = None  # an answerer version's training answer_k (its manifest); None: the client's


@dataclass(frozen=True)
class Served:
    """What serves one role: ``kind`` heuristic, rules (a user's policy, no LLM) or llm
    (``spec``; with ``custom`` set, a user's request/read policy instead of the built-in)."""

    kind: str
    spec: LLMSpec | None = None
    custom: Any = None
    name: str | None = None  # the installed policy's name, when it came from an entry point


def _resolve(role: str, choice: Any) -> Served:
    """A role's choice as the client serves it; installed policies are loaded here."""
    if choice == "heuristic":
        return Served("heuristic")
    if choice == "llm":
        return Served("llm", LLMSpec())
    if isinstance(choice, LLMSpec):
        policy, name = choice.policy, None
        if isinstance(policy, str):
            policy, name = _installed(role, policy, "policy"), policy
        elif policy is not None and not is_prompt_policy(policy):
            raise InvalidInput(f"config.policies.{role}.policy", "an LLM spec's policy must have request(...) and read(reply, ...)")
        return Served("llm", choice, policy, name)
    if isinstance(choice, str) and choice in TRAINED.get(role, {}):  # a trained policy without an LLM, loaded by `_build`
        return Served("rules", name=choice)
    if isinstance(choice, str) and choice in NAMED.get(role, {}):  # a built-in policy by name
        return Served("llm", LLMSpec(prompt=NAMED[role][choice]))
    name = choice if isinstance(choice, str) else None
    policy = _installed(role, choice, None) if name is not None else choice
    if is_prompt_policy(policy) and not callable(getattr(policy, {"extractor": "extract", "manager": "decide", "answerer": "answer"}[role], None)):
        return Served("llm", LLMSpec(), policy, name)
    return Served("rules", None, policy, name)


def _installed(role: str, name: str, field: str | None) -> Any:
    try:
        return load_installed(name, role)
    except ValueError as exc:
        raise InvalidInput(f"config.policies.{role}" + (f".{field}" if field else ""), str(exc)) from None


def chosen_because(policies: Any, model: str | None, role: str, kind: str) -> str:
    """Why ``role`` serves the kind of policy it does, in words (`PolicyInfo.why`)."""
    if isinstance(policies, str) and policies == "auto":
        if model is not None and (key := model_key(model)) in MEASURED_DEFAULTS:
            return f"policies='auto': what measured best over {key} ({MEASURED_DEFAULTS[key][role]})"
        if model is None:
            return "policies='auto' with a backend of the app's: the model is unknown, so an LLM policy"
        return f"policies='auto' over {model}: an LLM policy (nothing measured for this model)"
    if isinstance(policies, str):
        return f"policies={policies!r}"
    return f"chosen for this role ({kind})"


class PolicySet(Generic[B]):
    def __init__(self, backends: Backends[B], config: ClientConfig, registry: PolicyRegistry, state_path: Path, *, embedder: Embedder | None = None) -> None:
        """``embedder``: the client's, shared with a trained policy that reads the same model's
        vectors (the pair manager over MiniLM), so a process holds one copy of the model."""
        self.backends, self._config, self.registry, self._state_path = backends, config, registry, state_path
        self._embedder = embedder
        self._forget = packaged_reader(embedder)
        self._lock = threading.Lock()
        # "auto" needs the model: known only when the client makes the backend itself
        self._choices = choices = RolePolicies.of(config.policies, model=None if backends.injected else config.model)
        self._served = {role: _resolve(role, choices[role]) for role in ROLES}
        self._reader: LLMReader | WindowReader | None = None
        self._versions = {role: BASE_VERSION for role in ROLES}
        self._history: dict[str, list[str]] = {role: [] for role in ROLES}
        self._chosen: set[str] = set()  # roles whose version a caller switched, as opposed to one the client started on
        self._answer_k: int | None = None  # the serving answerer version's training answer_k
        self._policies = {role: self._checked_build(role) for role in ROLES}
        #: why each role serves what it serves (`PolicyInfo.why`): the choice, then its version's origin
        self._chose = {role: chosen_because(config.policies, None if backends.injected else config.model, role, self._served[role].kind) for role in ROLES}
        self._why = dict(self._chose)
        self._origin: dict[str, str] = {}  # role -> where `start_versions` found its version
        # Mem-alpha's writer serves the base model: it is not a registry role yet, so it has
        # no versions to switch between; its spec says where it runs and with which prompt
        self._writer = self._build_writer(choices.writer) if config.writer else None

    def _spec_prompt(self, field: str, prompt_role: str, spec: LLMSpec) -> str | None:
        """The prompt version a built-in role's spec names (None: the default), checked."""
        if spec.prompt is None:
            return None
        try:
            role, version = split_prompt_id(spec.prompt)
            if role != prompt_role:
                raise ValueError(f"the {field} runs {prompt_role} prompts, not {spec.prompt!r}")
            load_prompt(role, version)
        except ValueError as exc:
            raise InvalidInput(f"config.policies.{field}.prompt", str(exc)) from None
        return version

    def _build_writer(self, choice: Any) -> LLMWriter:
        spec = choice if isinstance(choice, LLMSpec) else LLMSpec()
        version = self._spec_prompt("writer", LLMWriter.prompt_role, spec)
        return LLMWriter(self.backends.for_spec(spec), PolicyConfig(prompt_version=version, params=spec.sampling))

    def reader(self) -> LLMReader | WindowReader:
        """MemAgent's reader, built on first use (a client that never reads needs no backend for it)."""
        with self._lock:
            if self._reader is None:
                self._reader = self._build_reader(self._choices.reader)
            return self._reader

    def _build_reader(self, choice: Any) -> LLMReader | WindowReader:
        if choice == "heuristic":
            return WindowReader()
        spec = choice if isinstance(choice, LLMSpec) else LLMSpec()
        version = self._spec_prompt("reader", LLMReader.prompt_role, spec)
        wants_fallback = spec.fallback if spec.fallback is not None else self._config.fallback_to_heuristic
        # no re-ask: a reply that cannot be read keeps the memory as it was, which costs less
        # than a second request per chunk of a long read
        config = PolicyConfig(prompt_version=version, params=spec.sampling, reask=False)
        return LLMReader(self.backends.for_spec(spec), config, fallback=WindowReader() if wants_fallback else None)

    @property
    def heuristic(self) -> bool:
        return all(s.kind == "heuristic" for s in self._served.values())

    def served(self, role: str) -> Served:
        return self._served[role]

    def backend(self, role: str) -> B:
        """The backend an LLM role's requests (and its adapters) go to."""
        spec = self._served[role].spec
        assert spec is not None, f"{role} is not an LLM role"
        return self.backends.for_spec(spec)

    def _checked_build(self, role: str) -> Any:
        try:
            return self._build(role, None, None)
        except ValueError as exc:  # a prompt id the role cannot run
            raise InvalidInput(f"config.policies.{role}.prompt", str(exc)) from None

    def _build(self, role: str, adapter_name: str | None, prompt: str | None) -> Any:
        served = self._served[role]
        if served.kind == "heuristic":
            return _HEURISTIC[role]()
        if served.kind == "rules":
            if served.custom is None:
                return self._trained(role, TRAINED[role][str(served.name)])
            return served.custom if isinstance(served.custom, PairManager) else plug(role, served.custom, name=served.name)
        spec = served.spec
        assert spec is not None
        backend = self.backends.for_spec(spec)
        wants_fallback = spec.fallback if spec.fallback is not None else self._config.fallback_to_heuristic
        fallback = _HEURISTIC[role]() if wants_fallback else None
        if served.custom is not None:
            return plug(role, served.custom, name=served.name, backend=backend, model=adapter_name, params=spec.sampling, fallback=fallback)
        cls, prompt_version = llm_policy_class(role, prompt or spec.prompt)
        return cls(backend, PolicyConfig(model=adapter_name, prompt_version=prompt_version, params=spec.sampling), fallback=fallback)

    def _trained(self, role: str, version: str) -> PairManager:
        return trained_pair_manager(role, version, self.registry, self._embedder)

    def version_label(self, role: str) -> str:
        if self._served[role].kind != "llm":
            version: str = self._policies[role].version  # a heuristic's or a user's policy object
            return version
        return self._versions[role]

    def active(self) -> ActivePolicies:
        with self._lock:
            return ActivePolicies(
                extractor=self._policies["extractor"],
                manager=self._policies["manager"],
                answerer=self._policies["answerer"],
                versions={role: self.version_label(role) for role in ROLES} | ({"writer": BASE_VERSION} if self._writer else {}),
                writer=self._writer,
                answer_k=self._answer_k,
                forget=self._forget,
            )

    def _describe(self, role: str) -> tuple[str, str | None, str]:
        """(model, prompt, served_by) as `PolicyInfo` shows them."""
        served, policy = self._served[role], self._policies[role]
        if served.kind == "heuristic":
            return "none (heuristic)", None, "heuristic"
        if served.kind == "rules":
            return f"none ({policy.version})", None, "rules"
        backend = self.backend(role)
        where = getattr(backend, "base_url", None) or "in-process"
        served_model = getattr(backend, "model", None) or (served.spec and served.spec.model) or self._config.model
        if served.custom is not None:
            return policy.model or served_model, f"custom: {policy.version}", f"llm at {where}"
        return policy.caller.model or served_model, policy.caller.prompt.id, f"llm at {where}"

    def info(self) -> dict[str, PolicyInfo]:
        with self._lock:
            out = {}
            for role in ROLES:
                model, prompt, served_by = self._describe(role)
                out[role] = PolicyInfo(
                    role=role, version=self.version_label(role), model=model, prompt=prompt, served_by=served_by, previous=list(self._history[role]), why=self._why[role]
                )
            return out

    def stats(self) -> dict[str, dict[str, int]]:
        # the writer too, when it ingests: its parse failures and refused calls are otherwise
        # counted where no caller can see them
        policies = {**self._policies, **({"writer": self._writer} if self._writer else {}), **({"reader": self._reader} if self._reader else {})}
        return {role: dict(p.stats.counts) if hasattr(p, "stats") else {} for role, p in policies.items()}

    # -- switching ------------------------------------------------------------------------

    @staticmethod
    def check_role(role: str) -> None:
        if role not in ROLES:
            raise InvalidInput("role", f"must be one of {', '.join(ROLES)}, got {role!r}")

    def plan(self, role: str, version: str) -> Switch:
        self.check_role(role)
        served = self._served[role]
        if served.kind == "heuristic":
            raise PolicyError(f"the {role} is heuristic: the heuristic policies have no checkpoints to switch to")
        if served.kind == "rules":
            raise PolicyError(f"the {role} is {served.name if served.custom is None else label(served.custom)}, a policy without an LLM: it has no checkpoints to switch to")
        if version == BASE_VERSION:
            return Switch(role, version, None, None)
        manifest = self.registry.get(role, version)
        path = self.registry.adapter_dir(manifest)
        if not (path / "adapter_config.json").exists():
            raise PolicyError(f"{role} {version!r}: no adapter at {path}")
        if served.custom is None:
            try:
                llm_policy_class(role, manifest.prompt)  # checked before the adapter is loaded: a bad prompt changes nothing
            except ValueError as exc:
                raise PolicyError(f"{role} {version!r}: {exc}") from None
        return Switch(role, version, f"{role}-{version}", path, manifest.prompt, manifest.answer_k)

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

    def commit(self, switch: Switch, *, rollback: bool = False, starting: bool = False) -> None:
        """Serve ``switch``. ``starting``: the version a client starts on (restored, pinned or
        packaged), which is no switch: the history stays as saved and nobody chose it now."""
        policy = self.build(switch)
        with self._lock:
            if rollback:
                self._history[switch.role].pop()
            elif not starting:
                self._history[switch.role].append(self._versions[switch.role])
            if not starting:
                self._chosen.add(switch.role)
            self._versions[switch.role] = switch.version
            self._policies[switch.role] = policy
            origin = self._origin.get(switch.role, "") if starting else "rolled back to" if rollback else "switched to by use_policy or a promotion"
            self._why[switch.role] = f"{self._chose[switch.role]}; {switch.version}: {origin}" if starting else f"{origin} {switch.version}"
            if switch.role == "answerer":
                self._answer_k = switch.answer_k
            self._save()
        log.info("%s now serves version %s", switch.role, switch.version)

    # -- persistence of the active versions ---------------------------------------------------

    def _save(self) -> None:
        tmp = self._state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"versions": self._versions, "history": self._history, "chosen": sorted(self._chosen)}))
        tmp.replace(self._state_path)

    def saved_versions(self) -> dict[str, str]:
        """Versions active when the client last ran (restored at start): any a caller chose
        (``base`` included: a switch back to it is a choice that outlives a restart), and any
        other than ``base`` (state files from before ``chosen`` was recorded)."""
        try:
            data = json.loads(self._state_path.read_text())
        except (FileNotFoundError, ValueError):
            return {}
        llm = [r for r in ROLES if self._served[r].kind == "llm"]  # a role now heuristic or rules has no versions
        self._history.update({r: list(v) for r, v in data.get("history", {}).items() if r in llm})
        self._chosen = {r for r in data.get("chosen", []) if r in llm}
        return {r: v for r, v in data.get("versions", {}).items() if r in llm and (r in self._chosen or v != BASE_VERSION)}

    def packaged_version(self, role: str) -> str | None:
        """The packaged adapter this role serves when nothing else was chosen: the built-in
        policy with its default prompt, on a backend the client makes itself (an injected
        one's model is not known), over the model the adapter was trained on."""
        served = self._served[role]
        spec = served.spec
        if spec is None or served.custom is not None or spec.prompt is not None or spec.backend is not None:
            return None
        if self.backends.injected and not spec.overrides_endpoint:
            return None
        manifest = self.registry.packaged_default(role, spec.model or self._config.model)
        return manifest.version if manifest is not None else None

    def start_versions(self) -> dict[str, str]:
        """Versions to serve at start: a spec's pinned ``version``, else the saved one (a
        switch back to ``base`` included), else the role's packaged adapter."""
        saved = self.saved_versions()
        pinned = {r: s.spec.version for r, s in self._served.items() if s.spec is not None and s.spec.version is not None}
        packaged = {r: v for r in ROLES if (v := self.packaged_version(r)) is not None}
        for origin, versions in (("the adapter memsdk ships for this model, which passed its release gate", packaged), ("what this data dir served before", saved), ("pinned by its spec", pinned)):
            self._origin.update(dict.fromkeys(versions, origin))
        return {r: v for r, v in {**packaged, **saved, **pinned}.items() if v != BASE_VERSION}

    def start_failed(self, role: str, version: str, exc: Exception) -> None:
        """``version`` of ``role`` could not be served at start: the base serves, and says why."""
        with self._lock:
            self._why[role] = f"{self._chose[role]}; {version} could not be loaded ({exc}), so the base model serves (the heuristic fallback while the model itself cannot load)"
