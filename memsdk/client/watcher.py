"""What the promotion watcher decides, shared by the twins (``watch_policies``): the interval
it checks at, the promotions due, and one that failed to load, never retried. The twins add
only the waiting (a thread, or a task on the event loop)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Generator
from typing import Any

from memsdk.client._base import BaseClient
from memsdk.effects import Call, Effect
from memsdk.errors import InvalidInput
from memsdk.registry import ROLES

__all__ = ["check_interval", "due_promotions", "promotion_failed"]

log = logging.getLogger("memsdk.client")


def check_interval(interval_s: float) -> float:
    # the watcher runs in the background: a bad interval there would be a crash no caller
    # sees (a string, an interval past what a lock can wait) or a loop that never sleeps
    if isinstance(interval_s, bool) or not isinstance(interval_s, (int, float)) or not 0 < interval_s <= threading.TIMEOUT_MAX:
        raise InvalidInput("interval_s", f"must be a positive number of seconds, got {interval_s!r}")
    return interval_s


def due_promotions(client: BaseClient[Any], failed: set[tuple[str, str]]) -> Generator[Effect, Any, list[tuple[str, str]]]:
    """(role, version) of each promotion the watcher should serve now: promoted after the
    version serving, and not one it already failed to load."""
    due = []
    for role in ROLES:
        latest = yield Call(client._policies.registry.latest_promoted, (role,), stage="registry")
        if latest is not None and latest.version != client.policies[role].version and (role, latest.version) not in failed:
            due.append((role, latest.version))
    return due


def promotion_failed(failed: set[tuple[str, str]], role: str, version: str, exc: Exception) -> None:
    failed.add((role, version))  # not retried every interval: a new promotion is needed
    log.warning("watcher could not promote %s %s: %s", role, version, exc)
