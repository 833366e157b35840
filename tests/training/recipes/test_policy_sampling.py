"""The training policy samples through the serving code: the same request through the runtime's
`TransformersBackend` (a folder it loaded itself) and through `LoRAModel.backend()` (the trainer's
peft model) gives the same token ids and text, and the policy scores those ids with the
log-probabilities the serving backend reported for them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from memsdk.errors import ClientClosed, Conflict, ModelNotFound
from memsdk.llm import SamplingParams
from memsdk_training.recipes import LoRASettings, LoRAModel, RecipeConfig

pytestmark = pytest.mark.slow

# a response prefix, a stop string the prefix makes likely within a few tokens, and every
# setting the serving backend samples with: a sampler that dropped one (the repetition
# penalty, say) would still agree on the others
MESSAGES = [
    {"role": "system", "content": "Extract the facts as JSON."},
    {"role": "user", "content": "I adopted a dog named Scout last week; my other dog Buddy loves him."},
    {"role": "assistant", "content": '{"facts": ["'},
]
PARAMS = SamplingParams(temperature=0.8, top_p=0.95, max_tokens=24, n=4, seed=1234, stop=('"',), repetition_penalty=1.3, logprobs=True)


@pytest.fixture(scope="module")
def policy(smollm2_dir: Path) -> LoRAModel:
    # the rank, alpha and targets of the `lora_adapter_dir` fixture, so its weights fit
    lora = LoRASettings(rank=8, alpha=16, target_modules=("q_proj", "k_proj", "v_proj", "o_proj"))
    return LoRAModel.from_config(RecipeConfig(model_path=str(smollm2_dir), num_threads=1, lora=lora))


def _sampled(completion: Any) -> list[tuple[list[int], str, str]]:
    return [(c.token_ids, c.text, c.finish_reason) for c in completion.choices]


def _check_scores(policy: LoRAModel, completion: Any) -> None:
    """The policy's log-probs of the sampled ids (at its temperature 1: the raw logits) are the
    ones the serving backend reported while it sampled them: same prompt ids, same weights."""
    prompt = policy.render(MESSAGES)
    ids = [c.token_ids for c in completion.choices]
    scored = policy.score([prompt] * len(ids), ids)
    for row, choice in enumerate(completion.choices):
        served = torch.tensor([lp.logprob for lp in choice.logprobs])
        torch.testing.assert_close(scored.logp[row, : len(ids[row])], served, atol=2e-3, rtol=0)


def test_the_policy_samples_exactly_what_the_serving_backend_samples(transformers_backend: Any, policy: LoRAModel, lora_adapter_dir: Path) -> None:
    assert policy.render(MESSAGES) == transformers_backend.render(MESSAGES)
    rollouts = policy.backend()

    # the adapter as the trainer initialises it (B = 0) against the plain served model, and the
    # trainer's adapter switched off: both are the base model
    served = transformers_backend.chat(MESSAGES, params=PARAMS)
    assert _sampled(rollouts.chat(MESSAGES, params=PARAMS)) == _sampled(served)
    assert _sampled(rollouts.chat(MESSAGES, params=PARAMS, model=policy.base_name)) == _sampled(served)
    assert any(c.finish_reason == "stop" and len(c.token_ids) < PARAMS.max_tokens for c in served.choices)  # the stop string fired
    assert len({len(c.token_ids) for c in served.choices}) > 1  # so finished rows were padded while others went on
    assert all('"' not in c.text for c in served.choices)
    _check_scores(policy, served)

    # trained weights: the published adapter served by name against the same weights in training
    policy.load_adapter_weights(lora_adapter_dir)
    transformers_backend.load_adapter("parity", lora_adapter_dir)
    try:
        tuned = transformers_backend.chat(MESSAGES, params=PARAMS, model="parity")
        assert _sampled(tuned) != _sampled(served)
        assert _sampled(rollouts.chat(MESSAGES, params=PARAMS)) == _sampled(tuned)
        _check_scores(policy, tuned)
    finally:
        transformers_backend.unload_adapter("parity")


def test_the_rollout_backend_leaves_the_trainers_model_to_the_trainer(policy: LoRAModel) -> None:
    rollouts = policy.backend()
    assert rollouts.model == policy.name and rollouts.list_models() == [policy.base_name, policy.name]
    with pytest.raises(Conflict):
        rollouts.unload_adapter(policy.name)
    with pytest.raises(ModelNotFound):
        rollouts.chat(MESSAGES, params=SamplingParams(max_tokens=2), model="no-such-model")
    trainable = [p.requires_grad for p in policy.model.parameters()]
    rollouts.chat(MESSAGES, params=SamplingParams(max_tokens=2))
    assert [p.requires_grad for p in policy.model.parameters()] == trainable
    rollouts.close()
    assert policy.model is not None  # closing the view leaves the model loaded
    with pytest.raises(ClientClosed):
        rollouts.chat(MESSAGES, params=SamplingParams(max_tokens=2))
    assert policy.backend().chat(MESSAGES, params=SamplingParams(max_tokens=2)).choices[0].token_ids
