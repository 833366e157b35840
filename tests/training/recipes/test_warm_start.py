"""The supervised warm start: teacher replies the environment accepts, SFT steps that fit them,
and a recipe that runs it once per run (never again on resume)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from memsdk.bank import MemoryBank
from memsdk.embedding import Embedder, HashEmbedder
from memsdk.gate import AnswerCase
from memsdk.policies import HeuristicManager, LLMAnswerer, LLMManager, PolicyConfig
from memsdk.store.memory import InMemoryTransport
from memsdk.types import Op, Scope, ScoredMemory, Turn
from memsdk_training.env import EnvConfig, ManagerEnv, MemoryState, QAItem
from memsdk_training.recipes import LoRASettings, ManagerGRPOConfig, LoRAModel, read_metrics
from memsdk_training.recipes.manager import ManagerRecipe
from memsdk_training.recipes.warm_start import answer_examples, answer_reply, sft_step, target_ids, teacher_examples

from ..env._fakes import KeywordAnswerer, SamplingFake

SCOPE = Scope(user_id="caroline")
MEMORIES = ["Caroline has a dog named Buddy", "Caroline lives in Paris", "Melanie paints sunsets at the lake"]
FACTS = [
    "Caroline adopted a cat named Luna",  # new: ADD
    "Caroline has a dog named Buddy",  # a duplicate: NOOP
    "Melanie paints sunsets at the lake with her kids",  # close to memory [?]: UPDATE or ADD, by score
    'Caroline said "hiking" is her favourite hobby',  # quotes must survive the JSON
]


def fake_states(embedder: Embedder) -> list[MemoryState]:
    bank = MemoryBank(InMemoryTransport(embedder.dim), embedder)
    bank.apply(SCOPE, [Op.add(m, source_turn_ids=("D1:1",)) for m in MEMORIES])
    qa = (QAItem("What is Caroline's cat called?", "Luna", ("D1:2",), 4),)
    return [
        MemoryState(f"t/D1:{i + 2}", bank.snapshot(SCOPE), (fact,), qa, Turn(speaker="Caroline", text=fact, turn_id=f"D1:{i + 2}"))
        for i, fact in enumerate(FACTS)
    ]


def answer_case(gold: str, evidence: frozenset[str] = frozenset({"D1:2"})) -> AnswerCase:
    bank = MemoryBank(InMemoryTransport(16), HashEmbedder(16))
    bank.apply(SCOPE, [Op.add(m, source_turn_ids=(f"D1:{i + 1}",)) for i, m in enumerate(MEMORIES)])
    shown = tuple(ScoredMemory(record=r, score=1.0) for r in sorted(bank.list(SCOPE), key=lambda r: r.text))
    return AnswerCase(f"q/{gold}", "Where does Caroline live?", shown, gold, evidence)


def test_the_answerer_teacher_writes_the_gold_and_cites_the_memories_of_its_evidence() -> None:
    answerer = LLMAnswerer(SamplingFake(answerer=["x"]), PolicyConfig(constrained=False, reask=False))  # type: ignore[arg-type]
    cases = [answer_case("Paris"), answer_case('the "Rue" in Paris', frozenset()), answer_case("one two three four five six seven eight nine ten eleven twelve thirteen")]
    examples = answer_examples(answerer, cases, render=lambda messages: messages[-1]["content"])
    # the thirteen-word gold would be cut to the answerer's 12 words: left out, not taught cut
    assert [e.key for e in examples] == ["q/Paris", 'q/the "Rue" in Paris']
    prefix = answerer.caller.prompt.response_prefix
    paris = next(i for i, m in enumerate(cases[0].memories) if m.record.text == "Caroline lives in Paris")
    assert examples[0].prompt == prefix and prefix + examples[0].target == f'{{"answer": "Paris", "evidence": [{paris}]}}'
    assert json.loads(prefix + examples[1].target) == {"answer": 'the "Rue" in Paris', "evidence": []}  # quotes survive
    for example, case in zip(examples, cases):
        request = answerer.request(case.question, case.memories)
        assert answerer.read(request, prefix + example.target, case.memories).text == case.gold  # read back as the gold
    assert answer_reply(cases[0]).endswith("]}")  # generation stops on the prompt's stop string


def make_env(embedder: Embedder) -> ManagerEnv:
    manager = LLMManager(SamplingFake(manager=["x"]), PolicyConfig(constrained=False, reask=False))  # type: ignore[arg-type]
    return ManagerEnv(manager, KeywordAnswerer({}), embedder, EnvConfig(related_k=3))


def test_teacher_targets_are_replies_the_environment_applies() -> None:
    embedder = HashEmbedder(64)
    env, states = make_env(embedder), fake_states(embedder)
    # the last message is the response prefix: the target continues it
    examples = teacher_examples(env, states, render=lambda messages: messages[-1]["content"])
    prefix = env.manager.caller.prompt.response_prefix
    assert [e.key for e in examples] == [s.key for s in states]
    for example, state in zip(examples, states):
        assert example.prompt == prefix and example.target.endswith("}]}")  # generation stops on the stop string
        assert env.step(state, prefix + example.target).valid
    ops = [json.loads(prefix + e.target)["ops"][0]["op"] for e in examples]
    assert ops[0] == "ADD" and ops[1] == "NOOP"
    assert json.loads(prefix + examples[3].target)["ops"][0]["text"] == FACTS[3]


def test_teacher_updates_name_the_memory_by_its_prompt_alias() -> None:
    embedder = HashEmbedder(64)
    env, states = make_env(embedder), fake_states(embedder)
    # merging at any similarity: every fact that is not a duplicate UPDATEs its closest memory
    merger = HeuristicManager(merge_at=0.0)
    examples = teacher_examples(env, states, render=lambda messages: "", teacher=lambda s, related: merger.decide(s.facts, related, source_turn_ids=s.source_turn_ids).ops)
    prefix = env.manager.caller.prompt.response_prefix
    updates = [(e, s) for e, s in zip(examples, states) if json.loads(prefix + e.target)["ops"][0]["op"] == "UPDATE"]
    assert len(updates) == 3
    for example, state in updates:
        op = json.loads(prefix + example.target)["ops"][0]
        closest = env.observe(state).related[op["id"]]
        assert op["text"] == f"{closest.record.text}; {state.facts[0]}" and env.step(state, prefix + example.target).valid


@pytest.fixture(scope="module")
def tiny_policy(tiny_model_dir: Path) -> LoRAModel:
    torch.set_num_threads(1)
    # LoRA on the MLP and the head too: a 2-layer model learns a fixed reply in a few steps
    lora = LoRASettings(rank=8, alpha=16, target_modules=("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head"))
    return LoRAModel.from_config(ManagerGRPOConfig(model_path=str(tiny_model_dir), num_threads=1, lora=lora))


def test_sft_steps_lower_the_loss_and_raise_the_targets_log_prob(tiny_policy: LoRAModel) -> None:
    prompts = ["<|user|> memory changed fact alice likes tea op <|assistant|> ", "<|user|> memory none fact bob is dog op <|assistant|> "]
    targets = [target_ids(tiny_policy, "UPDATE alice likes tea <eos>"), target_ids(tiny_policy, "ADD bob is dog <eos>")]

    def target_logp() -> float:
        with torch.no_grad():
            return float(tiny_policy.score(prompts, targets).logp.sum())

    optimizer = torch.optim.AdamW(tiny_policy.trainable_parameters(), lr=1e-2)
    before = target_logp()
    losses = [sft_step(tiny_policy, optimizer, prompts, targets, micro_batch_size=1, max_grad_norm=1.0) for _ in range(15)]
    # the first loss is the mean negative log-prob per target token of the untouched model
    assert losses[0] == pytest.approx(-before / sum(map(len, targets)), rel=1e-4)
    assert losses[-1] < 0.5 * losses[0] and target_logp() > before


class FakeStateRecipe(ManagerRecipe):
    """The manager recipe on the fake states: no LoCoMo, no sentence-transformers."""

    def states(self, embedder: Embedder) -> tuple[list[MemoryState], list[MemoryState]]:
        states = fake_states(embedder)
        return states, states[:2]


def _config(tiny_model_dir: Path, out: Path, **overrides: object) -> ManagerGRPOConfig:
    base = {
        "model_path": str(tiny_model_dir), "num_threads": 1, "embedder": "hash", "related_k": 3, "group_size": 2, "prompts_per_step": 1,
        "max_tokens": 4, "steps": 1, "progress": False, "output_dir": str(out), "warm_start_steps": 3, "warm_start_batch_size": 2,
        "warm_start_lr": 1e-2,
    }  # fmt: skip
    return ManagerGRPOConfig.model_validate({**base, **overrides})


def _run(config: ManagerGRPOConfig) -> tuple[FakeStateRecipe, list[dict]]:
    recipe = FakeStateRecipe(config)
    recipe.setup()
    try:
        return recipe, recipe.train()
    finally:
        recipe.cleanup()


def test_a_run_warm_starts_once_and_a_resumed_run_does_not_again(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    recipe, rows = _run(_config(tiny_model_dir, out))
    phases = [(e["step"], e.get("phase")) for e in recipe.evals]
    assert phases == [(0, None), (0, "warm_start"), (1, None)]
    warm = read_metrics(out / "warm_start.jsonl")
    assert [r["step"] for r in warm] == [1, 2, 3] and all(r["phase"] == "warm_start" and r["loss"] > 0 for r in warm)
    assert len(rows) == 1 and [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1]
    assert (out / "curves.png").exists()

    # resume for one more step: the checkpoint's evals say the warm start ran, so it is not redone
    (out / "warm_start.jsonl").unlink()
    resumed, more = _run(_config(tiny_model_dir, out, steps=2))
    assert not (out / "warm_start.jsonl").exists()
    assert [(e["step"], e.get("phase")) for e in resumed.evals] == [*phases, (2, None)]
    assert [r["step"] for r in more] == [2] and [r["step"] for r in read_metrics(out / "metrics.jsonl")] == [1, 2]


def test_a_run_interrupted_after_the_warm_start_resumes_from_it(tiny_model_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    recipe = FakeStateRecipe(_config(tiny_model_dir, out))
    recipe.setup()
    recipe.evals.append({"step": 0, **recipe.evaluate()})
    recipe.before_training()  # warm start + its checkpoint, then the run "dies" before step 1
    adapter = recipe.policy.adapter_state()
    recipe.cleanup()
    resumed = FakeStateRecipe(_config(tiny_model_dir, out))
    resumed.setup()
    assert resumed.warm_started and resumed.step == 0
    assert all(torch.equal(v, resumed.policy.adapter_state()[k]) for k, v in adapter.items())
    resumed.before_training()
    assert len(read_metrics(out / "warm_start.jsonl")) == 3  # not written again
    resumed.cleanup()


def test_the_answerer_recipe_warm_starts_on_the_golds(tiny_model_dir: Path, tmp_path: Path) -> None:
    from memsdk_training.recipes import AnswererGRPOConfig
    from memsdk_training.recipes.answerer import AnswererRecipe

    cases = [answer_case("Paris"), answer_case("Lyon")]
    config = AnswererGRPOConfig(
        model_path=str(tiny_model_dir), num_threads=1, embedder="hash", group_size=2, prompts_per_step=1, max_tokens=4, steps=0,
        progress=False, output_dir=str(tmp_path / "run"), warm_start_steps=2, warm_start_batch_size=2, warm_start_lr=1e-2,
    )  # fmt: skip
    recipe = AnswererRecipe(config, states=(cases, cases[:1]))
    recipe.setup()
    try:
        assert [e.key for e in recipe.warm_start_examples()] == ["q/Paris", "q/Lyon"]
        recipe.train()
    finally:
        recipe.cleanup()
    warm = read_metrics(tmp_path / "run" / "warm_start.jsonl")
    assert [(r["step"], r["examples"]) for r in warm] == [(1, 2), (2, 2)] and warm[1]["loss"] < warm[0]["loss"]
    assert [e.get("phase") for e in recipe.evals] == [None, "warm_start"] and "answer_bleu1" in recipe.evals[-1]
