"""``python -m memsdk_training train manager|manager-ppo|answerer|memory-r2|writer|memagent|deltamem|pairs|pairs-cross --config FILE``
and ``python -m memsdk_training retrain answerer|manager --from-log DATA_DIR`` (`memsdk_training.retrain`).

The config file (YAML or JSON) fills the recipe's typed config; ``--steps``,
``--output-dir`` and ``--device`` override it for quick runs. A run with an existing
``<output_dir>/checkpoints/last`` (a curriculum: ``stage-<i>-<n>/last``) resumes from it.
``manager-ppo`` is the manager recipe with its PPO config (`ManagerPPOConfig`: gamma, lam,
vf_coef, value_clip, value_lr), whose ``learner: value`` makes the loop's learner PPO with a value head.
``pairs`` is the pair manager's classifier (`recipes.pair_classifier`, `configs/pairs.yaml`):
supervised, with its own trainer; ``--steps`` and ``--device`` do not apply to it.
``pairs-cross`` is the cross-encoder served mixed with that head (`recipes.cross_encoder`,
`configs/pairs_cross.yaml`), supervised the same way.

``--nproc N`` runs an on-policy recipe data-parallel in N processes on this machine (it
re-runs the same command under torchrun, `training.distributed`); a command already
started by ``torchrun`` or ``accelerate launch`` joins their process group by itself.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

from .distributed import drop_option, launch_command, launched

__all__ = ["RECIPES", "main", "build_recipe"]

# recipe name -> (module, its config class, its recipe class), imported only when chosen
RECIPES = {
    "manager": ("manager", "ManagerGRPOConfig", "ManagerRecipe"),
    "manager-ppo": ("manager", "ManagerPPOConfig", "ManagerRecipe"),
    "answerer": ("answerer", "AnswererGRPOConfig", "AnswererRecipe"),
    "memory-r2": ("logo_grpo", "LogoGRPOConfig", "LogoGRPORecipe"),
    "writer": ("writer", "WriterGRPOConfig", "WriterRecipe"),
    "deltamem": ("deltamem", "DeltaMemGRPOConfig", "DeltaMemRecipe"),
    "memagent": ("memagent", "MemAgentDAPOConfig", "MemAgentRecipe"),
}

#: supervised classifiers (recipe name -> module with a ``main(argv)``), not on-policy loops
SUPERVISED = {"pairs": "pair_classifier", "pairs-cross": "cross_encoder"}


def build_recipe(name: str, config_path: str, **overrides: Any) -> Any:
    import importlib

    from .recipes.config import load_config

    module_name, config_name, recipe_name = RECIPES[name]
    module = importlib.import_module(f"{__package__}.recipes.{module_name}")
    config = load_config(config_path, getattr(module, config_name), **overrides)
    return getattr(module, recipe_name)(config)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m memsdk_training")
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="run a training recipe")
    train.add_argument("recipe", choices=sorted([*RECIPES, *SUPERVISED]))
    train.add_argument("--config", required=True, help="YAML or JSON file (training/configs/)")
    train.add_argument("--steps", type=int)
    train.add_argument("--output-dir")
    train.add_argument("--device")
    train.add_argument("--nproc", type=int, default=1, help="data-parallel processes on this machine (torchrun; gloo on CPU, NCCL on CUDA)")
    from .commands import add_arguments, run

    add_arguments(sub.add_parser("retrain", help="retrain from an app's judged traffic, then the release gate (= memsdk train)"))
    args = parser.parse_args(argv)
    if args.command == "retrain":
        print(json.dumps(run(args, {}), indent=2))
        return 0
    if args.nproc != 1 and not launched():
        if args.recipe in SUPERVISED:
            parser.error(f"--nproc: {args.recipe} is a supervised classifier trained in one process")
        return subprocess.run(launch_command(args.nproc, drop_option(argv if argv is not None else sys.argv[1:], "--nproc"))).returncode
    if args.recipe in SUPERVISED:  # a classifier, not an on-policy loop: its own trainer reads the config
        import importlib

        trainer = importlib.import_module(f"{__package__}.recipes.{SUPERVISED[args.recipe]}")
        return int(trainer.main(["--config", args.config, *(["--output-dir", args.output_dir] if args.output_dir else [])]))
    recipe = build_recipe(args.recipe, args.config, steps=args.steps, output_dir=args.output_dir, device=args.device)
    recipe.setup()
    try:
        recipe.train()
    finally:
        recipe.cleanup()
    if recipe.world.main:
        print(json.dumps({"output_dir": str(recipe.out), "metrics": str(recipe.out / "metrics.jsonl")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
