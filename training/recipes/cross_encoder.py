"""Supervised training of the pair cross-encoder, served mixed with a pair head
(`memsdk.policies.cross_encoder.MixedRelations`): the pair manager's second candidate.

    python -m memsdk_training.recipes.cross_encoder [--config FILE] [--epochs N]
        [--output-dir DIR] [--package DIR]

Data: the pair head's (`pair_classifier.benchmark_pairs` and `chat_pairs`): the management
benchmark's train / val pairs and LoCoMo conv-26 / conv-30 turns as 'unrelated'. The test
split is never read.

The loop reads top to bottom:

    1. data      train and val pairs; the pair head's val probabilities, once (it is not
                 trained here: the mixed model serves it as shipped)
    2. model     MiniLM with a LoRA adapter (peft) on its linear layers, mean pooling, a
                 linear layer over the relations (`cross_encoder.pair_logits`)
    3. train     per epoch: shuffled mini-batches, class-weighted cross-entropy (each class
                 weighs n / (classes * n_class)), AdamW; then the val probabilities of the
                 cross-encoder alone and mixed with the head
    4. keep      the epoch whose mix has the best val macro F1 (its adapter and classifier)
    5. threshold the lowest retirement threshold whose val retirements are at least
                 ``min_precision`` right (`retire_threshold`)
    6. write     the mixed model's folder (``model/`` and, when asked, ``package_dir``),
                 ``metrics.jsonl``, ``curves.png`` and ``report.json``

Measured on this 2-core CPU (defaults): README, "What is true now".
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from memsdk.embedding import SentenceTransformerEmbedder, minilm_path
from memsdk.policies.cross_encoder import CLASSIFIER, CrossEncoder, LoraSpec, MixedRelations, pair_logits
from memsdk.policies.relations import RELATIONS, PairClassifier

from ..checkpoint import data_hash
from .metrics import MetricsLog, plot_metrics
from .pair_classifier import Pair, as_pair, cli_config, benchmark_pairs, chat_pairs, embed_pairs, evaluate, retire_scores, retire_threshold
from .written_pairs import read_written, split_by_attribute

__all__ = ["CrossEncoderConfig", "CrossTrainResult", "retire_threshold", "lora_arrays", "train_cross_encoder", "main"]

#: pairs per forward pass when scoring val
EVAL_BATCH = 128


class CrossEncoderConfig(BaseModel):
    """What the cross-encoder is trained on and how; the defaults run on a 2-core CPU in minutes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    head: str = Field("memsdk/registry/packaged/manager/pairs-v5", description="The pair head folder the cross-encoder is mixed with (served as it is).")
    train_scenarios: int | None = Field(1000, ge=1, description="Benchmark scenarios the train pairs come from.")
    val_scenarios: int | None = Field(200, ge=1, description="Benchmark scenarios the val pairs come from.")
    chat_negatives: tuple[str, str] | None = Field(("conv-26", "conv-30"), description="LoCoMo conversations (train, val) whose turns join the pairs as 'unrelated'.")
    chat_related_k: int = Field(5, ge=1)
    written_pairs: tuple[str, ...] = Field((), description="JSONL files of pairs written outside the generator (`written_pairs`): their train / val parts join the pairs.")
    written_split: tuple[float, float] = Field((0.7, 0.15), description="The train and val shares of the written pairs' split keys (the pair recipe's split).")
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.05, ge=0.0, lt=1.0)
    targets: tuple[str, ...] = Field(("query", "key", "value", "dense"), description="MiniLM's linear layers the adapter adapts, by name.")
    max_length: int = Field(96, ge=8, description="Tokens of a pair, both texts together.")
    lr: float = Field(5e-4, gt=0.0, description="The adapter's learning rate.")
    classifier_lr: float = Field(1e-3, gt=0.0)
    weight_decay: float = Field(0.01, ge=0.0)
    epochs: int = Field(1, ge=1, description="The cross-encoder fits the train templates within an epoch (val macro F1 of the mix .773 after 1, .721 after 2); with more, val decides which.")
    batch_size: int = Field(32, ge=1)
    class_balanced: bool = True
    mix: float = Field(0.5, ge=0.0, le=1.0, description="The cross-encoder's share of the mixed probabilities.")
    min_precision: float = Field(0.9, gt=0.0, le=1.0, description="The val precision of retirements the threshold must reach.")
    max_train_pairs: int | None = Field(None, ge=1, description="A random subset of the train pairs (tests).")
    seed: int = 0
    num_threads: int | None = Field(2, description="torch threads while training; None leaves torch's default.")
    version: str = "pairs-x1"
    output_dir: str = "build/train/pairs-x1"
    package_dir: str | None = Field(None, description="Also write the mixed model here (memsdk/registry/packaged/manager/<version>).")
    progress: bool = True


@dataclass
class CrossTrainResult:
    model: MixedRelations
    val: dict[str, Any]
    val_retire: dict[str, dict[str, float]]
    best_epoch: int
    train_s: float
    out: Path


def lora_arrays(model: torch.nn.Module, classifier: torch.nn.Linear) -> dict[str, np.ndarray]:
    """The adapter of a peft-wrapped encoder as ``<module path>.A`` / ``.B`` arrays (the
    path inside the bare encoder, as `cross_encoder.merge_lora` looks it up) and the
    classifier's weight and bias."""
    arrays = {f"{CLASSIFIER}.weight": classifier.weight.detach().numpy().copy(), f"{CLASSIFIER}.bias": classifier.bias.detach().numpy().copy()}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
            path = name.removeprefix("base_model.model.")
            arrays[f"{path}.A"] = module.lora_A["default"].weight.detach().numpy().copy()
            arrays[f"{path}.B"] = module.lora_B["default"].weight.detach().numpy().copy()
    return arrays


def _labels(pairs: Sequence[Pair]) -> torch.Tensor:
    return torch.tensor([RELATIONS.index(p.label) for p in pairs])


def train_cross_encoder(cfg: CrossEncoderConfig, train: Iterable[Any] | None = None, val: Iterable[Any] | None = None) -> CrossTrainResult:
    """Train the cross-encoder on ``train`` (None: the benchmark's and chat pairs), keep its
    best epoch mixed with ``cfg.head`` on ``val``, write it (module docstring)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel, AutoTokenizer

    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    threads = torch.get_num_threads()
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    try:
        # 1. data, and the head's val probabilities
        embedder = SentenceTransformerEmbedder(threads=cfg.num_threads)
        head = PairClassifier.load(cfg.head)
        train_pairs = [as_pair(p) for p in train] if train is not None else benchmark_pairs("train", cfg.train_scenarios)
        val_pairs = [as_pair(p) for p in val] if val is not None else benchmark_pairs("val", cfg.val_scenarios)
        if train is None and cfg.chat_negatives is not None:
            train_pairs += chat_pairs(cfg.chat_negatives[0], embedder, cfg.chat_related_k)
        if val is None and cfg.chat_negatives is not None:
            val_pairs += chat_pairs(cfg.chat_negatives[1], embedder, cfg.chat_related_k)
        written_train, written_val, _ = split_by_attribute(read_written(cfg.written_pairs), *cfg.written_split)
        if train is None:
            train_pairs += [as_pair((w.new, w.old, w.label)) for w in written_train]
        if val is None:
            val_pairs += [as_pair((w.new, w.old, w.label)) for w in written_val]
        if cfg.max_train_pairs is not None and len(train_pairs) > cfg.max_train_pairs:
            train_pairs = random.Random(cfg.seed).sample(train_pairs, cfg.max_train_pairs)
        if not train_pairs or not val_pairs:
            raise ValueError(f"need train and val pairs, got {len(train_pairs)} and {len(val_pairs)}")
        head_val = head.predict(embed_pairs(val_pairs, embedder, lexical=head.lexical, prototypes=head.prototypes))
        y_train, y_val = _labels(train_pairs), _labels(val_pairs).numpy()

        # 2. model
        tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
        adapter = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout, target_modules=list(cfg.targets))
        encoder = get_peft_model(AutoModel.from_pretrained(str(minilm_path())), adapter)
        classifier = torch.nn.Linear(encoder.config.hidden_size, len(RELATIONS))
        optimizer = torch.optim.AdamW(
            [{"params": [p for p in encoder.parameters() if p.requires_grad], "lr": cfg.lr}, {"params": classifier.parameters(), "lr": cfg.classifier_lr}],
            weight_decay=cfg.weight_decay,
        )
        counts = np.bincount(y_train.numpy(), minlength=len(RELATIONS))
        weights = np.where(counts > 0, len(y_train) / (len(RELATIONS) * np.maximum(counts, 1)), 0.0) if cfg.class_balanced else np.ones(len(RELATIONS))
        loss_fn = torch.nn.CrossEntropyLoss(weight=torch.tensor(weights, dtype=torch.float32))

        def logits(pairs: Sequence[Pair]) -> torch.Tensor:
            return pair_logits(tokenizer, encoder, classifier, [p.new for p in pairs], [p.old for p in pairs], max_length=cfg.max_length)  # type: ignore[no-any-return]

        def cross_val() -> np.ndarray:
            encoder.eval()
            with torch.no_grad():
                probs = [torch.softmax(logits(val_pairs[i : i + EVAL_BATCH]), dim=1).double().numpy() for i in range(0, len(val_pairs), EVAL_BATCH)]
            encoder.train()
            return np.concatenate(probs)

        # 3. train, 4. keep the best mixed val epoch
        log = MetricsLog(out / "metrics.jsonl")
        best: tuple[float, int, dict[str, np.ndarray], np.ndarray] | None = None
        started, step = time.perf_counter(), 0
        encoder.train()
        for epoch in range(1, cfg.epochs + 1):
            order = torch.randperm(len(train_pairs)).tolist()
            bar = tqdm(range(0, len(order), cfg.batch_size), desc=f"cross {epoch}/{cfg.epochs}", disable=not cfg.progress)
            for start in bar:
                batch = [train_pairs[j] for j in order[start : start + cfg.batch_size]]
                loss = loss_fn(logits(batch), y_train[order[start : start + cfg.batch_size]])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                step += 1
                log.write({"step": step, "train_loss": loss.item()})
                bar.set_postfix(loss=f"{loss.item():.3f}")
            cross = cross_val()
            mixed = cfg.mix * cross + (1.0 - cfg.mix) * head_val
            scores, alone = evaluate(mixed, y_val), evaluate(cross, y_val)
            log.write({"step": step, "epoch": epoch, "eval_val_macro_f1": scores["macro_f1"], "eval_val_cross_macro_f1": alone["macro_f1"], "eval_val_accuracy": scores["accuracy"]})
            if best is None or scores["macro_f1"] > best[0]:
                best = (scores["macro_f1"], epoch, lora_arrays(encoder, classifier), mixed)
        assert best is not None  # epochs >= 1
        train_s = time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)

    # 5. threshold, 6. write
    _, best_epoch, arrays, mixed = best
    val_scores, val_retire = evaluate(mixed, y_val), retire_scores(mixed, y_val, (0.4, 0.5, 0.6, 0.7, 0.8, 0.9))
    threshold = retire_threshold(val_retire, cfg.min_precision)
    metrics = {"val_macro_f1": val_scores["macro_f1"], "val_accuracy": val_scores["accuracy"], "best_epoch": float(best_epoch), "train_pairs": float(len(train_pairs)),
               **{f"val_retire_{k}_at_{threshold:g}": float(v) for k, v in val_retire[f"{threshold:g}"].items()}}  # fmt: skip
    lora = LoraSpec(r=cfg.lora_r, alpha=cfg.lora_alpha, targets=cfg.targets)
    model = MixedRelations(head=head, cross=CrossEncoder(arrays, lora, max_length=cfg.max_length), mix=cfg.mix, version=cfg.version, supersede_at=threshold, metrics=metrics)
    training = {"recipe": cfg.model_dump(mode="json"), "val_retire": val_retire, "val_confusion": val_scores["confusion"], "train_s": round(train_s, 1)}
    digest = data_hash(json.dumps([p.new, p.old, str(p.label)]) for p in [*train_pairs, *val_pairs])
    for folder in [out / "model", *([Path(cfg.package_dir)] if cfg.package_dir else [])]:
        model.save(folder, config=training, training_data_hash=digest)
    plot_metrics(out / "metrics.jsonl", out / "curves.png", curves=("train_loss", "eval_val_macro_f1"))
    report = {"best_epoch": best_epoch, "supersede_at": threshold, "val": val_scores, "val_retire": val_retire, "train_pairs": len(train_pairs), "val_pairs": len(val_pairs), "train_s": train_s}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return CrossTrainResult(model, val_scores, val_retire, best_epoch, train_s, out)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsdk_training.recipes.cross_encoder", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--config", help="YAML or JSON file of CrossEncoderConfig fields")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--output-dir", dest="output_dir")
    parser.add_argument("--package", dest="package_dir", help="also write the mixed model into this folder")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None)
    cfg = cli_config(CrossEncoderConfig, vars(parser.parse_args(argv)))
    result = train_cross_encoder(cfg)
    print(json.dumps({"output_dir": str(result.out), "best_epoch": result.best_epoch, "supersede_at": result.model.supersede_at,
                      "val_macro_f1": round(result.val["macro_f1"], 4), "retire": result.val_retire, "train_s": round(result.train_s, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
