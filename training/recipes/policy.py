"""The trained policy: a causal LM with a peft LoRA adapter, on one device, that both samples
rollouts and scores them.

    pi_theta  = base + LoRA (the only trainable weights)
    pi_ref    = the same model with the adapter disabled (``model.disable_adapter()``):
                the KL reference costs no second copy of the weights
    pi_old    = pi_theta as it was when the rollouts were sampled (scored before the update)

Scoring and sampling must see the same distribution, or the PPO ratio is off from the first
step: sampling at temperature T draws from softmax(z / T), so log-probabilities are taken
from z / T too (TRL does the same), and the prompt is exactly the text generation started
from (`render`, the in-process backend's rendering: chat template, then a final assistant
message as a response prefix).

`PolicyBackend` exposes the model through the runtime's `LLMBackend` protocol, so the
environments (ManagerEnv, EpisodeRunner) and the runtime's own policies roll out with the
weights being trained; ``model=<base name>`` routes to the base model (adapter off), which is
how a frozen LLM answerer shares the memory of the policy.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import torch

from memsdk.errors import InvalidInput, ModelNotFound
from memsdk.llm.base import Choice, Completion, Message, SamplingParams

from .config import RecipeConfig

__all__ = ["Generated", "Scored", "Policy", "PolicyBackend", "render_chat"]


def render_chat(tokenizer: Any, messages: Sequence[Message]) -> str:
    """Chat template with a generation prompt; a final assistant message is a response prefix.

    The same text `TransformersBackend.render` produces (a test checks they agree), so a
    rollout logged by the runtime scores against the prompt it was generated from.
    """
    msgs = [dict(m) for m in messages]
    if msgs and msgs[-1]["role"] == "assistant":
        return tokenizer.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True) + msgs[-1]["content"]
    return tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)


@dataclass(frozen=True)
class Generated:
    token_ids: list[int]  # as sampled, the end token included when it was sampled
    text: str  # decoded, stop string excluded
    finish_reason: str


class Scored(NamedTuple):
    logp: torch.Tensor  # [B, L] log pi(y_l | prompt, y_<l) at the sampling temperature; 0 where masked
    mask: torch.Tensor  # [B, L] 1 on completion tokens
    logits: torch.Tensor | None  # [B, L, V] temperature-scaled, when asked (entropy)
    hidden: torch.Tensor | None = None  # [B, L, H] final hidden state h_l whose logits predict token l, when asked (a value head)


class Policy:
    """Base model + LoRA on ``device``; `generate` samples, `score` gives per-token log-probs."""

    def __init__(self, model: Any, tokenizer: Any, *, device: str, temperature: float, name: str = "policy") -> None:
        self.model, self.tokenizer, self.device = model, tokenizer, torch.device(device)
        self.temperature, self.name = temperature, name

    @classmethod
    def from_config(cls, config: RecipeConfig) -> "Policy":
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        from peft import LoraConfig, get_peft_model
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if config.device == "cpu":
            torch.set_flush_denormal(True)  # SmolLM2 decodes ~25x slower on CPU without it (NOTES.md)
            if config.num_threads:
                torch.set_num_threads(config.num_threads)
        path = config.model_path
        if path is None:
            from memsdk.llm.models import ensure_smollm2

            path = str(ensure_smollm2())
        tokenizer = AutoTokenizer.from_pretrained(path)
        tokenizer.padding_side = "left"
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
        base = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, config.dtype))
        lora = LoraConfig(
            r=config.lora.rank, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules), task_type="CAUSAL_LM",
        )  # fmt: skip
        model = get_peft_model(base, lora).to(config.device)
        model.eval()  # no dropout anywhere: rollouts, old and new log-probs come from one function
        return cls(model, tokenizer, device=config.device, temperature=config.temperature)

    # -- weights ---------------------------------------------------------------------------
    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    def save_adapter(self, path: str | os.PathLike[str]) -> Path:
        """A peft adapter folder (adapter_config.json + safetensors): what vLLM and the client load."""
        self.model.save_pretrained(str(path))
        return Path(path)

    def load_adapter_weights(self, path: str | os.PathLike[str]) -> None:
        """Copy a saved adapter's weights into the live LoRA layers (warm start, resume)."""
        from peft import set_peft_model_state_dict
        from safetensors.torch import load_file

        state = load_file(str(Path(path) / "adapter_model.safetensors"), device=str(self.device))
        result = set_peft_model_state_dict(self.model, state)
        if getattr(result, "unexpected_keys", None):
            raise ValueError(f"adapter at {path} does not fit this model: {result.unexpected_keys[:3]}")

    def adapter_state(self) -> dict[str, torch.Tensor]:
        from peft import get_peft_model_state_dict

        return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}

    # -- text ------------------------------------------------------------------------------
    def render(self, messages: Sequence[Message]) -> str:
        return render_chat(self.tokenizer, messages)

    def _encode(self, prompts: Sequence[str]) -> dict[str, torch.Tensor]:
        enc = self.tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
        return {k: v.to(self.device) for k, v in enc.items()}

    # -- sampling --------------------------------------------------------------------------
    @torch.no_grad()
    def generate(self, prompts: Sequence[str], params: SamplingParams, *, use_adapter: bool = True) -> list[list[Generated]]:
        """``params.n`` samples per prompt ([prompt][sample]); greedy when temperature is 0."""
        tok = self.tokenizer
        enc = self._encode(prompts)
        sampling = params.temperature > 0
        kwargs: dict[str, Any] = dict(
            max_new_tokens=params.max_tokens, do_sample=sampling, num_return_sequences=params.n, top_k=None,
            pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id,
            temperature=params.temperature if sampling else None, top_p=params.top_p if sampling else None,
        )  # fmt: skip
        if params.stop:
            kwargs.update(stopping_criteria=_stop_on_text(tok, enc["input_ids"].shape[1], params.stop))
        if params.seed is not None:
            torch.manual_seed(params.seed)
        with self.model.disable_adapter() if not use_adapter else nullcontext():
            sequences = self.model.generate(**enc, **kwargs)  # [B x n, W + T]
        new = sequences[:, enc["input_ids"].shape[1] :].tolist()
        out = [self._finish(ids, params.stop) for ids in new]
        return [out[b * params.n : (b + 1) * params.n] for b in range(len(prompts))]

    def _finish(self, ids: list[int], stop: Sequence[str]) -> Generated:
        eos, pad = self.tokenizer.eos_token_id, self.tokenizer.pad_token_id
        finish = "length"
        if eos in ids:  # keep the end token (it was sampled and is scored), drop the padding after it
            ids, finish = ids[: ids.index(eos) + 1], "stop"
        elif pad is not None and pad != eos:
            ids = [i for i in ids if i != pad]
        text = self.tokenizer.decode(ids, skip_special_tokens=True)
        for s in stop:
            if s in text:
                text, finish = text[: text.index(s)], "stop"
        return Generated(ids, text, finish)

    # -- scoring ---------------------------------------------------------------------------
    def score(
        self, prompts: Sequence[str], completions: Sequence[Sequence[int]], *, reference: bool = False, with_logits: bool = False,
        with_hidden: bool = False,
    ) -> Scored:  # fmt: skip
        """log pi(completion tokens | prompt) per token, under pi_theta or (``reference``) pi_ref.

        Prompts are left-padded and completions right-padded, so every completion starts at
        the same column W; positions come from the attention mask, as generate computes them
        for left padding. Only the logits of the last L + 1 columns are materialised.

        ``with_hidden`` also returns the last layer's (post-norm) hidden states of the columns
        W - 1 + l, from the same forward pass: the state s_l a value head reads V(s_l) from is
        everything before token l, exactly what the logits predicting token l see.
        """
        enc = self._encode(prompts)
        length = max(1, max(len(c) for c in completions))
        pad = self.tokenizer.pad_token_id
        comp = torch.full((len(completions), length), pad, dtype=torch.long, device=self.device)  # [B, L]
        mask = torch.zeros((len(completions), length), dtype=torch.long, device=self.device)  # [B, L]
        for row, ids in enumerate(completions):
            comp[row, : len(ids)] = torch.tensor(list(ids), dtype=torch.long)
            mask[row, : len(ids)] = 1
        input_ids = torch.cat([enc["input_ids"], comp], dim=1)  # [B, W + L]
        attention = torch.cat([enc["attention_mask"], mask], dim=1)  # [B, W + L]
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # [B, W + L]
        with self.model.disable_adapter() if reference else nullcontext():
            out = self.model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=length + 1, output_hidden_states=with_hidden
            )  # fmt: skip
        logits = out.logits[:, :-1].float() / self.temperature  # [B, L, V]: column W - 1 + l predicts token l
        logp = logits.log_softmax(-1).gather(-1, comp.unsqueeze(-1)).squeeze(-1) * mask  # [B, L]
        hidden = out.hidden_states[-1][:, -(length + 1) : -1] if with_hidden else None  # [B, L, H]: the same columns
        return Scored(logp, mask, logits if with_logits else None, hidden)

    def backend(self) -> "PolicyBackend":
        return PolicyBackend(self)


def _stop_on_text(tokenizer: Any, width: int, stop: Sequence[str]) -> Any:
    """Stop a row once its decoded reply contains a stop string.

    Decoding the reply is tokenizer-agnostic; transformers' ``stop_strings`` precomputes a
    table from the vocabulary and fails on word-level vocabularies (the test models).
    """
    from transformers import StoppingCriteria, StoppingCriteriaList

    class StopOnText(StoppingCriteria):
        def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor, **kwargs: Any) -> torch.Tensor:
            texts = tokenizer.batch_decode(input_ids[:, width:], skip_special_tokens=True)
            return torch.tensor([any(s in t for s in stop) for t in texts], dtype=torch.bool, device=input_ids.device)

    return StoppingCriteriaList([StopOnText()])


class PolicyBackend:
    """The `LLMBackend` protocol over a `Policy`: rollouts through the weights being trained.

    ``model=None`` or the policy's name samples pi_theta; ``model=base_name`` samples the
    base model with the adapter disabled. No constrained decoding (like the in-process
    backend): policies send their response prefix and stop string instead.
    """

    supports_schema = False

    def __init__(self, policy: Policy, *, base_name: str = "base") -> None:
        self.policy, self.base_name = policy, base_name

    @property
    def model(self) -> str:
        return self.policy.name

    def _use_adapter(self, model: str | None) -> bool:
        if model in (None, self.policy.name):
            return True
        if model == self.base_name:
            return False
        raise ModelNotFound(model, f"model {model!r} not found; serving {self.policy.name!r} and {self.base_name!r}")

    def complete_batch(self, prompts: Sequence[str], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> list[Completion]:
        if schema is not None:
            raise InvalidInput("schema", "PolicyBackend has no constrained decoding (supports_schema is False)")
        use_adapter = self._use_adapter(model)
        groups = self.policy.generate(prompts, params, use_adapter=use_adapter)
        name = self.policy.name if use_adapter else self.base_name
        return [
            Completion(
                model=name,
                choices=[Choice(index=j, text=g.text, token_ids=g.token_ids, finish_reason=g.finish_reason) for j, g in enumerate(group)],
                completion_tokens=sum(len(g.token_ids) for g in group),
            )
            for group in groups
        ]

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self.complete_batch([prompt], params=params, model=model, schema=schema)[0]

    def chat_batch(self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> list[Completion]:
        return self.complete_batch([self.policy.render(m) for m in conversations], params=params, model=model, schema=schema)

    def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self.chat_batch([messages], params=params, model=model, schema=schema)[0]

    def close(self) -> None:
        """The policy belongs to the recipe; closing the backend leaves it loaded."""
