"""Policies installed by other packages, through the ``memsdk.policies`` entry-point group.

A package declares, in its ``pyproject.toml``::

    [project.entry-points."memsdk.policies"]
    no-card-numbers = "acme_memory.policies:NoCardNumbers"

and a client serves it with ``policies={"manager": "no-card-numbers"}`` (or
``MEMSDK_POLICY_MANAGER=no-card-numbers``). The entry point names a policy class (built with
no arguments), a function returning a policy, or a policy object; its ``role`` attribute
says which role it serves. ``memsdk policies installed`` lists what is installed.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from memsdk.policies.plugged import RULE_METHOD, check_policy_object, is_prompt_policy

__all__ = ["GROUP", "Installed", "installed", "load_installed"]

GROUP = "memsdk.policies"


@dataclass(frozen=True)
class Installed:
    name: str
    target: str  # module:attribute
    distribution: str | None
    version: str | None
    role: str | None  # None: the target could not be imported (``error`` says why)
    error: str | None = None


def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        found.setdefault(ep.name, ep)  # the first on sys.path wins, as imports do
    return found


def _instance(target: Any) -> Any:
    """A policy from what an entry point names: a class or factory is called, an object kept."""
    if isinstance(target, type) or (callable(target) and not any(callable(getattr(target, m, None)) for m in RULE_METHOD.values()) and not is_prompt_policy(target)):
        return target()
    return target


def installed() -> list[Installed]:
    """Every policy in the ``memsdk.policies`` group, with the role its class declares."""
    out = []
    for name, ep in sorted(_entry_points().items()):
        dist = ep.dist
        try:
            role, error = getattr(ep.load(), "role", None), None
        except Exception as exc:  # a broken package must not break the listing of the others
            role, error = None, f"{type(exc).__name__}: {exc}"
        out.append(Installed(name, ep.value, dist.name if dist else None, dist.version if dist else None, role if isinstance(role, str) else None, error))
    return out


def load_installed(name: str, role: str) -> Any:
    """The installed policy ``name``, checked to serve ``role``. ValueError (with what is
    installed) when there is none by that name or it cannot be loaded."""
    found = _entry_points()
    ep = found.get(name)
    if ep is None:
        names = ", ".join(sorted(found)) or "none"
        raise ValueError(f"no installed policy named {name!r} (entry-point group {GROUP!r}; installed: {names})")
    try:
        policy = _instance(ep.load())
    except Exception as exc:
        raise ValueError(f"installed policy {name!r} ({ep.value}) could not be loaded: {type(exc).__name__}: {exc}") from None
    check_policy_object(policy, role)
    return policy
