"""The release gate and promotion, as steps both twins run (``evaluate_policy``, ``promote``):
the states a candidate replays, what a manager replay holds frozen, the promotion appended to
the role's audit trail, and what a version that could not be loaded raises."""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

from memsdk import gate
from memsdk.client._base import BaseClient
from memsdk.effects import Call, Effect
from memsdk.errors import PolicyError
from memsdk.gate import GateFailed, GateStates
from memsdk.policies.pair_manager import PairManager
from memsdk.registry import PolicyRegistry, Promotion
from memsdk.serving.policy_set import PolicySet, Switch, rules_manager

__all__ = ["gate_cases", "incumbent_of", "manager_replay", "promotion_steps", "switch_failed"]


def gate_cases(client: BaseClient[Any], role: str, version: str, on: GateStates, k: int | None) -> Generator[Effect, Any, list[Any]]:
    """The gate's states (`memsdk.gate.states`) from this client's log and bank. LoCoMo's are
    shown what the candidate would be shown once it serves: its k, and the supersessions
    this client's pair manager would make (marked), if it runs one."""
    client._policies.check_role(role)
    locomo = role == "answerer" and isinstance(on, str) and on == "locomo-val"
    if locomo and not k:
        switch = yield Call(client._policies.plan, (role, version), stage="registry")  # the version's manifest
        k = client._answer_k(switch.answer_k)
    manager = rules_manager("pairs", client._embedder, client.registry) if locomo and isinstance(client._policies.active().manager, PairManager) else None
    cases: list[Any] = yield Call(gate.states, (role, on), {"log": client.log, "bank": client.bank, "embedder": client._embedder, "k": k if locomo else None, "manager": manager}, stage="gate")
    return cases


def manager_replay(client: BaseClient[Any]) -> gate.ManagerReplay:
    """What a manager replay holds frozen: the answerer serving now and the client's sizes."""
    active = client._policies.active()
    return gate.ManagerReplay(active.answerer, client.bank.embedder, client.config.related_k, client._answer_k(active.answer_k))


def promotion_steps(registry: PolicyRegistry, role: str, version: str, incumbent: str, decision: Any, force: bool) -> Generator[Effect, Any, None]:
    """The promotion appended to ``role``'s audit trail; `GateFailed` (nothing appended) when
    the gate's ``decision`` did not pass."""
    if decision is not None and not decision.passed:
        raise GateFailed(decision)
    reason = "forced: the gate was not asked" if force else decision.summary()
    yield Call(registry.promote, (Promotion(role=role, version=version, against=incumbent, forced=bool(force), reason=reason),), stage="registry")


def incumbent_of(client: BaseClient[Any], role: str) -> str:
    """The version serving ``role`` now; an unknown role is `InvalidInput`, not a KeyError."""
    client._policies.check_role(role)
    return client.policies[role].version


def switch_failed(policies: PolicySet[Any], switch: Switch, exc: Exception) -> PolicyError:
    current = policies.info()[switch.role].version
    return PolicyError(f"could not load {switch.role} {switch.version!r} ({exc}); {switch.role} stays on {current!r}")
