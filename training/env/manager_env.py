"""Memory-R1's manager environment: one sampled manager output -> new bank -> frozen answerer -> reward.

    q_mem   = (x, M_old)                        x = the state's facts, M_old its snapshot
    ops     = to_ops(parse(o), R)               R = top-k memories related to x, shown as [0], [1], ...
    M_new   = T(M_old, ops)                     T = MemoryBank.apply on a fork of the snapshot
    R^mem   = (1/|Q|) sum_j metric(answerer(q_j, top_k(M_new, q_j)), a*_j)   metric = EM (paper) or F1
            + w_fmt * 1[o parses and the guard and the bank accept all its ops]  w_fmt = 0 in the paper
            (a state with a gold state, ``expect``: S(M_new), the share of it that holds,
            in place of the QA term; `rewards.validity`)

The output is parsed exactly as the runtime parses it (`memsdk.policies.parsing.parse` with
its one repair, then the manager's `to_ops` guard with the same aliases the prompt showed),
but without the runtime's re-ask: a rollout is judged on what the policy wrote. Output that
does not parse, or ops the guard or the bank reject, leave M_new = M_old, and the reward is
computed on that unchanged bank, so a broken output scores what doing nothing scores.

GRPO groups (`ManagerEnv.sample_group`): G outputs sampled for one prompt at temperature > 0,
each stepped on its own fork, all judged by one QA subset drawn once per group.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from memsdk.bank import BankLimits, BankSnapshot, MemoryBank, Transition
from memsdk.effects import Runner
from memsdk.pipeline.ingest import related_steps
from memsdk.embedding import Embedder
from memsdk.errors import Conflict, InvalidInput, MemoryNotFound
from memsdk.llm.base import LLMBackend, SamplingParams
from memsdk.policies import Answerer, LLMManager
from memsdk.effects import Request
from memsdk.types import Actor, Op, Scope, ScoredMemory

from ..rewards.memory_r1 import manager_reward
from ..rewards.validity import validity_score
from .answering import Metric, QAOutcome, answer_questions, mean_score, sample_qa
from .state import MemoryState

__all__ = ["EnvConfig", "Observation", "StepResult", "Rollout", "Group", "ManagerEnv", "retrieve_related", "apply_ops"]

Message = dict[str, str]


@dataclass(frozen=True)
class EnvConfig:
    """``related_k`` memories are shown to the manager; ``answer_k`` are retrieved per question
    (Memory-R1 retrieves 60, Mem0-style); ``metric`` is the reward (the paper trains on EM).

    ``format_reward`` (w_fmt) is a DeepSeek-R1-style format term: a 7B model's replies parse
    from the start, a 135M model's rarely do, and then every reply of a group scores what doing
    nothing scores, so GRPO sees equal rewards and learns nothing. The term makes "a reply the
    runtime can apply" the first thing to learn.
    """

    related_k: int = 10
    answer_k: int = 60
    metric: Metric = "em"
    format_reward: float = 0.0


@dataclass(frozen=True)
class Observation:
    """What the manager sees: the related memories (alias i = position i) and the chat prompt."""

    related: tuple[ScoredMemory, ...]
    messages: tuple[Message, ...]


@dataclass(frozen=True)
class StepResult:
    reward: float
    answers: tuple[QAOutcome, ...]
    bank: BankSnapshot  # M_new
    ops: tuple[Op, ...]
    transition: Transition | None
    parse_error: str | None = None
    rejected: tuple[str, ...] = ()
    apply_error: str | None = None

    @property
    def parse_failed(self) -> bool:
        return self.parse_error is not None

    @property
    def valid(self) -> bool:
        """The reply parsed and the guard and the bank accepted every op it asked for."""
        return not self.parse_failed and not self.rejected and self.apply_error is None

    @property
    def changed(self) -> bool:
        return self.transition is not None and bool(self.transition.events)


@dataclass(frozen=True)
class Rollout:
    """One sampled output o_i of a group, with what the trainer needs to score its tokens."""

    output: str
    token_ids: list[int] | None
    logprobs: list[float] | None
    result: StepResult


@dataclass(frozen=True)
class Group:
    state: MemoryState  # carries the group's shared QA subset
    observation: Observation
    rollouts: tuple[Rollout, ...]

    @property
    def rewards(self) -> list[float]:
        return [r.result.reward for r in self.rollouts]


def retrieve_related(bank: MemoryBank, scope: Scope, facts: Sequence[str], k: int) -> list[ScoredMemory]:
    """The memories the runtime shows the manager for ``facts`` (`related_steps`: per-fact
    top-k semantic memories merged by best score; for one fact, exactly ``bank.search(scope,
    fact, limit=k, tier="semantic")``): the manager never sees (or rewrites) episodic turns."""
    return Runner(bank).run(related_steps(scope, facts, k))


def apply_ops(bank: MemoryBank, scope: Scope, ops: Sequence[Op], actor: Actor) -> tuple[Transition | None, str | None]:
    """`MemoryBank.apply`, with the errors a policy can cause turned into a reported no-op.

    apply is atomic, so a rejected batch has written nothing. Store failures still raise:
    they are the environment's problem, not the policy's.
    """
    try:
        return bank.apply(scope, ops, actor=actor), None
    except (InvalidInput, MemoryNotFound, Conflict) as exc:
        return None, str(exc)


class ManagerEnv:
    """Steps manager outputs for `MemoryState`s; the manager policy supplies prompt, guard and backend.

    The answerer is frozen: the environment never changes it, and it only reads forks.
    """

    def __init__(self, manager: LLMManager, answerer: Answerer, embedder: Embedder, config: EnvConfig = EnvConfig(), *, limits: BankLimits = BankLimits()) -> None:
        self.manager, self.answerer, self.embedder = manager, answerer, embedder
        self.config, self.limits = config, limits
        self.actor = Actor(role=manager.role, version=manager.caller.version(manager.backend))

    def _fork(self, state: MemoryState) -> tuple[MemoryBank, list[ScoredMemory]]:
        bank = MemoryBank.from_snapshot(state.bank, self.embedder, limits=self.limits)
        return bank, retrieve_related(bank, state.scope, state.facts, self.config.related_k)

    def request(self, state: MemoryState, related: Sequence[ScoredMemory]) -> Request:
        """The runtime manager's own request for ``state`` (template, response prefix, stop).

        The trainer scores the exact text the policy saw, the aliases in it are the ones
        `to_ops` maps back, and a warm start's targets are framed by the same prefix and stop.
        """
        return self.manager.request(state.facts, related)

    def _render(self, state: MemoryState, related: Sequence[ScoredMemory]) -> tuple[Message, ...]:
        return tuple(self.request(state, related).messages)

    def observe(self, state: MemoryState) -> Observation:
        _, related = self._fork(state)
        return Observation(tuple(related), self._render(state, related))

    def messages(self, state: MemoryState) -> list[Message]:
        """The prompt for ``state``, as the manager policy would send it."""
        return list(self.observe(state).messages)

    def step(self, state: MemoryState, policy_output: str) -> StepResult:
        bank, related = self._fork(state)
        # the runtime's own reading of a reply: its parser, guard and finish (`LLMManager.read`)
        decision = self.manager.read(self.request(state, related), policy_output, state.facts, related, source_turn_ids=state.source_turn_ids)
        parse_error = decision.calls[0].failure if decision.calls[0].parsed is None else None
        ops, rejected = decision.ops, ([] if parse_error else decision.rejected)
        transition, apply_error = apply_ops(bank, state.scope, ops, self.actor)
        answers = answer_questions(bank, state.scope, state.qa, self.answerer, top_k=self.config.answer_k, metric=self.config.metric)
        valid = parse_error is None and not rejected and apply_error is None
        score = validity_score(state.expect, bank.list(state.scope, include_deleted=True)) if state.expect else mean_score(answers)
        return StepResult(
            reward=manager_reward(score, valid, self.config.format_reward),
            answers=answers,
            bank=bank.snapshot(state.scope),
            ops=tuple(ops) if transition is not None else (),
            transition=transition,
            parse_error=parse_error,
            rejected=tuple(rejected),
            apply_error=apply_error,
        )

    def sample_group(self, state: MemoryState, params: SamplingParams, *, qa_per_group: int | None = None, seed: int = 0) -> Group:
        """Sample ``params.n`` outputs for one state and step each of them.

        The QA subset is drawn once, from an RNG seeded by (seed, state key), so every rollout
        of the group, and a rerun with the same seed, is judged by the same questions.
        """
        if params.temperature <= 0:
            raise ValueError("a GRPO group needs temperature > 0: greedy decoding samples the same output n times")
        backend = cast(LLMBackend, self.manager.backend)  # a trainer's manager runs on its rollouts' blocking backend
        state = state.with_qa(sample_qa(state.qa, qa_per_group, random.Random(f"{seed}:{state.key}")))
        _, related = self._fork(state)
        observation = Observation(tuple(related), self._render(state, related))
        caller = self.manager.caller
        request = self.request(state, related)
        params = params.model_copy(update={"stop": request.params.stop})  # the policy's stop string, the trainer's sampling
        completion = backend.chat(request.messages, params=params, model=request.model, schema=request.schema)
        rollouts = tuple(
            Rollout(
                output=caller.reply_text(request, c),
                token_ids=c.token_ids,
                logprobs=None if c.logprobs is None else [t.logprob for t in c.logprobs],
                result=self.step(state, caller.reply_text(request, c)),
            )
            for c in completion.choices
        )
        return Group(state, observation, rollouts)

