"""Supervised training of the forget cross-encoder (`memsdk.pipeline.forget_cross`): is a turn
a forget request, and is a memory about what it asks to forget, read word against word.

    python -m memsdk_training.recipes.forget_cross [--config FILE] [--out DIR] [--no-held-out]

Data: the forget heads' (`forget_head.load_data`): ``training/data/forget/requests-<author>``
and ``relevance-<author>.jsonl``, each author writing without seeing the other's files, any
evaluation file or the forget rules. No evaluation file is read.

The loop reads top to bottom:

    1. examples  each request turn with its label (intent), each relevance pair twice, with
                 the whole request turn and with the short description (what ingest and
                 `client.forget` each give the reader); and, as negatives, memories about
                 other requests' topics (`other_topic_pairs`)
    2. held out  for each author: fit on the other authors, predict this one; pool the
                 held-out predictions (phrasings and topics the model never saw)
    3. choose    the thresholds on the pooled held-out predictions of the authors' own
                 labels, as the first heads do (`forget_head.threshold_at`): the lowest at
                 which a forget intent, and an "about" memory, are right at least
                 ``intent_precision`` / ``relevance_precision`` of the time
    4. fit       on every author; write the version's folder with the thresholds, the
                 held-out figures and the data's provenance

Each fit: MiniLM with a LoRA adapter (peft), two linear layers over the mean-pooled tokens,
mini-batches of one task each in shuffled order, class-weighted cross-entropy per task
(each class weighs n / (classes * n_class)), AdamW.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np
import torch
import yaml
from pydantic import BaseModel, ConfigDict, Field
from tqdm import tqdm

from memsdk.embedding import SentenceTransformerEmbedder, minilm_path
from memsdk.pipeline.forget_cross import DEFAULT_CROSS_DIR, INTENT, RELEVANCE, ForgetCross
from memsdk.pipeline.forget_head import INTENTS
from memsdk.policies.cross_encoder import LoraSpec, pooled
from memsdk.policies.words import STOPWORDS, split_words, word_key

from ..checkpoint import data_hash
from .cross_encoder import lora_arrays
from .forget_head import DATA_DIR, LOOK_FOR, load_data, rates, threshold_at

__all__ = ["ForgetCrossConfig", "Example", "examples", "other_topic_pairs", "fit", "train", "main"]

Task = Literal["intent", "relevance"]
_OUTPUTS: dict[Task, int] = {"intent": len(INTENTS), "relevance": 2}


class ForgetCrossConfig(BaseModel):
    """What the forget cross-encoder is trained on and how; the defaults run on a 2-core CPU in minutes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    data_dir: Path = DATA_DIR
    out_dir: Path = DEFAULT_CROSS_DIR
    version: str = "forget-v2"
    lora_r: int = Field(16, ge=1)
    lora_alpha: int = Field(32, ge=1)
    lora_dropout: float = Field(0.1, ge=0.0, lt=1.0)
    targets: tuple[str, ...] = Field(("query", "key", "value", "dense"), description="MiniLM's linear layers the adapter adapts, by name.")
    max_length: int = Field(128, ge=8, description="Tokens of a turn, or of a (request, memory) pair together.")
    lr: float = Field(5e-4, gt=0.0, description="The adapter's learning rate.")
    head_lr: float = Field(1e-3, gt=0.0, description="The two linear layers' learning rate.")
    weight_decay: float = Field(0.01, ge=0.0)
    epochs: int = Field(3, ge=1)
    batch_size: int = Field(32, ge=1)
    other_topics: int = Field(0, ge=0, description="Memories about another request's topic each request meets as negatives (`other_topic_pairs`).")
    intent_precision: float = Field(0.9, gt=0.0, le=1.0, description="Held-out precision the intent threshold must reach.")
    relevance_precision: float = Field(0.9, gt=0.0, le=1.0, description="Held-out precision the relevance threshold must reach: with the intent's, it bounds false deletions.")
    held_out: bool = Field(True, description="Choose the thresholds on author-held-out fits (False: reuse ``thresholds``).")
    held_out_authors: tuple[str, ...] | None = Field(None, description="The authors held out one at a time (None: every author); each costs a fit.")
    thresholds: tuple[float, float] | None = Field(None, description="(intent_at, relevance_at) when ``held_out`` is False.")
    seed: int = 0
    num_threads: int | None = Field(2, description="torch threads while training; None leaves torch's default.")
    progress: bool = True


@dataclass(frozen=True)
class Example:
    task: Task
    first: str
    second: str | None
    label: int
    author: str
    #: labelled by its author; False for a negative `other_topic_pairs` drew
    written: bool = True


def examples(requests: Sequence[dict[str, Any]], pairs: Sequence[dict[str, Any]], *, other_topics: int = 0, seed: int = 0) -> list[Example]:
    """Step 1 of the module docstring; with ``other_topics``, each request also meets that many
    memories (`other_topic_pairs`) that are about another request's topic."""
    intent = [Example("intent", r["text"], None, INTENTS.index(r["label"]), r["author"]) for r in requests]
    rows = [*pairs, *other_topic_pairs(pairs, other_topics, seed)]
    relevance = [
        Example("relevance", p[which], p["memory"], int(bool(p["relevant"])), p["author"], written="drawn" not in p) for p in rows for which in ("request", "description")
    ]
    return intent + relevance


def _topic_words(description: str) -> set[str]:
    return {word_key(w) for w in split_words(description) if w not in STOPWORDS and len(w) > 2}


def other_topic_pairs(pairs: Sequence[dict[str, Any]], per_request: int, seed: int = 0) -> list[dict[str, Any]]:
    """Negatives the authors did not write: each request against ``per_request`` memories its
    author wrote as relevant to another request, whose description shares no content word
    with its own. A user's memories are mostly other personal matters, each as personal as
    the one to forget; a reader trained only on the authors' groups took any personal
    disclosure for the topic. Drawn within one author, so an author held out stays unseen."""
    rng = random.Random(seed)
    groups: dict[str, list[dict[str, Any]]] = {}
    for p in pairs:
        groups.setdefault(p["group"], []).append(p)
    topics = {group: _topic_words(members[0]["description"]) for group, members in groups.items()}
    out: list[dict[str, Any]] = []
    for group, members in groups.items():
        first = members[0]
        unrelated = [other for other, rows in groups.items() if other != group and rows[0]["author"] == first["author"] and not topics[group] & topics[other]]
        pool = [p["memory"] for other in unrelated for p in groups[other] if p["relevant"]]
        for memory in rng.sample(pool, min(per_request, len(pool))):
            out.append({**first, "memory": memory, "relevant": False, "why": "another request's topic", "drawn": True})
    return out


def _batches(rows: Sequence[Example], size: int, rng: random.Random) -> list[list[Example]]:
    """Shuffled mini-batches, each of one task (the two take different inputs and layers)."""
    batches: list[list[Example]] = []
    for task in _OUTPUTS:
        of_task = [e for e in rows if e.task == task]
        rng.shuffle(of_task)
        batches += [of_task[i : i + size] for i in range(0, len(of_task), size)]
    rng.shuffle(batches)
    return batches


def _loss_weights(rows: Sequence[Example], task: Task) -> torch.Tensor:
    counts = np.bincount([e.label for e in rows if e.task == task], minlength=_OUTPUTS[task])
    n = counts.sum()
    return torch.tensor(np.where(counts > 0, n / (len(counts) * np.maximum(counts, 1)), 0.0), dtype=torch.float32)


def fit(cfg: ForgetCrossConfig, rows: Sequence[Example], *, desc: str = "forget") -> ForgetCross:
    """A cross-encoder trained on ``rows`` (its thresholds still to be chosen: 0.5 / 0.5)."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModel, AutoTokenizer

    rng = random.Random(cfg.seed)
    torch.manual_seed(cfg.seed)
    tokenizer = AutoTokenizer.from_pretrained(str(minilm_path()))
    adapter = LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout, target_modules=list(cfg.targets))
    encoder = get_peft_model(AutoModel.from_pretrained(str(minilm_path())), adapter)
    heads = {task: torch.nn.Linear(encoder.config.hidden_size, n) for task, n in _OUTPUTS.items()}
    optimizer = torch.optim.AdamW(
        [{"params": [p for p in encoder.parameters() if p.requires_grad], "lr": cfg.lr}, {"params": [p for h in heads.values() for p in h.parameters()], "lr": cfg.head_lr}],
        weight_decay=cfg.weight_decay,
    )
    losses = {task: torch.nn.CrossEntropyLoss(weight=_loss_weights(rows, task)) for task in _OUTPUTS}
    encoder.train()
    for epoch in range(1, cfg.epochs + 1):
        bar = tqdm(_batches(rows, cfg.batch_size, rng), desc=f"{desc} {epoch}/{cfg.epochs}", disable=not cfg.progress)
        for batch in bar:
            task = batch[0].task
            second = None if task == "intent" else [e.second or "" for e in batch]
            logits = heads[task](pooled(tokenizer, encoder, [e.first for e in batch], second, max_length=cfg.max_length))
            loss = losses[task](logits, torch.tensor([e.label for e in batch]))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            bar.set_postfix(loss=f"{loss.item():.3f}")
    arrays = lora_arrays(encoder, heads["intent"], name=INTENT) | lora_arrays(encoder, heads["relevance"], name=RELEVANCE)
    lora = LoraSpec(r=cfg.lora_r, alpha=cfg.lora_alpha, targets=cfg.targets)
    return ForgetCross(
        arrays, lora, look_for=LOOK_FOR, intent_at=0.5, relevance_at=0.5, embedder=SentenceTransformerEmbedder().name, version=cfg.version,
        max_length=cfg.max_length, threads=cfg.num_threads,
    )


def predict(model: ForgetCross, rows: Sequence[Example]) -> np.ndarray:
    """Per example: P(forget) for an intent row (0 where serving would not ask the model, or
    where forget is not its most likely intent), P(about) for a relevance row."""
    scores = np.zeros(len(rows))
    intent = [i for i, e in enumerate(rows) if e.task == "intent"]
    relevance = [i for i, e in enumerate(rows) if e.task == "relevance"]
    if intent:
        probs = np.concatenate([model.intent_probs([rows[i].first for i in intent[k : k + 64]]) for k in range(0, len(intent), 64)])
        forget = INTENTS.index("forget")
        asked = np.array([re.search(LOOK_FOR, rows[i].first, re.I) is not None for i in intent])
        scores[intent] = np.where(asked & (probs.argmax(axis=1) == forget), probs[:, forget], 0.0)
    if relevance:
        scores[relevance] = model.relevance_probs([rows[i].first for i in relevance], [rows[i].second or "" for i in relevance])
    return scores


def _truth(rows: Sequence[Example], task: Task) -> tuple[np.ndarray, np.ndarray]:
    """(which rows are of ``task``, which of those are positive: forget / about)."""
    of_task = np.array([e.task == task for e in rows])
    positive = INTENTS.index("forget") if task == "intent" else 1
    return of_task, np.array([e.label == positive for e in rows])


def _write_held_out(path: Path, rows: Sequence[Example], scores: np.ndarray) -> None:
    """Each held-out prediction, for checking another rule later without refitting."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        for e, score in zip(rows, scores):
            out.write(json.dumps({"task": e.task, "author": e.author, "written": e.written, "label": e.label, "score": float(score), "first": e.first, "second": e.second}) + "\n")


def train(cfg: ForgetCrossConfig) -> dict[str, Any]:
    threads = torch.get_num_threads()
    if cfg.num_threads is not None:
        torch.set_num_threads(cfg.num_threads)
    started = time.perf_counter()
    try:
        requests, pairs = load_data(cfg.data_dir)
        rows = examples(requests, pairs, other_topics=cfg.other_topics, seed=cfg.seed)
        authors = sorted({e.author for e in rows})
        held: dict[str, Any] = {}
        if cfg.held_out:
            scores = np.zeros(len(rows))
            for author in cfg.held_out_authors or authors:
                test = [i for i, e in enumerate(rows) if e.author == author]
                model = fit(cfg, [e for e in rows if e.author != author], desc=f"without {author}")
                scores[test] = predict(model, [rows[i] for i in test])
            # chosen on the authors' own labels: a drawn negative can be about the topic after all
            held_authors = np.array([e.author in (cfg.held_out_authors or authors) for e in rows])
            judged = held_authors & np.array([e.written for e in rows])
            at = []
            targets: tuple[tuple[Task, float], ...] = (("intent", cfg.intent_precision), ("relevance", cfg.relevance_precision))
            for task, precision in targets:
                of_task, positive = _truth(rows, task)
                t = threshold_at(scores[of_task & judged], positive[of_task & judged], precision)
                at.append(t)
                held[task] = rates(scores[of_task & judged] >= t, positive[of_task & judged])
            relevance, positive = _truth(rows, "relevance")
            held["relevance_with_drawn_negatives"] = rates(scores[relevance & held_authors] >= at[1], positive[relevance & held_authors])
            _write_held_out(cfg.out_dir / "held_out.jsonl", [e for e, h in zip(rows, held_authors) if h], scores[held_authors])
            intent_at, relevance_at = at
        elif cfg.thresholds is not None:
            intent_at, relevance_at = cfg.thresholds
        else:
            raise ValueError("held_out False needs thresholds (intent_at, relevance_at)")
        model = fit(cfg, rows, desc="all")
    finally:
        torch.set_num_threads(threads)
    model.intent_at, model.relevance_at = intent_at, relevance_at
    provenance = {
        "chosen_on": f"author-held-out predictions (each of {list(cfg.held_out_authors or authors)} predicted by a model fitted on the others) on the authors' own labels, at precision >= {cfg.intent_precision} (intent) and {cfg.relevance_precision} (relevance)" if cfg.held_out else "given",
        "data": {
            "source": "training/data/forget: requests-*.jsonl and relevance-*.jsonl, each author writing without seeing the other's files, any evaluation file or the forget rules",
            "requests": {label: sum(r["label"] == label for r in requests) for label in INTENTS}, "relevance_pairs": len(pairs), "authors": authors,
            "hash": data_hash(json.dumps([e.task, e.first, e.second, e.label]) for e in rows),
        },
        "held_out": held, "training": cfg.model_dump(mode="json", exclude={"data_dir", "out_dir"}),
        "train_s": round(time.perf_counter() - started, 1), "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    model.save(cfg.out_dir, **provenance)
    return provenance


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsdk_training.recipes.forget_cross", description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="A YAML file of `ForgetCrossConfig` fields.")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--no-held-out", action="store_true", help="Skip the author-held-out fits (the thresholds must be in the config).")
    args = parser.parse_args(argv)
    fields: dict[str, Any] = yaml.safe_load(args.config.read_text()) if args.config else {}
    if args.out is not None:
        fields["out_dir"] = args.out
    if args.no_held_out:
        fields["held_out"] = False
    provenance = train(ForgetCrossConfig(**fields))
    sys.stdout.write(json.dumps({k: provenance[k] for k in ("held_out", "data", "train_s")}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
