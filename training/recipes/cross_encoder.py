"""Supervised training of the pair cross-encoder, served mixed with a pair head
(`memsdk.policies.cross_encoder.MixedRelations`): the pair manager's second candidate.

    python -m memsdk_training.recipes.cross_encoder [--config FILE] [--epochs N]
        [--output-dir DIR] [--package DIR]
    python -m memsdk_training.recipes.cross_encoder --config FILE --floor-only MODEL_DIR

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
                 ``min_precision`` right (`retire_threshold`); then the largest floor of
                 ``cross_from_candidates`` under which skipping the cross-encoder changes no
                 val decision (`cross_floor`)
    6. write     the mixed model's folder (``model/`` and, when asked, ``package_dir``),
                 ``metrics.jsonl``, ``curves.png`` and ``report.json``

``--floor-only`` runs step 5's floor alone on a saved mixed model (its val pairs rebuilt from
the config it was trained with) and rewrites its manifest with it.

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
from typing import Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from memsdk.embedding import Embedder, SentenceTransformerEmbedder, minilm_path
from memsdk.policies.cross_encoder import CLASSIFIER, CrossEncoder, LoraSpec, MixedRelations, acting, load_relations, pair_logits
from memsdk.policies.pair_manager import PairThresholds
from memsdk.policies.relations import RELATIONS, PairClassifier

from ..checkpoint import data_hash
from .metrics import MetricsLog, plot_metrics
from .pair_classifier import Pair, as_pair, cli_config, benchmark_pairs, chat_pairs, embed_pairs, evaluate, retire_scores, retire_threshold
from .written_pairs import read_written, split_by_attribute

__all__ = ["CrossEncoderConfig", "CrossTrainResult", "retire_threshold", "cross_floor", "lora_arrays", "train_cross_encoder", "refloor", "main"]

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
    written_repeat: int = Field(1, ge=1, description="Times each written train pair is seen per epoch: the generator's pairs outnumber them.")
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
    cross_from_candidates: tuple[float, ...] = Field(
        (0.0, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2), description="Floors tried for `MixedRelations.cross_from`; the largest that changes no val decision is kept."
    )
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


def lora_arrays(model: torch.nn.Module, classifier: torch.nn.Linear, *, name: str = CLASSIFIER) -> dict[str, np.ndarray]:
    """The adapter of a peft-wrapped encoder as ``<module path>.A`` / ``.B`` arrays (the
    path inside the bare encoder, as `cross_encoder.merge_lora` looks it up) and the
    classifier's weight and bias, as ``<name>.weight`` / ``<name>.bias``."""
    arrays = {f"{name}.weight": classifier.weight.detach().numpy().copy(), f"{name}.bias": classifier.bias.detach().numpy().copy()}
    for name, module in model.named_modules():
        if hasattr(module, "lora_A") and "default" in getattr(module, "lora_A", {}):
            path = name.removeprefix("base_model.model.")
            arrays[f"{path}.A"] = module.lora_A["default"].weight.detach().numpy().copy()
            arrays[f"{path}.B"] = module.lora_B["default"].weight.detach().numpy().copy()
    return arrays


def recipe_pairs(cfg: CrossEncoderConfig, split: Literal["train", "val"], embedder: Embedder) -> list[Pair]:
    """The ``split``'s pairs: the benchmark's, a LoCoMo conversation's chat, the written ones' part."""
    part = 0 if split == "train" else 1
    pairs = benchmark_pairs(split, cfg.train_scenarios if split == "train" else cfg.val_scenarios)
    if cfg.chat_negatives is not None:
        pairs += chat_pairs(cfg.chat_negatives[part], embedder, cfg.chat_related_k)
    written = split_by_attribute(read_written(cfg.written_pairs), *cfg.written_split)[part]
    repeat = cfg.written_repeat if split == "train" else 1
    return pairs + [as_pair((w.new, w.old, w.label)) for w in written] * repeat


def cross_floor(head: np.ndarray, cross: np.ndarray, mix: float, act_at: Sequence[float], candidates: Sequence[float]) -> float:
    """The largest of ``candidates`` at which reading only the pairs whose head acting
    probability (`acting`) reaches it changes no decision: every pair acts (its acting
    probabilities against ``act_at``) as it does with the cross-encoder on every pair.
    0.0 where none does. ``head`` and ``cross`` are [n, relations] val probabilities."""
    at = np.asarray(act_at, dtype=float)
    everywhere = acting(mix * cross + (1.0 - mix) * head) >= at
    head_acting = acting(head)
    best = 0.0
    for floor in sorted(candidates):
        read = head_acting.max(axis=1) >= floor
        decisions = np.where(read[:, None], everywhere, head_acting >= at)
        if (decisions == everywhere).all():
            best = floor
    return best


def _act_at(supersede_at: float | None) -> tuple[float, float, float]:
    """What a `PairManager` serving the model acts at, in `acting`'s order."""
    t = PairThresholds() if supersede_at is None else PairThresholds(supersede_at=supersede_at)
    return (t.supersede_at, t.duplicate_at, t.forget_at)


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
        train_pairs = [as_pair(p) for p in train] if train is not None else recipe_pairs(cfg, "train", embedder)
        val_pairs = [as_pair(p) for p in val] if val is not None else recipe_pairs(cfg, "val", embedder)
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

        def cross_val() -> np.ndarray:  # the cross-encoder alone
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
                best = (scores["macro_f1"], epoch, lora_arrays(encoder, classifier), cross)
        assert best is not None  # epochs >= 1
        train_s = time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)

    # 5. threshold, 6. write
    _, best_epoch, arrays, cross = best
    mixed = cfg.mix * cross + (1.0 - cfg.mix) * head_val
    val_scores, val_retire = evaluate(mixed, y_val), retire_scores(mixed, y_val, (0.4, 0.5, 0.6, 0.7, 0.8, 0.9))
    threshold = retire_threshold(val_retire, cfg.min_precision)
    floor = cross_floor(head_val, cross, cfg.mix, _act_at(threshold), cfg.cross_from_candidates)
    metrics = {"val_macro_f1": val_scores["macro_f1"], "val_accuracy": val_scores["accuracy"], "best_epoch": float(best_epoch), "train_pairs": float(len(train_pairs)),
               **{f"val_retire_{k}_at_{threshold:g}": float(v) for k, v in val_retire[f"{threshold:g}"].items()}}  # fmt: skip
    lora = LoraSpec(r=cfg.lora_r, alpha=cfg.lora_alpha, targets=cfg.targets)
    model = MixedRelations(head=head, cross=CrossEncoder(arrays, lora, max_length=cfg.max_length), mix=cfg.mix, version=cfg.version, supersede_at=threshold, metrics=metrics, cross_from=floor)
    training = {"recipe": cfg.model_dump(mode="json"), "val_retire": val_retire, "val_confusion": val_scores["confusion"], "train_s": round(train_s, 1)}
    digest = data_hash(json.dumps([p.new, p.old, str(p.label)]) for p in [*train_pairs, *val_pairs])
    for folder in [out / "model", *([Path(cfg.package_dir)] if cfg.package_dir else [])]:
        model.save(folder, config=training, training_data_hash=digest)
    plot_metrics(out / "metrics.jsonl", out / "curves.png", curves=("train_loss", "eval_val_macro_f1"))
    report = {"best_epoch": best_epoch, "supersede_at": threshold, "cross_from": floor, "val": val_scores, "val_retire": val_retire, "train_pairs": len(train_pairs), "val_pairs": len(val_pairs), "train_s": train_s}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return CrossTrainResult(model, val_scores, val_retire, best_epoch, train_s, out)


def refloor(cfg: CrossEncoderConfig, folder: str | Path) -> float:
    """Step 5's floor for the mixed model saved in ``folder``, chosen on the val pairs of
    ``cfg`` (the config it was trained with); its manifest is rewritten with it."""
    model = load_relations(folder)
    if not isinstance(model, MixedRelations):
        raise ValueError(f"{folder} is not a mixed pair model")
    embedder = SentenceTransformerEmbedder(threads=cfg.num_threads)
    val_pairs = recipe_pairs(cfg, "val", embedder)
    head = model.head.predict(embed_pairs(val_pairs, embedder, lexical=model.head.lexical, prototypes=model.head.prototypes))
    cross = np.concatenate([model.cross.predict([p.new for p in val_pairs[i : i + EVAL_BATCH]], [p.old for p in val_pairs[i : i + EVAL_BATCH]]) for i in range(0, len(val_pairs), EVAL_BATCH)])
    floor = cross_floor(head, cross, model.mix, _act_at(model.supersede_at), cfg.cross_from_candidates)
    manifest_path = Path(folder) / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    read = float((acting(head).max(axis=1) >= floor).mean())
    manifest["config"]["cross_from"] = floor
    manifest["config"]["training"]["cross_from"] = {"candidates": list(cfg.cross_from_candidates), "val_pairs": len(val_pairs), "val_pairs_read": round(read, 3)}
    manifest_path.write_text(json.dumps(manifest, indent=2) + "\n")
    return floor


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsdk_training.recipes.cross_encoder", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--config", help="YAML or JSON file of CrossEncoderConfig fields")
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--output-dir", dest="output_dir")
    parser.add_argument("--package", dest="package_dir", help="also write the mixed model into this folder")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None)
    parser.add_argument("--floor-only", dest="floor_only", metavar="MODEL_DIR", help="choose the cross-encoder's floor for this saved mixed model and rewrite its manifest")
    args = vars(parser.parse_args(argv))
    floor_only = args.pop("floor_only")
    cfg = cli_config(CrossEncoderConfig, args)
    if floor_only is not None:
        print(json.dumps({"model": floor_only, "cross_from": refloor(cfg, floor_only)}))
        return 0
    result = train_cross_encoder(cfg)
    print(json.dumps({"output_dir": str(result.out), "best_epoch": result.best_epoch, "supersede_at": result.model.supersede_at,
                      "val_macro_f1": round(result.val["macro_f1"], 4), "retire": result.val_retire, "train_s": round(result.train_s, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
