"""The forget reader that reads both texts at once: MiniLM with a LoRA adapter and two heads.

The first forget heads (`memsdk.pipeline.forget_head`) decide from vectors made apart: the
turn's embedding for the intent, the cosine of (description, memory) and a few typed features
for relevance. Two texts about one topic in different words ("drop everything about my
divorce" and "the lawyer says Paul gets the house") are far apart as vectors, and a memory
about a neighbouring topic (a friend's divorce) is close. A cross-encoder reads "request
[SEP] memory" through MiniLM's attention, word against word, as the pair manager's does
(`memsdk.policies.cross_encoder`).

One adapter, two linear layers over the mean-pooled tokens:

    intent      the turn alone -> other / forget / refuse (`forget_head.INTENTS`), asked only
                of turns whose words can be about keeping or removing something (``look_for``,
                a data-file pattern), so chat pays no forward pass
    relevance   "request [SEP] memory" -> P(the memory is about what the request wants
                forgotten); the request is the whole turn, or the app's description

A version's folder (``memsdk/data/forget-v2/``): ``manifest.json`` (format `FORMAT`, the LoRA
shape, the thresholds, what they were chosen on, where the training text came from) and
``cross.npz`` (the adapter and the two layers). Trained by
``training/recipes/forget_cross.py``. The model is built on first use, once, under a lock,
and served on one torch thread as the embedder is.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from memsdk.effects import Call, Steps
from memsdk.embedding.minilm import torch_threads
from memsdk.embedding import Embedder
from memsdk.pipeline.forget_head import INTENTS, ForgetReader, ForgetReading, intent_named, packaged_head
from memsdk.policies.cross_encoder import AdaptedMiniLM, LoraSpec, pooled
from memsdk.types import MemoryRecord, split_header

__all__ = ["FORMAT", "WEIGHTS", "INTENT", "RELEVANCE", "ForgetCross", "CrossForgetReader", "packaged_cross", "packaged_reader", "DEFAULT_CROSS_DIR"]

FORMAT = "memsdk-forget-cross/1"
WEIGHTS = "cross.npz"
#: the two linear layers' names in ``cross.npz`` (``<name>.weight``, ``<name>.bias``)
INTENT, RELEVANCE = "intent", "relevance"
DEFAULT_CROSS_DIR = Path(__file__).resolve().parent.parent / "data" / "forget-v2"
#: memories per forward pass when reading a request's candidates
_BATCH = 32


class ForgetCross(AdaptedMiniLM):
    """The adapter and the two heads of one version (module docstring)."""

    layers = (INTENT, RELEVANCE)

    def __init__(
        self, arrays: Mapping[str, np.ndarray], lora: LoraSpec, *, look_for: str, intent_at: float, relevance_at: float, embedder: str,
        version: str = "forget-v2", max_length: int = 128, threads: int | None = 1, base: str | os.PathLike[str] | None = None,
    ) -> None:
        """``embedder``: the name of the embedder whose weights the adapter adapts (MiniLM's);
        ``base``: where those weights are (None: the installed MiniLM)."""
        super().__init__(arrays, lora, max_length=max_length, threads=threads, base=base)
        for name, outputs in ((INTENT, len(INTENTS)), (RELEVANCE, 2)):
            if arrays[f"{name}.weight"].shape[0] != outputs:
                raise ValueError(f"a forget cross-encoder needs {name!r} weights with {outputs} outputs")
        self.version, self.embedder = version, embedder
        self.look_for = re.compile(look_for, re.I)
        self.intent_at, self.relevance_at = intent_at, relevance_at

    def intent_probs(self, texts: Sequence[str]) -> np.ndarray:
        """[n, len(INTENTS)] for n turns."""
        import torch

        tokenizer, encoder, layers = self._load()
        intent = layers[INTENT]
        # one call at a time: a fast tokenizer shared by threads raises "Already borrowed"
        with self._calls, torch_threads(self.threads), torch.inference_mode():
            probs: np.ndarray = torch.softmax(intent(pooled(tokenizer, encoder, texts, max_length=self.max_length)), dim=1).double().numpy()
        return probs

    def relevance_probs(self, requests: Sequence[str], memories: Sequence[str]) -> np.ndarray:
        """[n] P(about) of n (request, memory) pairs."""
        if not memories:
            return np.zeros(0)
        import torch

        tokenizer, encoder, layers = self._load()
        relevance = layers[RELEVANCE]
        out = []
        with self._calls, torch_threads(self.threads), torch.inference_mode():
            for i in range(0, len(memories), _BATCH):
                hidden = pooled(tokenizer, encoder, requests[i : i + _BATCH], memories[i : i + _BATCH], max_length=self.max_length)
                out.append(torch.softmax(relevance(hidden), dim=1)[:, 1].double().numpy())
        return np.concatenate(out)

    def save(self, folder: str | os.PathLike[str], **provenance: Any) -> Path:
        """Write the folder of the module docstring; ``provenance`` joins the manifest."""
        out = Path(folder)
        out.mkdir(parents=True, exist_ok=True)
        arrays: dict[str, Any] = {k: v.astype(np.float32) for k, v in self.arrays.items()}  # Any: numpy's stub types **kwds as bool
        np.savez_compressed(out / WEIGHTS, **arrays)
        manifest = {
            "format": FORMAT, "version": self.version, "embedder": self.embedder, "intents": list(INTENTS), "weights": WEIGHTS,
            "lora": {"r": self.lora.r, "alpha": self.lora.alpha, "targets": list(self.lora.targets)}, "max_length": self.max_length, "pooling": "mean",
            "look_for": self.look_for.pattern, "intent_at": self.intent_at, "relevance_at": self.relevance_at, **provenance,
        }
        (out / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, folder: str | os.PathLike[str] = DEFAULT_CROSS_DIR, *, base: str | os.PathLike[str] | None = None) -> ForgetCross:
        root = Path(folder)
        manifest: dict[str, Any] = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
        if manifest.get("format") != FORMAT or tuple(manifest.get("intents", ())) != INTENTS:
            raise ValueError(f"{root} is not a forget cross-encoder ({FORMAT}, intents {INTENTS})")
        with np.load(root / manifest["weights"], allow_pickle=False) as arrays:
            weights = {k: arrays[k] for k in arrays.files}
        lora = manifest["lora"]
        return cls(
            weights, LoraSpec(r=int(lora["r"]), alpha=float(lora["alpha"]), targets=tuple(lora["targets"])), look_for=manifest["look_for"],
            intent_at=float(manifest["intent_at"]), relevance_at=float(manifest["relevance_at"]), embedder=manifest["embedder"], version=manifest["version"],
            max_length=int(manifest["max_length"]), base=base,
        )


@dataclass(frozen=True)
class CrossForgetReader:
    """`ForgetCross` as effects, with the interface of `forget_head.ForgetReader`: the sync
    client runs its forward passes in place, the async one off its loop."""

    model: ForgetCross

    def wants(self, text: str) -> Steps[str]:
        """The intent of ``text`` (an `INTENTS` name); "other" without a forward pass when no
        word of it can be about keeping or removing something."""
        model = self.model
        if not model.look_for.search(text):
            return "other"
        probs: np.ndarray = yield Call(model.intent_probs, ([text],), stage="embedding")
        return intent_named(probs[0], model.intent_at)

    def about(self, description: str, records: Sequence[MemoryRecord]) -> Steps[dict[Any, float]]:
        """P(about) for each record at or above ``relevance_at``, by id."""
        if not records:
            return {}
        bodies = [split_header(r.text)[1] for r in records]
        probs: np.ndarray = yield Call(self.model.relevance_probs, ([description] * len(bodies), bodies), stage="embedding")
        return {r.id: float(p) for r, p in zip(records, probs) if p >= self.model.relevance_at}


@cache
def packaged_cross() -> ForgetCross | None:
    """The shipped cross-encoder, loaded once per process (its weights on first use); None
    where it is not installed."""
    return ForgetCross.load() if (DEFAULT_CROSS_DIR / "manifest.json").exists() else None


def packaged_reader(embedder: Embedder | None) -> ForgetReading | None:
    """The reader a client serves: the packaged cross-encoder where the client embeds with
    the model the cross-encoder adapts (so the process holds those weights anyway), else the
    first heads over ``embedder`` where they fit it, else None (the forget rules alone). A
    client on another embedder loads no second model for its forgets."""
    cross = packaged_cross()
    if cross is not None and getattr(embedder, "name", None) == cross.embedder:
        return CrossForgetReader(cross)
    return ForgetReader.over(embedder, packaged_head())
