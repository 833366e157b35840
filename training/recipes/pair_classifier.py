"""Supervised training of the pair classifier (`memsdk.policies.relations`), the head the
`PairManager` serves: candidate (a) of the trained supersession policy.

    python -m memsdk_training.recipes.pair_classifier [--config FILE] [--train JSONL --val JSONL]
        [--embedder minilm|hash] [--epochs N] [--output-dir DIR] [--package DIR]

Data: labelled (new text, old text, relation) pairs, from JSONL files of
``{"new": ..., "old": ..., "label": ...}`` or, without them, the management benchmark's
``memsdk.eval.manage.pairs("train", train_scenarios)`` and ``pairs("val", val_scenarios)``,
each text behind its speaker's header as the heuristic extractor's facts are. The splits
share no phrasing, name or value; the test split is never read.

Measured on this 2-core CPU (training/configs/pairs.yaml: 5,329 train pairs, 3,264 from
1,000 scenarios and 2,065 of LoCoMo conv-26's turns; 663 + 1,815 val pairs): 34 s wall in
all, 25-28 s of it embedding; val accuracy .973, macro F1 .856 (the head's manifest,
memsdk/registry/packaged/manager/pairs-v5, holds the per-class figures).

The loop reads top to bottom:

    1. embed     every distinct text of train and val once (`relation_text`: no header), in
                 batches, with the embedder the head is served with; features per pair
                 (`pair_features`: the attribute features over the embedder's own
                 `attribute_prototypes`), standardised with the train set's mean and scale
    2. train     per epoch: shuffled mini-batches, class-weighted cross-entropy (each class
                 weighs n / (classes * n_class), so a rare relation counts as a common one),
                 AdamW; then the val loss, accuracy and macro F1
    3. keep      the epoch with the best val macro F1 (its weights; ties: the earlier one)
    4. write     the head (`PairClassifier.save`: ``head.npz`` + ``manifest.json`` with the
                 label order, feature spec, embedder, val metrics and confusion, and the
                 threshold it retires at: `retire_threshold` of its val retirements) under
                 ``<output_dir>/head`` and, when asked, ``package_dir``; ``metrics.jsonl``
                 (one row per epoch), ``curves.png`` and ``report.json`` (per-class
                 precision / recall, the confusion matrix, wall times)

``shuffle_labels`` permutes the train labels: the control of the learning test, which must
stay near chance on val.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal, TypeVar

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from memsdk.embedding import Embedder, HashEmbedder, SentenceTransformerEmbedder
from memsdk.policies.relations import ATTRIBUTES, LEXICAL, RELATIONS, PairClassifier, Relation, attribute_prototypes, pair_features, reads_attributes, relation_text

from ..checkpoint import data_hash
from .metrics import MetricsLog, plot_metrics
from .written_pairs import read_written, split_by_attribute

__all__ = ["PairClassifierConfig", "Pair", "PairTrainResult", "standardiser", "retire_scores", "read_pairs", "benchmark_pairs", "chat_pairs", "as_pair", "embed_pairs", "evaluate", "retire_threshold", "train_pair_classifier", "cli_config", "main"]

#: texts embedded per call (a progress step)
EMBED_BATCH = 256
#: the least scale of a lexical feature (`standardiser`)
LEXICAL_MIN_SCALE = 0.1


class PairClassifierConfig(BaseModel):
    """What the pair head is trained on and how; every default runs on a CPU in minutes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    train_path: str | None = Field(None, description="JSONL of {new, old, label}; None: the management benchmark's pairs('train').")
    val_path: str | None = Field(None, description="JSONL of {new, old, label}; None: the management benchmark's pairs('val').")
    train_scenarios: int | None = Field(1000, ge=1, description="Benchmark scenarios the train pairs come from (None: the benchmark's own size).")
    val_scenarios: int | None = Field(200, ge=1, description="Benchmark scenarios the val pairs come from (None: the benchmark's own size).")
    embedder: Literal["minilm", "hash"] = Field("minilm", description="The vectors the head reads; the served manager embeds with the same one.")
    hash_dim: int = Field(64, ge=8, description="The hashing embedder's size (tests).")
    embedding_weight: float = Field(
        0.3, gt=0.0, description="The embedding blocks' standardised size beside the lexical features' (1: the same). Below 1 the head leans "
        "on the cues that carry over to new phrasings (benchmark pairs alone, val macro F1, 3 seeds: 1 .74, .3 .84, .1 .89); with the chat "
        "pairs .3 retired the fewest chat pairs (val, at .9: 12 against 13-14 for .1 and (128,) hidden).",
    )
    chat_negatives: tuple[str, str] | None = Field(
        ("conv-26", "conv-30"), description="LoCoMo conversations (train, val) whose turns, each paired with its most similar earlier turns of the same "
        "speaker, join the train / val pairs as 'unrelated': real chat rarely replaces what was said before, and the benchmark's templates alone "
        "taught the head to retire 119 of conv-30's facts (LoCoMo val recall@10 .781 -> .664). None: benchmark pairs only.",
    )
    chat_related_k: int = Field(5, ge=1, description="Earlier turns per turn in those pairs: the memories the manager is shown (the client's related_k).")
    chat_repeat: int = Field(
        1, ge=1, description="Times each train chat pair is seen per epoch: pairs told as events, without a cue word, look like chat, and real chat must still be "
        "left alone (each written pair is one person's; the chat is what apps send).",
    )
    hidden: tuple[int, ...] = Field((64,), description="Hidden layer widths; () is a linear (logistic) head.")
    dropout: float = Field(0.3, ge=0.0, lt=1.0)
    lr: float = Field(5e-4, gt=0.0)
    weight_decay: float = Field(0.05, ge=0.0)
    epochs: int = Field(60, ge=1, description="With the chat pairs the best val epoch came late (50-60 of 60).")
    batch_size: int = Field(64, ge=1)
    class_balanced: bool = Field(True, description="Weigh each class's loss by n / (classes * n_class).")
    shuffle_labels: bool = Field(False, description="Permute the train labels: the learning test's control.")
    seed: int = 0
    num_threads: int | None = Field(2, description="torch threads for embedding and training; None leaves torch's default.")
    min_precision: float | None = Field(
        0.9, gt=0.0, le=1.0, description="The head is served retiring at the lowest threshold (of `retire_scores`') whose val retirements are at "
        "least this right, the highest when none is (`retire_threshold`); None: the manager's default (.9).",
    )
    written_pairs: tuple[str, ...] = Field(
        (), description="JSONL files of pairs written outside the generator (`written_pairs`), split by attribute into train / val / an attribute-held-out test."
    )
    written_split: tuple[float, float] = Field((0.7, 0.15), description="The train and val shares of the written pairs' attributes; the rest is the held-out test.")
    written_prototypes: bool = Field(False, description="Add each train attribute's name to the attribute prototypes, beside `relations.ATTRIBUTES`.")
    version: str = "pairs-v5"
    output_dir: str = "build/train/pairs"
    package_dir: str | None = Field(None, description="Also write the head here (memsdk/registry/packaged/manager/pairs-v1).")
    progress: bool = True


@dataclass(frozen=True)
class Pair:
    new: str
    old: str
    label: Relation


def as_pair(item: Any) -> Pair:
    """A labelled pair from a dict, a (new, old, label) tuple, or an object with those fields."""
    if isinstance(item, Pair):
        return item
    if isinstance(item, dict):
        new, old, label = item["new"], item["old"], item["label"]
    elif isinstance(item, (tuple, list)):
        new, old, label = item
    else:
        new, old, label = item.new, item.old, item.label
    return Pair(str(new), str(old), Relation(str(label)))


def read_pairs(path: str | Path) -> list[Pair]:
    return [as_pair(json.loads(line)) for line in Path(path).read_text().splitlines() if line.strip()]


def benchmark_pairs(split: Literal["train", "val"], scenarios: int | None = None) -> list[Pair]:
    """The management benchmark's labelled pairs of ``split`` (never its test split), from
    ``scenarios`` of its conversations. Each text carries its speaker as a header ("Maya:
    I moved to York"), as the heuristic extractor's facts do when the manager sees them."""
    try:
        from memsdk.eval.manage import pairs
    except ImportError as exc:
        raise RuntimeError(f"the management benchmark (memsdk.eval.manage.pairs) is not available: {exc}; give train_path and val_path") from None
    return [Pair(f"{p.new_speaker}: {p.new}", f"{p.old_speaker}: {p.old}", Relation(p.label)) for p in pairs(split, scenarios)]


def chat_pairs(sample_id: str, embedder: Embedder, k: int) -> list[Pair]:
    """Each turn of LoCoMo conversation ``sample_id`` against the ``k`` earlier turns of its
    speaker most similar to it (what the manager is shown when the turn is ingested), as
    'unrelated' pairs: the texts the head must leave alone when it serves real chat. Only
    train / val conversations are asked for (`PairClassifierConfig.chat_negatives`)."""
    from memsdk.datasets.locomo import load_locomo

    (conv,) = [c for c in load_locomo() if c.sample_id == sample_id]
    turns = [(t.speaker, f"{t.speaker}: {t.text}") for t in conv.turns()]
    vectors = embedder.embed([relation_text(text) for _, text in turns])
    pairs = []
    for i, (speaker, text) in enumerate(turns):
        earlier = [j for j in range(i) if turns[j][0] == speaker]
        for j in sorted(earlier, key=lambda j: -float(vectors[i] @ vectors[j]))[:k]:
            pairs.append(Pair(text, turns[j][1], Relation.UNRELATED))
    return pairs


def embed_pairs(
    pairs: Sequence[Pair], embedder: Embedder, *, lexical: Sequence[str] = LEXICAL, prototypes: np.ndarray | None = None, progress: bool = False
) -> np.ndarray:
    """`pair_features` of ``pairs``, each distinct text embedded once: the ``lexical``
    features, the attribute ones over ``prototypes`` (None: ``embedder``'s `attribute_prototypes`)."""
    if prototypes is None and reads_attributes(lexical):
        prototypes = attribute_prototypes(embedder.embed)
    texts = list(dict.fromkeys(relation_text(t) for p in pairs for t in (p.new, p.old)))
    vectors = np.zeros((len(texts), embedder.dim), dtype=np.float32)
    for start in tqdm(range(0, len(texts), EMBED_BATCH), desc="embed", disable=not progress):
        vectors[start : start + EMBED_BATCH] = embedder.embed(texts[start : start + EMBED_BATCH])
    row = {t: i for i, t in enumerate(texts)}
    u = vectors[[row[relation_text(p.new)] for p in pairs]]
    v = vectors[[row[relation_text(p.old)] for p in pairs]]
    return pair_features(u, v, [p.new for p in pairs], [p.old for p in pairs], lexical=lexical, prototypes=prototypes)


def evaluate(probs: np.ndarray, gold: np.ndarray) -> dict[str, Any]:
    """Accuracy, macro F1, per-class precision / recall / F1 / support, and the confusion
    matrix (rows gold, columns predicted, both in `RELATIONS` order) of ``probs`` [n, classes]."""
    k = len(RELATIONS)
    predicted = probs.argmax(axis=1)
    confusion = np.zeros((k, k), dtype=np.int64)
    np.add.at(confusion, (gold, predicted), 1)
    per_class: dict[str, dict[str, float]] = {}
    for c, relation in enumerate(RELATIONS):
        tp, predicted_count, support = confusion[c, c], confusion[:, c].sum(), confusion[c].sum()
        precision = tp / predicted_count if predicted_count else 0.0
        recall = tp / support if support else 0.0
        f1 = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
        per_class[relation] = {"precision": float(precision), "recall": float(recall), "f1": float(f1), "support": int(support)}
    present = [m["f1"] for m in per_class.values() if m["support"]]
    return {
        "accuracy": float((predicted == gold).mean()) if len(gold) else 0.0,
        "macro_f1": float(np.mean(present)) if present else 0.0,
        "per_class": per_class,
        "confusion": confusion.tolist(),
    }


def retire_scores(probs: np.ndarray, gold: np.ndarray, thresholds: Sequence[float] = (0.5, 0.6, 0.7, 0.8, 0.9)) -> dict[str, dict[str, float]]:
    """What `PairManager` would retire, per ``supersede_at`` threshold: a pair is retired when
    P(supersedes) + P(corrects) reaches it. Precision and recall against the gold supersedes /
    corrects pairs, and ``false``: pairs of any other relation retired (each one a fact the
    manager would wrongly take out of the current view)."""
    sup, cor = RELATIONS.index(Relation.SUPERSEDES), RELATIONS.index(Relation.CORRECTS)
    wanted = (gold == sup) | (gold == cor)
    out = {}
    for t in thresholds:
        retired = probs[:, sup] + probs[:, cor] >= t
        hit = int((retired & wanted).sum())
        out[f"{t:g}"] = {"precision": hit / max(1, int(retired.sum())), "recall": hit / max(1, int(wanted.sum())), "false": float((retired & ~wanted).sum())}
    return out


def retire_threshold(retire: Mapping[str, Mapping[str, float]], min_precision: float) -> float:
    """The lowest threshold of `retire_scores`'s table whose retirements reach
    ``min_precision``; the highest one when none does. A wrong retirement takes a true fact
    out of the current view, so precision comes first and, past it, recall."""
    ranked = sorted(retire, key=float)
    return float(next((t for t in ranked if retire[t]["precision"] >= min_precision), ranked[-1]))


@dataclass
class PairTrainResult:
    classifier: PairClassifier
    val: dict[str, Any]
    val_retire: dict[str, dict[str, float]]
    best_epoch: int
    embed_s: float
    train_s: float
    out: Path


def standardiser(x: np.ndarray, embed_dim: int, embedding_weight: float = 1.0) -> tuple[np.ndarray, np.ndarray]:
    """The mean and scale the head standardises its features with: the train mean per
    feature; one scale per embedding block (the block's mean std over ``embedding_weight``),
    so a dimension that barely varied in training (a hash bucket no train word fell into) is
    not blown up when a new text lands there; per lexical feature its std, at least
    `LEXICAL_MIN_SCALE` (a cue never seen in training amplified at most ten times)."""
    std = x.std(axis=0)
    blocks = [np.full(embed_dim, max(float(std[i * embed_dim : (i + 1) * embed_dim].mean()), 1e-6) / embedding_weight) for i in range(2)]
    scale = np.concatenate([*blocks, np.maximum(std[2 * embed_dim :], LEXICAL_MIN_SCALE)])
    return x.mean(axis=0).astype(np.float32), scale.astype(np.float32)


def _embedder(cfg: PairClassifierConfig) -> Embedder:
    return HashEmbedder(cfg.hash_dim) if cfg.embedder == "hash" else SentenceTransformerEmbedder(threads=cfg.num_threads, batch_size=64)


def _head(cfg: PairClassifierConfig, dim: int) -> torch.nn.Sequential:
    layers: list[torch.nn.Module] = []
    for width in cfg.hidden:
        layers += [torch.nn.Linear(dim, width), torch.nn.ReLU(), torch.nn.Dropout(cfg.dropout)]
        dim = width
    return torch.nn.Sequential(*layers, torch.nn.Linear(dim, len(RELATIONS)))


def _numpy_head(
    model: torch.nn.Sequential, mean: np.ndarray, scale: np.ndarray, prototypes: np.ndarray, embedder: str, cfg: PairClassifierConfig, metrics: dict[str, float]
) -> PairClassifier:
    linears = [m for m in model if isinstance(m, torch.nn.Linear)]
    layers = tuple((m.weight.detach().numpy().T.copy(), m.bias.detach().numpy().copy()) for m in linears)
    return PairClassifier(layers=layers, mean=mean, scale=scale, labels=RELATIONS, embedder=embedder, version=cfg.version, metrics=metrics, prototypes=prototypes)


def _flat(val: dict[str, Any], best_epoch: int, n_train: int) -> dict[str, float]:
    """The manifest's ``eval_metrics``: numbers only."""
    out = {"val_accuracy": val["accuracy"], "val_macro_f1": val["macro_f1"], "best_epoch": float(best_epoch), "train_pairs": float(n_train)}
    for name, m in val["per_class"].items():
        out |= {f"val_precision_{name}": m["precision"], f"val_recall_{name}": m["recall"], f"val_support_{name}": float(m["support"])}
    return out


def train_pair_classifier(
    cfg: PairClassifierConfig, train: Iterable[Any] | None = None, val: Iterable[Any] | None = None, *, embedder: Embedder | None = None
) -> PairTrainResult:
    """Train a head on ``train`` (pairs; None: ``cfg.train_path`` or the benchmark's train
    split), keep its best epoch on ``val``, write it (module docstring)."""
    train_pairs = [as_pair(p) for p in train] if train is not None else read_pairs(cfg.train_path) if cfg.train_path else benchmark_pairs("train", cfg.train_scenarios)
    val_pairs = [as_pair(p) for p in val] if val is not None else read_pairs(cfg.val_path) if cfg.val_path else benchmark_pairs("val", cfg.val_scenarios)
    if not train_pairs or not val_pairs:
        raise ValueError(f"need train and val pairs, got {len(train_pairs)} and {len(val_pairs)}")
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    random.seed(cfg.seed)
    np.random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    threads = torch.get_num_threads()
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    try:
        # 1. embed
        started = time.perf_counter()
        embedder = embedder or _embedder(cfg)
        if cfg.chat_negatives is not None:
            train_pairs += chat_pairs(cfg.chat_negatives[0], embedder, cfg.chat_related_k) * cfg.chat_repeat
            val_pairs += chat_pairs(cfg.chat_negatives[1], embedder, cfg.chat_related_k)
        written = read_written(cfg.written_pairs)
        written_train, written_val, written_test = split_by_attribute(written, *cfg.written_split)
        train_pairs += [as_pair((w.new, w.old, w.label)) for w in written_train]
        val_pairs += [as_pair((w.new, w.old, w.label)) for w in written_val]
        test_pairs = [as_pair((w.new, w.old, w.label)) for w in written_test if w.attribute]
        chat_test = [as_pair((w.new, w.old, w.label)) for w in written_test if not w.attribute]
        attributes = {**ATTRIBUTES, **({f"written:{w.attribute}": (w.attribute,) for w in written_train if w.attribute} if cfg.written_prototypes else {})}
        prototypes = attribute_prototypes(embedder.embed, attributes)
        x_train, x_val = embed_pairs(train_pairs, embedder, prototypes=prototypes, progress=cfg.progress), embed_pairs(val_pairs, embedder, prototypes=prototypes, progress=cfg.progress)
        x_test = embed_pairs(test_pairs, embedder, prototypes=prototypes) if test_pairs else None
        x_chat = embed_pairs(chat_test, embedder, prototypes=prototypes) if chat_test else None
        y_train = np.array([RELATIONS.index(p.label) for p in train_pairs])
        y_val = np.array([RELATIONS.index(p.label) for p in val_pairs])
        if cfg.shuffle_labels:
            y_train = np.random.default_rng(cfg.seed).permutation(y_train)
        mean, scale = standardiser(x_train, embedder.dim, cfg.embedding_weight)
        xt = torch.from_numpy((x_train - mean) / scale)
        xv = torch.from_numpy((x_val - mean) / scale)
        yt, yv = torch.from_numpy(y_train), torch.from_numpy(y_val)
        embed_s = time.perf_counter() - started

        # 2. train, 3. keep the best val epoch
        started = time.perf_counter()
        counts = np.bincount(y_train, minlength=len(RELATIONS))
        weights = np.where(counts > 0, len(y_train) / (len(RELATIONS) * np.maximum(counts, 1)), 0.0) if cfg.class_balanced else np.ones(len(RELATIONS))
        loss_fn = torch.nn.CrossEntropyLoss(weight=torch.tensor(weights, dtype=torch.float32))
        model = _head(cfg, xt.shape[1])
        optimizer = torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay)
        log = MetricsLog(out / "metrics.jsonl")
        best: tuple[float, int, dict[str, torch.Tensor]] | None = None
        bar = tqdm(range(1, cfg.epochs + 1), desc="pairs", disable=not cfg.progress)
        for epoch in bar:
            model.train()
            order = torch.randperm(len(xt))
            total = 0.0
            for start in range(0, len(xt), cfg.batch_size):
                batch = order[start : start + cfg.batch_size]
                loss = loss_fn(model(xt[batch]), yt[batch])
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
                total += loss.item() * len(batch)
            model.eval()
            with torch.no_grad():
                logits = model(xv)
                val_loss = float(loss_fn(logits, yv))
            scores = evaluate(torch.softmax(logits, dim=1).numpy(), y_val)
            log.write({"step": epoch, "train_loss": total / len(xt), "eval_val_loss": val_loss, "eval_val_accuracy": scores["accuracy"], "eval_val_macro_f1": scores["macro_f1"]})
            bar.set_postfix(val_f1=f"{scores['macro_f1']:.3f}", val_acc=f"{scores['accuracy']:.3f}")
            if best is None or scores["macro_f1"] > best[0]:
                best = (scores["macro_f1"], epoch, {k: t.clone() for k, t in model.state_dict().items()})
        assert best is not None  # epochs >= 1
        model.load_state_dict(best[2])
        train_s = time.perf_counter() - started
    finally:
        torch.set_num_threads(threads)

    # 4. write: the served (numpy) head's own val scores
    val_probs = _numpy_head(model, mean, scale, prototypes, embedder.name, cfg, {}).predict(x_val)
    val_scores, val_retire = evaluate(val_probs, y_val), retire_scores(val_probs, y_val)
    head = replace(
        _numpy_head(model, mean, scale, prototypes, embedder.name, cfg, _flat(val_scores, best[1], len(train_pairs))),
        supersede_at=None if cfg.min_precision is None else retire_threshold(val_retire, cfg.min_precision),
    )
    training = {
        "recipe": cfg.model_dump(mode="json"),
        "val_confusion": {"rows_gold_cols_predicted": [str(r) for r in RELATIONS], "matrix": val_scores["confusion"]},
        "val_retire": val_retire,
        "train_counts": {str(r): int(c) for r, c in zip(RELATIONS, counts)},
        "embed_s": round(embed_s, 2),
        "train_s": round(train_s, 2),
    }
    digest = data_hash(json.dumps([p.new, p.old, str(p.label)]) for p in [*train_pairs, *val_pairs])
    for folder in [out / "head", *([Path(cfg.package_dir)] if cfg.package_dir else [])]:
        head.save(folder, config=training, training_data_hash=digest)
    plot_metrics(out / "metrics.jsonl", out / "curves.png", curves=("train_loss",))
    report = {
        "best_epoch": best[1], "val": val_scores, "val_retire": val_retire,
        "train_pairs": len(train_pairs), "val_pairs": len(val_pairs), "embed_s": embed_s, "train_s": train_s,
    }  # fmt: skip
    if x_test is not None:  # attributes the head never trained on, scored once after training
        y_test = np.array([RELATIONS.index(p.label) for p in test_pairs])
        test_probs = head.predict(x_test)
        report |= {"attribute_held_out": evaluate(test_probs, y_test), "attribute_held_out_retire": retire_scores(test_probs, y_test), "attribute_held_out_pairs": len(test_pairs)}
    if x_chat is not None:  # written chat held out: mostly restatements a manager must leave alone
        y_chat = np.array([RELATIONS.index(p.label) for p in chat_test])
        report |= {"chat_held_out_retire": retire_scores(head.predict(x_chat), y_chat), "chat_held_out_pairs": len(chat_test)}
    (out / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    return PairTrainResult(head, val_scores, val_retire, best[1], embed_s, train_s, out)


M = TypeVar("M", bound=BaseModel)


def cli_config(cls: type[M], args: dict[str, Any]) -> M:
    """``cls`` from the command line: the file ``args["config"]`` names (YAML, or JSON: YAML
    reads both), overridden by every other argument given (not None)."""
    import yaml

    path = args.pop("config", None)
    data = (yaml.safe_load(Path(path).read_text()) or {}) if path else {}
    return cls.model_validate({**data, **{k: v for k, v in args.items() if v is not None}})


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsdk_training.recipes.pair_classifier", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--config", help="YAML or JSON file of PairClassifierConfig fields")
    parser.add_argument("--train", dest="train_path", help="JSONL of {new, old, label} (default: the benchmark's train split)")
    parser.add_argument("--val", dest="val_path", help="JSONL of {new, old, label} (default: the benchmark's val split)")
    parser.add_argument("--embedder", choices=("minilm", "hash"))
    parser.add_argument("--epochs", type=int)
    parser.add_argument("--output-dir", dest="output_dir")
    parser.add_argument("--package", dest="package_dir", help="also write the head into this folder")
    parser.add_argument("--no-progress", dest="progress", action="store_false", default=None)
    cfg = cli_config(PairClassifierConfig, vars(parser.parse_args(argv)))
    result = train_pair_classifier(cfg)
    per_class = {name: {k: round(m[k], 3) for k in ("precision", "recall")} for name, m in result.val["per_class"].items()}
    print(json.dumps({"output_dir": str(result.out), "best_epoch": result.best_epoch, "val_accuracy": round(result.val["accuracy"], 4),
                      "val_macro_f1": round(result.val["macro_f1"], 4), "per_class": per_class, "confusion": result.val["confusion"],
                      "retire": result.val_retire, "supersede_at": result.classifier.supersede_at, "embed_s": round(result.embed_s, 1), "train_s": round(result.train_s, 1)}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
