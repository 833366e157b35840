"""The management benchmark's report as a markdown table (report.md beside report.json)."""

from __future__ import annotations

from memsdk.eval.manage.results import ManageReport, Rate
from memsdk.eval.report import _ms, _num

__all__ = ["markdown"]


def _target(r: Rate) -> str:
    if r.target is None:
        return ""
    mark = {True: " ✓", False: " ✗", None: ""}[r.meets_target]
    return f"{'≤' if r.lower_is_better else '≥'} {r.target:g}{mark}"


def _row(r: Rate) -> str:
    name = f"**{r.metric}**" if r.event == "all" else ""
    return f"| {name} | {r.event} | {r.k} / {r.n} | {_num(r.rate)} | {_target(r)} |"


def markdown(report: ManageReport) -> str:
    s, c = report.summary, report.summary.cost
    roles = ", ".join(f"{role} {served}" for role, served in report.policies.items())
    questions = [q for r in report.scenarios for q in r.questions]
    f1 = {kind: [q.f1 for q in questions if q.kind == kind] for kind in ("current", "previous")}
    cost = {
        "ingest latency per turn p50 / p95 (ms)": f"{_ms(c.ingest_p50_s)} / {_ms(c.ingest_p95_s)}",
        "LLM calls / prompt tokens / completion tokens per turn": f"{c.llm_calls_per_turn:.2f} / {c.prompt_tokens_per_turn:.0f} / {c.completion_tokens_per_turn:.0f}",
        "answer latency p50 (ms); prompt tokens per question": f"{_ms(c.answer_p50_s)}; {c.prompt_tokens_per_question:.0f}",
        "answer F1, current / previous state": " / ".join(_num(sum(v) / len(v) if v else None) for v in f1.values()),
        "live semantic memories per turn": f"{c.memories_per_turn:.3f}",
        "ops by type": ", ".join(f"{k} {v}" for k, v in c.ops.items()) or "-",
    }
    return "\n".join([
        f"## Memory management {report.split}: {report.config.policies} ({roles}; {len(report.scenarios)} scenarios, {sum(r.turns for r in report.scenarios)} turns, {report.wall_s:.0f} s)",
        "",
        *([f"`{report.run.command}` at commit {report.run.commit or 'unknown'}, {report.run.machine}, {report.started_at:%Y-%m-%d}", ""] if report.run else []),
        "| metric | class | k / n | rate | target |",
        "|---|---|---|---|---|",
        *(_row(r) for r in s.rates),
        "",
        "| cost | value |",
        "|---|---|",
        *(f"| {name} | {value} |" for name, value in cost.items()),
    ]) + "\n"
