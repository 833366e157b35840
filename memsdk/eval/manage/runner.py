"""Run the management benchmark: each scenario through a fresh `MemoryClient`, then score.

Per scenario (`ManageRunner.scenario`): a client on an empty data folder with the run's
policies, one scope per speaker (user_id the speaker lowercased, run_id the scenario), every
turn ingested in order with its timestamp and turn id; then the records of both scopes
(every tier, deleted ones too) are scored against the gold (`metrics`), and each question
is answered over both scopes. The embedder and the LLM backend (when a role needs one) are
loaded once and shared by every scenario's client, as in the LoCoMo harness.

Output, like ``memsdk eval locomo``'s: ``out/report.json`` (with every scenario's details:
facts, answers, checks, the records left), ``out/report.md`` (the table), and
``out/scenarios/<id>.json`` (one scenario's details, written as it finishes).
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Sequence
from contextlib import ExitStack, closing, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memsdk.client import MemoryClient
from memsdk.serving.policy_set import TRAINED
from memsdk.eval.backends import CountingBackend, open_backend, open_embedder
from memsdk.eval.config import EvalConfig
from memsdk.eval.manage.metrics import answer_correct, fact_outcomes, summarize, turn_checks
from memsdk.eval.manage.report import markdown
from memsdk.eval.manage.results import ManageConfig, ManageReport, QuestionOutcome, RecordView, ScenarioResult
from memsdk.eval.manage.scenarios.demo import scenarios
from memsdk.eval.manage.scenarios.models import Question, Scenario, ScenarioSplit
from memsdk.eval.results import RunInfo, write_atomic
from memsdk.scoring import bleu1, exact_match, token_f1
from memsdk.errors import InvalidInput
from memsdk.eval.runner import _calls, _Tally
from memsdk.llm.base import LLMBackend
from memsdk.policies.answerer import UNKNOWN
from memsdk.policies.pair_manager import PairManager
from memsdk.policies.cross_encoder import load_relations
from memsdk.config.roles import RolePolicies
from memsdk.registry import BASE_VERSION, PACKAGED_DIR, PolicyRegistry
from memsdk.types import MemoryRecord, Tier

__all__ = ["ManageRunner", "role_policies", "default_out"]

KINDS = ("current", "previous")


def role_policies(config: ManageConfig) -> dict[str, str]:
    """What serves each role: the preset's choice for ``config.model``, the answerer as asked."""
    preset = RolePolicies.of(config.policies, model=config.model)
    roles = {role: str(preset[role]) for role in ("extractor", "manager", "answerer")}
    if config.manager is not None:
        roles["manager"] = config.manager
    if config.answerer is not None:
        roles["answerer"] = "heuristic" if config.answerer == "extractive" else "llm"
    return roles


def default_out(split: ScenarioSplit, config: ManageConfig) -> Path:
    """``build/eval/manage-<split>-<policies>``, then ``-manager-<name>`` and the answerer where they are not the preset's."""
    preset = RolePolicies.of(config.policies, model=config.model)
    roles = role_policies(config)
    suffix = "" if roles["manager"] == str(preset["manager"]) else f"-manager-{config.manager}"
    suffix += "" if roles["answerer"] == str(preset["answerer"]) else f"-{config.answerer}"
    return Path("build") / "eval" / f"manage-{split}-{config.policies}{suffix}"


class ManageRunner:
    """One run: settings, an output folder, and the models its clients share."""

    def __init__(self, config: ManageConfig, out_dir: str | Path, *, progress: bool = True, backend: LLMBackend | None = None, embedder: Any = None) -> None:
        """``backend`` / ``embedder`` replace the ones the config names (tests inject them);
        injected parts are not closed by the runner."""
        self.config = config
        self.out_dir = Path(out_dir)
        self.progress = progress
        self.roles = role_policies(config)
        self._stack = ExitStack()
        loader = EvalConfig(embedder=config.embedder, model=config.model, llm_base_url=config.llm_base_url, llm_threads=config.llm_threads)
        self.embedder = embedder if embedder is not None else open_embedder(loader)
        self.backend = backend
        if backend is None and "llm" in self.roles.values():
            self.backend = self._stack.enter_context(closing(open_backend(loader)))
        self.answerer_version = self._answerer_version()

    def _answerer_version(self) -> str | None:
        """The LLM answerer's version: the configured one, else the packaged adapter for the model (what a client serves by default)."""
        if self.roles["answerer"] != "llm":
            return None
        if self.config.answerer_version is not None:
            return self.config.answerer_version
        packaged = PolicyRegistry(PACKAGED_DIR, packaged=PACKAGED_DIR).packaged_default("answerer", self.config.model)
        return packaged.version if packaged is not None else BASE_VERSION

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> ManageRunner:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def served(self) -> dict[str, str]:
        """What served each role: a trained policy by its version ("pairs" -> pairs-v4), the LLM answerer at its adapter."""
        named = {role: TRAINED.get(role, {}).get(choice, choice) for role, choice in self.roles.items()}
        if self.config.manager_version and self.roles["manager"] in ("llm", *TRAINED["manager"]):
            named["manager"] = self.config.manager_version if self.roles["manager"] != "llm" else f"llm@{self.config.manager_version}"
        return named | ({"answerer": f"llm@{self.answerer_version}"} if self.answerer_version else {})

    def run(self, split: ScenarioSplit, chosen: Sequence[Scenario] | None = None) -> ManageReport:
        """Every scenario of ``split`` (or ``chosen``); writes report.json, report.md and scenarios/*.json."""
        started, clock = datetime.now(UTC), time.perf_counter()
        todo = list(chosen) if chosen is not None else scenarios(split, self.config.scenarios, seed=self.config.seed)
        todo = todo[: self.config.max_scenarios]
        results = [self.scenario(sc) for sc in tqdm(todo, desc=f"manage {split} {self.config.policies}", unit="scenario", disable=not self.progress)]
        report = ManageReport(
            split=split, config=self.config, policies=self.served, started_at=started, wall_s=time.perf_counter() - clock,
            run=RunInfo.here(), scenarios=results, summary=summarize(results),
        )
        write_atomic(self.out_dir / "report.json", report.model_dump_json(indent=2))
        write_atomic(self.out_dir / "summary.json", report.model_dump_json(indent=2, exclude={"scenarios"}))  # what a results page needs
        write_atomic(self.out_dir / "report.md", markdown(report))
        return report

    def fresh_client(self, work: Path) -> tuple[MemoryClient, CountingBackend[LLMBackend] | None]:
        shutil.rmtree(work, ignore_errors=True)
        counter = CountingBackend(self.backend) if self.backend is not None else None
        roles: dict[str, Any] = dict(self.roles)
        chosen = {"answerer": self.answerer_version, "manager": self.config.manager_version}
        if self.roles["manager"] in TRAINED["manager"] and chosen["manager"] not in (None, BASE_VERSION):
            roles["manager"] = self._pair_head(str(chosen.pop("manager")))  # a candidate head, not the shipped one
        client = MemoryClient(data_dir=work, embedder=self.embedder, backend=counter, policies=roles, model=self.config.model, checkpoint_dir=self.config.checkpoint_dir)
        try:
            for role, version in chosen.items():
                if version not in (None, BASE_VERSION):
                    client.use_policy(role, version)
        except BaseException:
            client.close()
            raise
        return client, counter

    def _pair_head(self, version: str) -> PairManager:
        """The pair manager of a candidate head, ``version`` of the run's checkpoints (a
        trainer's registry_dir, or any folder holding ``manager/<version>/``)."""
        if self.config.checkpoint_dir is None:
            raise InvalidInput("checkpoints", f"the pair head {version!r} is looked up in --checkpoints: none given")
        registry = PolicyRegistry(self.config.checkpoint_dir)
        head = load_relations(registry.adapter_dir(registry.get("manager", version)))
        return PairManager(head, self.embedder if getattr(self.embedder, "name", None) == head.embedder else None)

    def scenario(self, sc: Scenario) -> ScenarioResult:
        """Ingest ``sc`` into a fresh client, score what its scopes hold, answer its questions."""
        started = time.perf_counter()
        work = self.out_dir / "work" / sc.id
        client, counter = self.fresh_client(work)
        try:
            tally = _Tally()
            for turn in sc.turns:
                before = _calls(counter)
                tally.add(client.ingest(turn.turn(), scope=sc.scope(turn.speaker)), _calls(counter) - before)
            records = {speaker: client.list(scope=sc.scope(speaker), include_deleted=True) for speaker in sc.speakers}
            facts = fact_outcomes(sc, records)
            questions = [self._ask(client, counter, sc, q) for q in sc.questions]
            history: Counter[str] = Counter(str(e.event) for s in sc.scopes() for e in client.history(scope=s))
            result = ScenarioResult(
                id=sc.id, events=[e.event for e in sc.episodes], turns=len(sc.turns), ingest=tally.stats(), facts=facts, questions=questions,
                checks=turn_checks(sc, records, facts), history=dict(sorted(history.items())), records=_views(records),
                memories=sum(r.tier is Tier.SEMANTIC and not r.deleted for rs in records.values() for r in rs),
                policy_stats=client.policy_stats, wall_s=time.perf_counter() - started,
            )
        finally:
            client.close()
            shutil.rmtree(work, ignore_errors=True)
            with suppress(OSError):
                (self.out_dir / "work").rmdir()
        write_atomic(self.out_dir / "scenarios" / f"{sc.id}.json", result.model_dump_json(indent=2))
        return result

    @staticmethod
    def _ask(client: MemoryClient, counter: CountingBackend[LLMBackend] | None, sc: Scenario, q: Question) -> QuestionOutcome:
        before = _calls(counter)
        r = client.answer(q.text, scope=list(sc.scopes()))
        text = UNKNOWN if r.abstained else r.text  # scored as the answerers' own word for it, as before it was one
        return QuestionOutcome(
            question=q.text, gold=q.gold, category=KINDS.index(q.kind) + 1, category_name=f"{q.kind}-state", prediction=text,
            f1=token_f1(text, q.gold), bleu1=bleu1(text, q.gold), em=exact_match(text, q.gold), latency_s=r.latency_s,
            llm_calls=_calls(counter) - before, prompt_tokens=r.prompt_tokens, completion_tokens=r.completion_tokens,
            kind=q.kind, event=q.event, correct=answer_correct(text, q.gold, q.excludes),
        )


def _views(records: dict[str, list[MemoryRecord]]) -> list[RecordView]:
    return [
        RecordView(owner=owner, tier=str(r.tier), text=r.text, current=r.current, deleted=r.deleted, source_turn_ids=r.source_turn_ids)
        for owner, rs in records.items() for r in rs
    ]
