"""Evaluation harness: LoCoMo end to end, retrieval recall, latency and cost, baselines.

    memsdk eval locomo --split val --baseline heuristic --out build/eval/val-heuristic
    memsdk eval judge build/eval/val-heuristic --judge-url http://vllm:8000
    memsdk eval compare build/eval/a/report.json build/eval/b/report.json

    from memsdk.eval import EvalConfig, Evaluator
    with Evaluator(EvalConfig(baseline="raw-rag"), "build/eval/raw") as ev:
        report = ev.run("val")

`memsdk.scoring` holds the answer metrics (EM, F1, BLEU-1) the trainer's rewards also use.
"""

from memsdk.eval.config import Baseline, EvalConfig
from memsdk.eval.judge import Judge, JudgedRun, Verdict, judge_run
from memsdk.eval.report import compare, load_report, markdown, write_outputs
from memsdk.eval.results import ConversationResult, IngestStats, JudgeRef, QuestionResult, RunReport, Scores, Summary
from memsdk.eval.runner import Evaluator
from memsdk.scoring import bleu1, evidence_recall, exact_match, normalize_answer, token_f1

__all__ = [
    "Baseline",
    "ConversationResult",
    "EvalConfig",
    "Evaluator",
    "IngestStats",
    "Judge",
    "JudgeRef",
    "JudgedRun",
    "QuestionResult",
    "RunReport",
    "Scores",
    "Summary",
    "Verdict",
    "bleu1",
    "compare",
    "evidence_recall",
    "exact_match",
    "judge_run",
    "load_report",
    "markdown",
    "normalize_answer",
    "token_f1",
    "write_outputs",
]
