"""Mem-alpha's environment: a sample's chunks written by the writer, one rollout at a time.

    M_0 = the empty bank;  step t: q_t = (c_t, M_{t-1}) -> o_t = (a_t^1 .. a_t^K_t) -> M_t
    R_t = R1 + R2_t + w3 * R3 + w4 * R4_t                   (`rewards.mem_alpha`)

A step is the runtime's `write_steps` (chunk into the episodic tier, core + related semantic
memories shown, the calls applied one op per `MemoryBank.apply`), driven here against an
in-memory bank; only the writer's `Chat` effect is answered differently: the reply is
sampled from the policy being trained, and the runtime's own writer reads it. So R2_t is
exactly the share of calls the runtime would have executed.

- R1: QA over the final memory through the frozen retriever (`retrieve_steps`, as `answer`
  retrieves) and the frozen answerer, shared by every step of the rollout.
- R3: 1 - L_M / L_C with L_M the characters of the live core and semantic memories (what
  the writer wrote; the episodic tier is the context itself, not a compression of it) and
  L_C the characters of the chunks' turns.
- R4_t: the judge's verdict on each call of step t; a call the bank never applied is not
  valid content (v = 0) and costs no judge request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from memsdk.bank import MemoryBank
from memsdk.effects import Runner
from memsdk.pipeline.ingest import WriteOutcome, write_steps
from memsdk.pipeline.retrieval import retrieve_steps
from memsdk.embedding import Embedder
from memsdk.interactions.types import AppliedOp
from memsdk.llm.base import Completion, LLMBackend, SamplingParams
from memsdk.effects import Chat
from memsdk.policies import Answerer, LLMWriter
from memsdk.grounding import grounded
from memsdk.store.memory import InMemoryTransport
from memsdk.types import ScoredMemory, Tier

from ..rewards import QA_METRICS, MemAlphaConfig, Metric, compression_reward, content_validity, format_validity, mem_alpha_reward, mean_qa_score
from .episodes import Episode, chunks
from .state import QAItem

__all__ = ["CallJudge", "Frozen", "WriterStep", "WriterRollout", "grounded_judge", "llm_judge", "qa_score", "roll_out", "VERSION"]

#: the writer actor's version inside training rollouts (history says who wrote what)
VERSION = "training"

#: judge(chunk text, an applied op) -> is the write semantically valid (Mem-alpha's v)
CallJudge = Callable[[str, AppliedOp], bool]


def grounded_judge(chunk: str, op: AppliedOp) -> bool:
    """The cheap judge: a write is valid when it is not empty and, for ADD / UPDATE, at least
    half of its content words come from the chunk or the text it replaces. Any OpenAI-
    compatible model can judge instead (`llm_judge`)."""
    if op.op == "DELETE":
        return True
    return bool(op.after) and grounded(op.after or "", [chunk, op.before or ""], 0.5)


_JUDGE_SYSTEM = "You check one write to a user's memory. Answer yes or no."


def llm_judge(backend: LLMBackend, model: str | None = None) -> CallJudge:
    """Mem-alpha's content judge on any OpenAI-compatible model: asked, greedily, whether a
    write is a correct and useful memory of its chunk; anything but a "yes" is invalid."""
    params = SamplingParams(temperature=0.0, max_tokens=3)

    def judge(chunk: str, op: AppliedOp) -> bool:
        write = f"{op.op} {op.after!r}" + (f" (was {op.before!r})" if op.before else "")
        user = f"Conversation chunk:\n<<<\n{chunk}\n>>>\nWrite: {write}\nIs this write a correct and useful memory of the chunk? Answer yes or no."
        reply = backend.chat([{"role": "system", "content": _JUDGE_SYSTEM}, {"role": "user", "content": user}], params=params, model=model)
        return reply.choices[0].text.strip().lower().startswith("yes")

    return judge


@dataclass(frozen=True)
class WriterStep:
    """One write step of one rollout: what the trainer learns from, and its local rewards."""

    prompt: str  # rendered: exactly what generation started from
    token_ids: tuple[int, ...]
    text: str
    executed: tuple[bool, ...]  # one per call the reply held (`WriteOutcome.executed`)
    valid: tuple[bool, ...]  # the judge's v per call (False for a call that did not execute)
    parse_failed: bool

    @property
    def format_score(self) -> float:  # R2_t
        return format_validity(self.executed)

    @property
    def content_score(self) -> float:  # R4_t
        return content_validity(self.valid, bool)


@dataclass(frozen=True)
class WriterRollout:
    steps: tuple[WriterStep, ...]
    qa: float  # R1
    compression: float  # R3
    memory_chars: int  # L_M
    context_chars: int  # L_C

    def rewards(self, config: MemAlphaConfig) -> list[float]:
        """R_t per step; R1 and R3 are the rollout's, shared by all its steps."""
        return [mem_alpha_reward(self.qa, s.format_score, self.compression, s.content_score, config) for s in self.steps]


@dataclass(frozen=True)
class Frozen:
    """The parts a rollout is scored with and never trains."""

    embedder: Embedder
    answerer: Answerer
    judge: CallJudge
    metric: Metric = "f1"
    answer_k: int = 30
    related_k: int = 5
    chunk_turns: int = 4


def qa_score(bank: MemoryBank, episode: Episode, questions: Sequence[QAItem], frozen: Frozen) -> float:
    """R1: QA(M, Q) (`rewards.qa`) of the frozen answerer over what `answer` would retrieve."""
    score = QA_METRICS[frozen.metric]
    scores = []
    for item in questions:
        shown: list[ScoredMemory] = Runner(bank).run(retrieve_steps(item.question, [episode.scope], frozen.answer_k))
        scores.append(score(frozen.answerer.answer(item.question, shown).text, item.answer))
    return mean_qa_score(scores)


def roll_out(episode: Episode, writer: LLMWriter, render: Callable[[list[dict[str, str]]], str], params: SamplingParams, frozen: Frozen, questions: Sequence[QAItem]) -> WriterRollout:
    """One rollout: every chunk of every session written from an empty bank, then R1 and R3.

    ``params`` are the sampling parameters of every step (n = 1: a rollout is one path; the
    group is several rollouts); its seed is advanced per step so the steps differ."""
    bank = MemoryBank(InMemoryTransport(frozen.embedder.dim), frozen.embedder)
    steps: list[WriterStep] = []
    context = 0
    for session in episode.sessions:
        for chunk in chunks(session.turns, frozen.chunk_turns):
            context += sum(len(t.text) for t in chunk)
            sampled: dict[str, Any] = {}
            seed = (params.seed or 0) + len(steps)  # a step's own seed: the steps of a rollout differ

            def sample(effect: Chat) -> Completion:
                # the writer's own request, sampled with the trainer's settings; the runtime's
                # writer then reads the reply and the pipeline applies it
                request = effect.request
                options = params.model_copy(update={"n": 1, "seed": seed, "stop": request.params.stop})
                completion: Completion = effect.backend.chat(request.messages, params=options, model=request.model)
                choice = completion.choices[0]
                sampled.update(prompt=render(request.messages), token_ids=tuple(choice.token_ids or ()), text=writer.caller.reply_text(request, choice))
                return completion

            outcome: WriteOutcome = Runner(bank, chat=sample).run(write_steps(chunk, episode.scope, writer, frozen.related_k, version=VERSION))
            if not sampled:  # every turn was a forget request or a correction: no writer call
                continue
            sampled["failed"] = outcome.calls[-1].parsed is None
            chunk_text = LLMWriter.chunk_text(chunk)
            applied = iter(outcome.ops)  # one applied op per executed call, in order
            valid = [frozen.judge(chunk_text, next(applied)) if ok else False for ok in outcome.executed]
            steps.append(WriterStep(sampled["prompt"], sampled["token_ids"], sampled["text"], tuple(outcome.executed), tuple(valid), sampled["failed"]))
    memory = sum(len(r.text) for tier in (Tier.CORE, Tier.SEMANTIC) for r in bank.list(episode.scope, tier=tier))
    return WriterRollout(tuple(steps), qa_score(bank, episode, questions, frozen), compression_reward(memory, context), memory, context)

