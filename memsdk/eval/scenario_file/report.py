"""A scenario file run as markdown: the per-class table, then each failing scenario."""

from __future__ import annotations

from memsdk.eval.scenario_file.models import ScenarioFileReport

__all__ = ["markdown"]


def markdown(report: ScenarioFileReport) -> str:
    roles = ", ".join(f"{role} {served}" for role, served in report.policies.items())
    lines = [
        f"## Scenarios {report.source}: {len(report.scenarios)} scenarios ({roles}; {report.wall_s:.0f} s)",
        "",
        *([f"`{report.run.command}` at commit {report.run.commit or 'unknown'}, {report.run.machine}, {report.started_at:%Y-%m-%d}", ""] if report.run and report.started_at else []),
        "| class | k / n | rate |",
        "|---|---|---|",
        *(f"| {row.name} | {row.k} / {row.n} | {'-' if row.rate is None else f'{row.rate:.2f}'} |" for row in report.rows),
    ]
    failing = [o for o in report.scenarios if not o.passed or not all(q.correct for q in o.questions)]
    if failing:
        lines += ["", "### Failures", ""]
    for o in failing:
        for c in o.checks:
            if not c.passed:
                why = "retired or deleted" if c.retired else ("not current anywhere" if c.kind == "keep" else "; ".join(c.found_in))
                lines.append(f"- `{o.id}` ({o.scenario_class}) {c.kind} {c.target!r}" + (f" [{c.tiers}]" if c.tiers else "") + f": {why}")
        for q in o.questions:
            if not q.correct:
                lines.append(f"- `{o.id}` asked {q.question!r}: answered {q.prediction!r}, gold {q.gold!r}" + ("" if q.gold_in_top3 else " (gold not in the top 3)"))
    if report.isolation is not None and not report.isolation.passed:
        lines += ["", f"**Isolation broken**: the second user saw {report.isolation.leaked}"]
    return "\n".join(lines) + "\n"
