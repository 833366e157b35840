"""Memory-R1's answer agent trained with GRPO on (question, top-k memories, gold answer).

    state   a LoCoMo question, the k memories retrieval returns for it (Memory-R1: 60), its gold
    reply   the answerer's JSON {"evidence": [...], "answer": "..."}, sampled n times
    reward  EM or token F1 of the parsed answer against the gold (unparseable -> "unknown")
    warm    optional SFT on the golds first (``warm_start_steps``; `warm_start.answer_examples`)

The memories a question is answered from are what the client's answer path shows for it
after the conversation was ingested with no LLM (`memsdk.gate.answer_cases`: every
turn in the episodic tier with its speaker and date, the heuristic facts, hybrid retrieval),
so the policy learns on what it is shown when it serves. The answerer is the
runtime's `LLMAnswerer` on the training backend, so the published adapter runs with the
prompt it was trained on. Trained separately from the manager, as in the paper.

Run: ``python -m memsdk_training train answerer --config training/configs/answerer_grpo.yaml``.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sequence
from typing import Literal, cast

from pydantic import Field

from memsdk.serving.policy_set import rules_manager
from memsdk.embedding import Embedder
from memsdk.eval.manage.cases import manage_answer_cases
from memsdk.gate import AnswerCase, answer_cases
from memsdk.llm.base import LLMBackend, SamplingParams
from memsdk.policies import UNKNOWN, LLMAnswerer, PolicyConfig

from ..env import conversation, locomo_qa, locomo_sessions
from ..rewards import QA_METRICS, bleu1, exact_match, token_f1
from .config import RecipeConfig
from .loop import Recipe, RecipeData
from .manager import make_embedder
from .lora_model import LoRAModel
from .rollouts import RolloutEngine
from .samples import Sampled, SampledGroup
from .warm_start import TeacherExample, answer_examples

__all__ = ["AnswererGRPOConfig", "AnswerState", "answer_states", "AnswererGroups", "AnswererRecipe"]


class AnswererGRPOConfig(RecipeConfig):
    """Memory-R1's answer agent: (question, top-k memories, gold) with EM or F1."""

    metric: Literal["em", "f1"] = "f1"
    embedder: Literal["minilm", "hash"] = "minilm"
    answer_k: int = Field(60, ge=1, description="Memories shown per question (Memory-R1: 60).")
    train_ids: tuple[str, ...] = ("conv-26",)
    val_ids: tuple[str, ...] = ("conv-30",)
    max_train_questions: int | None = 64
    max_val_questions: int | None = 16
    max_tokens: int = 48
    manager: Literal["heuristic", "pairs"] = Field("heuristic", description="The manager (no LLM) the states' banks are built with; 'pairs': the default's, whose retired facts the answerer sees marked.")
    manage_train_scenarios: int = Field(0, ge=0, description="Management benchmark train scenarios whose current- and previous-state questions join the training states.")
    manage_val_scenarios: int = Field(0, ge=0, description="Management benchmark val scenarios whose questions join validation (at most max_val_questions of them).")


#: a state is the runtime's gate state: the answerer is trained and gated on the same shape
AnswerState = AnswerCase


def answer_states(embedder: Embedder, sample_ids: Sequence[str], *, k: int, manager: str = "heuristic") -> Iterator[AnswerState]:
    """Per conversation: its turns ingested by a client without an LLM, then each scored
    question with the k memories the answer path shows (`memsdk.gate.answer_cases`)."""
    banked = rules_manager(manager, embedder)
    for sample_id in sample_ids:
        conv = conversation(sample_id)
        yield from answer_cases(sample_id, [t for _, turns in locomo_sessions(conv) for t in turns], locomo_qa(conv), embedder, k=k, manager=banked)


class AnswererGroups:
    """The answerer's `Sampler`: replies parsed as the runtime parses them, scored against the gold."""

    def __init__(self, answerer: LLMAnswerer, policy: LoRAModel, metric: str) -> None:
        self.answerer, self.policy, self.score = answerer, policy, QA_METRICS[metric]

    def key(self, state: AnswerState) -> str:
        return state.key

    def sample(self, state: AnswerState, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        request = self.answerer.request(state.question, state.memories)
        backend = cast(LLMBackend, self.answerer.backend)  # built on the rollouts' blocking backend (`_setup_data`)
        completion = backend.chat(request.messages, params=params.model_copy(update={"stop": request.params.stop}), model=request.model)
        prompt, samples = self.policy.render(request.messages), []
        for choice in completion.choices:
            reply = self.answerer.caller.reply_text(request, choice)
            answer = self.answerer.read(request, reply, state.memories)  # the runtime's reading: parse, repair, cut
            samples.append(Sampled.reply(prompt, choice.token_ids or (), reply, float(self.score(answer.text, state.gold)), parse_failed=answer.calls[0].parsed is None))
        return [SampledGroup(state.key, tuple(samples))]

    def evaluate(self, states: Sequence[AnswerState]) -> dict[str, float]:
        answers = [self.answerer.answer(s.question, s.memories).text for s in states]  # the policy's greedy default
        n = max(1, len(states))
        f1, em, bleu = (sum(metric(a, s.gold) for a, s in zip(answers, states)) / n for metric in (token_f1, exact_match, bleu1))
        return {"reward": f1 if self.score is token_f1 else em, "answer_f1": f1, "answer_em": em, "answer_bleu1": bleu, "unknown_rate": sum(a == UNKNOWN for a in answers) / n}


class AnswererRecipe(Recipe[AnswerState]):
    role = "answerer"
    config: AnswererGRPOConfig

    def __init__(self, config: AnswererGRPOConfig, *, states: tuple[Sequence[AnswerState], Sequence[AnswerState]] | None = None) -> None:
        """``states``: (train, validation) to train on instead of LoCoMo's, e.g. an app's judged
        answers (`memsdk.gate.log_answer_cases`, as `memsdk_training.retrain` does)."""
        super().__init__(config)
        self.given = states

    def published_roles(self) -> dict[str, str | None]:
        assert isinstance(self.data.sampler, AnswererGroups)
        return {self.role: self.data.sampler.answerer.caller.prompt.id}

    def warm_start_examples(self) -> list[TeacherExample]:
        """The gold answers of the training states, as the JSON the answerer writes."""
        assert isinstance(self.data.sampler, AnswererGroups)
        return answer_examples(self.data.sampler.answerer, self.data.train, self.policy.render)

    def _setup_data(self, policy: LoRAModel, rollouts: RolloutEngine) -> RecipeData[AnswerState]:
        cfg = self.config
        answerer = LLMAnswerer(rollouts.backend, PolicyConfig(model=rollouts.model, constrained=False, reask=False))
        train, val = self.given if self.given is not None else self.states(make_embedder(cfg.embedder))
        return RecipeData(AnswererGroups(answerer, policy, cfg.metric), train, val)

    def states(self, embedder: Embedder) -> tuple[list[AnswerState], list[AnswerState]]:
        """Train and validation states: LoCoMo questions over their conversations' turns, then
        the management benchmark's questions over its scenarios (`manage_answer_cases`), each
        source cut to ``max_*_questions``."""
        cfg = self.config
        train = list(itertools.islice(answer_states(embedder, cfg.train_ids, k=cfg.answer_k, manager=cfg.manager), cfg.max_train_questions))
        val = list(itertools.islice(answer_states(embedder, cfg.val_ids, k=cfg.answer_k, manager=cfg.manager), cfg.max_val_questions))
        if cfg.manage_train_scenarios:
            train += manage_answer_cases("train", embedder, k=cfg.answer_k, n=cfg.manage_train_scenarios, manager=cfg.manager)[: cfg.max_train_questions]
        if cfg.manage_val_scenarios:
            val += manage_answer_cases("val", embedder, k=cfg.answer_k, n=cfg.manage_val_scenarios, manager=cfg.manager)[: cfg.max_val_questions]
        return train, val
