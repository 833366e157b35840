#!/usr/bin/env python3
"""Render the result pages of the docs site from the result files, so no figure is typed.

Every folder ``docs/results/<name>/`` holds one run: the ``report.json`` that ``memsdk eval
locomo`` / ``memsdk eval manage`` write (``--out``) or the ``summary.json`` they write beside
it (the same without the per-item details), and/or the markdown they print beside it
(``report.md``; the management benchmark's test folder holds one markdown report per system
and the release gate's decision). For each folder this writes ``docs/results/<name>.md``:

- the run's command, commit, machine and date, read from ``report.json`` where it records
  them, and "not recorded" where it does not (the runs kept so far predate those fields:
  their folders hold only the markdown and, for a LoCoMo run, the per-conversation result
  files with the configuration's fingerprint);
- the markdown reports of the folder, verbatim, headings moved one level down.

and ``docs/results/index.md``: first the current figure of each benchmark for the default
configuration (one row each, read from the run ``CURRENT`` names), then, under "Archive", a
table of every run kept, the design-time ones included. The output depends only on the files
(folders and reports in sorted order, no clock), so a rerun writes the same bytes;
``--check`` exits 1, writing nothing, when a page is missing or differs from what the files
give (tests/test_docs.py runs it). ``make docs`` runs it before ``mkdocs build``.

    python scripts/render_results.py            # write the pages
    python scripts/render_results.py --check    # are they up to date?
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "docs" / "results"
NOT_RECORDED = "not recorded"

#: where each field may sit in a report.json (first found wins); dotted paths into the JSON
FIELDS: dict[str, tuple[str, ...]] = {
    "command": ("run.command", "command", "meta.command", "config.command"),
    "commit": ("commit", "git_commit", "meta.commit", "run.commit", "code.commit"),
    "machine": ("machine", "host", "hostname", "meta.machine", "run.machine"),
    "date": ("date", "started_at", "finished_at", "meta.date", "run.date"),
}


def _dot(value: float) -> str:
    """A rate as the docs write it: .740, 1.000."""
    return f"{value:.3f}".removeprefix("0")


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" + ("" if n == 1 else "s")


def _locomo_split(report: dict[str, Any]) -> str:
    summary = report["summary"]
    conversations = _count(len(summary["cost"]["memories"]), "conversation")
    return f"{report['split']}: {conversations}, {_count(summary['overall']['n'], 'question')}"


def _locomo_recall(report: dict[str, Any]) -> str:
    return " / ".join(_dot(report["summary"]["overall"]["recall"][k]) for k in ("10", "30", "60"))


def _locomo_answers(report: dict[str, Any]) -> str:
    overall = report["summary"]["overall"]
    return " / ".join(_dot(overall[k]) for k in ("f1", "bleu1", "em"))


def _manage_split(report: dict[str, Any]) -> str:
    return f"{report['split']}: {_count(len(report['summary']['cost']['memories']), 'scenario')}"


#: the management benchmark's headline metrics, as the current-figures table names them
MANAGE_HEADLINE = (
    ("superseded retired (current view)", "superseded retired"),
    ("forget honoured (every tier)", "forget honoured"),
    ("false deletions", "false deletions"),
    ("current-state answers", '"now" answers'),
    ("previous-state answers", '"before" answers'),
)


def _manage_figures(report: dict[str, Any]) -> str:
    rates = {r["metric"]: r for r in report["summary"]["rates"] if r["event"] == "all"}
    return "; ".join(f"{label} {rates[m]['k']} / {rates[m]['n']}" for m, label in MANAGE_HEADLINE)


def _scenario_split(report: dict[str, Any]) -> str:
    return f"{report['source']}: {_count(len(report['scenarios']), 'scenario')}"


#: a scenario file run's headline rows (`memsdk eval scenarios`), by how their names begin
SCENARIO_HEADLINE = (
    ("scenarios passing", "passing"),
    ("forget honoured", "forget honoured"),
    ("replaced, gone", "replaced retired"),
    ("false retirements", "false retirements"),
    ("answers containing the gold", "answers with the gold"),
)


def _scenario_figures(report: dict[str, Any]) -> str:
    def row(prefix: str) -> dict[str, Any]:
        return next(r for r in report["rows"] if r["name"].startswith(prefix))

    return "; ".join(f"{label} {row(prefix)['k']} / {row(prefix)['n']}" for prefix, label in SCENARIO_HEADLINE)


@dataclass(frozen=True)
class Current:
    """A benchmark's current figure for the default configuration: the run that holds it
    (``None``: not run yet) and how its split and figure are read from the run's summary."""

    benchmark: str
    run: str | None
    split: Callable[[dict[str, Any]], str]
    figure: Callable[[dict[str, Any]], str]


#: The default configuration's current run of each benchmark. Only which run is current is
#: chosen here; every figure is read from that run's report.json / summary.json.
CURRENT: tuple[Current, ...] = (
    Current("LoCoMo evidence recall@10 / @30 / @60", "locomo-test-pairs-v6", _locomo_split, _locomo_recall),
    Current("LoCoMo answers F1 / BLEU-1 / EM (SmolLM2 + `locomo-v2`, 20 memories)", "locomo-val-default-pairs-v6", _locomo_split, _locomo_answers),
    Current("management benchmark (`memsdk eval manage`)", "manage-test-default-pairs-v6", _manage_split, _manage_figures),
    Current("scenarios written outside the team (`memsdk eval scenarios`)", "scenarios-dev-default-pairs-v6", _scenario_split, _scenario_figures),
)


@dataclass(frozen=True)
class Run:
    name: str
    title: str
    meta: dict[str, str]
    body: str
    sources: list[str]


def _lookup(data: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _meta(report: dict[str, Any] | None) -> dict[str, str]:
    meta = {}
    for field, paths in FIELDS.items():
        value = None
        for path in paths:
            value = _lookup(report, path) if report is not None else None
            if value not in (None, ""):
                break
        if value in (None, ""):
            meta[field] = NOT_RECORDED
        elif field == "command" and isinstance(value, list):
            meta[field] = " ".join(str(v) for v in value)
        elif field == "date":
            meta[field] = str(value)[:10]  # the day: an ISO timestamp's date part
        else:
            meta[field] = str(value)
    return meta


def _demote(markdown: str) -> str:
    """Headings one level down (the page's own title is the only h1)."""
    return re.sub(r"^(#{1,5}) ", lambda m: "#" + m.group(1) + " ", markdown, flags=re.MULTILINE)


def _title(markdown: str, default: str) -> str:
    for line in markdown.splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
    return default


def _summary_table(report: dict[str, Any]) -> str:
    """A report.json without its markdown: the scalar figures of its summary, flattened."""
    rows: list[tuple[str, str]] = []

    def walk(prefix: str, value: Any) -> None:
        if isinstance(value, dict):
            for key in sorted(value):
                walk(f"{prefix}.{key}" if prefix else str(key), value[key])
        elif isinstance(value, (int, float, str, bool)):
            rows.append((prefix, f"{value:.3f}" if isinstance(value, float) else str(value)))

    walk("", report.get("summary", {}))
    if not rows:
        return "The report holds no summary figures.\n"
    return "| figure | value |\n|---|---|\n" + "".join(f"| `{k}` | {v} |\n" for k, v in rows)


def _conversations(folder: Path) -> str:
    """What the per-conversation result files of a LoCoMo run say about how it was run."""
    files = sorted(p for p in folder.glob("conv-*.json"))
    if not files:
        return ""
    fingerprints, wall = set(), 0.0
    for path in files:
        data = json.loads(path.read_text())
        fingerprints.add(str(data.get("fingerprint", "?")))
        wall += float(data.get("wall_s") or 0.0)
    names = ", ".join(p.stem for p in files)
    return (
        f"Per-conversation result files: {len(files)} ({names}); configuration fingerprint "
        f"{', '.join(f'`{f}`' for f in sorted(fingerprints))}; summed wall time {wall:,.0f} s.\n"
    )


def _report_file(folder: Path) -> Path | None:
    return next((p for p in (folder / "report.json", folder / "summary.json") if p.exists()), None)


def load(folder: Path) -> Run:
    # report.json as the run wrote it, else its summary.json (the same without the
    # per-conversation / per-scenario details, which are what make a report.json large)
    report_json = _report_file(folder)
    report = json.loads(report_json.read_text()) if report_json is not None else None
    mds = sorted(folder.glob("*.md"), key=lambda p: (p.name != "report.md", p.name))
    parts, sources = [], []
    for md in mds:
        text = md.read_text().strip()
        sources.append(f"{folder.name}/{md.name}")
        if len(mds) > 1:
            parts.append(f"## `{md.name}`\n\n{_demote(_demote(text))}")
        else:
            parts.append(_demote(text))
    if report is not None:
        sources.insert(0, f"{folder.name}/{report_json.name}")
        if not mds:
            parts.append(_summary_table(report))
    conv = _conversations(folder)
    if conv:
        sources.append(f"{folder.name}/conv-*.json")
    body = "\n\n".join(parts)
    first = mds[0].read_text() if mds else ""
    title = _title(first, folder.name) if len(mds) == 1 else folder.name
    return Run(folder.name, title, _meta(report), (conv + "\n" if conv else "") + body, sources)


def page(run: Run) -> str:
    meta = "".join(f"| {field} | {value} |\n" for field, value in run.meta.items())
    sources = ", ".join(f"`docs/results/{s}`" for s in run.sources)
    return (
        f"# {run.name}\n\n"
        "<!-- generated by scripts/render_results.py from the files below; do not edit -->\n\n"
        f"| run | |\n|---|---|\n{meta}\n"
        f"Rendered from {sources}.\n\n"
        f"{run.body.strip()}\n"
    )


def _report(results: Path, name: str) -> dict[str, Any]:
    path = _report_file(results / name)
    if path is None:
        raise SystemExit(f"render_results: CURRENT names {name}, which has no report.json or summary.json")
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def current_table(results: Path = RESULTS) -> str:
    rows = []
    for c in CURRENT:
        if c.run is None:
            rows.append(f"| {c.benchmark} | {c.split({})} | {c.figure({})} | - |\n")
            continue
        report = _report(results, c.run)
        rows.append(f"| {c.benchmark} | {c.split(report)} | {c.figure(report)} | [{c.run}]({c.run}.md) |\n")
    return "| benchmark | split | memsdk default | run |\n|---|---|---|---|\n" + "".join(rows)


def index(runs: list[Run], results: Path = RESULTS) -> str:
    rows = "".join(f"| [{r.name}]({r.name}.md) | {r.title} | {r.meta['date']} | {r.meta['commit']} |\n" for r in runs)
    return (
        "# Results\n\n"
        "<!-- generated by scripts/render_results.py; do not edit -->\n\n"
        "## Current figures\n\n"
        "The default configuration (the heuristic extractor, the trained pair manager, whose "
        "version each run's page names, SmolLM2 with the packaged `locomo-v2` answerer adapter "
        "shown 20 memories), one row per "
        "benchmark, each from the run it links to. Evidence recall does not depend on the "
        "answerer (that run used the extractive one); the answerer's F1 has been measured on the "
        "validation split only. Measured on the 2-core development machine; "
        "[Evaluation](../evaluation.md) says how, and what each benchmark still misses.\n\n"
        f"{current_table(results)}\n"
        "## Archive\n\n"
        "Every run kept, the design-time ones included (baselines, candidates the release gate "
        "compared, the runs before and after each change). "
        "Each page is rendered from a run's own result files in `docs/results/<name>/` by "
        "`scripts/render_results.py` (`make docs` runs it), so the figures here are the ones the "
        "runs wrote. Where a run's files do not record its command, commit, machine or date, "
        "its page says \"not recorded\"; [Evaluation](../evaluation.md) gives the commands.\n\n"
        "| run | report | date | commit |\n|---|---|---|---|\n"
        f"{rows}"
    )


def render(results: Path = RESULTS) -> dict[Path, str]:
    runs = [load(folder) for folder in sorted(p for p in results.iterdir() if p.is_dir())]
    pages = {results / f"{run.name}.md": page(run) for run in runs}
    pages[results / "index.md"] = index(runs, results)
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="exit 1 if a page is missing or stale; write nothing")
    parser.add_argument("--results", type=Path, default=RESULTS, help="the results folder (default: docs/results)")
    args = parser.parse_args(argv)
    pages = render(args.results)
    stale = [path for path, text in pages.items() if not path.exists() or path.read_text() != text]
    if args.check:
        for path in stale:
            print(f"stale: {path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}", file=sys.stderr)
        return 1 if stale else 0
    for path in stale:
        path.write_text(pages[path])
    print(f"render_results: {len(pages)} pages, {len(stale)} written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
