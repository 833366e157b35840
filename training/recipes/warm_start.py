"""Supervised warm start ("cold start") of a policy before RL, and its teachers.

A 135M model sampled at T = 1 writes a reply the op guard accepts about once in 16, and
answers in sentences where LoCoMo's golds are a few words, so most GRPO groups score alike
and carry no signal. A few supervised steps on a teacher's replies teach the format first;
RL then starts from a policy whose samples score.

    teacher   y*(s), written as the JSON the runtime parses, minus the response prefix the
              prompt already ends with:
              manager   the heuristic manager's ops for state s (Mem0-style thresholds: NOOP a
                        near-duplicate, UPDATE a close match by appending the fact, ADD the rest)
              answerer  the gold answer, citing the shown memories that hold its evidence turns
    loss      L(theta) = -(1 / sum_i |y*_i|) sum_i sum_l log pi_theta(y*_{i,l} | x_i, y*_{i,<l})

Every target is read back the way the runtime reads a reply, and kept only when that gives
what the teacher meant (a manager reply `ManagerEnv.step` accepts; an answer that reads as
the gold), so the warm start never teaches a reply the runtime would reject or cut.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch

from memsdk.gate import AnswerCase
from memsdk.llm.base import Message
from memsdk.policies import HeuristicManager, LLMAnswerer
from memsdk.effects import Request
from memsdk.policies.answerer import MAX_EVIDENCE
from memsdk.types import Op, ScoredMemory

from ..distributed import World
from ..env import ManagerEnv, MemoryState
from .lora_model import LoRAModel

__all__ = ["TeacherExample", "Teacher", "heuristic_teacher", "teacher_reply", "teacher_examples", "answer_reply", "answer_examples", "target_ids", "sft_step", "warm_start_batches"]


@dataclass(frozen=True)
class TeacherExample:
    key: str  # the state's key
    prompt: str  # rendered: the text generation starts from (response prefix included)
    target: str  # what the policy should generate after the prompt, up to and including the stop string


def teacher_reply(ops: Sequence[Op], related: Sequence[ScoredMemory]) -> str:
    """The ops as the JSON reply the runtime parses, memory ids written as the prompt's aliases.

    json.dumps' default separators are the prompt's own (``{"op": "ADD", "text": "..."}``), so
    the target looks like the examples the model was shown. No ops is an explicit NOOP.
    """
    alias = {m.record.id: i for i, m in enumerate(related)}
    out: list[dict[str, object]] = []
    for op in ops:
        item: dict[str, object] = {"op": op.op.value}
        if op.target is not None:
            item["id"] = alias[op.target]
        if op.text is not None:
            item["text"] = op.text
        if op.supersedes:
            item["replaces"] = [alias[m] for m in op.supersedes]
        out.append(item)
    return json.dumps({"ops": out or [{"op": "NOOP"}]}, ensure_ascii=False)


#: a teacher: the ops for a state over the memories its manager is shown, None to teach nothing
Teacher = Callable[[MemoryState, Sequence[ScoredMemory]], Sequence[Op] | None]


def heuristic_teacher(state: MemoryState, related: Sequence[ScoredMemory]) -> Sequence[Op]:
    """The heuristic manager's decision (the default teacher)."""
    return HeuristicManager().decide(state.facts, related, source_turn_ids=state.source_turn_ids).ops


def teacher_examples(
    env: ManagerEnv, states: Sequence[MemoryState], render: Callable[[Sequence[Message]], str], *, teacher: Teacher = heuristic_teacher, perfect: bool = False
) -> list[TeacherExample]:
    """(rendered prompt, target) pairs for the states whose teacher reply ``env`` accepts
    (and, with ``perfect``, scores the state's best reward: a gold state all held).

    The target is the reply after the request's response prefix: the prompt already ends with
    the prefix, and generation stops on the prompt's stop string, which the JSON ends with.
    A reply the guard would reject (a merged memory over ``OpGuard.max_text_chars``, say) is
    left out rather than taught.
    """
    out = []
    for state in states:
        observation = env.observe(state)
        ops = teacher(state, observation.related)
        if ops is None:
            continue
        reply = teacher_reply(ops, observation.related)
        request = env.request(state, observation.related)
        result = env.step(state, _framed(request, reply, "manager"))
        if result.valid and (not perfect or result.reward >= 1.0 + env.config.format_reward):
            out.append(TeacherExample(state.key, render(request.messages), reply[len(request.prefix) :]))
    return out


def _framed(request: Request, reply: str, role: str) -> str:
    """``reply`` when the prompt's response prefix and stop string frame it: the target is what
    follows the prefix, and generation must end on the stop string the JSON ends with."""
    if not reply.startswith(request.prefix) or (request.params.stop and not any(reply.endswith(s) for s in request.params.stop)):
        raise ValueError(f"the {role} prompt's prefix {request.prefix!r} / stop {request.params.stop} do not frame a JSON reply")
    return reply


def answer_reply(state: AnswerCase) -> str:
    """The gold as the answerer's JSON, ``evidence`` the positions of the shown memories that
    cite one of the gold's evidence turns (at most the schema's bound; none when unknown).
    Keys in the order the v3 prompt's response prefix opens: answer first."""
    cited = [i for i, m in enumerate(state.memories) if state.evidence.intersection(m.record.source_turn_ids)]
    return json.dumps({"answer": state.gold, "evidence": cited[:MAX_EVIDENCE]}, ensure_ascii=False)


def answer_examples(answerer: LLMAnswerer, states: Sequence[AnswerCase], render: Callable[[Sequence[Message]], str]) -> list[TeacherExample]:
    """(rendered prompt, gold reply) for the states whose gold the runtime reads back whole: a
    gold longer than the answerer keeps (``max_answer_words``) is left out, not taught cut."""
    out = []
    for state in states:
        request = answerer.request(state.question, state.memories)
        reply = _framed(request, answer_reply(state), "answerer")
        if state.gold.strip() and answerer.read(request, reply, state.memories).text == state.gold.strip():
            out.append(TeacherExample(state.key, render(request.messages), reply[len(request.prefix) :]))
    return out


def target_ids(policy: LoRAModel, target: str) -> list[int]:
    """The target's tokens as the policy would generate them: the reply alone, no special tokens.

    No end-of-sequence token: the runtime stops on the stop string the target ends with.
    """
    ids: list[int] = policy.tokenizer(target, add_special_tokens=False)["input_ids"]
    return ids


def sft_step(
    policy: LoRAModel, optimizer: torch.optim.Optimizer, prompts: Sequence[str], targets: Sequence[Sequence[int]],
    *, micro_batch_size: int | None = None, max_grad_norm: float | None = None, world: World = World(),
) -> float:  # fmt: skip
    """One optimizer step on L = -(1 / N) sum_i sum_l log pi(y_{i,l} | x_i, y_{i,<l}), N = sum_i |y_i|.

    A token-level mean, so long targets weigh by their length, as in ordinary SFT.
    Log-probs are `LoRAModel.score`'s, at the policy's sampling temperature (1 in the manager
    recipes, where this is the plain cross-entropy). Micro-batches accumulate gradients of
    their share of the sum, so the step is the same whatever ``micro_batch_size`` is, and
    whatever the number of ranks (the batch is the whole step's; each rank scores its share
    and the gradients are summed across ranks, `training.distributed`).
    Returns L (before the step).
    """
    total = sum(len(t) for t in targets)
    if total == 0:
        raise ValueError("sft_step needs at least one target token")
    mine = world.part(len(prompts))
    size = micro_batch_size or max(1, len(mine))
    params = [p for group in optimizer.param_groups for p in group["params"]]
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for i in range(mine.start, mine.stop, size):
        end = min(i + size, mine.stop)
        scored = policy.score(prompts[i:end], targets[i:end])
        loss = -scored.logp.sum() / total
        loss.backward()
        loss_sum += float(loss.detach())
    world.sum_grads(params)
    if max_grad_norm:
        torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    optimizer.step()
    return world.sum({"loss": loss_sum})["loss"]


def warm_start_batches(n_examples: int, batch_size: int, steps: int, seed: int) -> list[list[int]]:
    """``steps`` batches of example indices: each epoch a seeded permutation, cycled, as the RL loop visits states."""
    order: list[int] = []
    epoch = 0
    while len(order) < steps * batch_size:
        order += random.Random(f"{seed}:warm_start:{epoch}").sample(range(n_examples), n_examples)
        epoch += 1
    return [order[k * batch_size : (k + 1) * batch_size] for k in range(steps)]
