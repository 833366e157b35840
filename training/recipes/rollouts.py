"""Where rollouts are sampled: in-process with the trained weights, or on a vLLM server.

In-process (CPU tests, small runs): the runtime's `TransformersBackend` over the live LoRA
model (`Policy.backend`) generates, so nothing needs syncing. vLLM (GPU runs): the server
samples with a runtime LoRA adapter that the trainer re-saves and reloads in place after
every update (``load_inplace``), so the next rollouts come from the updated policy; token
ids come back with ``return_token_ids`` and are scored in-process against the same rendered
prompt.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Protocol

from memsdk.llm.base import LLMBackend

from .config import RecipeConfig
from .policy import Policy

__all__ = ["RolloutEngine", "InProcessRollouts", "VLLMRollouts", "rollout_engine"]


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

    def sync(self, policy: Policy) -> None:
        """Make the next rollouts sample from ``policy``'s current weights."""
        ...


class InProcessRollouts:
    def __init__(self, policy: Policy) -> None:
        self.backend: LLMBackend = policy.backend()
        self.model: str | None = None
        self.base = policy.base_name

    def sync(self, policy: Policy) -> None:
        """Nothing to do: the backend generates with the live weights."""


class VLLMRollouts:
    def __init__(self, base_url: str, base_model: str, work_dir: Path, *, adapter_name: str = "training-policy") -> None:
        from memsdk.llm.openai_compat import OpenAICompatibleBackend

        self.backend = OpenAICompatibleBackend(base_url, model=base_model)
        self.model, self.base = adapter_name, base_model
        self._dir, self._loaded = Path(work_dir), False

    def sync(self, policy: Policy) -> None:
        # a fresh folder per sync: vLLM may still read the previous one while it reloads
        target = self._dir / "rollout-adapter.next"
        shutil.rmtree(target, ignore_errors=True)
        policy.save_adapter(target)
        final = self._dir / "rollout-adapter"
        shutil.rmtree(final, ignore_errors=True)
        target.rename(final)
        self.backend.load_lora_adapter(self.model, str(final.resolve()), replace=self._loaded)
        self._loaded = True


def rollout_engine(config: RecipeConfig, policy: Policy, work_dir: Path) -> RolloutEngine:
    if config.rollout_backend == "vllm":
        engine: RolloutEngine = VLLMRollouts(config.vllm_base_url or "", config.base_model, work_dir)
        engine.sync(policy)  # the untrained adapter (B = 0): identical to the base model
        return engine
    return InProcessRollouts(policy)
