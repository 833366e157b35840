"""Real rollouts: SmolLM2 in-process samples manager outputs for a LoCoMo train state (one:
the suite's time limit; what varies between states is the model's numerics, not the code path)."""

from __future__ import annotations

import itertools
import time

import pytest

from memsdk.llm.base import SamplingParams
from memsdk.policies import ExtractiveAnswerer, LLMManager
from memsdk_training.env import EnvConfig, ManagerEnv, locomo_states

pytestmark = [pytest.mark.slow, pytest.mark.locomo]


def test_smollm2_rollouts_on_a_locomo_train_state(transformers_backend) -> None:
    from memsdk.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    env = ManagerEnv(LLMManager(transformers_backend), ExtractiveAnswerer(), embedder, EnvConfig(metric="f1"))
    params = SamplingParams(temperature=0.7, n=2, max_tokens=96, seed=0, logprobs=True)
    states = list(itertools.islice(locomo_states(embedder, split="train"), 1))

    for state in states:
        started = time.perf_counter()
        group = env.sample_group(state, params, seed=0)
        print(f"\n{state.key}: {len(state.bank.records())} memories, {len(group.state.qa)} QA, {time.perf_counter() - started:.1f} s")
        for i, rollout in enumerate(group.rollouts):
            r = rollout.result
            flag = "parse-failure" if r.parse_failed else f"{len(r.ops)} ops" + (f", rejected {list(r.rejected)}" if r.rejected else "")
            print(f"  o{i} reward={r.reward:.3f} ({flag}) answers={[a.prediction for a in r.answers]} output={rollout.output[:120]!r}")
            assert 0.0 <= r.reward <= 1.0
            assert rollout.token_ids and rollout.logprobs and len(rollout.logprobs) == len(rollout.token_ids)
            assert r.bank.violations() == []
            assert len(r.bank.records()) >= len(state.bank.records()) - 1  # the guard allows one DELETE at most
        assert len(group.rollouts) == 2 and all(len(r.result.answers) == len(group.state.qa) for r in group.rollouts)
