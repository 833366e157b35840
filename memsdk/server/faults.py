"""Crash points, for the crash tests: a process that must die at an exact moment kills itself.

``MEMSDK_CRASH_AT=<point>[:<n>]`` in a server's environment makes it SIGKILL itself the
``n``-th time (the first by default) it passes `crash_point(point)`. A kill from outside
lands anywhere; these land in a window a few microseconds wide, such as between a turn's
store write and the outbox's record that it was done (`STORED`), where a wrong replay
decision would apply the turn twice. Unset, a crash point reads one environment variable.
"""

from __future__ import annotations

import os
import re
import signal
import threading
from collections import Counter

from memsdk.errors import InvalidInput

__all__ = ["ENV", "STORED", "POINTS", "crash_point", "check_armed"]

ENV = "MEMSDK_CRASH_AT"
#: an accepted turn is in the store, and its row is not marked done yet
STORED = "accepted.stored"
POINTS = frozenset({STORED})

_ARMED = re.compile(r"(?P<point>[a-z.]+)(?::(?P<nth>[1-9][0-9]*))?")
_passed: Counter[str] = Counter()
_lock = threading.Lock()


def check_armed() -> None:
    """`InvalidInput` naming `ENV` when it is set to something no crash point reads: a test
    whose kill would never come fails at the start, not at its deadline."""
    armed = os.environ.get(ENV)
    if armed and ((m := _ARMED.fullmatch(armed)) is None or m["point"] not in POINTS):
        raise InvalidInput(ENV, f"expected <point>[:<n>] with a point of {sorted(POINTS)}, got {armed!r}")


def crash_point(point: str) -> None:
    """SIGKILL this process here if `ENV` arms ``point`` and this is its ``n``-th passage."""
    armed = os.environ.get(ENV)
    if not armed or (m := _ARMED.fullmatch(armed)) is None or m["point"] != point:
        return
    with _lock:
        _passed[point] += 1
        due = _passed[point] == int(m["nth"] or 1)
    if due:
        os.kill(os.getpid(), signal.SIGKILL)
