"""The LoCoMo harness: build each conversation's memory, answer its questions, score, cache.

Per conversation (`Evaluator.conversation`):

1. memory: one scope per speaker, both sharing the conversation's run_id (so the extractor
   sees the conversation's recent turns), filled turn by turn, in order, with the session
   timestamp on each turn: through `MemoryClient.ingest` (heuristic / llm), or each turn
   stored verbatim with its turn id and no LLM (raw-rag);
2. retrieval: what the answer path retrieves (`MemoryClient.retrieve`: core, then semantic
   and episodic hits fused by rank; raw-rag: the top of each speaker merged by score);
   recall@k of the source turn ids of its first k against the QA evidence ids;
3. answer: `MemoryClient.answer` over both scopes (answer_k/2 each), scored F1 / BLEU-1 / EM.
   full-context instead puts the whole conversation in the prompt, or records why it cannot
   (it does not fit the model's context);
4. judge, when a judge is configured: the questions without a label get one (`judge.label`,
   the step ``memsdk eval judge`` runs on a finished run).

Each finished conversation is written to ``out/conversations/<id>.json`` with the config's
fingerprint; a rerun with the same fingerprint reuses it, so an interrupted run resumes.
The judge is not part of the fingerprint: a cached result is labelled where it lacks labels.
While a conversation is being ingested, ``<id>.progress.json`` says what it has cost so far.
"""

from __future__ import annotations

import shutil
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from contextlib import ExitStack, closing, suppress
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from tqdm import tqdm

from memsdk.client import IngestResult, MemoryClient
from memsdk.datasets.locomo import LocomoConversation, LocomoQA, Split, load_locomo
from memsdk.eval.backends import CountingBackend, open_backend, open_embedder
from memsdk.eval.config import EvalConfig
from memsdk.eval.judge import Judge, label, unjudged
from memsdk.eval.parallel import ordered_map
from memsdk.eval.results import ADVERSARIAL, ConversationResult, IngestProgress, IngestStats, QuestionResult, Retirement, RunInfo, RunReport, conversation_path, summarize, write_atomic
from memsdk.scoring import bleu1, chance_recall, chance_session_recall, evidence_ids, evidence_recall, exact_match, session_of, session_recall, token_f1
from memsdk.llm.base import LLMBackend, SamplingParams
from memsdk.policies.answerer import UNKNOWN, abstains
from memsdk.registry import BASE_VERSION
from memsdk.errors import InvalidInput
from memsdk.types import Op, Scope, Turn

__all__ = ["Evaluator", "conversation_slice", "render_turn", "speaker_scopes"]

#: turns between two progress files of a long ingest
PROGRESS_EVERY = 10
#: characters per token assumed when checking that a conversation fits the context window;
#: English runs ~4 with SmolLM2's tokenizer, 3 errs towards "does not fit"
CHARS_PER_TOKEN = 3
FULL_CONTEXT_PROMPT = "Here is a conversation between {a} and {b}.\n\n{conversation}\n\nAnswer in at most 6 words, from the conversation only.\nQuestion: {question}"


def render_turn(turn: Turn) -> str:
    """How a raw turn is stored and shown: the speaker, the session date, the text."""
    when = f" (on {turn.timestamp})" if turn.timestamp else ""
    return f"{turn.speaker}{when}: {turn.text}"


@dataclass(frozen=True)
class RankedSpace:
    """What a random ranking of one conversation would draw from: its turns and sessions."""

    turns: int
    sessions: int

    @classmethod
    def of(cls, turns: Sequence[Turn]) -> RankedSpace:
        return cls(turns=len(turns), sessions=len({session_of(t.turn_id) for t in turns if t.turn_id}))


def retirements(client: MemoryClient, scopes: Sequence[Scope]) -> list[Retirement]:
    """The semantic memories of ``scopes`` that a successor retired, each with its successor."""
    records = [r for s in scopes for r in client.list(scope=s, tier="semantic")]
    text = {r.id: r.text for r in records}
    return [Retirement(retired=r.text, by=text.get(r.superseded_by)) for r in records if r.superseded_by is not None]


def speaker_scopes(conv: LocomoConversation) -> tuple[Scope, Scope]:
    first, second = conv.speakers
    return Scope(user_id=first, run_id=conv.sample_id), Scope(user_id=second, run_id=conv.sample_id)


def conversation_slice(conv: LocomoConversation, config: EvalConfig) -> tuple[list[Turn], list[LocomoQA]]:
    """The turns to ingest and the questions to ask. With ``max_sessions``, only questions
    whose evidence lies entirely in the kept sessions: the others cannot be answered."""
    sessions = conv.sessions[: config.max_sessions]
    turns = [t for s in sessions for t in s.turns]
    questions = conv.questions(include_adversarial=config.include_adversarial)
    if config.max_sessions is not None:
        kept = {t.turn_id for t in turns}
        questions = [q for q in questions if (ids := evidence_ids(q.evidence)) and ids <= kept]
    return turns, questions[: config.max_questions]


class Evaluator:
    """One run: a config, an output folder, and the models it loads once and shares."""

    def __init__(self, config: EvalConfig, out_dir: str | Path, *, progress: bool = True, backend: LLMBackend | None = None, judge: Judge | None = None) -> None:
        """``backend`` and ``judge`` replace the ones the config names (tests inject fakes);
        injected parts are not closed by the evaluator."""
        self.config = config
        self.out_dir = Path(out_dir)
        self.progress = progress
        self._stack = ExitStack()
        self.embedder = open_embedder(config)
        self.backend = backend
        if backend is None and config.needs_backend:
            self.backend = self._stack.enter_context(closing(open_backend(config)))
        self.judge = judge
        if judge is None and config.judge_url:
            self.judge = self._stack.enter_context(closing(Judge.connect(config.judge_url, config.judge_model)))

    def close(self) -> None:
        self._stack.close()

    def __enter__(self) -> Evaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the run ------------------------------------------------------------------------------

    def run(self, split: Split) -> RunReport:
        started, clock = datetime.now(timezone.utc), time.perf_counter()
        convs = [c for c in load_locomo() if c.split == split and (self.config.conversations is None or c.sample_id in self.config.conversations)]
        if not convs:
            raise InvalidInput("conversations", f"none of {list(self.config.conversations or [])} is in the {split} split")
        bar = tqdm(total=len(convs), desc=f"locomo {split} {self.config.baseline}", unit="conv", disable=not self.progress)
        # Conversations are independent: against a server they overlap; in-process they queue.
        with ThreadPoolExecutor(max_workers=min(self.config.concurrency, len(convs))) as pool:
            results = list(pool.map(lambda c: self._tick(bar, self.conversation(c)), convs))
        bar.close()
        report = RunReport(
            split=split, config=self.config, started_at=started, wall_s=time.perf_counter() - clock,
            run=RunInfo.here(), conversations=results, summary=summarize(results, self.config.recall_ks),
        )
        self.out_dir.mkdir(parents=True, exist_ok=True)
        write_atomic(self.out_dir / "report.json", report.model_dump_json(indent=2))
        write_atomic(self.out_dir / "summary.json", report.model_dump_json(indent=2, exclude={"conversations"}))  # what a results page needs
        return report

    @staticmethod
    def _tick(bar: tqdm[Any], result: ConversationResult) -> ConversationResult:
        bar.update()
        return result

    def _cache_path(self, conv: LocomoConversation) -> Path:
        return conversation_path(self.out_dir, conv.sample_id)

    def _progress_path(self, conv: LocomoConversation) -> Path:
        return self.out_dir / "conversations" / f"{conv.sample_id}.progress.json"

    def cached(self, conv: LocomoConversation) -> ConversationResult | None:
        path = self._cache_path(conv)
        if not path.exists():
            return None
        result = ConversationResult.model_validate_json(path.read_text(encoding="utf-8"))
        return result if self.config.accepts(result.fingerprint) else None

    def conversation(self, conv: LocomoConversation) -> ConversationResult:
        result = self.cached(conv)
        if result is None:
            result = self._generate(conv)
            # saved before judging: a judge that fails must not cost the hours of ingest
            write_atomic(self._cache_path(conv), result.model_dump_json(indent=2))
            self._progress_path(conv).unlink(missing_ok=True)
        if self.judge is not None and (labelled := self._label(conv, result, self.judge)) is not result:
            write_atomic(self._cache_path(conv), labelled.model_dump_json(indent=2))
            result = labelled
        return result

    def _label(self, conv: LocomoConversation, result: ConversationResult, judge: Judge) -> ConversationResult:
        todo = len(unjudged(result))
        with closing(tqdm(total=todo, desc=f"{conv.sample_id} judge", unit="q", leave=False, disable=not (self.progress and todo))) as bar:
            return label(result, judge, workers=self.config.concurrency, bar=bar)

    def _generate(self, conv: LocomoConversation) -> ConversationResult:
        started = time.perf_counter()
        turns, questions = conversation_slice(conv, self.config)
        if self.config.baseline == "full-context":
            return self._full_context(conv, turns, questions, started)
        return self._from_memory(conv, turns, questions, started)

    # -- memory-backed answering ----------------------------------------------------------------

    def _client(self, conv: LocomoConversation) -> tuple[MemoryClient, CountingBackend[LLMBackend] | None]:
        data_dir = self.out_dir / "work" / conv.sample_id
        shutil.rmtree(data_dir, ignore_errors=True)  # a half-built memory from an interrupted run
        backend = CountingBackend(self.backend) if self.backend is not None else None
        ingest = "llm" if self.config.baseline == "llm" else "heuristic"
        policies = {"extractor": ingest, "manager": self.config.manager or ingest, "answerer": "llm" if self.config.uses_llm_answerer else "heuristic"}
        client = MemoryClient(
            data_dir=data_dir, embedder=self.embedder, backend=backend, policies=policies,
            model=self.config.model, related_k=self.config.related_k, context_turns=self.config.context_turns,
            tiers=self.config.tiers and self.config.baseline != "raw-rag", hybrid=self.config.hybrid,
            **({} if self.config.answer_k is None else {"answer_k": self.config.answer_k}),
        )
        if self.config.answerer_version != BASE_VERSION:
            try:  # the harness's backend is its own (counted), so the adapter is chosen, not started on
                client.use_policy("answerer", self.config.answerer_version)
            except BaseException:
                client.close()
                raise
        return client, backend

    def _from_memory(self, conv: LocomoConversation, turns: list[Turn], questions: list[LocomoQA], started: float) -> ConversationResult:
        client, counter = self._client(conv)
        scopes = speaker_scopes(conv)
        try:
            build = self._store_raw if self.config.baseline == "raw-rag" else self._ingest
            ingest = build(client, conv, turns, counter)
            space = RankedSpace.of(turns)
            ask = lambda qa: self._answer(client, counter, scopes, space, qa)  # noqa: E731
            answered = self._map(ask, questions, desc=f"{conv.sample_id} answer", unit="q")
            return ConversationResult(
                sample_id=conv.sample_id, fingerprint=self.config.fingerprint(), turns=len(turns),
                memories=sum(client.bank.count(s, tier="semantic") for s in scopes), ingest=ingest, questions=answered,
                policy_stats=client.policy_stats, retirements=retirements(client, scopes), wall_s=time.perf_counter() - started,
            )
        finally:
            client.close()
            shutil.rmtree(self.out_dir / "work" / conv.sample_id, ignore_errors=True)
            with suppress(OSError):  # other conversations may still be building there
                (self.out_dir / "work").rmdir()

    def _ingest(self, client: MemoryClient, conv: LocomoConversation, turns: list[Turn], counter: CountingBackend[LLMBackend] | None) -> IngestStats:
        scope_of = dict(zip(conv.speakers, speaker_scopes(conv)))
        tally = _Tally()
        for n, turn in enumerate(tqdm(turns, desc=f"{conv.sample_id} ingest", unit="turn", leave=False, disable=not self.progress), start=1):
            before = _calls(counter)
            result = client.ingest(turn, scope=scope_of[turn.speaker])
            tally.add(result, _calls(counter) - before)
            if n % PROGRESS_EVERY == 0 and n < len(turns):
                self._write_progress(conv, client, tally.stats(), len(turns))
        return tally.stats()

    def _write_progress(self, conv: LocomoConversation, client: MemoryClient, stats: IngestStats, of: int) -> None:
        """What an LLM ingest has cost so far, readable while it runs (hours on a CPU)."""
        progress = IngestProgress(
            sample_id=conv.sample_id, turns_total=of, ingest=stats,
            memories=sum(client.bank.count(s, tier="semantic") for s in speaker_scopes(conv)), policy_stats=client.policy_stats,
        )
        write_atomic(self._progress_path(conv), progress.model_dump_json(indent=2))

    def _store_raw(self, client: MemoryClient, conv: LocomoConversation, turns: list[Turn], counter: CountingBackend[LLMBackend] | None) -> IngestStats:
        """Raw-turn RAG: each turn becomes one memory, verbatim, with its turn id; no LLM."""
        scope_of = dict(zip(conv.speakers, speaker_scopes(conv)))
        latency = []
        for turn in tqdm(turns, desc=f"{conv.sample_id} store", unit="turn", leave=False, disable=not self.progress):
            start = time.perf_counter()
            client.bank.apply(scope_of[turn.speaker], [Op.add(render_turn(turn), source_turn_ids=(turn.turn_id,) if turn.turn_id else ())])
            latency.append(time.perf_counter() - start)
        return IngestStats(turns=len(turns), latency_s=latency, facts=len(turns), ops={"ADD": len(turns)})

    def _answer(self, client: MemoryClient, counter: CountingBackend[LLMBackend] | None, scopes: Sequence[Scope], space: RankedSpace, qa: LocomoQA) -> QuestionResult:
        recall = self._recall(client, scopes, space, qa)
        before = _calls(counter)
        r = client.answer(qa.question, scope=list(scopes))
        # an abstention is scored as the word the answerers write for it, as before it was one
        text = UNKNOWN if r.abstained else r.text
        measured = {"latency_s": r.latency_s, "llm_calls": _calls(counter) - before, "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens}
        return self._score(qa, text, **recall, **measured, abstained=r.abstained)

    def _recall(self, client: MemoryClient, scopes: Sequence[Scope], space: RankedSpace, qa: LocomoQA) -> dict[str, Any]:
        """Evidence recall of what the answer path retrieves, before any LLM runs: turn level at
        ``recall_ks``, session level at ``session_ks``, and each one's chance value."""
        ranked = [h.record.source_turn_ids for h in client.retrieve(qa.question, scope=list(scopes))]
        sessions = {k: session_recall(ranked, qa.evidence, k) for k in self.config.session_ks}
        gold = len({session_of(t) for t in evidence_ids(qa.evidence)})
        chance_sessions = {k: chance_session_recall(space.sessions, gold, k) for k in self.config.session_ks} if 0 < gold <= space.sessions else {}
        return {
            "recall": {k: evidence_recall(ranked, qa.evidence, k) for k in self.config.recall_ks},
            "session_recall_any": {k: any_ for k, (any_, _) in sessions.items()},
            "session_recall_all": {k: all_ for k, (_, all_) in sessions.items()},
            "chance": {} if not gold else {
                "recall": {k: chance_recall(space.turns, k) for k in self.config.recall_ks},
                "session_recall_any": {k: any_ for k, (any_, _) in chance_sessions.items()},
                "session_recall_all": {k: all_ for k, (_, all_) in chance_sessions.items()},
            },
        }  # fmt: skip

    # -- full-context answering -----------------------------------------------------------------

    def _full_context(self, conv: LocomoConversation, turns: list[Turn], questions: list[LocomoQA], started: float) -> ConversationResult:
        conversation = "\n".join(render_turn(t) for t in turns)
        budget = self.config.context_tokens - 64  # room for the question's wrapper and the answer
        estimate = len(conversation) // CHARS_PER_TOKEN
        skipped = None if estimate <= budget else f"~{estimate} tokens of conversation (at {CHARS_PER_TOKEN} chars/token) exceed the {self.config.context_tokens}-token context of {self.config.model}"
        answered = [] if skipped else self._map(lambda qa: self._ask_whole(conv, conversation, qa), questions, desc=f"{conv.sample_id} full-context", unit="q")
        return ConversationResult(
            sample_id=conv.sample_id, fingerprint=self.config.fingerprint(), turns=len(turns), memories=0,
            ingest=IngestStats(turns=len(turns)), questions=answered, skipped=skipped, wall_s=time.perf_counter() - started,
        )

    def _ask_whole(self, conv: LocomoConversation, conversation: str, qa: LocomoQA) -> QuestionResult:
        assert self.backend is not None  # full-context needs_backend
        prompt = FULL_CONTEXT_PROMPT.format(a=conv.speakers[0], b=conv.speakers[1], conversation=conversation, question=qa.question)
        start = time.perf_counter()
        done = self.backend.chat([{"role": "user", "content": prompt}], params=SamplingParams(max_tokens=24, stop=("\n",)))
        answer = " ".join(done.text.split()[:12])
        return self._score(qa, answer, recall={}, latency_s=time.perf_counter() - start, llm_calls=1, prompt_tokens=done.prompt_tokens, completion_tokens=done.completion_tokens)

    # -- shared -----------------------------------------------------------------------------------

    def _score(self, qa: LocomoQA, prediction: str, **measured: Any) -> QuestionResult:
        """F1, BLEU-1 and EM against the gold; a category 5 question scores 1 on each for an
        abstention and 0 for any answer (its gold is the trap the other speaker's turns set)."""
        if qa.category == ADVERSARIAL:
            right = float(measured.get("abstained", abstains(prediction)))
            f1 = bleu = em = right
        else:
            f1, bleu, em = token_f1(prediction, qa.answer), bleu1(prediction, qa.answer), exact_match(prediction, qa.answer)
        return QuestionResult(
            question=qa.question, gold=qa.answer, category=qa.category, category_name=qa.category_name, prediction=prediction,
            f1=f1, bleu1=bleu, em=em, **measured,
        )

    def _map(self, fn: Callable[[LocomoQA], QuestionResult], questions: list[LocomoQA], *, desc: str, unit: str) -> list[QuestionResult]:
        with closing(tqdm(total=len(questions), desc=desc, unit=unit, leave=False, disable=not self.progress)) as bar:
            return ordered_map(fn, questions, workers=self.config.concurrency, bar=bar)


@dataclass
class _Tally:
    """Running totals of per-turn ingest results."""

    latency: list[float] = field(default_factory=list)
    ops: Counter[str] = field(default_factory=Counter)
    calls: int = 0
    prompt: int = 0
    completion: int = 0
    facts: int = 0
    failures: int = 0
    fallbacks: int = 0

    def add(self, r: IngestResult, calls: int) -> None:
        self.latency.append(r.latency_s)
        self.ops.update(op.op for op in r.ops)
        self.calls += calls
        self.prompt, self.completion = self.prompt + r.prompt_tokens, self.completion + r.completion_tokens
        self.facts, self.failures, self.fallbacks = self.facts + len(r.facts), self.failures + len(r.failures), self.fallbacks + r.fallback

    def stats(self) -> IngestStats:
        return IngestStats(
            turns=len(self.latency), latency_s=list(self.latency), llm_calls=self.calls, prompt_tokens=self.prompt, completion_tokens=self.completion,
            facts=self.facts, ops=dict(self.ops), failures=self.failures, fallback_turns=self.fallbacks,
        )


def _calls(counter: CountingBackend[LLMBackend] | None) -> int:
    return 0 if counter is None else counter.calls
