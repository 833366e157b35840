"""``memsdk train``: the command memsdk[training] adds to the ``memsdk`` command line.

Declared as a ``memsdk.commands`` entry point (pyproject.toml), so the runtime's CLI finds it
without importing the training package; nothing heavy (torch, the recipes) is imported until
the command runs. ``python -m memsdk_training retrain`` takes the same arguments.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

__all__ = ["register", "add_arguments", "run"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("role", choices=["answerer", "manager"], help="the role to retrain: the answerer on its judged answers, the manager on the ingests they cited")
    p.add_argument("--from-log", dest="from_log", type=Path, required=True, metavar="DATA_DIR", help="the app's data dir: its interaction log, bank and checkpoints")
    p.add_argument("--config", help="the recipe's YAML/JSON config (default: the packaged <role>_grpo.yaml)")
    p.add_argument("--steps", type=int, help="training steps (default: the config's)")
    p.add_argument("--version", help="the published version's name (default: <role>-log-<unix time>)")
    p.add_argument("--holdout", type=float, default=0.3, help="share of the judged answers kept out of training, for the gate")
    p.add_argument("--margin", type=float, default=0.0, help="the gate's margin")
    p.add_argument("--seed", type=int, default=0)


def run(args: argparse.Namespace, client_settings: dict[str, Any]) -> dict[str, Any]:
    """States from the log, train, gate (`memsdk_training.retrain`); the summary, as JSON-able data."""
    from memsdk import InvalidInput, MemoryClient

    try:
        from .retrain import RetrainConfig, retrain
    except ImportError as exc:  # the entry point ships with memsdk; torch and peft come with the extra
        raise InvalidInput("train", f"needs the training extra ({exc.name} is not installed): pip install 'memsdk[training]'") from None

    config = RetrainConfig(role=args.role, recipe_config=args.config, steps=args.steps, version=args.version, holdout=args.holdout, margin=args.margin, seed=args.seed)
    with MemoryClient(**{**client_settings, "data_dir": args.from_log}) as client:
        return retrain(client, config).summary()


def register(sub: Any) -> None:
    """The entry point: add ``train`` to the memsdk command's subcommands."""
    p = sub.add_parser("train", help="retrain a policy from the app's judged traffic; it serves only if the release gate passes")
    add_arguments(p)
    p.set_defaults(handler=run)
