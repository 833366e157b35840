"""Run a scenario file against a client configuration (``memsdk eval scenarios FILE``).

Each scenario gets a fresh client on an empty data folder (the run's models loaded once and
shared, as in the management benchmark): its turns are ingested in order into the scope
``user_id='u-<id>'``, its checks are judged on every record the scope holds at the end, and
each question is answered and retrieved in that scope. The isolation block, when the file
has one, puts two scenarios' turns in two scopes of one client and asserts that the
second user's searches and answers return none of the first user's memories.

Output: ``out/report.json`` (every scenario with its checks, answers and top-3 memories),
``out/report.md`` (the per-class table).
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import ValidationError
from tqdm import tqdm

from memsdk.client import MemoryClient
from memsdk.errors import InvalidInput
from memsdk.eval.manage.results import ManageConfig
from memsdk.eval.manage.runner import ManageRunner
from memsdk.eval.results import RunInfo, write_atomic
from memsdk.eval.scenario_file.judging import answer_contains, check_records, class_rows, scenario_class
from memsdk.eval.scenario_file.models import AnsweredQuestion, Isolation, IsolationOutcome, Scenario, ScenarioFile, ScenarioFileReport, ScenarioOutcome
from memsdk.eval.scenario_file.report import markdown
from memsdk.types import Turn, utcnow

__all__ = ["load_scenarios", "ScenarioFileRunner"]


def load_scenarios(path: str | Path) -> ScenarioFile:
    """The file at ``path``, validated; `InvalidInput` names the field that is wrong."""
    try:
        return ScenarioFile.model_validate_json(Path(path).read_bytes())
    except ValidationError as exc:
        raise InvalidInput.from_pydantic(exc, "scenarios") from None
    except OSError as exc:
        raise InvalidInput("scenarios", f"cannot read {path}: {exc.strerror}") from None


def _turn(sc: Scenario, i: int) -> Turn:
    turn = sc.turns[i]
    return Turn(speaker=turn.speaker, text=turn.text, timestamp=turn.time, turn_id=f"{sc.id}:{i + 1}")


class ScenarioFileRunner:
    """One run of one configuration: the models, an output folder, a client per scenario."""

    def __init__(self, config: ManageConfig, out_dir: str | Path, *, progress: bool = True, answers: bool = True, **models: object) -> None:
        """``answers=False`` judges the checks only (no answerer call, no retrieval);
        ``models`` (``backend``, ``embedder``) replace the ones the config names."""
        self.out_dir = Path(out_dir)
        self.progress = progress
        self.answers = answers
        self._clients = ManageRunner(config, self.out_dir, progress=False, **models)  # type: ignore[arg-type]

    def close(self) -> None:
        self._clients.close()

    def __enter__(self) -> ScenarioFileRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, file: ScenarioFile, *, source: str = "", only: Sequence[str] = ()) -> ScenarioFileReport:
        started, began = time.perf_counter(), utcnow()
        todo = [sc for sc in file.scenarios if not only or sc.id in only]
        outcomes = [self.scenario(sc) for sc in tqdm(todo, desc="scenarios", unit="scenario", disable=not self.progress)]
        isolation = self.isolation(file) if file.isolation is not None and not only else None
        report = ScenarioFileReport(
            source=source, policies=self._clients.served, rows=class_rows(outcomes, isolation), scenarios=outcomes, isolation=isolation,
            wall_s=time.perf_counter() - started, run=RunInfo.here(), started_at=began,
        )
        write_atomic(self.out_dir / "report.json", report.model_dump_json(indent=2))
        write_atomic(self.out_dir / "report.md", markdown(report))
        return report

    def _work(self, name: str) -> Path:
        return self.out_dir / "work" / name

    def scenario(self, sc: Scenario) -> ScenarioOutcome:
        started = time.perf_counter()
        work = self._work(sc.id)
        client, _ = self._clients.fresh_client(work)
        scope = {"user_id": sc.user_id}
        try:
            failures = [f for i in range(len(sc.turns)) for f in client.ingest(_turn(sc, i), scope=scope).failures]
            checks = check_records(sc, client.list(scope=scope, include_deleted=True))
            questions = [self._ask(client, scope, q.q, q.a) for q in sc.questions] if self.answers else []
        finally:
            client.close()
            shutil.rmtree(work, ignore_errors=True)
        return ScenarioOutcome(
            id=sc.id, scenario_class=scenario_class(sc), passed=all(c.passed for c in checks), checks=checks, questions=questions,
            failures=failures, wall_s=time.perf_counter() - started,
        )

    @staticmethod
    def _ask(client: MemoryClient, scope: dict[str, str], question: str, gold: str) -> AnsweredQuestion:
        top3 = [h.record.text for h in client.retrieve(question, scope=scope)[:3]]
        answer = client.answer(question, scope=scope)
        return AnsweredQuestion(
            question=question, gold=gold, prediction=answer.text, correct=answer_contains(answer.text, gold), top3=top3,
            gold_in_top3=any(answer_contains(text, gold) for text in top3), latency_s=answer.latency_s,
        )

    def isolation(self, file: ScenarioFile) -> IsolationOutcome:
        spec: Isolation = file.isolation  # type: ignore[assignment]
        by_id = {sc.id: sc for sc in file.scenarios}
        if spec.first not in by_id or spec.second not in by_id:
            raise InvalidInput("isolation", f"names scenarios {spec.first!r} and {spec.second!r}; the file has no scenario {spec.first if spec.first not in by_id else spec.second!r}")
        first, second = by_id[spec.first], by_id[spec.second]
        work = self._work("isolation")
        client, _ = self._clients.fresh_client(work)
        try:
            mine = {"user_id": "first-user"}
            theirs = {"user_id": "second-user"}
            for i in range(min(spec.first_turns, len(first.turns))):
                client.ingest(_turn(first, i), scope=mine)
            for i in range(len(second.turns)):
                client.ingest(_turn(second, i), scope=theirs)
            private = {r.id: r.text for r in client.list(scope=mine, include_deleted=True)}
            probes = [t.text for t in first.turns[: spec.first_turns]] + [q.q for q in first.questions]
            returned = [h.record for p in probes for h in client.search(p, scope=theirs, limit=20, hybrid=True)]
            if self.answers:
                returned += [m for q in first.questions for m in client.answer(q.q, scope=theirs).evidence]
            leaked = sorted({private[r.id] for r in returned if r.id in private})
        finally:
            client.close()
            shutil.rmtree(work, ignore_errors=True)
        return IsolationOutcome(passed=not leaked, leaked=leaked)
