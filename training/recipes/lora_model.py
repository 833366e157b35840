"""The trained model, pi_theta: a causal LM with a peft LoRA adapter, on one device, that both samples
rollouts and scores them.

    pi_theta  = base + LoRA (the only trainable weights)
    pi_ref    = the same model with the adapter disabled (``model.disable_adapter()``):
                the KL reference costs no second copy of the weights
    pi_old    = pi_theta as it was when the rollouts were sampled (scored before the update)

Scoring and sampling must see the same distribution, or the PPO ratio is off from the first
step: sampling at temperature T draws from softmax(z / T), so log-probabilities are taken
from z / T too (TRL does the same), and the prompt is exactly the text generation started
from, encoded the same way (`memsdk.llm.inprocess`: chat template with a final assistant
message as a response prefix, left-padded ids).

Sampling is the runtime's: `backend` is a `TransformersBackend` over this very peft model
(`TransformersBackend.from_model`), so rollouts go through the code that serves the
published adapter (rendering, stop strings, end tokens, seeding), and the environments
(ManagerEnv, EpisodeRunner) and the runtime's own policies roll out with the weights being
trained. ``model=<name>`` (or None) samples pi_theta; ``model=<base name>`` turns the adapter
off, which is how a frozen LLM answerer shares the memory of the policy.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch

from memsdk.llm import inprocess
from memsdk.llm.base import Message
from memsdk.llm.transformers_backend import TransformersBackend

from .config import RecipeConfig

__all__ = ["Scored", "LoRAModel"]


@contextmanager
def _train_mode(model: Any, on: bool) -> Iterator[None]:
    if not on:
        yield
        return
    model.train()
    try:
        yield
    finally:
        model.eval()


class Scored(NamedTuple):
    logp: torch.Tensor  # [B, L] log pi(y_l | prompt, y_<l) at the sampling temperature; 0 where masked
    mask: torch.Tensor  # [B, L] 1 on completion tokens
    logits: torch.Tensor | None  # [B, L, V] temperature-scaled, when asked (entropy)
    hidden: torch.Tensor | None = None  # [B, L, H] final hidden state h_l whose logits predict token l, when asked (a value head)


class LoRAModel:
    """Base model + LoRA on ``device``; `backend` samples, `score` gives per-token log-probs."""

    def __init__(
        self, model: Any, tokenizer: Any, *, device: str, temperature: float, name: str = "policy", base_name: str = "base",
        checkpointing: bool = False,
    ) -> None:  # fmt: skip
        self.model, self.tokenizer, self.device = model, inprocess.prepare_tokenizer(tokenizer), torch.device(device)
        self.temperature, self.name, self.base_name = temperature, name, base_name
        self.checkpointing = checkpointing

    @classmethod
    def from_config(cls, config: RecipeConfig) -> "LoRAModel":
        path = config.model_path
        if path is None:
            from memsdk.llm.models import ensure_smollm2

            path = str(ensure_smollm2())
        base, tokenizer = inprocess.load_pretrained(path, dtype=config.dtype, num_threads=config.num_threads)
        from peft import LoraConfig, get_peft_model  # after the load, which sets HF_HUB_OFFLINE before the hub is imported
        lora = LoraConfig(
            r=config.lora.rank, lora_alpha=config.lora.alpha, lora_dropout=config.lora.dropout,
            target_modules=list(config.lora.target_modules), task_type="CAUSAL_LM",
        )  # fmt: skip
        model = get_peft_model(base, lora).to(config.device)
        model.eval()  # no dropout anywhere: rollouts, old and new log-probs come from one function
        if config.gradient_checkpointing:
            # non-reentrant: the frozen embeddings' outputs need no requires_grad hook for the LoRA to get gradients
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        return cls(model, tokenizer, device=config.device, temperature=config.temperature, checkpointing=config.gradient_checkpointing)

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
        unexpected = list(getattr(result, "unexpected_keys", None) or [])  # peft returns torch's load result
        if unexpected:
            raise ValueError(f"adapter at {path} does not fit this model: {unexpected[:3]}")

    def adapter_state(self) -> dict[str, torch.Tensor]:
        from peft import get_peft_model_state_dict

        return {k: v.detach().clone() for k, v in get_peft_model_state_dict(self.model).items()}

    # -- sampling: the runtime's in-process backend over these weights ----------------------
    def render(self, messages: Sequence[Message]) -> str:
        return inprocess.render(self.tokenizer, messages)

    def backend(self) -> TransformersBackend:
        """The `LLMBackend` rollouts sample from: ``name`` (the default) is pi_theta, ``base_name`` pi_ref.

        A view over the live model: it sees every update without a sync, and closing it
        leaves the model loaded.
        """
        return TransformersBackend.from_model(self.model, self.tokenizer, served_model_name=self.base_name, adapter_name=self.name)

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
        enc = inprocess.encode(self.tokenizer, prompts, self.device)
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
        # transformers recomputes checkpointed layers only in train mode; the config refuses
        # LoRA dropout with checkpointing, so train mode computes the same function as eval
        recompute = self.checkpointing and torch.is_grad_enabled()
        with self.model.disable_adapter() if reference else nullcontext(), _train_mode(self.model, recompute):
            out = self.model(
                input_ids=input_ids, attention_mask=attention, position_ids=positions, logits_to_keep=length + 1, output_hidden_states=with_hidden
            )  # fmt: skip
        logits = out.logits[:, :-1].float() / self.temperature  # [B, L, V]: column W - 1 + l predicts token l
        logp = logits.log_softmax(-1).gather(-1, comp.unsqueeze(-1)).squeeze(-1) * mask  # [B, L]
        hidden = out.hidden_states[-1][:, -(length + 1) : -1] if with_hidden else None  # [B, L, H]: the same columns
        return Scored(logp, mask, logits if with_logits else None, hidden)
