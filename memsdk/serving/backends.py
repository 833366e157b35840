"""The LLM backends of one client: where each role's requests go (`Endpoint`), and one
backend per endpoint, made on first use and shared by the roles that name it (`Backends`).
Each twin says how a backend is made, blocking or async (``_make_backend``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from memsdk.config import ClientConfig
from memsdk.config.roles import LLMSpec
from memsdk.llm.base import AsyncLLMBackend, LLMBackend

__all__ = ["B", "Backends", "Endpoint"]

#: the kind of backend a client makes and switches adapters on: a blocking `LoRABackend`
#: (`MemoryClient`) or an `AsyncLoRABackend` (`AsyncMemoryClient`)
B = TypeVar("B", bound=LLMBackend | AsyncLLMBackend)


@dataclass(frozen=True)
class Endpoint:
    """Where an LLM role's requests go; roles with equal endpoints share one backend."""

    base_url: str | None  # None: the model in this process
    model: str
    api_key: str | None
    timeout_s: float


class Backends(Generic[B]):
    """The LLM backends of one client: the default (injected, or made from the config) and
    one per other endpoint a role names, each made on first use and shared by the roles
    that name it. Only the ones made here are closed with the client."""

    def __init__(self, config: ClientConfig, make: Callable[[Endpoint], B], injected: B | None = None) -> None:
        self._config, self._make, self._injected = config, make, injected
        self._made: dict[Endpoint, B] = {}
        self._lock = threading.Lock()

    def _default_endpoint(self) -> Endpoint:
        c = self._config
        return Endpoint(c.llm_base_url, c.model, c.llm_api_key, c.llm_timeout_s)

    def default(self) -> B:
        if self._injected is not None:
            return self._injected
        return self._get(self._default_endpoint())

    def for_spec(self, spec: LLMSpec) -> B:
        if spec.backend is not None:
            # a user's own object (the spec holds Any): the client uses it as the kind of
            # backend it makes itself
            backend: B = spec.backend
            return backend
        if not spec.overrides_endpoint:
            return self.default()
        c = self._config
        url = None if spec.in_process else (spec.base_url or c.llm_base_url)
        # the client's API key goes only to the client's server, never to another one
        key = spec.api_key if spec.api_key is not None else (c.llm_api_key if url == c.llm_base_url else None)
        return self._get(Endpoint(url, spec.model or c.model, key, spec.timeout_s or c.llm_timeout_s))

    def _get(self, endpoint: Endpoint) -> B:
        with self._lock:
            if endpoint not in self._made:
                self._made[endpoint] = self._make(endpoint)
            return self._made[endpoint]

    def made(self) -> list[B]:
        with self._lock:
            return list(self._made.values())

    @property
    def injected(self) -> bool:
        return self._injected is not None

    def made_default(self) -> B | None:
        """The default backend if it exists (injected or already made), else None."""
        if self._injected is not None:
            return self._injected
        return self._made.get(self._default_endpoint())
