"""MemAgent's Multi-Conv DAPO recipe: the pure pieces (the rollout's reward and terms, one
advantage shared by every conversation of a rollout, the DAPO config), a tiny-model learning
test with its zeroed-advantage control, and the CLI on real LoCoMo data.

The tiny model speaks the reader's reply ({"memory": "..."}) and the answerer's
({"answer": "..."}) after a short warm-up with random content; the recipe then drives the
runtime's own `LLMReader.steps` over each chunk and `LLMAnswerer.steps` over the final memory
(shown as `client.answer` shows a core memory), so everything sampled is parsed as serving
parses it."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest
import torch

from memsdk.llm.base import Choice, Completion as LLMCompletion, SamplingParams
from memsdk.llm.inprocess import render
from memsdk.policies import LLMAnswerer, PolicyConfig
from memsdk.effects import Chat
from memsdk.policies.reader import LLMReader, chunk_turns
from memsdk.types import Scope, Turn
from memsdk_training.advantages import grouped_advantages
from memsdk_training.cli import build_recipe, main
from memsdk_training.env.memagent_env import Conversation, ReadRollout, golds, is_multi_answer, question_reward, roll_out_read, shown_memory
from memsdk_training.env.state import QAItem
from memsdk_training.recipes import GroupLearner, MemAgentDAPOConfig, SampledGroup, read_metrics
from memsdk_training.recipes.memagent import TERMS, MemAgentRecipe, ReadSample, to_sampled

from ._tiny import FORMAT_WORDS, SPECIALS_METASPACE, ZeroAdvantages, _warm_up, _word_llama, mean_of, run_recipe

CONFIGS = Path(__file__).resolve().parents[3] / "training" / "configs"


# -- the pure pieces ---------------------------------------------------------------------------
def _conv(role: str, n: int) -> Conversation:
    return Conversation(role, f"{role}-prompt", tuple(range(n)), "", False)


def _rollout(preds: tuple[str, ...], qs: tuple[QAItem, ...], memory: str = "m", reads: int = 3, kept_old: int = 0) -> ReadRollout:
    scores = tuple(question_reward(p, q) for p, q in zip(preds, qs))
    return ReadRollout(tuple(_conv("reader", 2) for _ in range(reads)), tuple(_conv("answerer", 1) for _ in qs), memory, qs, preds, scores, kept_old)


SINGLE = QAItem("Where did Caroline move from?", "Sweden", ("D1:1",), 4)
MULTI = QAItem("Where has Melanie camped?", "beach, mountains, forest", ("D1:2",), 1)


def test_multi_answer_questions_are_scored_by_coverage_and_the_others_by_exact_match() -> None:
    assert is_multi_answer(MULTI) and golds(MULTI) == ["beach", "mountains", "forest"]
    assert not is_multi_answer(SINGLE) and golds(SINGLE) == ["Sweden"]
    # a category-3 gold with a comma is an explanation, not a list
    assert not is_multi_answer(QAItem("q", "Likely no, she does not", (), 3))
    assert question_reward("sweden.", SINGLE) == 1.0 and question_reward("from Sweden", SINGLE) == 0.0
    assert question_reward("the beach and the forest", MULTI) == pytest.approx(2 / 3)


def test_a_rollouts_reward_is_its_questions_mean_and_every_term_is_worked_by_hand() -> None:
    r = _rollout(("Sweden", "beach"), (SINGLE, MULTI), memory="Caroline moved from Sweden. Melanie camped at the beach and in the mountains.", kept_old=1)
    assert r.reward == pytest.approx((1.0 + 1 / 3) / 2)
    t = r.terms()
    assert t["answer_reward"] == pytest.approx(r.reward)
    assert t["answer_em"] == pytest.approx((1.0 + 0.0) / 2)  # "beach" is not the whole gold
    assert t["answer_coverage"] == pytest.approx((1.0 + 1 / 3) / 2)
    assert t["memory_recall"] == pytest.approx((1.0 + 2 / 3) / 2)  # the memory holds Sweden, beach, mountains
    assert t["kept_old_rate"] == pytest.approx(1 / 3) and t["answer_parse_failure_rate"] == 0.0
    assert t["memory_tokens"] == float(-(-len(r.memory) // 4))
    assert set(t) == set(TERMS)


def test_one_advantage_per_rollout_is_shared_by_every_conversation_of_it() -> None:
    """Dr.GRPO: A_i = R_i - mean R, no std; every read and answer of rollout i is a row with A_i."""
    rollouts = [_rollout((p,), (SINGLE,), reads=k) for p, k in (("Sweden", 3), ("Norway", 2), ("Sweden", 4), ("x", 1))]
    group = SampledGroup("s", tuple(to_sampled(r) for r in rollouts))
    assert [len(s.completions) for s in group.samples] == [4, 3, 5, 2]  # reads, then the answer
    config = MemAgentDAPOConfig(model_path="unused")
    learner = GroupLearner(config)
    adv = learner.advantages([group])
    assert adv.advantages.tolist() == pytest.approx([0.5, -0.5, 0.5, -0.5])  # not divided by the std (0.5)
    rows = learner.rows([group], adv)
    assert [r.advantage for r in rows] == pytest.approx([0.5] * 4 + [-0.5] * 3 + [0.5] * 5 + [-0.5] * 2)
    assert [r.prompt for r in rows[:4]] == ["reader-prompt"] * 3 + ["answerer-prompt"]


def test_the_config_is_multi_conv_dapo() -> None:
    c = MemAgentDAPOConfig(model_path="unused")
    assert (c.clip_eps_low, c.clip_eps_high) == (0.2, 0.28) and c.clip_eps_high > c.clip_eps_low
    assert c.aggregation == "token-mean" and not c.scale_by_std and c.drop_zero_variance and c.max_redraws > 0
    assert c.kl_coef == 0.001  # the seed's objective keeps beta * KL
    assert grouped_advantages([[1.0, 0.0]], scale_by_std=c.scale_by_std).advantages.tolist() == [0.5, -0.5]
    with pytest.raises(ValueError, match="reader role"):
        MemAgentDAPOConfig(model_path="unused", publish={"registry_dir": "r", "version": "v1"})


class _Scripted:
    """A backend that replies from a script, for the rollout's plumbing."""

    model = "scripted"
    supports_schema = False

    def __init__(self, replies: list[str]) -> None:
        self.replies, self.seen = list(replies), []  # type: list[str], list[Any]

    def chat(self, messages: Any, *, params: SamplingParams, model: str | None = None, **_: Any) -> LLMCompletion:
        self.seen.append((messages, params))
        return LLMCompletion(model=self.model, choices=[Choice(text=self.replies.pop(0), token_ids=[1, 2], finish_reason="stop")], prompt_tokens=1, completion_tokens=2)


def test_a_rollout_reads_every_chunk_through_the_runtime_reader_then_answers_from_the_core_memory() -> None:
    backend = _Scripted(['Caroline is from Sweden.', '', 'Sweden", "evidence": [0'])
    settings = PolicyConfig(constrained=False, reask=False)
    reader, answerer = LLMReader(backend, settings), LLMAnswerer(backend, settings)
    params = SamplingParams(temperature=1.0, max_tokens=500, seed=7)
    r = roll_out_read(["chunk one", "chunk two"], [SINGLE], Scope(user_id="u"), reader, lambda m: json.dumps(m), params, budget_tokens=32, answerer=answerer, policy_answers=True)
    assert [c.role for c in r.conversations] == ["reader", "reader", "answerer"]
    assert r.memory == "Caroline is from Sweden." and r.kept_old == 1  # the empty second memory kept the old one
    assert [c.parse_failed for c in r.conversations] == [False, False, False] and r.terms()["kept_old_rate"] == 0.5
    assert r.predictions == ("Sweden",) and r.reward == 1.0
    # each call its own seed; the reader's own reply budget (32 + 8 + 16), not the cap
    assert [p.seed for _, p in backend.seen] == [7, 8, 9] and backend.seen[0][1].max_tokens == 56
    assert "Caroline is from Sweden." in backend.seen[2][0][-2]["content"]  # the answerer was shown the memory
    assert [m.record.text for m in shown_memory("the memory", Scope(user_id="u"), "q?", 5)] == ["the memory"]


# -- dynamic sampling -------------------------------------------------------------------------
class _Uniform:
    """A sampler whose group is uniform until it has been drawn ``uniform_for`` times."""

    def __init__(self, uniform_for: int) -> None:
        self.uniform_for, self.seeds = uniform_for, []  # type: int, list[tuple[int | None, int]]

    def key(self, state: str) -> str:
        return state

    def evaluate(self, states: Any) -> dict[str, float]:
        return {"reward": 0.0}

    def sample(self, state: str, params: SamplingParams, *, seed: int) -> list[SampledGroup]:
        from memsdk_training.recipes import Sampled

        self.seeds.append((params.seed, seed))
        rewards = [0.0, 0.0] if len(self.seeds) <= self.uniform_for else [1.0, 0.0]
        return [SampledGroup(state, tuple(Sampled(r, ()) for r in rewards))]


def test_dynamic_sampling_redraws_a_uniform_group_with_fresh_seeds_and_counts_it() -> None:
    from memsdk_training.recipes import DynamicSampling

    inner = _Uniform(uniform_for=2)
    sampler = DynamicSampling(inner, max_redraws=3)
    [group] = sampler.sample("s", SamplingParams(n=2, seed=11), seed=5)
    assert group.rewards == [1.0, 0.0] and len(inner.seeds) == 3
    assert len(set(inner.seeds)) == 3  # every redraw had fresh rollout and question seeds
    assert sampler.take_metrics() == {"redraws": 2.0, "redrawn_groups": 1.0, "uniform_after_redraws": 0.0}
    assert sampler.take_metrics()["redraws"] == 0.0  # zeroed once taken

    stubborn = DynamicSampling(_Uniform(uniform_for=99), max_redraws=2)  # bounded: gives up and hands the uniform group on
    [group] = stubborn.sample("s", SamplingParams(n=2, seed=11), seed=5)
    assert group.rewards == [0.0, 0.0]
    assert stubborn.take_metrics() == {"redraws": 2.0, "redrawn_groups": 1.0, "uniform_after_redraws": 1.0}

    lucky = DynamicSampling(_Uniform(uniform_for=0), max_redraws=2)
    lucky.sample("s", SamplingParams(n=2, seed=11), seed=5)
    assert lucky.take_metrics()["redraws"] == 0.0
    # the same seeds give the same redraws: a resumed run repeats them
    again = _Uniform(uniform_for=2)
    DynamicSampling(again, max_redraws=3).sample("s", SamplingParams(n=2, seed=11), seed=5)
    assert again.seeds == inner.seeds


# -- a tiny model that reads and answers ---------------------------------------------------------
# Two short documents, each of two chunks, each with a question whose gold is "tea". The
# warm-up writes memories and answers of random words among the 8 the model knows (1 answer in
# 8 right), so the reward can only rise through rollouts in which every reader and answer call
# takes the rollout's one advantage.
READER_PIECES = ['▁{"memory":', '▁{"answer":', '▁"', '▁"}']
WORDS = [w.lstrip("▁") for w in FORMAT_WORDS]
DOCS = {
    "alice": ([("alice", "alice likes tea"), ("bob", "bob has a cat")], QAItem("what does alice like", "tea", ("D1:0",), 4)),
    "bob": ([("bob", "bob has a dog"), ("alice", "bob likes tea")], QAItem("what does bob like", "tea", ("D1:1",), 4)),
}


def _sample(key: str) -> ReadSample:
    turns, qa = DOCS[key]
    chunks = [c for i, (s, t) in enumerate(turns) for c in chunk_turns([Turn(speaker=s, text=t, turn_id=f"D1:{i}")], 32)]
    return ReadSample(key, Scope(user_id="u", run_id=key), tuple(chunks), (qa,))


def _requests() -> tuple[list[list[dict[str, str]]], list[list[dict[str, str]]]]:
    """The reader's and the answerer's requests the recipe will send (with response prefixes)."""
    reader, answerer = LLMReader(_Scripted([])), LLMAnswerer(_Scripted([]))
    reads = [reader.request(m, c, 16).messages for key in DOCS for c in _sample(key).chunks for m in ("", "alice likes tea")]
    answers = [answerer.request(qa.question, shown_memory(m, Scope(user_id="u"), qa.question, 5)).messages for _, qa in DOCS.values() for m in ("alice likes tea", "bob has a dog")]
    return reads, answers


def make_reader_model(folder: Path, *, seed: int = 0, warmup_steps: int = 120) -> Path:
    model, tokenizer, vocab = _word_llama([*SPECIALS_METASPACE, *READER_PIECES, *FORMAT_WORDS], seed=seed, max_positions=4096, metaspace=True)
    rng = random.Random(seed)
    reads, answers = _requests()
    rendered_reads, rendered_answers = [render(tokenizer, r) for r in reads], [render(tokenizer, a) for a in answers]

    def example() -> tuple[str, str]:
        if rng.random() < 0.5:
            return rng.choice(rendered_reads), " " + " ".join(rng.choice(WORDS) for _ in range(rng.randint(2, 3))) + ' "}'
        return rng.choice(rendered_answers), f' {rng.choice(WORDS)} "}}'

    return _warm_up(model, tokenizer, vocab, example, warmup_steps, folder)


class TinyMemAgent(MemAgentRecipe):
    def samples(self):  # type: ignore[no-untyped-def]
        return [_sample("alice"), _sample("bob")], [_sample("alice"), _sample("bob")]


class ZeroAdvantageMemAgent(TinyMemAgent):
    def make_learner(self, policy):  # type: ignore[no-untyped-def]
        return ZeroAdvantages(self.config)


@pytest.fixture(scope="module")
def reader_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    return make_reader_model(tmp_path_factory.mktemp("reader") / "model")


def _config(model: Path, out: Path, **overrides: object) -> MemAgentDAPOConfig:
    base = dict(
        model_path=str(model), output_dir=str(out), progress=False, seed=0, budget_tokens=16, qa_per_sample=1,
        lora={"rank": 8, "alpha": 16, "target_modules": ("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head")},
        lr=1e-2, ppo_epochs=2, group_size=8, prompts_per_step=1, max_tokens=8, micro_batch_size=64, steps=25,
        checkpoint_every=1000, num_threads=1,
    )  # fmt: skip
    return MemAgentDAPOConfig.model_validate({**base, **overrides})


def test_multi_conv_dapo_learns_the_answer_and_zeroed_advantages_do_not(reader_model: Path, tmp_path: Path) -> None:
    learned = run_recipe(TinyMemAgent, _config(reader_model, tmp_path / "dapo"))
    # the control needs few steps: zeroed advantages (and a KL term at the reference) leave the
    # weights where they started, so its rewards are the warm-up's at every step
    frozen = run_recipe(ZeroAdvantageMemAgent, _config(reader_model, tmp_path / "zero", steps=10))
    start, end = mean_of(learned[:3]), mean_of(learned[-5:])
    control = mean_of(frozen[-5:])
    print(f"\nanswer reward {start:.2f} -> {end:.2f}; zeroed advantages -> {control:.2f}; redraws {sum(r['redraws'] for r in learned):.0f}")
    # seeds 0-2 (model and run seed alike), 30 steps: start .12 / .21 / .17, last five steps
    # .97 / 1.0 / 1.0 (all three at ~.9 by step 12), zeroed advantages .10 / .25 / .17; 31-45
    # redraws a run, most of them late, of groups that all answered right. lr 3e-3 rose too
    # slowly for 30 steps (.25 -> .42)
    assert start < 0.5
    assert end >= 0.8
    assert control <= 0.5 and end - control >= 0.4
    rows = read_metrics(tmp_path / "dapo" / "metrics.jsonl")
    for row in rows:  # each term logged on its own, every step, with the redraws
        assert set(TERMS) <= set(row) and {"redraws", "redrawn_groups", "uniform_after_redraws"} <= set(row)
        assert 0.0 <= row["answer_reward"] <= 1.0 and row["answer_reward"] == pytest.approx(row["reward_mean"])
    assert all("kl" in r for r in rows if r["updated"])  # the seed's objective keeps the KL term
    assert (tmp_path / "dapo" / "curves.png").stat().st_size > 1000


# -- the CLI on LoCoMo ------------------------------------------------------------------------
@pytest.mark.parametrize("steps", [3])
def test_the_shipped_config_builds_the_recipe(steps: int) -> None:
    recipe = build_recipe("memagent", str(CONFIGS / "memagent_dapo.yaml"), steps=steps)
    assert type(recipe) is MemAgentRecipe and recipe.config.steps == steps and recipe.config.clip_eps_high == 0.28


@pytest.mark.locomo
def test_cli_trains_memagent_one_step_on_locomo(tmp_path: Path, reader_model: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = {
        "model_path": str(reader_model), "num_threads": 1, "group_size": 2, "prompts_per_step": 1, "max_tokens": 6, "steps": 1,
        "progress": False, "output_dir": str(tmp_path / "run"), "max_train_samples": 1, "max_val_samples": 1, "qa_per_sample": 1,
        "chunk_tokens": 512, "max_redraws": 1,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["train", "memagent", "--config", str(path)]) == 0
    [row] = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert set(TERMS) <= set(row) and {"redraws", "eval_reward", "eval_memory_recall"} <= set(row)
    assert row["response_length"] > 0
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["output_dir"] == str(tmp_path / "run")
