"""Value objects that configure the HTTP backend (after httpx's ``_config.py``).

    Timeout(connect=5, read=120)                 explicit per phase; read bounds one generation
    Limits(max_connections=16, max_concurrency=8) pool size and in-flight requests
    RetryPolicy(max_retries=2, ...)              which failures are retried and how long to wait

Each has a module-level default (``DEFAULT_TIMEOUT``...). A float passed where a ``Timeout``
is expected means "this many seconds for every phase" (``Timeout.of``).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

__all__ = [
    "Timeout",
    "Limits",
    "RetryPolicy",
    "TimeoutTypes",
    "DEFAULT_TIMEOUT",
    "DEFAULT_LIMITS",
    "DEFAULT_RETRY",
]


@dataclass(frozen=True)
class Timeout:
    """Seconds per phase of one HTTP attempt; ``None`` disables that bound."""

    connect: float | None = 5.0
    read: float | None = 120.0  # one whole generation: a CPU server decodes ~20 tok/s
    write: float | None = 10.0
    pool: float | None = 10.0  # waiting for a free pooled connection

    @classmethod
    def of(cls, value: "TimeoutTypes") -> "Timeout":
        if isinstance(value, Timeout):
            return value
        return cls(connect=value, read=value, write=value, pool=value)

    def to_httpx(self) -> "object":
        import httpx

        return httpx.Timeout(connect=self.connect, read=self.read, write=self.write, pool=self.pool)


TimeoutTypes = Timeout | float | None


@dataclass(frozen=True)
class Limits:
    """Connection pool size and the cap on concurrent requests from one backend object."""

    max_connections: int = 16
    max_keepalive_connections: int = 8
    keepalive_expiry: float = 30.0
    max_concurrency: int = 8  # a semaphore around each request; excess callers wait

    def to_httpx(self) -> "object":
        import httpx

        return httpx.Limits(
            max_connections=self.max_connections,
            max_keepalive_connections=self.max_keepalive_connections,
            keepalive_expiry=self.keepalive_expiry,
        )


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with capped exponential backoff and jitter (openai-python's rules).

    Retried: connection errors, connect/pool timeouts, and the statuses in ``retry_statuses``.
    Read timeouts are not retried by default: the server may still be generating, and a
    retry would double its load exactly when it is overloaded.
    """

    max_retries: int = 2
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    jitter: float = 0.25  # the delay is scaled by a random factor in [1 - jitter, 1]
    retry_statuses: frozenset[int] = field(default_factory=lambda: frozenset({408, 409, 429, 500, 502, 503, 504}))
    max_retry_after_s: float = 60.0  # a longer Retry-After is not honoured: give up instead
    retry_read_timeouts: bool = False

    def backoff(self, retries_done: int, retry_after_s: float | None = None, rng: random.Random | None = None) -> float:
        """Seconds to wait before retry number ``retries_done + 1``."""
        if retry_after_s is not None and 0 <= retry_after_s <= self.max_retry_after_s:
            return retry_after_s
        delay = min(self.initial_backoff_s * 2.0**retries_done, self.max_backoff_s)
        return delay * (1.0 - self.jitter * (rng or random).random())


DEFAULT_TIMEOUT = Timeout()
DEFAULT_LIMITS = Limits()
DEFAULT_RETRY = RetryPolicy()
