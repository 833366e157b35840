"""The CLI and the LoCoMo recipes wired end to end on a tiny model: configs load, one step of
the manager and answerer recipes runs through the real environments and publishes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from memsdk.policies.calling.prompts import DEFAULT_PROMPTS
from memsdk.registry import PolicyRegistry
from memsdk_training.cli import RECIPES, build_recipe, main
from memsdk_training.recipes import read_metrics

from ._tiny import make_format_model

CONFIGS = Path(__file__).resolve().parents[3] / "training" / "configs"


@pytest.fixture(scope="module")
def format_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    torch.set_num_threads(1)
    return make_format_model(tmp_path_factory.mktemp("fmt-cli") / "model")


@pytest.mark.parametrize("name,file", [("manager", "manager_grpo.yaml"), ("answerer", "answerer_grpo.yaml"), ("memory-r2", "memory_r2.yaml"), ("writer", "writer_grpo.yaml")])
def test_shipped_configs_build_their_recipes(name: str, file: str) -> None:
    recipe = build_recipe(name, str(CONFIGS / file), steps=3)
    assert type(recipe).__name__ == RECIPES[name][2] and recipe.config.steps == 3


def test_unknown_config_keys_are_errors(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"learning_rate": 0.1}))
    with pytest.raises(ValueError, match="learning_rate"):
        build_recipe("manager", str(bad))


def _tiny_config(tmp_path: Path, model: Path, **extra: object) -> Path:
    config = {
        "model_path": str(model), "num_threads": 1, "embedder": "hash", "group_size": 2, "prompts_per_step": 1,
        "max_tokens": 8, "steps": 1, "progress": False, "output_dir": str(tmp_path / "run"), **extra,
    }  # fmt: skip
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    return path


@pytest.mark.locomo
def test_cli_trains_the_manager_one_step_and_publishes(tmp_path: Path, format_model_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    registry = tmp_path / "registry"
    config = _tiny_config(tmp_path, format_model_dir, max_train_states=2, max_val_states=2, publish={"registry_dir": str(registry), "version": "t1"})
    assert main(["train", "manager", "--config", str(config)]) == 0
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len(rows) == 1 and {"eval_valid_op_rate", "eval_answer_f1"} <= set(rows[0])
    manifest = PolicyRegistry(registry).get("manager", "t1")
    assert manifest.base_model == "smollm2" and "answer_f1" in manifest.eval_metrics and manifest.training_data_hash
    assert manifest.prompt == f"manager/{DEFAULT_PROMPTS['manager']}"  # served with the prompt it was trained on
    assert (registry / "manager" / "t1" / "adapter_config.json").exists()
    assert json.loads(capsys.readouterr().out.strip().splitlines()[-1])["output_dir"] == str(tmp_path / "run")


@pytest.mark.locomo
def test_cli_trains_the_manager_in_two_processes_and_publishes_once(tmp_path: Path, format_model_dir: Path) -> None:
    """``--nproc 2`` re-runs the command under torchrun: the same recipe and config, two gloo
    ranks (one state each), one metrics file and one published adapter, from rank 0."""
    registry = tmp_path / "registry"
    config = _tiny_config(
        tmp_path, format_model_dir, max_train_states=2, max_val_states=1, prompts_per_step=2, drop_zero_variance=False,
        publish={"registry_dir": str(registry), "version": "dp"},
    )  # fmt: skip
    assert main(["train", "manager", "--config", str(config), "--nproc", "2"]) == 0
    rows = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert len(rows) == 1 and rows[0]["updated"] and rows[0]["rows"] > 0
    assert PolicyRegistry(registry).get("manager", "dp").base_model == "smollm2"
    assert (registry / "manager" / "dp" / "adapter_config.json").exists()


@pytest.mark.locomo
def test_answerer_recipe_runs_a_step_on_locomo_questions(tmp_path: Path, format_model_dir: Path) -> None:
    recipe = build_recipe("answerer", str(_tiny_config(tmp_path, format_model_dir, max_train_questions=2, max_val_questions=2, answer_k=5)))
    recipe.setup()
    rows = recipe.train()
    recipe.cleanup()
    assert rows[0]["response_length"] > 0 and {"eval_answer_f1", "eval_unknown_rate"} <= set(rows[0])


@pytest.mark.locomo
def test_writer_recipe_runs_a_step_on_locomo_sessions(tmp_path: Path, format_model_dir: Path) -> None:
    recipe = build_recipe("writer", str(_tiny_config(tmp_path, format_model_dir, max_train_samples=1, max_val_samples=1, chunk_turns=8)))
    recipe.setup()
    try:
        [train] = recipe.data.train
        assert train.key == "conv-26/w0" and train.sessions[-1].qa  # a window with its own questions
        rows = recipe.train()
    finally:
        recipe.cleanup()
    assert {"r1_qa", "r2_format", "r3_compression", "r4_content", "eval_reward", "eval_r2_format"} <= set(rows[0])
    assert recipe.config.kl_coef == 0.0
