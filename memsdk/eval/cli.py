"""``memsdk eval``: the harness from a shell (registered by `memsdk.cli`).

    memsdk eval locomo --split train|val|test [--config FILE] [--baseline raw-rag|heuristic|llm|full-context]
                       [--out DIR] [--include-adversarial] [--judge-url URL] [--concurrency N] ...
    memsdk eval judge RUN_DIR --judge-url URL [--judge-model M] [--concurrency N] [--rejudge]
    memsdk eval manage --split train|val|test|demo [--policies heuristic|llm|auto] [--answerer extractive|llm] ...
    memsdk eval scenarios FILE [--policies auto|heuristic|llm] [--no-answers] [--only ID ...]   (an app's own memory tests)
    memsdk eval compare A.json B.json

``locomo`` prints the markdown table and writes report.json / report.md / report.png to
``--out`` (default ``build/eval/<split>-<baseline>``); rerunning with the same settings
reuses the conversations already finished there. ``judge`` adds the LLM judge J to a run
afterwards (judging needs only question, gold and prediction, not the run's hours of ingest)
and rewrites its report.
"""

from __future__ import annotations

import argparse
import sys
from contextlib import closing
from pathlib import Path

from pydantic import ValidationError

from memsdk.errors import InvalidInput
from memsdk.eval.config import EvalConfig
from memsdk.eval.manage.cli import add_parser as add_manage_parser
from memsdk.eval.scenario_file.cli import add_parser as add_scenarios_parser

__all__ = ["add_parser", "run"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("eval", help="evaluate a configuration on LoCoMo or the management benchmark, judge a run's answers, or compare two runs")
    which = p.add_subparsers(dest="eval_command", required=True)

    lo = which.add_parser("locomo", help="build memory, answer and score a LoCoMo split")
    lo.add_argument("--split", choices=["train", "val", "test"], required=True)
    lo.add_argument("--config", type=Path, help="an EvalConfig as JSON or TOML; flags override it")
    lo.add_argument("--baseline", choices=["raw-rag", "heuristic", "llm", "full-context"])
    lo.add_argument("--answerer", choices=["extractive", "llm"], help="who answers a raw-rag or heuristic run")
    lo.add_argument("--answerer-version", help="the LLM answerer's adapter: base (default), or a published or packaged version such as locomo-v1")
    lo.add_argument("--manager", help="the manager role over the baseline's: heuristic, llm, or a trained policy without an LLM (pairs)")
    lo.add_argument("--answer-k", type=int, help="memories the answerer sees (default: the client's, the answerer version's training k, else 60)")
    lo.add_argument("--out", type=Path, help="output folder (default build/eval/<split>-<baseline>)")
    lo.add_argument("--include-adversarial", action="store_true", default=None, help="also ask category 5, where abstaining is right: scored 1 for an abstention, 0 for an answer; abstention recall and precision reported")
    lo.add_argument("--judge-url", help="OpenAI-compatible server for the LLM judge J")
    lo.add_argument("--judge-model")
    lo.add_argument("--llm-base-url", help="OpenAI-compatible server for the policies (default: SmolLM2 in-process)")
    lo.add_argument("--model")
    lo.add_argument("--embedder", choices=["minilm", "hash"])
    lo.add_argument("--conversations", nargs="+", help="only these sample ids of the split")
    lo.add_argument("--max-sessions", type=int)
    lo.add_argument("--max-questions", type=int)
    lo.add_argument("--concurrency", type=int)
    lo.add_argument("--no-progress", action="store_true")

    add_manage_parser(which)
    add_scenarios_parser(which)

    jd = which.add_parser("judge", help="label a run's answers with the LLM judge J and rewrite its report")
    jd.add_argument("run_dir", type=Path, help="the --out folder of an `eval locomo` run")
    jd.add_argument("--judge-url", required=True, help="OpenAI-compatible server for the judge")
    jd.add_argument("--judge-model", default=EvalConfig.model_fields["judge_model"].default)
    jd.add_argument("--concurrency", type=int, default=4, help="judge requests in flight at once (default 4)")
    jd.add_argument("--rejudge", action="store_true", help="relabel questions judged before, not only the unjudged ones")
    jd.add_argument("--no-progress", action="store_true")

    cmp = which.add_parser("compare", help="print the differences between two report.json files")
    cmp.add_argument("a", type=Path)
    cmp.add_argument("b", type=Path)


def _config(args: argparse.Namespace) -> EvalConfig:
    try:
        base = EvalConfig.load(args.config) if args.config else EvalConfig()
        return _overrides(base, args)
    except ValidationError as exc:  # a bad file or flag is one line on stderr, as for every memsdk command
        raise InvalidInput.from_pydantic(exc, "config") from None


def _overrides(base: EvalConfig, args: argparse.Namespace) -> EvalConfig:
    return base.with_overrides(
        baseline=args.baseline, answerer=args.answerer, answerer_version=args.answerer_version, manager=args.manager, answer_k=args.answer_k, include_adversarial=args.include_adversarial,
        judge_url=args.judge_url, judge_model=args.judge_model, llm_base_url=args.llm_base_url, model=args.model,
        embedder=args.embedder, conversations=tuple(args.conversations) if args.conversations else None,
        max_sessions=args.max_sessions, max_questions=args.max_questions, concurrency=args.concurrency,
    )


def run(args: argparse.Namespace) -> int:
    from memsdk.eval.report import compare, load_report, markdown, write_outputs
    from memsdk.eval.runner import Evaluator

    if args.eval_command == "compare":
        sys.stdout.write(compare(load_report(args.a), load_report(args.b)))
        return 0
    if args.eval_command == "judge":
        return _judge(args)
    if args.eval_command == "manage":
        from memsdk.eval.manage.cli import run as run_manage

        return run_manage(args)
    if args.eval_command == "scenarios":
        from memsdk.eval.scenario_file.cli import run as run_scenarios

        return run_scenarios(args)
    if args.eval_command == "manage-gate":
        from memsdk.eval.manage.cli import gate as gate_manage

        return gate_manage(args)
    config = _config(args)
    out = args.out or Path("build") / "eval" / f"{args.split}-{config.baseline}"
    with Evaluator(config, out, progress=not args.no_progress) as evaluator:
        report = evaluator.run(args.split)
    paths = write_outputs(report, out)
    sys.stdout.write(markdown(report))
    sys.stdout.write(f"\nwrote {', '.join(str(p) for p in paths.values())}\n")
    return 0


def _judge(args: argparse.Namespace) -> int:
    from memsdk.eval.judge import Judge, judge_run
    from memsdk.eval.report import markdown

    if args.concurrency < 1:
        raise InvalidInput("concurrency", f"must be at least 1, got {args.concurrency}")
    with closing(Judge.connect(args.judge_url, args.judge_model)) as judge:
        done = judge_run(args.run_dir, judge, rejudge=args.rejudge, workers=args.concurrency, progress=not args.no_progress)
    if done.report is not None:
        sys.stdout.write(markdown(done.report) + "\n")
    sys.stdout.write(f"judged {done.asked} questions of {done.conversations} conversations in {args.run_dir}")
    sys.stdout.write("; report rewritten\n" if done.report is not None else "; no report.json yet: the run's next `memsdk eval locomo` reports J\n")
    return 0
