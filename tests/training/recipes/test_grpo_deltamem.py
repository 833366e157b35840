"""DeltaMem's recipe on a tiny model that speaks DeltaMem's replies: the whole path (triples
from the heuristic teacher's run through the client -> the runtime's DeltaMem ingest over a
fork, every call sampled -> format + retrieval + soft state F1 -> GRPO over every call of each
trace -> update).

Each state's fact is already in memory, word for word, so the teacher's target is "nothing
new" (its manager skips a duplicate). The tiny model is warmed up on DeltaMem's reply format
with random content: a first reply searches, ADDs or NOOPs (a third each), a reply after a
search ADDs or NOOPs. Every fact holds every word it knows, so any ADD is grounded and
applied: it leaves an extra memory (state F1 0, R = 0.2), while NOOP leaves the target
(R = 1.0). A working path must learn to stop adding; zeroed advantages must not."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from memsdk.embedding import HashEmbedder
from memsdk.llm.base import Choice, Completion, SamplingParams
from memsdk.llm.inprocess import render
from memsdk.types import Scope, Turn
from memsdk_training.env import TargetTriple, heuristic_teacher, teacher_triples
from memsdk_training.env.deltamem_env import DeltaMemEnv
from memsdk_training.recipes import DeltaMemGRPOConfig, read_metrics
from memsdk_training.recipes.deltamem import TERMS, DeltaMemRecipe

from ._tiny import FORMAT_WORDS, SPECIALS_METASPACE, ZeroAdvantages, _warm_up, _word_llama, mean_of, run_recipe

# the reply after DeltaMem's response prefix '{"', as single tokens (Metaspace decodes the
# first without its space): 'ops": [{"op": "NOOP"}]}', 'ops": [{"op": "ADD", "text": " w w "}]}', 'search": " w "}'
PIECES = ['▁ops":', '▁[{"op":', '▁"NOOP"}]}', '▁"ADD",', '▁"text":', '▁"', '▁"}]}', '▁search":', '▁"}']
WORDS = [w.lstrip("▁") for w in FORMAT_WORDS]  # alice bob likes has tea dog cat paris
SAID = ["alice likes tea and paris but bob has a dog and a cat", "bob likes paris and tea but alice has a cat and a dog", "alice has a dog and a cat and bob likes tea and paris"]


def triples(tmp: Path) -> list[TargetTriple]:
    """One per sentence: the memory already holds the fact (the extractor's rendering), so the
    heuristic teacher's target is the bank unchanged."""
    out = []
    for i, text in enumerate(SAID):
        client = heuristic_teacher(HashEmbedder(64), tmp / str(i))
        scope = Scope(user_id="u", run_id=str(i))
        try:
            client.add(f"alice: {text}", scope=scope)
            client.add("bob: bob works at the museum", scope=scope)
            out += teacher_triples(client, [(f"s{i}", [Turn(speaker="alice", text=text, turn_id=f"D{i}:1")])], scope)
        finally:
            client.close()
    return out


class Recorder:
    """Searches first, then NOOPs: to see the requests a rollout sends (first and follow-up)."""

    model, supports_schema = "recorder", False

    def __init__(self) -> None:
        self.requests: list[list[dict[str, str]]] = []

    def chat(self, messages: Sequence[dict[str, str]], *, params: SamplingParams, model: str | None = None, schema: dict | None = None) -> Completion:
        self.requests.append([dict(m) for m in messages])
        text = 'search": "alice"}' if len(self.requests) % 2 else 'ops": [{"op": "NOOP"}]}'
        return Completion(model="recorder", choices=[Choice(text=text, finish_reason="stop")])


def make_deltamem_model(folder: Path, states: Sequence[TargetTriple], *, seed: int = 0, warmup_steps: int = 160) -> Path:
    model, tokenizer, vocab = _word_llama([*SPECIALS_METASPACE, *PIECES, *FORMAT_WORDS], seed=seed, max_positions=4096, metaspace=True)
    recorder = Recorder()
    env = DeltaMemEnv(recorder, json.dumps, HashEmbedder(64), max_lookups=1)  # type: ignore[arg-type]
    for s in states:
        env.roll_out(s, SamplingParams(temperature=0.0))
    first = [render(tokenizer, m) for m in recorder.requests[0::2]]
    after_search = [render(tokenizer, m) for m in recorder.requests[1::2]]
    rng = random.Random(seed)

    def ops() -> str:
        words = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 3)))
        return f'ops": [{{"op": "ADD", "text": " {words} "}}]}}' if rng.random() < 0.85 else 'ops": [{"op": "NOOP"}]}'

    def example() -> tuple[str, str]:
        if rng.random() < 1 / 3:
            return rng.choice(after_search), ops()
        if rng.random() < 0.5:
            return rng.choice(first), f'search": " {rng.choice(WORDS)} "}}'
        return rng.choice(first), ops()

    return _warm_up(model, tokenizer, vocab, example, warmup_steps, folder)


@pytest.fixture(scope="module")
def states(tmp_path_factory: pytest.TempPathFactory) -> list[TargetTriple]:
    return triples(tmp_path_factory.mktemp("teacher"))


@pytest.fixture(scope="module")
def deltamem_model(tmp_path_factory: pytest.TempPathFactory, states: list[TargetTriple]) -> Path:
    import torch

    torch.set_num_threads(1)
    return make_deltamem_model(tmp_path_factory.mktemp("deltamem") / "model", states)


def recipes(states: list[TargetTriple]) -> tuple[type[DeltaMemRecipe], type[DeltaMemRecipe]]:
    class Tiny(DeltaMemRecipe):
        def triples(self, embedder):  # type: ignore[no-untyped-def]
            return states[:2], states[2:]

    class ZeroAdvantage(Tiny):
        def make_learner(self, policy):  # type: ignore[no-untyped-def]
            return ZeroAdvantages(self.config)

    return Tiny, ZeroAdvantage


def _config(model: Path, out: Path, **overrides: object) -> DeltaMemGRPOConfig:
    base = dict(
        model_path=str(model), output_dir=str(out), progress=False, seed=0, embedder="hash", max_lookups=1,
        lora={"rank": 8, "alpha": 16, "target_modules": ("q_proj", "v_proj", "o_proj", "up_proj", "down_proj", "lm_head")},
        lr=3e-3, ppo_epochs=2, group_size=8, prompts_per_step=1, max_tokens=16, micro_batch_size=64, steps=20,
        checkpoint_every=1000, num_threads=1,
    )  # fmt: skip
    return DeltaMemGRPOConfig.model_validate({**base, **overrides})


def test_the_manager_learns_to_leave_the_target_state_and_zeroed_advantages_do_not(deltamem_model: Path, states: list[TargetTriple], tmp_path: Path) -> None:
    assert all(s.asks_the_manager and [r.text for r in s.before.records()] == [r.text for r in s.after.records() if r.tier == "semantic"] for s in states)
    tiny, zero = recipes(states)
    learned = run_recipe(tiny, _config(deltamem_model, tmp_path / "grpo"))
    frozen = run_recipe(zero, _config(deltamem_model, tmp_path / "zero"))
    start, end = mean_of(learned[:3]), mean_of(learned[-5:])
    control = mean_of(frozen[-5:])
    print(f"\nreward {start:.2f} -> {end:.2f} (state F1 {mean_of(learned[:3], 'state_f1'):.2f} -> {mean_of(learned[-5:], 'state_f1'):.2f}); zeroed advantages -> {control:.2f}")
    assert learned[0]["reward_mean"] == frozen[0]["reward_mean"]  # same rollouts until the updates differ
    # seeds 0-2 measured (20 steps, warm-up 160 steps, ADD 85% of the warm-up's ops):
    # 0: .45 -> .90, control .40 (it stopped adding by searching past the budget: format 0,
    #    R .9, as good as NOOP for the state); 1: .66 -> .97, control .79; 2: .72 -> .99, control .54.
    # With a warm-up of 80 steps seed 2 never wrote a parseable reply (every R .9, no signal).
    assert end >= 0.85 and end - start >= 0.15
    assert control <= 0.85 and end - control >= 0.15
    rows = read_metrics(tmp_path / "grpo" / "metrics.jsonl")
    for row in rows:  # each term logged on its own, every step
        assert set(TERMS) <= set(row) and "lookups" in row
        assert all(0.0 <= row[t] <= 1.0 for t in TERMS)
    assert any(r["rows"] > 8 for r in rows if r["updated"])  # a trace with a search is two rows
    assert (tmp_path / "grpo" / "curves.png").stat().st_size > 1000


CONFIGS = Path(__file__).resolve().parents[3] / "training" / "configs"


def test_the_shipped_config_builds_the_recipe() -> None:
    from memsdk_training.cli import build_recipe

    recipe = build_recipe("deltamem", str(CONFIGS / "deltamem_grpo.yaml"), steps=3)
    assert isinstance(recipe, DeltaMemRecipe) and recipe.config.steps == 3 and recipe.config.w_state == 0.8


@pytest.mark.locomo
def test_cli_trains_deltamem_one_step_on_locomo_and_publishes(tmp_path: Path, deltamem_model: Path) -> None:
    from memsdk.registry import PolicyRegistry
    from memsdk_training.cli import main

    registry = tmp_path / "registry"
    config = {
        "model_path": str(deltamem_model), "num_threads": 1, "embedder": "hash", "group_size": 2, "prompts_per_step": 1, "max_tokens": 8,
        "steps": 1, "progress": False, "output_dir": str(tmp_path / "run"), "max_train_states": 1, "max_val_states": 1,
        "publish": {"registry_dir": str(registry), "version": "t1"},
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    assert main(["train", "deltamem", "--config", str(path)]) == 0
    [row] = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert {*TERMS, "lookups", "eval_reward", "eval_state_f1", "eval_format", "eval_retrieval"} <= set(row)
    manifest = PolicyRegistry(registry).get("manager", "t1")
    assert manifest.prompt == "deltamem/v1"  # served as DeltaMem's manager, the prompt it was trained with
