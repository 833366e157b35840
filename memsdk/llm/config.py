"""Value objects that configure the HTTP backend (after httpx's ``_config.py``).

    Timeout(connect=5, read=120)                 explicit per phase; read bounds one generation
    Limits(max_connections=16, max_concurrency=8) pool size and in-flight requests
    RetryPolicy(max_retries=2, ...)              which failures are retried and how long to wait
    CircuitBreaker(failures=5, cooldown_s=30)    stop calling a server that is down, for a while

Each has a module-level default (``DEFAULT_TIMEOUT``...). A float passed where a ``Timeout``
is expected means "this many seconds for every phase" (``Timeout.of``).
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = [
    "Timeout",
    "Limits",
    "RetryPolicy",
    "CircuitBreaker",
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


class CircuitBreaker:
    """Fails fast while a server is down, instead of paying timeouts and retries per request.

    After ``failures`` requests in a row ended with the server unreachable (connection
    errors and timeouts, after the retry policy's own retries), the breaker opens: requests
    fail at once for ``cooldown_s``. Then one request is let through (half-open): its success
    closes the breaker, its failure opens it for another cooldown. A response of any status
    is the server being up. Thread-safe; one breaker per backend.
    """

    def __init__(self, failures: int = 5, cooldown_s: float = 30.0, *, clock: Callable[[], float] = time.monotonic) -> None:
        if failures < 1 or cooldown_s <= 0:
            raise ValueError("a circuit breaker needs failures >= 1 and cooldown_s > 0")
        self.failures, self.cooldown_s, self._clock = failures, cooldown_s, clock
        self._lock = threading.Lock()
        self._failed = 0
        self._open_until: float | None = None
        self._probing = False

    def allow(self) -> float | None:
        """None if a request may go out now, else the seconds until the breaker half-opens."""
        with self._lock:
            if self._open_until is None:
                return None
            left = self._open_until - self._clock()
            if left > 0 or self._probing:
                return max(left, 0.0)
            self._probing = True  # the one request that finds out whether the server is back
            return None

    def succeeded(self) -> None:
        with self._lock:
            self._failed, self._open_until, self._probing = 0, None, False

    def failed(self) -> None:
        with self._lock:
            self._failed += 1
            if self._probing or self._failed >= self.failures:
                self._open_until, self._probing = self._clock() + self.cooldown_s, False
