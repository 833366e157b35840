"""``memsdk eval scenarios FILE``: an app's own memory tests from a shell (registered by `memsdk.eval.cli`).

    memsdk eval scenarios my-scenarios.json [--policies auto|heuristic|llm] [--manager NAME]
                          [--answerer extractive|llm] [--manager-version V --checkpoints DIR]
                          [--no-answers] [--only ID ...] [--out DIR]

Prints the per-class table and the failures, writes report.json and report.md to ``--out``
(default ``build/eval/scenarios-<file stem>-<policies>``). The file's format is described
in `memsdk.eval.scenario_file.models` and docs/evaluation.md.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from pydantic import ValidationError

from memsdk.errors import InvalidInput

__all__ = ["add_parser", "run"]


def add_parser(which: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sc = which.add_parser("scenarios", help="run a file of written scenarios (keep / gone checks, questions) against a configuration")
    sc.add_argument("file", type=Path)
    sc.add_argument("--policies", choices=["heuristic", "llm", "auto"], default="auto", help="the client's policy preset (default auto: what MemoryClient() serves)")
    sc.add_argument("--manager", help="the manager role over the preset's: heuristic, llm, or a trained policy's name")
    sc.add_argument("--answerer", choices=["extractive", "llm"], help="who answers (default: the preset's own)")
    sc.add_argument("--answerer-version")
    sc.add_argument("--manager-version", help="a candidate version in --checkpoints: a pair head for --manager pairs, an LLM manager's adapter")
    sc.add_argument("--checkpoints", help="a folder of published checkpoints (a trainer's registry_dir) the versions are found in")
    sc.add_argument("--embedder", choices=["minilm", "hash"], default="minilm")
    sc.add_argument("--llm-base-url", help="OpenAI-compatible server for the LLM roles (default: SmolLM2 in-process)")
    sc.add_argument("--model", default="smollm2")
    sc.add_argument("--no-answers", action="store_true", help="judge the memory checks only; ask no question")
    sc.add_argument("--only", nargs="+", default=(), metavar="ID", help="only these scenarios (and no isolation block)")
    sc.add_argument("--out", type=Path)
    sc.add_argument("--no-progress", action="store_true")


def run(args: argparse.Namespace) -> int:
    from memsdk.eval.manage.results import ManageConfig
    from memsdk.eval.scenario_file.report import markdown
    from memsdk.eval.scenario_file.runner import ScenarioFileRunner, load_scenarios

    file = load_scenarios(args.file)
    try:
        config = ManageConfig(
            policies=args.policies, manager=args.manager, answerer=args.answerer, answerer_version=args.answerer_version,
            manager_version=args.manager_version, checkpoint_dir=args.checkpoints, embedder=args.embedder, llm_base_url=args.llm_base_url, model=args.model,
        )
    except ValidationError as exc:
        raise InvalidInput.from_pydantic(exc, "scenarios") from None
    out = args.out or Path("build") / "eval" / f"scenarios-{args.file.stem}-{args.policies}"
    with ScenarioFileRunner(config, out, progress=not args.no_progress, answers=not args.no_answers) as runner:
        report = runner.run(file, source=args.file.name, only=args.only)
    sys.stdout.write(markdown(report) + f"\nwrote {out}/report.json and report.md\n")
    return 0
