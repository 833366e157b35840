"""Mem-alpha's writer recipe on a tiny model that speaks the writer's reply: the whole path
(prompt -> sampled calls -> the runtime's reader and write_steps -> the bank refusing what a
tier forbids -> R1 + R2_t + w3 R3 + w4 R4_t -> GRPO without KL -> update). Inserting into
the episodic tier is refused by the transition function (R2 = 0) and inserting a fact is
not, so a working path must learn the semantic tier and a path with zeroed advantages must not."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memsdk.policies import LLMWriter, load_prompt
from memsdk.types import MemoryRecord, Scope, ScoredMemory, Turn, content_hash
from memsdk_training.env import Episode, QAItem, Session
from memsdk_training.recipes import WriterGRPOConfig, read_metrics
from memsdk_training.recipes.writer import TERMS, WriterRecipe

from ._tiny import ZeroAdvantages, make_writer_model, mean_of, run_recipe

# each chunk of two turns holds every content word the tiny model knows, so any text it writes
# is grounded: the tier alone decides whether a call executes
NOW = datetime(2023, 5, 8, tzinfo=UTC)
TURNS = [("alice", "alice likes tea and paris"), ("bob", "bob has a dog and a cat"), ("alice", "alice has a cat and a dog"), ("bob", "bob likes paris and tea")]


def sample(key: str) -> Episode:
    turns = tuple(Turn(speaker=s, text=t, turn_id=f"D1:{i}") for i, (s, t) in enumerate(TURNS))
    qa = (QAItem("what does alice like", "tea", ("D1:0",)), QAItem("what does bob have", "dog", ("D1:1",)))
    return Episode(key, Scope(user_id="u", run_id=key), (Session(f"{key}/s0", turns, qa),))


class TinyWriter(WriterRecipe):
    def samples(self):  # type: ignore[no-untyped-def]
        return [sample("train-a"), sample("train-b")], [sample("val")]


class ZeroAdvantageWriter(TinyWriter):
    def make_learner(self, policy):  # type: ignore[no-untyped-def]
        return ZeroAdvantages(self.config)


def requests() -> list[list[dict[str, str]]]:
    """What the recipe will send: the writer prompt over the sample's chunks, with no memory
    yet and with one, ending in the response prefix."""
    turns = sample("x").sessions[0].turns
    prompt = load_prompt("writer")
    shown = [[], [ScoredMemory(record=MemoryRecord(id=uuid.uuid4(), text="alice likes tea", scope=Scope(user_id="u"), created_at=NOW, updated_at=NOW, version=1, content_hash=content_hash("alice likes tea")), score=1.0)]]
    return [
        [*prompt.render(**LLMWriter.prompt_values(turns[i : i + 2], memories)), {"role": "assistant", "content": prompt.response_prefix}]
        for i in (0, 2) for memories in shown
    ]


@pytest.fixture(scope="module")
def writer_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_writer_model(tmp_path_factory.mktemp("writer") / "model", prompts=requests())


def _config(model: Path, out: Path, **overrides: object) -> WriterGRPOConfig:
    base = dict(
        model_path=str(model), output_dir=str(out), progress=False, seed=0, embedder="hash", chunk_turns=2,
        lora={"rank": 8, "alpha": 16, "target_modules": ("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head")},
        lr=3e-3, ppo_epochs=2, group_size=8, prompts_per_step=1, max_tokens=16, micro_batch_size=64, steps=30,
        checkpoint_every=1000, num_threads=1,
    )  # fmt: skip
    return WriterGRPOConfig.model_validate({**base, **overrides})


def test_the_writer_learns_the_tier_the_bank_accepts_and_zeroed_advantages_do_not(writer_model: Path, tmp_path: Path) -> None:
    learned = run_recipe(TinyWriter, _config(writer_model, tmp_path / "grpo"))
    # the control needs few steps: zeroed advantages leave the weights as they are, so its
    # rewards are the warm-up's at every step (10 steps: the suite's time limit)
    frozen = run_recipe(ZeroAdvantageWriter, _config(writer_model, tmp_path / "zero", steps=10))
    start, end = mean_of(learned[:3], "r2_format"), mean_of(learned[-5:], "r2_format")
    control = mean_of(frozen[-5:], "r2_format")
    print(f"\nR2 (calls executed) {start:.2f} -> {end:.2f}; zeroed advantages -> {control:.2f}")
    # seeds 0-2 measured: start .44-.58, end .90-.96, control .23-.53 (lr 1e-2 without KL
    # collapsed one seed's format to 0: Mem-alpha drops the KL term, so the step must be small)
    assert start < 0.7  # the warm-up drew the two tiers 50/50 (and some replies miss the format)
    assert end >= 0.8
    assert control <= 0.7 and end - control >= 0.3
    assert learned[0]["reward_mean"] == frozen[0]["reward_mean"]  # same rollouts until the updates differ
    rows = read_metrics(tmp_path / "grpo" / "metrics.jsonl")
    for row in rows:  # each term logged on its own, every step
        assert set(TERMS) <= set(row)
        assert 0.0 <= row["r2_format"] <= 1.0 and 0.0 <= row["r4_content"] <= 1.0 and 0.0 <= row["r1_qa"] <= 1.0
    # Mem-alpha's GRPO has no KL term: no reference pass, so no KL is measured or logged
    assert all("kl" not in r for r in rows if r["updated"])
    assert (tmp_path / "grpo" / "curves.png").stat().st_size > 1000
