"""Where rollouts are sampled: in-process with the trained weights, or on a vLLM server.

In-process (CPU tests, small runs): the runtime's `TransformersBackend` over the live LoRA
model (`LoRAModel.backend`) generates, so nothing needs syncing. vLLM (GPU runs): the server
samples with a runtime LoRA adapter that the trainer re-saves and reloads in place after
every update (``load_inplace``), so the next rollouts come from the updated policy; token
ids come back with ``return_token_ids`` and are scored in-process against the same rendered
prompt.

Several vLLM servers (``vllm_base_urls``, replicas of one base model): a `ServerPool`
spreads the requests across them (round robin per call; rank r of a data-parallel run
starts at server r), and every sync reloads the adapter on each server. Only rank 0 saves
and reloads (`training.distributed`); the other ranks wait until every server serves the
new weights.
"""

from __future__ import annotations

import itertools
import shutil
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol

from memsdk.llm.base import Completion, LLMBackend, LoRABackend, Message, SamplingParams

from ..distributed import World
from .config import RecipeConfig
from .lora_model import LoRAModel

__all__ = ["RolloutEngine", "InProcessRollouts", "ServerPool", "VLLMRollouts", "rollout_engine"]


class RolloutEngine(Protocol):
    base: str  # the name of the frozen base model (a frozen LLM answerer uses it)

    @property
    def backend(self) -> LLMBackend:
        """Where rollouts are sampled (read-only here: an engine may hold a narrower kind)."""
        ...

    @property
    def model(self) -> str | None:
        """The name the trained policy is routed by (PolicyConfig.model); None: the backend's default."""
        ...

    def sync(self, policy: LoRAModel) -> None:
        """Make the next rollouts sample from ``policy``'s current weights."""
        ...


class InProcessRollouts:
    def __init__(self, policy: LoRAModel) -> None:
        self.backend: LLMBackend = policy.backend()
        self.model: str | None = None
        self.base = policy.base_name

    def sync(self, policy: LoRAModel) -> None:
        """Nothing to do: the backend generates with the live weights."""


class ServerPool:
    """A `LoRABackend` over several servers of one base model: each call goes to the next
    server in turn (a batch is split across all of them, sent at once); adapters are loaded
    on every server. Thread-safe, as the servers' backends are."""

    def __init__(self, servers: Sequence[LoRABackend], *, start: int = 0) -> None:
        if not servers:
            raise ValueError("a ServerPool needs at least one server")
        self.servers = list(servers)
        self._turn = itertools.count(start)
        self._lock = threading.Lock()

    def _next(self) -> LoRABackend:
        with self._lock:
            return self.servers[next(self._turn) % len(self.servers)]

    @property
    def model(self) -> str:
        return self.servers[0].model

    @property
    def supports_schema(self) -> bool:
        return all(s.supports_schema for s in self.servers)

    def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self._next().chat(messages, params=params, model=model, schema=schema)

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self._next().complete(prompt, params=params, model=model, schema=schema)

    def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None,
        schema: dict[str, Any] | None = None,
    ) -> list[Completion]:  # fmt: skip
        """Server i of n gets conversations i, i + n, ...; the replies come back in the input's order."""
        n = min(len(self.servers), len(conversations))
        if n <= 1:
            return self._next().chat_batch(conversations, params=params, model=model, schema=schema)
        servers = [self._next() for _ in range(n)]
        with ThreadPoolExecutor(n) as pool:
            parts = list(pool.map(lambda i: servers[i].chat_batch(conversations[i::n], params=params, model=model, schema=schema), range(n)))
        out: list[Completion | None] = [None] * len(conversations)
        for i, part in enumerate(parts):
            out[i::n] = part
        return [c for c in out if c is not None]

    def list_models(self) -> list[str]:
        """The models every server serves."""
        served = [set(s.list_models()) for s in self.servers]
        return sorted(set.intersection(*served))

    def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        for server in self.servers:
            server.load_lora_adapter(name, path, replace=replace)

    def unload_lora_adapter(self, name: str) -> None:
        for server in self.servers:
            server.unload_lora_adapter(name)

    def close(self) -> None:
        for server in self.servers:
            server.close()


class VLLMRollouts:
    def __init__(
        self, base_urls: Sequence[str], base_model: str, work_dir: Path, *, adapter_name: str = "training-policy", world: World = World()
    ) -> None:  # fmt: skip
        from memsdk.llm.openai_compat import OpenAICompatibleBackend

        servers = [OpenAICompatibleBackend(url, model=base_model) for url in base_urls]
        self.backend: LoRABackend = servers[0] if len(servers) == 1 else ServerPool(servers, start=world.rank)
        self.model, self.base = adapter_name, base_model
        self._dir, self._world = Path(work_dir), world

    def sync(self, policy: LoRAModel) -> None:
        """Rank 0 saves the adapter and reloads it on every server; every rank returns once they serve it."""
        if self._world.main:
            # a fresh folder per sync: vLLM may still read the previous one while it reloads
            target = self._dir / "rollout-adapter.next"
            shutil.rmtree(target, ignore_errors=True)
            policy.save_adapter(target)
            final = self._dir / "rollout-adapter"
            shutil.rmtree(final, ignore_errors=True)
            target.rename(final)
            # in place whether or not a server holds it yet: one that served a killed run still does
            self.backend.load_lora_adapter(self.model, str(final.resolve()), replace=True)
        self._world.barrier()


def rollout_engine(config: RecipeConfig, policy: LoRAModel, work_dir: Path, world: World = World()) -> RolloutEngine:
    if config.rollout_backend == "vllm":
        engine: RolloutEngine = VLLMRollouts(config.rollout_servers, config.base_model, work_dir, world=world)
        engine.sync(policy)  # the untrained adapter (B = 0): identical to the base model
        return engine
    return InProcessRollouts(policy)
