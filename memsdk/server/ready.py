"""``/healthz`` (the process is up) and ``/readyz`` (it can do its job now).

A client loads its models on first use: the embedder on the first embedding, a policy's
model on its first call. A server that said ready before them made its first ingest pay for
them (seconds), and a queue it replays after a crash waited behind them. `Readiness` warms
the client up in a thread as soon as the app is made (`MemoryClient.warm_up`: one turn and
one question through the pipelines, on an empty bank in memory), while the accepted
ingests drain from the start; ``/readyz`` answers 200 only once that is done and the store
answers a read.
"""

from __future__ import annotations

import logging
import threading
import time

from fastapi import APIRouter
from fastapi.responses import JSONResponse, Response

from memsdk.client import MemoryClient
from memsdk.errors import MemsdkError, PolicyError
from memsdk.server.problems import problem
from memsdk.types import Scope

__all__ = ["Readiness", "health_routes"]

log = logging.getLogger("memsdk.server")

#: the scope ``/readyz`` reads: no tenant can name it (every tenant's ids hold a "/")
_PROBE = Scope(run_id=".readyz")


class Readiness:
    """Whether ``client`` is warmed up: `start` runs `MemoryClient.warm_up` in a thread."""

    def __init__(self, client: MemoryClient) -> None:
        self.client = client
        self.warm_s: float | None = None
        self._failed: Exception | None = None
        self._done = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._warm, name="memsdk-warm-up", daemon=True).start()

    def _warm(self) -> None:
        started = time.perf_counter()
        try:
            self.client.warm_up()
        except PolicyError as exc:  # its backend is another service: each call meets it (its fallback, or a 502 / 503)
            log.warning("warming up: a policy's backend failed, its calls will fail or fall back the same way: %s", exc)
        except Exception as exc:  # a model that cannot load, a store that fails: every ingest would fail so
            log.error("warming up failed, /readyz stays 503: %r", exc, exc_info=not isinstance(exc, MemsdkError))
            self._failed = exc
        if self._failed is None:
            self.warm_s = time.perf_counter() - started
            log.info("warmed up in %.1f s: the embedder and the policies are loaded", self.warm_s)
        self._done.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the warm-up ended (done or failed); False on timeout."""
        return self._done.wait(timeout)

    def problem(self) -> Response | None:
        """Why the server is not ready (a 503 problem), or None when it is."""
        if not self._done.is_set():
            return problem(503, "NotReady", "loading the embedder and the policies")
        if self._failed is not None:
            return problem(503, type(self._failed).__name__, f"warming up failed: {self._failed}")
        try:
            self.client.list(scope=_PROBE, limit=1)
        except MemsdkError as exc:
            return problem(503, type(exc).__name__, str(exc))
        return None


def health_routes(readiness: Readiness) -> APIRouter:
    router = APIRouter(tags=["health"])

    @router.get("/healthz")
    def healthz() -> dict[str, str]:
        """The process is up."""
        return {"status": "ok"}

    @router.get("/readyz")
    def readyz() -> Response:
        """Ready for traffic: the embedder and the policies are loaded (a warm-up ran through
        them) and the store answers a read."""
        return readiness.problem() or JSONResponse({"status": "ready"})

    return router
