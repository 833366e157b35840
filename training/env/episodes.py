"""Memory-R2 episodes: sessions in chunks of k turns, extractor + manager on one backbone, a reward per session.

One rollout over sessions S_1..S_T (memory M starts empty):

    for t = 1..T:
        anchor_t = snapshot(M)                                  the state before S_t
        for each chunk C of k turns of S_t:
            F   = extractor(C)                                  ChunkExtractor, one call
            ops = manager(F, related(M, F))                     ChunkManager, same backend and model
            M   = T(M, ops)                                     MemoryBank.apply
                                                                (the three: the runtime's `ingest_steps`)
        R_t = QA-F1(M, Q_t) - lambda_comp * Comp(M, t)          rewards.memory_r2.session_reward

Local re-rolls (LoGo-GRPO): fork anchor_t and run S_t again m times. They sample at the
training temperature: Memory-R2's public code re-rolls greedily by default, which makes
the m members of a local group identical and their advantages zero; `reroll` refuses that.

Rollouts of one group share the per-session QA subsets (drawn once, `sample_episode_qa`).
With ``params.seed`` set, every policy call gets its own seed from an RNG keyed by the
rollout, so a group is repeatable and still diverse (one fixed seed on every call would
make all rollouts of the group the same).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from memsdk.bank import BankLimits, BankSnapshot, MemoryBank
from memsdk.effects import Runner
from memsdk.pipeline.decisions import ActivePolicies
from memsdk.pipeline.ingest import ingest_steps
from memsdk.embedding import Embedder
from memsdk.llm.base import Completion, LLMBackend, Message, SamplingParams
from memsdk.policies import Answerer, PolicyCall, PolicyConfig, memory_r2_policies
from memsdk.types import Scope, Turn

from ..rewards.memory_r2 import SessionRewardConfig, compression_penalty, session_reward
from .answering import QAOutcome, answer_questions, mean_score, sample_qa
from .state import QAItem

__all__ = [
    "Session",
    "Episode",
    "EpisodeConfig",
    "SessionOutcome",
    "EpisodeRollout",
    "EpisodeRunner",
    "chunks",
    "sample_episode_qa",
    "word_count",
]


def word_count(text: str) -> int:
    """Tok(.) by whitespace words; pass a model tokenizer's length instead for exact tokens."""
    return len(text.split())


@dataclass(frozen=True, slots=True)
class Session:
    key: str
    turns: tuple[Turn, ...]
    qa: tuple[QAItem, ...]  # Q_t: questions answerable once this session is in memory


@dataclass(frozen=True, slots=True)
class Episode:
    key: str
    scope: Scope
    sessions: tuple[Session, ...]


@dataclass(frozen=True)
class EpisodeConfig:
    chunk_turns: int = 4  # k
    related_k: int = 10  # memories shown to the manager per chunk
    answer_k: int = 60  # memories retrieved per question
    qa_per_session: int | None = None  # |Q_t| cap, drawn once per group
    reward: SessionRewardConfig = SessionRewardConfig()


@dataclass(frozen=True)
class SessionOutcome:
    index: int
    before: BankSnapshot  # anchor_t
    after: BankSnapshot
    reward: float  # R_t
    qa_f1: float
    compression: float  # Comp(M, t)
    memory_tokens: int  # Tok(M) after S_t
    seen_tokens: int  # sum Tok(S_1..t)
    answers: tuple[QAOutcome, ...]
    calls: tuple[PolicyCall, ...]  # extractor and manager calls in order: the trainer's steps
    rejected: tuple[str, ...]


@dataclass(frozen=True)
class EpisodeRollout:
    episode: Episode
    qa: tuple[tuple[QAItem, ...], ...]  # the group's subset per session
    sessions: tuple[SessionOutcome, ...]

    @property
    def rewards(self) -> list[float]:
        return [s.reward for s in self.sessions]


def chunks(turns: Sequence[Turn], k: int) -> Iterator[tuple[Turn, ...]]:
    if k < 1:
        raise ValueError("chunk size must be at least 1")
    for start in range(0, len(turns), k):
        yield tuple(turns[start : start + k])


def sample_episode_qa(episode: Episode, k: int | None, seed: int) -> tuple[tuple[QAItem, ...], ...]:
    rng = random.Random(f"{seed}:{episode.key}")
    return tuple(sample_qa(s.qa, k, rng) for s in episode.sessions)


class _SeedPerCall:
    """Forwards to a backend, giving each request its own seed from one RNG.

    Keeps sampling repeatable per rollout while no two calls share a seed; only the seed
    differs from what the policy asked for.
    """

    def __init__(self, backend: LLMBackend, rng: random.Random) -> None:
        self._backend, self._rng = backend, rng

    @property
    def model(self) -> str:
        return self._backend.model

    @property
    def supports_schema(self) -> bool:
        return self._backend.supports_schema

    def _seeded(self, params: SamplingParams) -> SamplingParams:
        return params.model_copy(update={"seed": self._rng.getrandbits(31)})

    def chat(self, messages: Sequence[Message], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self._backend.chat(messages, params=self._seeded(params), model=model, schema=schema)

    def complete(self, prompt: str, *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None) -> Completion:
        return self._backend.complete(prompt, params=self._seeded(params), model=model, schema=schema)

    def chat_batch(
        self, conversations: Sequence[Sequence[Message]], *, params: SamplingParams, model: str | None = None, schema: dict[str, Any] | None = None
    ) -> list[Completion]:
        return self._backend.chat_batch(conversations, params=self._seeded(params), model=model, schema=schema)

    def close(self) -> None:
        """The wrapped backend belongs to the caller; closing the wrapper leaves it open."""


class EpisodeRunner:
    """Runs Memory-R2 rollouts and anchor re-rolls with one backbone and a frozen answerer.

    ``policy`` is the training-time policy config: one model name for both roles, and the
    sampling params (temperature > 0 for training) that every extractor and manager call uses.
    """

    def __init__(
        self,
        backend: LLMBackend,
        answerer: Answerer,
        embedder: Embedder,
        policy: PolicyConfig,
        config: EpisodeConfig = EpisodeConfig(),
        *,
        count_tokens: Callable[[str], int] = word_count,
        limits: BankLimits = BankLimits(),
    ) -> None:
        if policy.params is None:
            raise ValueError("policy.params must be the training sampling params (the role defaults are greedy)")
        if policy.params.n != 1:
            raise ValueError("policies read one choice per call: sample groups as separate rollouts, not n > 1")
        self.backend, self.answerer, self.embedder = backend, answerer, embedder
        self.policy, self.config, self.count_tokens, self.limits = policy, config, count_tokens, limits
        self.params = policy.params  # checked above: never None here

    def prompt_ids(self) -> dict[str, str]:
        """The prompt id each client role renders in these rollouts: a published adapter must be served with it."""
        extractor, manager = memory_r2_policies(self.backend, self.policy)
        return {"extractor": extractor.caller.prompt.id, "manager": manager.caller.prompt.id}

    def session_tokens(self, episode: Episode) -> list[int]:
        """Tok(S_t) for every session: its turns as the extractor sees them ("speaker: text")."""
        return [sum(self.count_tokens(f"{t.speaker}: {t.text}") for t in s.turns) for s in episode.sessions]

    def empty(self, episode: Episode) -> BankSnapshot:
        return BankSnapshot(episode.scope, (), self.embedder.dim)

    def _backend_for(self, tag: str) -> LLMBackend:
        if self.params.seed is None:
            return self.backend
        return _SeedPerCall(self.backend, random.Random(f"{self.params.seed}:{tag}"))

    def rollout(self, episode: Episode, qa: Sequence[Sequence[QAItem]] | None = None, *, tag: str = "0", start: BankSnapshot | None = None) -> EpisodeRollout:
        """One pass over every session; ``qa`` is the group's subset per session (default: all)."""
        qa = tuple(tuple(q) for q in (qa if qa is not None else [s.qa for s in episode.sessions]))
        if len(qa) != len(episode.sessions):
            raise ValueError(f"{len(qa)} QA subsets for {len(episode.sessions)} sessions")
        backend = self._backend_for(f"{episode.key}:rollout:{tag}")
        bank = MemoryBank.from_snapshot(start or self.empty(episode), self.embedder, limits=self.limits)
        seen = self.session_tokens(episode)
        outcomes = tuple(self._session(bank, backend, episode, t, qa[t], seen) for t in range(len(episode.sessions)))
        return EpisodeRollout(episode, qa, outcomes)

    def group(self, episode: Episode, n: int, *, seed: int = 0) -> list[EpisodeRollout]:
        """n full rollouts judged by one QA subset per session (the global groups)."""
        qa = sample_episode_qa(episode, self.config.qa_per_session, seed)
        return [self.rollout(episode, qa, tag=f"{seed}:{i}") for i in range(n)]

    def reroll(self, anchor: EpisodeRollout, session: int, m: int, *, seed: int = 0) -> list[SessionOutcome]:
        """Restore the memory before ``session`` in ``anchor`` and run that session m more times.

        The local group of LoGo-GRPO: same start state, same questions, fresh samples.
        """
        if self.params.temperature <= 0:
            raise ValueError("re-rolls must sample at the training temperature: greedy re-rolls are all identical")
        episode, start = anchor.episode, anchor.sessions[session].before
        seen = self.session_tokens(episode)
        out = []
        for j in range(m):
            backend = self._backend_for(f"{episode.key}:reroll:{seed}:{session}:{j}")
            bank = MemoryBank.from_snapshot(start, self.embedder, limits=self.limits)
            out.append(self._session(bank, backend, episode, session, anchor.qa[session], seen))
        return out

    def _session(self, bank: MemoryBank, backend: LLMBackend, episode: Episode, t: int, qa: tuple[QAItem, ...], seen: Sequence[int]) -> SessionOutcome:
        scope = episode.scope
        extractor, manager = memory_r2_policies(backend, self.policy)
        policies = ActivePolicies(extractor, manager, self.answerer, versions={"manager": manager.caller.version(backend)})
        before = bank.snapshot(scope)
        calls: list[PolicyCall] = []
        rejected: list[str] = []
        for chunk in chunks(episode.sessions[t].turns, self.config.chunk_turns):
            # the runtime's ingest loop on a chunk: one extractor call, the facts decided together
            outcome = Runner(bank).run(ingest_steps(chunk, (), scope, policies, self.config.related_k, episodic=False, together=True))
            calls += outcome.calls
            rejected += outcome.failures
        answers = answer_questions(bank, scope, qa, self.answerer, top_k=self.config.answer_k, metric="f1")
        qa_f1 = mean_score(answers)  # QA(M, Q_t): mean token F1, 0.0 without questions
        memory_tokens = sum(self.count_tokens(r.text) for r in bank.list(scope))
        cumulative = list(seen[: t + 1])
        return SessionOutcome(
            index=t,
            before=before,
            after=bank.snapshot(scope),
            reward=session_reward(qa_f1, memory_tokens, cumulative, self.config.reward),
            qa_f1=qa_f1,
            compression=compression_penalty(memory_tokens, cumulative, self.config.reward.alpha),
            memory_tokens=memory_tokens,
            seen_tokens=sum(cumulative),
            answers=answers,
            calls=tuple(calls),
            rejected=tuple(rejected),
        )
