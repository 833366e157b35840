"""What a new fact does to an old memory, read by a model that sees both texts at once.

The pair head (`relations.PairClassifier`) compares two embeddings made apart, plus cue
words. It cannot see that "I've been going out with Lina" is about the same slot as "my
partner Mei": the embeddings of the two are far apart, and no cue word says so. A
cross-encoder reads "new [SEP] old" through MiniLM's attention, word against word.

`CrossEncoder`: MiniLM (the weights the embedder ships, `minilm_path`) with a LoRA adapter
merged into its linear layers, mean-pooled, and a linear layer over the relations. The
adapter is a few hundred kB (``cross.npz``), so a version ships in the package like a pair
head; no weights of MiniLM's own are stored. Served on one torch thread, as the embedder is.

`MixedRelations`: the served model, the mean of the two classifiers' probabilities,

    P(r | new, old) = mix * P_cross(r | new, old) + (1 - mix) * P_head(r | u, v, new, old)

On the management benchmark's val pairs the two err on different pairs: the head on
phrasings without a cue, the cross-encoder on phrasings it never saw in training (it fits
the train templates). The mean retired more of what should be retired, with fewer wrong
retirements, than either alone (README, "What is true now").

The cross-encoder is a forward pass per pair, the head microseconds. Most (fact, memory)
pairs are plainly unrelated, and there the head is sure no relation acts: where its largest
acting probability (`acting`) is below ``cross_from``, its probabilities stand and the
cross-encoder is not run. A mix cannot act where the head is near 0 unless the cross-encoder
is near 1, so the floor is chosen on val as the largest at which no decision changes
(``training/recipes/cross_encoder.py``), and the manifest says so.

A mixed version's folder: ``manifest.json`` (format `MIXED_FORMAT`, the mix, the LoRA
shape, the retirement threshold measured on val), ``cross.npz``, and ``head/`` (a pair head
folder, `PairClassifier.save`). `load_relations` opens either kind of folder.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from memsdk.embedding.minilm import minilm_path, torch_threads
from memsdk.policies.relations import HEAD_FORMAT, RELATIONS, PairClassifier, Relation, RelationModel, relation_text, write_manifest

__all__ = ["MIXED_FORMAT", "CROSS_WEIGHTS", "CLASSIFIER", "LoraSpec", "AdaptedMiniLM", "CrossEncoder", "MixedRelations", "acting", "pair_logits", "pooled", "merged_minilm", "linear_layer", "merge_lora", "load_relations"]

MIXED_FORMAT = "memsdk-pair-mixed/1"
CROSS_WEIGHTS = "cross.npz"
#: the classifier layer's arrays in ``cross.npz``; every other pair of arrays is a LoRA
#: adapter, ``<module path>.A`` [r, in] and ``<module path>.B`` [out, r]
CLASSIFIER = "classifier"
_CLS_W, _CLS_B = f"{CLASSIFIER}.weight", f"{CLASSIFIER}.bias"
_SUP, _COR, _DUP, _FGT = (RELATIONS.index(r) for r in (Relation.SUPERSEDES, Relation.CORRECTS, Relation.DUPLICATES, Relation.FORGET_TARGET))


def acting(probs: np.ndarray) -> np.ndarray:
    """[n, 3]: per pair, the probabilities a manager acts on (`pair_manager.PairThresholds`):
    a retirement's (supersedes + corrects), a duplicate's, a forget target's."""
    return np.stack([probs[:, _SUP] + probs[:, _COR], probs[:, _DUP], probs[:, _FGT]], axis=1)


@dataclass(frozen=True)
class LoraSpec:
    """The adapter's shape: rank ``r``, scaling ``alpha / r`` (as peft applies it), and the
    linear layers it adapts, by the last part of their name ("query", "dense")."""

    r: int = 16
    alpha: float = 32.0
    targets: tuple[str, ...] = ("query", "key", "value", "dense")

    @property
    def scale(self) -> float:
        return self.alpha / self.r


class AdaptedMiniLM:
    """MiniLM with a merged LoRA adapter and the linear layers ``layers`` over its mean-pooled
    tokens, all stored in ``arrays`` (adapter arrays `merge_lora` reads, ``<layer>.weight`` /
    ``<layer>.bias``). Built on first use (a client that never needs it never loads it),
    once, under a lock; `_calls` serialises the forward passes."""

    layers: tuple[str, ...] = ()

    def __init__(self, arrays: Mapping[str, np.ndarray], lora: LoraSpec, *, max_length: int, threads: int | None = 1, base: str | os.PathLike[str] | None = None) -> None:
        for name in self.layers:
            if f"{name}.weight" not in arrays or f"{name}.bias" not in arrays:
                raise ValueError(f"the weights need {name}.weight and {name}.bias")
        self.arrays, self.lora, self.max_length, self.threads = dict(arrays), lora, max_length, threads
        self.base = Path(base) if base is not None else minilm_path()
        self._model: Any = None
        self._lock, self._calls = threading.Lock(), threading.Lock()

    def _load(self) -> tuple[Any, Any, dict[str, Any]]:
        """(tokenizer, merged encoder, the linear layers by name)."""
        with self._lock:
            if self._model is None:
                tokenizer, encoder = merged_minilm(self.base, self.arrays, self.lora, self.threads)
                self._model = (tokenizer, encoder, {name: linear_layer(self.arrays, name) for name in self.layers})
        return self._model  # type: ignore[no-any-return]


class CrossEncoder(AdaptedMiniLM):
    """MiniLM + a merged LoRA adapter + a linear layer: relation probabilities of text pairs.

    ``arrays``: the adapter and the classifier (module docstring)."""

    layers = (CLASSIFIER,)

    def __init__(self, arrays: Mapping[str, np.ndarray], lora: LoraSpec, *, max_length: int = 96, threads: int | None = 1, base: str | os.PathLike[str] | None = None) -> None:
        super().__init__(arrays, lora, max_length=max_length, threads=threads, base=base)
        if arrays[_CLS_W].shape[0] != len(RELATIONS):
            raise ValueError(f"the classifier has {arrays[_CLS_W].shape[0]} outputs for {len(RELATIONS)} relations")

    def predict(self, new: Sequence[str], old: Sequence[str]) -> np.ndarray:
        """[n, len(RELATIONS)] probabilities, columns in `RELATIONS` order."""
        if not new:
            return np.zeros((0, len(RELATIONS)))
        import torch

        tokenizer, encoder, layers = self._load()
        classifier = layers[CLASSIFIER]
        # one call at a time: a fast tokenizer shared by threads raises "Already borrowed"
        with self._calls, torch_threads(self.threads), torch.inference_mode():
            logits = pair_logits(tokenizer, encoder, classifier, new, old, max_length=self.max_length)
            probs: np.ndarray = torch.softmax(logits, dim=1).double().numpy()
        return probs


def pair_logits(tokenizer: Any, encoder: Any, classifier: Any, new: Sequence[str], old: Sequence[str], *, max_length: int) -> Any:
    """The relation logits (a torch tensor [n, len(RELATIONS)]) of the pairs: "new [SEP]
    old" (each without its header, `relation_text`) through ``encoder``, mean-pooled over
    the tokens, through ``classifier``. With gradients where the caller enables them: the
    trainer runs it over the LoRA-wrapped encoder, serving over the merged one."""
    return classifier(pooled(tokenizer, encoder, [relation_text(t) for t in new], [relation_text(t) for t in old], max_length=max_length))


def pooled(tokenizer: Any, encoder: Any, first: Sequence[str], second: Sequence[str] | None = None, *, max_length: int) -> Any:
    """The mean of ``encoder``'s last hidden states over the tokens of each text, or of each
    pair "first [SEP] second" (a torch tensor [n, hidden])."""
    batch = tokenizer(list(first), None if second is None else list(second), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    hidden = encoder(**batch).last_hidden_state
    mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
    return (hidden * mask).sum(1) / mask.sum(1)


def merged_minilm(base: str | os.PathLike[str], arrays: Mapping[str, np.ndarray], lora: LoraSpec, threads: int | None) -> tuple[Any, Any]:
    """(tokenizer, encoder): MiniLM from ``base`` with the adapter in ``arrays`` merged into
    its weights, in eval mode."""
    from transformers import AutoModel, AutoTokenizer

    with torch_threads(threads):
        encoder = AutoModel.from_pretrained(str(base))
        merge_lora(encoder, arrays, lora)
        encoder.eval()
    return AutoTokenizer.from_pretrained(str(base)), encoder


def linear_layer(arrays: Mapping[str, np.ndarray], name: str) -> Any:
    """The torch linear layer stored in ``arrays`` as ``<name>.weight`` and ``<name>.bias``."""
    import torch

    weight, bias = arrays[f"{name}.weight"], arrays[f"{name}.bias"]
    layer = torch.nn.Linear(weight.shape[1], weight.shape[0])
    layer.load_state_dict({"weight": torch.from_numpy(weight), "bias": torch.from_numpy(bias)})
    return layer


def merge_lora(model: Any, arrays: Mapping[str, np.ndarray], lora: LoraSpec) -> int:
    """Add each adapter's ``B @ A * scale`` to the weight of the module it names; the
    number of modules changed. KeyError for a module ``model`` does not have."""
    import torch

    names = sorted({k.rsplit(".", 1)[0] for k in arrays if k.endswith((".A", ".B"))})
    with torch.no_grad():
        for name in names:
            module = model.get_submodule(name)
            delta = torch.from_numpy(arrays[f"{name}.B"]) @ torch.from_numpy(arrays[f"{name}.A"])
            if delta.shape != module.weight.shape:
                raise ValueError(f"the adapter of {name} is {tuple(delta.shape)}, its weight {tuple(module.weight.shape)}")
            module.weight += delta.to(module.weight.dtype) * lora.scale
    return len(names)


@dataclass(frozen=True, eq=False)
class MixedRelations:
    """The served model: a pair head and a cross-encoder, their probabilities mixed
    (module docstring). A `RelationModel`; ``supersede_at`` is the retirement threshold
    measured for this mix on val (`PairManager` uses it unless given its own);
    ``cross_from`` the head's acting probability below which the cross-encoder is not run
    (module docstring; 0: on every pair)."""

    head: PairClassifier
    cross: CrossEncoder
    mix: float = 0.5
    version: str = "pairs-x1"
    supersede_at: float | None = None
    metrics: Mapping[str, float] = field(default_factory=dict)
    cross_from: float = 0.0

    def __post_init__(self) -> None:
        if not 0.0 <= self.mix <= 1.0:
            raise ValueError(f"mix must be within [0, 1], got {self.mix}")
        if not 0.0 <= self.cross_from <= 1.0:
            raise ValueError(f"cross_from must be within [0, 1], got {self.cross_from}")

    @property
    def embedder(self) -> str:
        return self.head.embedder

    def predict_pairs(self, new: Sequence[str], old: Sequence[str], u: np.ndarray, v: np.ndarray) -> np.ndarray:
        head = self.head.predict_pairs(new, old, u, v)
        if self.mix == 0.0:
            return head
        read = np.flatnonzero(acting(head).max(axis=1) >= self.cross_from).tolist()
        mixed = head.copy()
        if len(read):
            mixed[read] = self.mix * self.cross.predict([new[i] for i in read], [old[i] for i in read]) + (1.0 - self.mix) * head[read]
        return mixed

    def save(self, folder: str | os.PathLike[str], *, config: Mapping[str, Any] | None = None, training_data_hash: str | None = None) -> Path:
        """Write the folder of the module docstring; the manifest has the registry's fields."""
        out = Path(folder)
        self.head.save(out / "head", config={"note": f"the pair head inside {self.version}"})
        arrays: dict[str, Any] = {k: v.astype(np.float32) for k, v in self.cross.arrays.items()}  # Any: as in PairClassifier.save
        np.savez_compressed(out / CROSS_WEIGHTS, **arrays)
        spec = {
            "format": MIXED_FORMAT,
            "head": "head",
            "cross": {"weights": CROSS_WEIGHTS, "lora": {"r": self.cross.lora.r, "alpha": self.cross.lora.alpha, "targets": list(self.cross.lora.targets)}, "max_length": self.cross.max_length, "pooling": "mean"},
            "mix": self.mix,
            "supersede_at": self.supersede_at,
            "cross_from": self.cross_from,
            "labels": [str(r) for r in RELATIONS],
            "training": dict(config or {}),
        }
        return write_manifest(out, version=self.version, embedder=self.embedder, metrics=self.metrics, spec=spec, training_data_hash=training_data_hash)

    @classmethod
    def load(cls, folder: str | os.PathLike[str], *, base: str | os.PathLike[str] | None = None) -> MixedRelations:
        root = Path(folder)
        manifest = _manifest(root)
        spec = manifest["config"]
        if spec.get("format") != MIXED_FORMAT:
            raise ValueError(f"{root} is not a mixed pair model ({MIXED_FORMAT}): its manifest says format {spec.get('format')!r}")
        if spec.get("labels") != [str(r) for r in RELATIONS]:
            raise ValueError(f"{root} was trained on the relations {spec.get('labels')}, not {[str(r) for r in RELATIONS]}")
        cross = spec["cross"]
        with np.load(root / cross["weights"], allow_pickle=False) as arrays:
            weights = {k: arrays[k] for k in arrays.files}
        lora = LoraSpec(r=int(cross["lora"]["r"]), alpha=float(cross["lora"]["alpha"]), targets=tuple(cross["lora"]["targets"]))
        return cls(
            head=PairClassifier.load(root / spec["head"]), cross=CrossEncoder(weights, lora, max_length=int(cross["max_length"]), base=base),
            mix=float(spec["mix"]), version=manifest["version"], supersede_at=spec.get("supersede_at"), metrics=dict(manifest.get("eval_metrics", {})),
            cross_from=float(spec.get("cross_from", 0.0)),
        )


def _manifest(root: Path) -> dict[str, Any]:
    try:
        manifest: dict[str, Any] = json.loads((root / "manifest.json").read_text())
    except (OSError, ValueError) as exc:
        raise ValueError(f"{root} has no readable manifest.json: {exc}") from None
    return manifest


def load_relations(folder: str | os.PathLike[str]) -> RelationModel:
    """The relation model saved in ``folder``: a pair head or a mixed model, by the format
    its manifest names. ValueError for any other folder.

    One per folder and process, while its manifest is unchanged: the models are immutable,
    and clients opened one after another (an evaluation opens one per conversation) would
    otherwise each load MiniLM's weights again."""
    root = Path(folder).resolve()
    try:
        stamp = (root / "manifest.json").stat().st_mtime_ns
    except OSError as exc:
        raise ValueError(f"{root} has no readable manifest.json: {exc}") from None
    return _load_relations(root, stamp)


@lru_cache(maxsize=8)
def _load_relations(root: Path, stamp: int) -> RelationModel:
    kind = _manifest(root).get("config", {}).get("format")
    if kind == MIXED_FORMAT:
        return MixedRelations.load(root)
    if kind == HEAD_FORMAT:
        return PairClassifier.load(root)
    raise ValueError(f"{root} holds neither a pair head ({HEAD_FORMAT}) nor a mixed pair model ({MIXED_FORMAT}): format {kind!r}")
