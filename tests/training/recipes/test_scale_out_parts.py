"""The pieces a scaled-out run adds around the loop: rollouts spread over several vLLM
servers (`ServerPool`), the config switches of a GPU run, gradient checkpointing (the same
log-probs and gradients, recomputed), and the GPU check script, run here on the CPU."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import torch
from pydantic import ValidationError

from memsdk.llm.base import Choice, Completion, SamplingParams
from memsdk_training.recipes import LoRASettings, LoRAModel, RecipeConfig
from memsdk_training.recipes.rollouts import ServerPool

ROOT = Path(__file__).resolve().parents[3]
PARAMS = SamplingParams(max_tokens=1)


class _Server:
    """Answers every request with its own name; records the adapters loaded on it."""

    supports_schema = True

    def __init__(self, name: str) -> None:
        self.name, self.model, self.adapters, self.closed = name, "base", {}, False  # type: ignore[var-annotated]

    def _reply(self, text: str) -> Completion:
        return Completion(model=self.model, choices=[Choice(index=0, text=f"{self.name}:{text}", finish_reason="stop")])

    def chat(self, messages: Sequence[Any], *, params: SamplingParams, model: str | None = None, schema: Any = None) -> Completion:
        return self._reply(messages[-1]["content"])

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: Any = None) -> Completion:
        return self._reply(prompt)

    def chat_batch(self, conversations: Sequence[Sequence[Any]], *, params: SamplingParams, model: str | None = None, schema: Any = None) -> list[Completion]:
        return [self._reply(c[-1]["content"]) for c in conversations]

    def list_models(self) -> list[str]:
        return ["base", *self.adapters]

    def load_lora_adapter(self, name: str, path: str, *, replace: bool = False) -> None:
        assert replace or name not in self.adapters
        self.adapters[name] = path

    def unload_lora_adapter(self, name: str) -> None:
        del self.adapters[name]

    def close(self) -> None:
        self.closed = True


def _ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


def test_a_server_pool_spreads_requests_and_loads_adapters_on_every_server() -> None:
    servers = [_Server("a"), _Server("b"), _Server("c")]
    pool = ServerPool(servers, start=1)  # rank 1 of a data-parallel run starts at the second server
    assert [pool.chat(_ask("x"), params=PARAMS).choices[0].text[0] for _ in range(4)] == ["b", "c", "a", "b"]
    assert pool.complete("y", params=PARAMS).choices[0].text == "c:y"
    # a batch is split across every server and comes back in the input's order
    replies = pool.chat_batch([_ask(str(i)) for i in range(7)], params=PARAMS)
    assert [r.choices[0].text.split(":")[1] for r in replies] == [str(i) for i in range(7)]
    assert {r.choices[0].text[0] for r in replies} == {"a", "b", "c"}
    pool.load_lora_adapter("policy", "/tmp/adapter")
    pool.load_lora_adapter("policy", "/tmp/adapter2", replace=True)
    assert all(s.adapters == {"policy": "/tmp/adapter2"} for s in servers)
    servers[0].adapters["only-a"] = "/x"
    assert pool.list_models() == ["base", "policy"]  # what every server serves
    pool.close()
    assert all(s.closed for s in servers)
    with pytest.raises(ValueError, match="at least one server"):
        ServerPool([])


def test_the_config_takes_several_rollout_servers_and_refuses_checkpointing_with_dropout() -> None:
    config = RecipeConfig(rollout_backend="vllm", vllm_base_url="http://a/v1", vllm_base_urls=["http://b/v1", "http://a/v1"])
    assert config.rollout_servers == ["http://a/v1", "http://b/v1"]
    assert RecipeConfig(rollout_backend="vllm", vllm_base_urls=["http://b/v1"]).rollout_servers == ["http://b/v1"]
    with pytest.raises(ValidationError, match="needs vllm_base_url or vllm_base_urls"):
        RecipeConfig(rollout_backend="vllm")
    with pytest.raises(ValidationError, match="gradient_checkpointing needs lora.dropout 0"):
        RecipeConfig(gradient_checkpointing=True, lora=LoRASettings(dropout=0.1))


def test_gradient_checkpointing_gives_the_same_log_probs_and_gradients(tiny_model_dir: Path) -> None:
    lora = LoRASettings(rank=4, alpha=8, target_modules=("q_proj", "v_proj"))
    results = []
    for checkpointing in (False, True):
        torch.manual_seed(0)
        policy = LoRAModel.from_config(RecipeConfig(model_path=str(tiny_model_dir), num_threads=1, lora=lora, gradient_checkpointing=checkpointing))
        with torch.no_grad():  # B = 0 at init: give the LoRA a non-trivial value, the same in both
            for name, p in policy.model.named_parameters():
                if "lora_B" in name:
                    p.copy_(torch.linspace(-0.1, 0.1, p.numel()).view_as(p))
        prompt = policy.render([{"role": "user", "content": "memory changed fact alice likes tea op"}])
        scored = policy.score([prompt, prompt], [[1, 2, 3], [4, 5]])
        (scored.logp.sum()).backward()
        grads = {n: p.grad.clone() for n, p in policy.model.named_parameters() if p.grad is not None}
        assert not policy.model.training  # back in eval mode after the recomputing pass
        results.append((scored.logp.detach(), grads))
    (plain, plain_grads), (recomputed, recomputed_grads) = results
    torch.testing.assert_close(recomputed, plain)
    assert plain_grads.keys() == recomputed_grads.keys() and plain_grads
    for name in plain_grads:
        torch.testing.assert_close(recomputed_grads[name], plain_grads[name])


@pytest.mark.slow
def test_the_gpu_check_runs_its_checks_on_the_cpu_without_a_gpu() -> None:
    done = subprocess.run(["bash", "scripts/gpu_check.sh", "--seconds", "1"], cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "PYTHON": sys.executable, "HOME": str(Path.home())})  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    print(done.stdout)
    table = [line for line in done.stdout.splitlines() if line.startswith("| ") and not line.startswith("| check |")]
    assert "CUDA not available" in done.stdout
    assert len(table) == 5 and all("| pass |" in line for line in table)
    assert any(line.startswith("| ddp 2 x cpu |") for line in table)
