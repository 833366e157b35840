"""A run's report as a markdown table and a PNG chart, and the differences between two runs."""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from memsdk.eval.results import RunReport, Scores

__all__ = ["markdown", "chart", "compare", "load_report", "write_outputs"]

log = logging.getLogger("memsdk.eval")


def _num(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _ms(seconds: float | None) -> str:
    return "-" if seconds is None else f"{seconds * 1000:.1f}"


def _score_row(name: str, s: Scores, ks: tuple[int, ...]) -> str:
    recall = " | ".join(_num(s.recall.get(k)) for k in ks)
    return f"| {name} | {s.n} | {_num(s.f1)} | {_num(s.bleu1)} | {_num(s.em)} | {_num(s.j)} | {recall} |"


def _judges(report: RunReport) -> list[str]:
    """Who labelled J, since J of different judges is not comparable (see `memsdk eval judge`)."""
    if not report.judged_by:
        return []
    names = ", ".join(f"{j.model} at {j.url}" if j.url else j.model for j in report.judged_by)
    overall = report.summary.overall
    return [f"J judged by {names}: {overall.judged} of {overall.n} questions labelled.", ""]


def markdown(report: RunReport) -> str:
    ks = report.config.recall_ks
    s, c = report.summary, report.summary.cost
    lines = [
        f"## LoCoMo {report.split}: {report.config.baseline} ({len(report.conversations)} conversations, {s.overall.n} questions, {report.wall_s:.0f} s)",
        "",
        *_judges(report),
        "| category | n | F1 | BLEU-1 | EM | J | " + " | ".join(f"recall@{k}" for k in ks) + " |",
        "|---|---|---|---|---|---|" + "---|" * len(ks),
        *(_score_row(name, sc, ks) for name, sc in s.by_category.items()),
        _score_row("**overall**", s.overall, ks),
        "",
        "| cost | value |",
        "|---|---|",
        f"| ingest latency per turn p50 / p95 (ms) | {_ms(c.ingest_p50_s)} / {_ms(c.ingest_p95_s)} |",
        f"| answer latency per question p50 / p95 (ms) | {_ms(c.answer_p50_s)} / {_ms(c.answer_p95_s)} |",
        f"| LLM calls / prompt tokens / completion tokens per turn | {c.llm_calls_per_turn:.2f} / {c.prompt_tokens_per_turn:.0f} / {c.completion_tokens_per_turn:.0f} |",
        f"| LLM calls / prompt tokens / completion tokens per question | {c.llm_calls_per_question:.2f} / {c.prompt_tokens_per_question:.0f} / {c.completion_tokens_per_question:.0f} |",
        f"| memories per turn (all conversations) | {c.memories_per_turn:.3f} |",
        f"| memories per conversation | {', '.join(f'{k}: {v}' for k, v in c.memories.items())} |",
        f"| facts extracted | {c.facts} |",
        f"| ops by type | {', '.join(f'{k} {v}' for k, v in c.ops.items()) or '-'} |",
        f"| facts retired, each with its successor in conversations/*.json | {sum(len(cv.retirements) for cv in report.conversations)} |",
        f"| parse failures / LLM policy calls | {c.parse_failures} / {c.policy_calls} ({_num(c.parse_failure_rate)}) |",
    ]
    if s.abstention is not None and s.answerable is not None:
        a = s.abstention
        lines += [
            f"| answerable questions (categories 1-4): F1 / BLEU-1 / EM | {_num(s.answerable.f1)} / {_num(s.answerable.bleu1)} / {_num(s.answerable.em)} |",
            f"| category 5 abstained on: recall; abstentions on category 5: precision | {_num(a.recall)} ({a.abstained_on_adversarial} / {a.adversarial}); {_num(a.precision)} (of {a.abstained}) |",
        ]
    lines += [f"| skipped {cid} | {why} |" for cid, why in s.skipped.items()]
    return "\n".join(lines + _session_table(report)) + "\n"


def _with_chance(s: Scores, metric: str, k: int) -> str:
    measured = {"recall": s.recall, "session_recall_any": s.session_recall_any, "session_recall_all": s.session_recall_all}[metric].get(k)
    chance = s.chance.get(metric, {}).get(k)
    return _num(measured) + ("" if chance is None else f" ({_num(chance, 2)})")


def _session_table(report: RunReport) -> list[str]:
    """Recall the way LoCoMo results are reported elsewhere: a question is a hit when any (all)
    of its evidence sessions are among the first k sessions retrieved; chance in brackets."""
    s, ks = report.summary, report.config.session_ks
    if not s.overall.session_recall_any:
        return []
    k10 = report.config.recall_ks[0]
    header = f"| category | n | recall@{k10} | " + " | ".join(f"any@{k}" for k in ks) + " | " + " | ".join(f"all@{k}" for k in ks) + " |"
    rows = [
        f"| {name} | {sc.n} | {_with_chance(sc, 'recall', k10)} | "
        + " | ".join(_with_chance(sc, "session_recall_any", k) for k in ks) + " | "
        + " | ".join(_with_chance(sc, "session_recall_all", k) for k in ks) + " |"
        for name, sc in {**s.by_category, "**overall**": s.overall}.items()
    ]  # fmt: skip
    return ["", "Evidence recall by turn and by session (recall_any@k / recall_all@k: any / every evidence session among the first k sessions retrieved); in brackets, a random ranking's", "", header, "|---|---|---|" + "---|" * (2 * len(ks)), *rows]


def chart(report: RunReport, path: Path) -> None:
    """Per-category F1 / BLEU-1 / J and recall@k bars; matplotlib is imported only here."""
    import matplotlib

    matplotlib.use("Agg")  # no display on the machines that run evaluations
    import matplotlib.pyplot as plt

    s = report.summary
    groups = {**s.by_category, "overall": s.overall}
    series: dict[str, Callable[[Scores], float | None]] = {"F1": lambda x: x.f1, "BLEU-1": lambda x: x.bleu1, "EM": lambda x: x.em}
    if s.overall.j is not None:
        series["J"] = lambda x: x.j
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.5), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / len(series)
    for i, (label, get) in enumerate(series.items()):
        left.bar([g + i * width for g in range(len(groups))], [get(v) or 0.0 for v in groups.values()], width, label=label)
    left.set_xticks([g + width * (len(series) - 1) / 2 for g in range(len(groups))], list(groups))
    left.set_ylim(0, 1)
    left.legend()
    left.set_title(f"LoCoMo {report.split}, {report.config.baseline}: answer quality")
    ks = report.config.recall_ks
    right.bar([str(k) for k in ks], [s.overall.recall.get(k) or 0.0 for k in ks], color="gray")
    right.set_ylim(0, 1)
    right.set_xlabel("k")
    right.set_title("evidence recall@k")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_outputs(report: RunReport, out_dir: Path) -> dict[str, Path]:
    """report.json is written by the run itself; this adds report.md and report.png.

    The chart needs matplotlib (the ``charts`` extra); a lean install writes the rest and
    says what it skipped.
    """
    paths = {"json": out_dir / "report.json", "markdown": out_dir / "report.md"}
    paths["markdown"].write_text(markdown(report), encoding="utf-8")
    try:
        chart(report, out_dir / "report.png")
    except ModuleNotFoundError as exc:
        if exc.name != "matplotlib":
            raise
        log.warning("report.png skipped: matplotlib is not installed (pip install 'memsdk[charts]')")
    else:
        paths["chart"] = out_dir / "report.png"
    return paths


def load_report(path: str | Path) -> RunReport:
    return RunReport.model_validate_json(Path(path).read_text(encoding="utf-8"))


def _metrics(report: RunReport) -> dict[str, float | None]:
    """Flat name -> value of everything worth comparing between two runs."""
    s, c = report.summary, report.summary.cost
    out: dict[str, float | None] = {}
    for name, sc in {"overall": s.overall, **s.by_category}.items():
        out |= {f"{name} F1": sc.f1, f"{name} BLEU-1": sc.bleu1, f"{name} EM": sc.em, f"{name} J": sc.j}
        out |= {f"{name} recall@{k}": v for k, v in sc.recall.items()}
        out |= {f"{name} session recall_any@{k}": v for k, v in sc.session_recall_any.items()}
        out |= {f"{name} session recall_all@{k}": v for k, v in sc.session_recall_all.items()}
    out |= {
        "questions": float(s.overall.n),
        "ingest p50 (ms)": None if c.ingest_p50_s is None else c.ingest_p50_s * 1000,
        "ingest p95 (ms)": None if c.ingest_p95_s is None else c.ingest_p95_s * 1000,
        "answer p50 (ms)": None if c.answer_p50_s is None else c.answer_p50_s * 1000,
        "answer p95 (ms)": None if c.answer_p95_s is None else c.answer_p95_s * 1000,
        "LLM calls per turn": c.llm_calls_per_turn,
        "prompt tokens per turn": c.prompt_tokens_per_turn,
        "prompt tokens per question": c.prompt_tokens_per_question,
        "memories per turn": c.memories_per_turn,
        "parse failure rate": c.parse_failure_rate,
    }
    return out


def compare(a: RunReport, b: RunReport) -> str:
    """A markdown table of every metric of A and B with B - A; metrics only one side has show '-'."""
    ma, mb = _metrics(a), _metrics(b)
    names = list(dict.fromkeys([*ma, *mb]))
    lines = [
        f"A: {a.split} {a.config.baseline} ({a.started_at:%Y-%m-%d %H:%M})   B: {b.split} {b.config.baseline} ({b.started_at:%Y-%m-%d %H:%M})",
        "",
        "| metric | A | B | B - A |",
        "|---|---|---|---|",
    ]
    for name in names:
        va, vb = ma.get(name), mb.get(name)
        delta = None if va is None or vb is None else vb - va
        lines.append(f"| {name} | {_num(va)} | {_num(vb)} | {'-' if delta is None else f'{delta:+.3f}'} |")
    if a.split != b.split:
        lines.append(f"\nnote: the runs are on different splits ({a.split} vs {b.split}); differences mix data and configuration.")
    return "\n".join(lines) + "\n"
