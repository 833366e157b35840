"""LLM-as-a-judge J: is a generated answer CORRECT or WRONG against the gold one?

The prompt follows the one Mem0 and Memory-R1 report J with (generous about wording and date
formats, strict about the fact), asked at temperature 0. Where the server supports
constrained decoding the reply is held to ``{"label": "CORRECT" | "WRONG"}``; otherwise the
first CORRECT/WRONG word in the reply is the label, and a reply with neither is unlabelled
(counted in neither J's numerator nor its denominator).

Judging needs only (question, gold, prediction), so it is a step of its own: `label` fills in
a cached conversation result, and `judge_run` (``memsdk eval judge RUN_DIR``) labels a
finished run and rewrites its report, without redoing the run's ingest and answers.
"""

from __future__ import annotations

import re
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tqdm import tqdm

from memsdk.errors import InvalidInput
from memsdk.eval.parallel import ordered_map
from memsdk.eval.report import load_report, write_outputs
from memsdk.eval.results import ConversationResult, JudgeRef, RunReport, result_paths, summarize, write_atomic
from memsdk.llm.base import LLMBackend, SamplingParams

__all__ = ["Judge", "JudgedRun", "Verdict", "JUDGE_PROMPT", "judge_run", "label", "parse_label", "unjudged"]

JUDGE_PROMPT = """Your task is to label an answer to a question as "CORRECT" or "WRONG".
You are given a question, a gold (ground truth) answer, and a generated answer.
Be generous: if the generated answer refers to the same thing as the gold answer, label it CORRECT,
even if it is longer or worded differently. For time questions, the same date or period in
another format (e.g. "May 7th" vs "7 May") is CORRECT. Otherwise label it WRONG.

Question: {question}
Gold answer: {gold}
Generated answer: {prediction}

Reply with JSON only: {{"label": "CORRECT"}} or {{"label": "WRONG"}}."""

LABEL_SCHEMA = {"type": "object", "properties": {"label": {"type": "string", "enum": ["CORRECT", "WRONG"]}}, "required": ["label"]}
_LABEL = re.compile(r"\b(CORRECT|WRONG)\b", re.IGNORECASE)

Label = Literal["CORRECT", "WRONG"]


def parse_label(reply: str) -> Label | None:
    """The first CORRECT/WRONG in the reply (any case); None if there is neither."""
    m = _LABEL.search(reply)
    return None if m is None else m.group(1).upper()  # type: ignore[return-value]


@dataclass(frozen=True)
class Verdict:
    label: Label | None
    reply: str


class Judge:
    def __init__(self, backend: LLMBackend, *, max_tokens: int = 12) -> None:
        self.backend = backend
        self.params = SamplingParams(temperature=0.0, max_tokens=max_tokens)

    def judge(self, question: str, gold: str, prediction: str) -> Verdict:
        prompt = JUDGE_PROMPT.format(question=question, gold=gold, prediction=prediction)
        schema = LABEL_SCHEMA if self.backend.supports_schema else None
        reply = self.backend.chat([{"role": "user", "content": prompt}], params=self.params, schema=schema).text
        return Verdict(parse_label(reply), reply)

    @property
    def ref(self) -> JudgeRef:
        return JudgeRef(url=getattr(self.backend, "base_url", None), model=self.backend.model)

    def close(self) -> None:
        self.backend.close()

    @classmethod
    def connect(cls, base_url: str, model: str) -> Judge:
        from memsdk.llm.openai_compat import OpenAICompatibleBackend  # memsdk.llm's lazy name is typed `object`

        return cls(OpenAICompatibleBackend(base_url, model=model))


def unjudged(result: ConversationResult, *, rejudge: bool = False) -> list[int]:
    """Indices of the questions to ask the judge about: all with ``rejudge``, else those never
    asked. A reply that named neither label was asked: at temperature 0 it would come again."""
    return [i for i, q in enumerate(result.questions) if rejudge or q.judge_reply is None]


def label(result: ConversationResult, judge: Judge, *, rejudge: bool = False, workers: int = 1, bar: tqdm[Any] | None = None) -> ConversationResult:
    """``result`` with the judge's verdicts filled in (see `unjudged`); ``result`` itself when
    there was nothing to ask, so callers can tell whether to write it back."""
    todo = unjudged(result, rejudge=rejudge)
    if not todo:
        return result
    asked = [result.questions[i] for i in todo]
    verdicts = ordered_map(lambda q: judge.judge(q.question, q.gold, q.prediction), asked, workers=workers, bar=bar)
    questions = list(result.questions)
    for i, verdict in zip(todo, verdicts, strict=True):
        questions[i] = questions[i].model_copy(update={"judge": verdict.label, "judge_reply": verdict.reply})
    judged_by = [judge.ref] if rejudge else list(dict.fromkeys([*result.judged_by, judge.ref]))
    return result.model_copy(update={"questions": questions, "judged_by": judged_by})


@dataclass(frozen=True)
class JudgedRun:
    conversations: int
    asked: int
    """Questions sent to the judge by this call."""
    report: RunReport | None
    """The rewritten report; None when the run has no report.json yet (it is still running or
    was interrupted: its next `memsdk eval locomo` writes one, with these labels)."""


def judge_run(run_dir: str | Path, judge: Judge, *, rejudge: bool = False, workers: int = 1, progress: bool = True) -> JudgedRun:
    """Label every cached conversation result of a run, then rewrite its report.

    Each conversation file is replaced whole (write-then-rename) once all its questions are
    labelled, so a kill or a dead judge leaves every file as it was or fully labelled, the
    report as it was, and a rerun asks only what is left.
    """
    run_dir = Path(run_dir)
    paths = result_paths(run_dir)
    if not paths:
        raise InvalidInput("run_dir", f"no conversation results in {run_dir / 'conversations'}: run `memsdk eval locomo --out {run_dir}` first")
    results = [ConversationResult.model_validate_json(p.read_text(encoding="utf-8")) for p in paths]
    asked = sum(len(unjudged(r, rejudge=rejudge)) for r in results)
    labelled = []
    with closing(tqdm(total=asked, desc=f"judge {judge.ref.model}", unit="q", disable=not progress)) as bar:
        for path, result in zip(paths, results, strict=True):
            done = label(result, judge, rejudge=rejudge, workers=workers, bar=bar)
            if done is not result:
                write_atomic(path, done.model_dump_json(indent=2))
            labelled.append(done)
    return JudgedRun(conversations=len(labelled), asked=asked, report=_rewrite_report(run_dir, labelled))


def _rewrite_report(run_dir: Path, labelled: list[ConversationResult]) -> RunReport | None:
    """The run's report with its conversations replaced by their labelled results, the
    summary recomputed, and report.json / .md / .png written again."""
    path = run_dir / "report.json"
    if not path.exists():
        return None
    old = load_report(path)
    # a file rewritten since by a run of another config is not this report's conversation
    mine = {r.sample_id: r for r in labelled if old.config.accepts(r.fingerprint)}
    conversations = [mine.get(c.sample_id, c) for c in old.conversations]
    report = old.model_copy(update={"conversations": conversations, "summary": summarize(conversations, old.config.recall_ks)})
    write_atomic(path, report.model_dump_json(indent=2))
    write_outputs(report, run_dir)
    return report
