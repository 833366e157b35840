"""Per-step metrics: one JSON object per line, and a PNG of the curves at the end.

JSONL because a run that dies still leaves every finished step readable, and because a
resumed run appends to the same file. The plot uses matplotlib's Agg backend (no display).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

__all__ = ["MetricsLog", "read_metrics", "plot_metrics", "DEFAULT_CURVES"]

DEFAULT_CURVES = ("reward_mean", "reward_std", "zero_variance_fraction", "kl", "entropy", "clip_fraction", "response_length", "parse_failure_rate")


class MetricsLog:
    """Appends rows to ``path``; rows after ``resume_step`` (written by a run that went on past its last checkpoint) are dropped.

    ``keep`` replaces the step test where a run's position is more than a step number (a
    curriculum's stage and the step within it)."""

    def __init__(self, path: str | os.PathLike[str], *, resume_step: int = 0, keep: Callable[[dict[str, Any]], bool] | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep is None:
            keep = (lambda r: r.get("step", 0) <= resume_step) if resume_step else (lambda r: False)
        kept = [r for r in read_metrics(self.path) if keep(r)]
        self.path.write_text("".join(json.dumps(r) + "\n" for r in kept))

    def write(self, row: dict[str, Any]) -> None:
        with self.path.open("a") as f:
            f.write(json.dumps(row) + "\n")


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    p = Path(path)
    return [json.loads(line) for line in p.read_text().splitlines() if line.strip()] if p.exists() else []


def plot_metrics(path: str | os.PathLike[str], out: str | os.PathLike[str], curves: Sequence[str] = DEFAULT_CURVES) -> Path | None:
    """One small panel per curve that has values; eval_* curves are drawn where they were measured."""
    rows = read_metrics(path)
    if not rows:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [c for c in curves if any(isinstance(r.get(c), (int, float)) for r in rows)]
    names += sorted({k for r in rows for k in r if k.startswith("eval_") and isinstance(r[k], (int, float))})
    cols = 3
    fig, axes = plt.subplots(math.ceil(len(names) / cols), cols, figsize=(4 * cols, 2.6 * math.ceil(len(names) / cols)), squeeze=False)
    for ax, name in zip(axes.flat, names):
        points = [(r["step"], r[name]) for r in rows if isinstance(r.get(name), (int, float))]
        ax.plot([p[0] for p in points], [p[1] for p in points], marker="." if len(points) < 30 else None)
        ax.set_title(name, fontsize=9)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(out, dpi=90)
    plt.close(fig)
    return Path(out)
