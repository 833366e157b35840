"""What an in-process model needs around ``generate``, written once for serving and training.

`TransformersBackend` serves with these functions, and the trainer samples through a
`TransformersBackend` built over its own LoRA model (`TransformersBackend.from_model`) and
scores against the ids `encode` gives; a policy is therefore trained on exactly the prompts,
sampling and stop handling it is served with::

    render(tokenizer, messages)        chat template; a final assistant message is a response prefix
    encode(tokenizer, prompts, dev)    prompt texts -> left-padded ids, as generation and scoring see them
    StopOnText(tokenizer, width, stop) stopping criterion: a row ends once its decoded reply holds a stop string
    first_stop(text, stop)             where the earliest stop string starts
    finish(tokenizer, ids, stop)       a generated row -> (ids as sampled, text, finish reason)
    load_pretrained(path, dtype=...)   (model, tokenizer) ready for all of the above

Stop strings are matched on the decoded reply, the way vLLM matches them, not on token
sequences: transformers' ``stop_strings`` precomputes a table from the vocabulary, and that
fails on word-level vocabularies (the tiny models the training tests use).

Nothing here imports torch or transformers at import time.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, NamedTuple

from memsdk.errors import PolicyUnavailable
from memsdk.llm.base import FinishReason, Message

__all__ = ["Finished", "StopOnText", "encode", "finish", "first_stop", "load_pretrained", "prepare_tokenizer", "render"]


def render(tokenizer: Any, messages: Sequence[Message]) -> str:
    """The exact prompt text generation starts from (a trainer scores log-probs against it).

    A final assistant message is a response prefix: the reply continues it, as with vLLM's
    ``continue_final_message``.
    """
    msgs = [dict(m) for m in messages]
    if msgs and msgs[-1]["role"] == "assistant":
        head: str = tokenizer.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True)
        return head + msgs[-1]["content"]
    whole: str = tokenizer.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True)
    return whole


def encode(tokenizer: Any, prompts: Sequence[str], device: Any = None) -> dict[str, Any]:
    """``input_ids`` and ``attention_mask`` [B, W], left-padded so every reply starts at column W.

    No special tokens are added: the chat template has already written them.
    """
    enc = tokenizer(list(prompts), return_tensors="pt", padding=True, add_special_tokens=False)
    return {k: v if device is None else v.to(device) for k, v in enc.items()}


def prepare_tokenizer(tokenizer: Any) -> Any:
    """Left padding (what `encode` relies on) and a pad token; SmolLM2's pad is its end token."""
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer


def first_stop(text: str, stop: Sequence[str]) -> int | None:
    """Where the earliest stop string starts in ``text``; None when there is none."""
    return min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=None)


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    text: str = tokenizer.decode(list(ids), skip_special_tokens=True)
    return text


class StopOnText:
    """A ``generate`` stopping criterion: a row is done once its decoded reply holds a stop string.

    ``width`` is the padded prompt width: the reply is everything after it.
    """

    def __init__(self, tokenizer: Any, width: int, stop: Sequence[str]) -> None:
        self.tokenizer, self.width, self.stop = tokenizer, width, tuple(stop)

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        texts = self.tokenizer.batch_decode(input_ids[:, self.width :], skip_special_tokens=True)
        return torch.tensor([first_stop(t, self.stop) is not None for t in texts], dtype=torch.bool, device=input_ids.device)


class Finished(NamedTuple):
    token_ids: list[int]  # as sampled: the end token kept when it was sampled
    text: str  # decoded, stop string and what follows it excluded
    finish_reason: FinishReason


def finish(tokenizer: Any, ids: Sequence[int], stop: Sequence[str]) -> Finished:
    """One generated row, with vLLM's conventions, from what ``generate`` wrote for it.

    Once a row is done, ``generate`` pads it while other rows go on. An end token ends the
    row and stays in its ids (it was sampled, and a trainer scores it). A stop string ends
    the text where it starts and the ids at the token that completed it, which is where
    `StopOnText` stopped the row; the padding after it is dropped even where it looks like an
    end token (SmolLM2 pads with its end token), since nothing sampled it.
    """
    row = list(ids)
    reason: FinishReason = "length"
    eos = tokenizer.eos_token_id
    if eos in row:
        row, reason = row[: row.index(eos) + 1], "stop"
    text = _decode(tokenizer, row)
    if first_stop(text, stop) is None:
        return Finished(row, text, reason)
    while len(row) > 1 and first_stop(_decode(tokenizer, row[:-1]), stop) is not None:
        row = row[:-1]
    text = _decode(tokenizer, row)
    return Finished(row, text[: first_stop(text, stop)], "stop")


def load_pretrained(path: str | os.PathLike[str], *, dtype: str = "float32", num_threads: int | None = None) -> tuple[Any, Any]:
    """(model, tokenizer) from a transformers folder, on the CPU, in eval mode (no dropout).

    Raises `PolicyUnavailable` when the folder does not hold a loadable model.
    """
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.set_flush_denormal(True)  # SmolLM2 decodes ~25x slower on CPU without it (docs/platform-notes.md)
    if num_threads:
        torch.set_num_threads(num_threads)
    try:
        tokenizer = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path), dtype=getattr(torch, dtype))
    except (OSError, ValueError) as exc:
        raise PolicyUnavailable(f"cannot load model from {path}: {exc}") from exc
    model.eval()
    return model, prepare_tokenizer(tokenizer)
