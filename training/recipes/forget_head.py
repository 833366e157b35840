"""Supervised training of the forget heads (`memsdk.pipeline.forget_head`): is a turn a
forget request, and is a memory about what it asks to forget.

    python -m memsdk_training.recipes.forget_head [--data DIR] [--out DIR] [--precision P]

Data: ``training/data/forget/requests-<author>.jsonl`` (a turn, its label other / forget /
refuse, the words naming what to forget) and ``relevance-<author>.jsonl`` (a request, a
short description of it, a memory, whether the memory is about it). Each author wrote
without seeing the other's files, any evaluation file or this code's rules, so holding one
author out measures phrasings the head never saw.

The loop reads top to bottom:

    1. embed     every distinct text once with MiniLM (the embedder the head is served with)
    2. held out  for each author: fit both heads on the other authors, predict this one
                 (an author-held-out split); pool the held-out predictions
    3. choose    the thresholds on the pooled held-out predictions: the lowest at which a
                 forget intent, and an "about" memory, are right at least ``precision`` of
                 the time (a false deletion costs a user's data; a missed one is reported)
    4. fit       both heads on every author, write ``head.npz`` and ``manifest.json`` (the
                 thresholds, the held-out figures, the data's provenance) to ``out``

Both heads are L2-regularised logistic regressions (scikit-learn): the intent head a
softmax over the turn's vector, the relevance head over `relevance_features`.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
from sklearn.linear_model import LogisticRegression

from memsdk.embedding import Embedder, SentenceTransformerEmbedder
from memsdk.pipeline.forget_head import DEFAULT_HEAD_DIR, FEATURES, INTENTS, relevance_features

__all__ = ["ForgetHeadConfig", "load_data", "held_out", "threshold_at", "rates", "train", "main"]

DATA_DIR = Path(__file__).resolve().parents[1] / "data" / "forget"

#: turns worth asking the intent head about: a word about keeping, removing or remembering.
#: Recall-oriented (the head decides); chosen so that ordinary chat rarely pays the embedding
LOOK_FOR = (
    r"\b(?:forget|forgot|delete|deleting|remove|removing|erase|erasing|drop|wipe|wiping|scrub|purge|scrap|clear|discard|destroy|"
    r"get rid|rid of|keep|keeping|kept|store|storing|stored|save|saving|saved|remember|remembering|remembered|record|records|recorded|"
    r"retain|retaining|hold on|hold onto|hang on to|on file|on record|note|notes|memory|memories|gdpr|data)\b"
)


@dataclass(frozen=True)
class ForgetHeadConfig:
    data_dir: Path = DATA_DIR
    out_dir: Path = DEFAULT_HEAD_DIR
    version: str = "forget-v1"
    #: held-out precision each threshold must reach. The authors' negatives are hard on
    #: purpose (the same verbs, the same words in another sense), far harder than chat; and a
    #: false intent deletes nothing unless a memory also matches, so both stages share the risk
    precision: float = 0.9
    #: inverse L2 strength of both regressions
    c_intent: float = 1.0
    c_relevance: float = 1.0


def _jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def load_data(data_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(requests, relevance pairs) of every author's files."""
    requests = [row for p in sorted(data_dir.glob("requests-*.jsonl")) for row in _jsonl(p)]
    pairs = [row for p in sorted(data_dir.glob("relevance-*.jsonl")) for row in _jsonl(p)]
    if not requests or not pairs:
        raise FileNotFoundError(f"{data_dir}: no requests-*.jsonl or relevance-*.jsonl")
    return requests, pairs


def _pair_rows(pairs: Sequence[dict[str, Any]]) -> list[tuple[str, str, bool, str]]:
    """Each pair twice: described by the whole request turn (what ingest sees) and by the
    short description (what `client.forget` is given)."""
    return [(p[which], p["memory"], bool(p["relevant"]), p["author"]) for p in pairs for which in ("request", "description")]


def _fit(x: np.ndarray, y: np.ndarray, c: float) -> LogisticRegression:
    return LogisticRegression(C=c, max_iter=2000, class_weight="balanced").fit(x, y)


def threshold_at(scores: np.ndarray, labels: np.ndarray, precision: float) -> float:
    """The lowest score threshold whose positives are right at least ``precision`` of the
    time (1.0 when none is)."""
    for t in np.unique(np.round(scores, 3)):
        chosen = scores >= t
        if chosen.any() and labels[chosen].mean() >= precision:
            return float(t)
    return 1.0


def held_out(x: np.ndarray, y: np.ndarray, authors: np.ndarray, c: float) -> np.ndarray:
    """Class probabilities for every row from a head fitted without its author's rows."""
    probs = np.zeros((len(y), len(np.unique(y))))
    for author in np.unique(authors):
        held = authors == author
        probs[held] = _fit(x[~held], y[~held], c).predict_proba(x[held])
    return probs


def rates(chosen: np.ndarray, truth: np.ndarray) -> dict[str, float]:
    hits = int((chosen & truth).sum())
    return {"precision": hits / max(int(chosen.sum()), 1), "recall": hits / max(int(truth.sum()), 1), "n": int(truth.size)}


def train(config: ForgetHeadConfig, embedder: Embedder | None = None) -> dict[str, Any]:
    embedder = embedder or SentenceTransformerEmbedder()
    requests, pairs = load_data(config.data_dir)
    rows = _pair_rows(pairs)
    texts = sorted({r["text"] for r in requests} | {t for d, m, _, _ in rows for t in (d, m)})
    vectors = dict(zip(texts, np.asarray(embedder.embed(texts), dtype=np.float32)))

    # the intent head: the turn's vector -> other / forget / refuse
    xi = np.stack([vectors[r["text"]] for r in requests])
    yi = np.array([INTENTS.index(r["label"]) for r in requests])
    ai = np.array([r["author"] for r in requests])
    pi = held_out(xi, yi, ai, config.c_intent)
    forget = INTENTS.index("forget")
    # what serving sees: the head is asked only about turns its look_for pattern finds
    looked = np.array([re.search(LOOK_FOR, r["text"], re.I) is not None for r in requests])
    wants_forget = (pi.argmax(axis=1) == forget) & looked
    intent_at = threshold_at(np.where(wants_forget, pi[:, forget], 0.0), yi == forget, config.precision)
    intent_heldout = rates(wants_forget & (pi[:, forget] >= intent_at), yi == forget)

    # the relevance head: features of (description, memory) -> about it or not
    xr = np.array([relevance_features(d, m, float(vectors[d] @ vectors[m])) for d, m, _, _ in rows], dtype=np.float32)
    yr = np.array([int(rel) for _, _, rel, _ in rows])
    ar = np.array([a for _, _, _, a in rows])
    pr = held_out(xr, yr, ar, config.c_relevance)[:, 1]
    relevance_at = threshold_at(pr, yr == 1, config.precision)
    relevance_heldout = rates(pr >= relevance_at, yr == 1)

    intent, relevance = _fit(xi, yi, config.c_intent), _fit(xr, yr, config.c_relevance)
    config.out_dir.mkdir(parents=True, exist_ok=True)
    np.savez(
        config.out_dir / "head.npz",
        intent=np.vstack([intent.coef_.T, intent.intercept_]).astype(np.float32),
        relevance=np.append(relevance.coef_[0], relevance.intercept_).astype(np.float32),
    )
    authors = sorted(set(ai) | set(ar))
    manifest = {
        "version": config.version, "embedder": embedder.name, "intents": list(INTENTS), "features": list(FEATURES), "look_for": LOOK_FOR,
        "intent_at": intent_at, "relevance_at": relevance_at,
        "chosen_on": f"author-held-out predictions (each of {authors} predicted by heads fitted on the others), at precision >= {config.precision}",
        "data": {
            "source": "training/data/forget: requests-*.jsonl and relevance-*.jsonl, each author writing without seeing the other's files, any evaluation file or the forget rules",
            "requests": {label: int((yi == INTENTS.index(label)).sum()) for label in INTENTS}, "relevance_pairs": len(pairs), "authors": authors,
        },
        "held_out": {"intent_forget": intent_heldout, "relevance": relevance_heldout},
        "trained_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    (config.out_dir / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    return manifest


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memsdk_training.recipes.forget_head", description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA_DIR)
    parser.add_argument("--out", type=Path, default=DEFAULT_HEAD_DIR)
    parser.add_argument("--precision", type=float, default=ForgetHeadConfig.precision)
    args = parser.parse_args(argv)
    manifest = train(ForgetHeadConfig(data_dir=args.data, out_dir=args.out, precision=args.precision))
    sys.stdout.write(json.dumps({k: manifest[k] for k in ("intent_at", "relevance_at", "held_out", "data")}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
