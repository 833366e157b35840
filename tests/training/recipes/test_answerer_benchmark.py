"""`benchmarks/train_answerer_cpu.py`'s gate states: what its gate and `--regate` replay."""

from __future__ import annotations

from memsdk.datasets.locomo import load_locomo
from memsdk_training.recipes import AnswererGRPOConfig

from tests.store.conftest import load_benchmark


def test_the_gate_states_are_conv_30s_questions_over_the_configs_manager() -> None:
    """The states are built with the manager the config names (a name the recipe resolves to
    a policy): every val question of LoCoMo, each with at most ``answer_k`` memories beside
    the speakers' core ones. The house refactor had the script pass the name where a `Manager` is
    taken, so its gate failed after a finished training run."""
    benchmark = load_benchmark("train_answerer_cpu.py")
    config = AnswererGRPOConfig(embedder="hash", manager="heuristic", answer_k=5, manage_val_scenarios=0)
    states = benchmark.gate_states(config)
    asked = [qa for conv in load_locomo() if conv.split == "val" for qa in conv.questions()]
    assert [s.question for s in states] == [qa.question for qa in asked]
    assert all(1 <= len(s.memories) <= config.answer_k + 2 for s in states)  # + each speaker's core memory
