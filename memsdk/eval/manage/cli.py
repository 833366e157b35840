"""``memsdk eval manage``: the management benchmark from a shell (registered by `memsdk.eval.cli`).

    memsdk eval manage --split train|val|test|demo [--policies heuristic|llm|auto] [--manager NAME] [--answerer extractive|llm]
                       [--manager-version V] [--answerer-version V] [--checkpoints DIR] [--out DIR] [--max-scenarios N] [--pairs-out FILE] [--no-progress]
    memsdk eval manage-gate CANDIDATE/report.json INCUMBENT/report.json [--write gate.json]

Prints the markdown table and writes report.json / report.md / scenarios/*.json to ``--out``
(default ``build/eval/manage-<split>-<policies>``). ``--pairs-out FILE`` writes the split's
labelled (new, old) pairs as JSON lines instead of running.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from memsdk.errors import InvalidInput

__all__ = ["add_parser", "run"]


def add_parser(which: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    ma = which.add_parser("manage", help="the memory-management benchmark: supersede, correct, forget, keep, per event class")
    ma.add_argument("--split", choices=["train", "val", "test", "demo"], required=True)
    ma.add_argument("--policies", choices=["heuristic", "llm", "auto"], default="heuristic", help="the client's policy preset (default heuristic)")
    ma.add_argument("--manager", help="the manager role over the preset's: heuristic, llm, or a trained policy's name (default: the preset's)")
    ma.add_argument("--answerer", choices=["extractive", "llm"], help="who answers (default: the preset's own)")
    ma.add_argument("--answerer-version", help="the LLM answerer's version (default: the packaged one for the model, else base)")
    ma.add_argument("--manager-version", help="the manager's version in --checkpoints: an LLM manager's adapter, or a candidate head for --manager pairs (default: base, or the shipped head)")
    ma.add_argument("--checkpoints", help="a folder of published checkpoints (a trainer's registry_dir) the versions are found in")
    ma.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    ma.add_argument("--llm-base-url", help="OpenAI-compatible server for the LLM roles (default: SmolLM2 in-process)")
    ma.add_argument("--model", default="smollm2")
    ma.add_argument("--seed", type=int, default=0, help="the generator's seed (default 0)")
    ma.add_argument("--scenarios", type=int, help="scenarios generated for the split (default: train 120, val 40, test 60)")
    ma.add_argument("--max-scenarios", type=int, help="only the first N")
    ma.add_argument("--out", type=Path, help="output folder (default build/eval/manage-<split>-<policies>)")
    ma.add_argument("--pairs-out", type=Path, help="write the split's labelled pairs as JSONL to FILE and exit")
    ma.add_argument("--no-progress", action="store_true")

    gt = which.add_parser("manage-gate", help="the release gate for a manager: two runs of the same scenarios, paired by scenario")
    gt.add_argument("candidate", type=Path, help="the candidate run's report.json")
    gt.add_argument("incumbent", type=Path, help="the serving manager's run of the same split")
    gt.add_argument("--write", type=Path, help="write the decision (gate.json) to FILE, as a packaged version ships it")


def gate(args: argparse.Namespace) -> int:
    """Print the decision and the per-class comparison; exit 0 whether or not it passed."""
    from memsdk.eval.manage.gate import manage_gate, per_class
    from memsdk.eval.manage.results import ManageReport

    candidate, incumbent = (ManageReport.model_validate_json(p.read_text(encoding="utf-8")) for p in (args.candidate, args.incumbent))
    decision = manage_gate(candidate, incumbent)
    lines = [decision.summary(), "", "| event class | n | mean diff | 95% interval | win / tie / loss |", "|---|---|---|---|---|"]
    lines += [f"| {event} | {p.n} | {p.mean_diff:+.3f} | [{p.ci_low:+.3f}, {p.ci_high:+.3f}] | {p.wins} / {p.ties} / {p.losses} |" for event, p in per_class(candidate, incumbent).items()]
    sys.stdout.write("\n".join(lines) + "\n")
    if args.write is not None:
        args.write.write_text(decision.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return 0


def run(args: argparse.Namespace) -> int:
    from memsdk.eval.manage.report import markdown
    from memsdk.eval.manage.results import ManageConfig
    from memsdk.eval.manage.runner import ManageRunner, default_out
    from memsdk.eval.manage.scenarios.training_pairs import write_pairs

    if args.pairs_out is not None:
        n = write_pairs(args.pairs_out, args.split, args.scenarios, seed=args.seed)
        sys.stdout.write(f"wrote {n} pairs of {args.split} to {args.pairs_out}\n")
        return 0
    try:
        config = ManageConfig(
            policies=args.policies, manager=args.manager, answerer=args.answerer, answerer_version=args.answerer_version, manager_version=args.manager_version,
            checkpoint_dir=args.checkpoints, embedder=args.embedder, llm_base_url=args.llm_base_url,
            model=args.model, seed=args.seed, scenarios=args.scenarios, max_scenarios=args.max_scenarios,
        )
    except ValidationError as exc:
        raise InvalidInput.from_pydantic(exc, "manage") from None
    out = args.out or default_out(args.split, config)
    with ManageRunner(config, out, progress=not args.no_progress) as runner:
        report = runner.run(args.split)
    sys.stdout.write(markdown(report) + f"\nwrote {out}/report.json, report.md and scenarios/ ({len(report.scenarios)} scenarios)\n")
    return 0
