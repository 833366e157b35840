"""One rank of a data-parallel test run: ``python -m torch.distributed.run ... -m tests.training.recipes._dist_run JOBS.json``.

JOBS.json is a list of runs of the op task, each ``{"recipe": "op" | "zero" | "sgd", "model": dir,
"out": dir, "config": {...overrides}, "die_at": step index or null, "die_rank": r}``.
Each rank trains every job in turn (the process group is joined once and kept), then saves
the adapter it ended with as ``<out>/adapter-rank<r>.pt``, so a test can check that every
rank holds the same weights. ``die_at``: rank ``die_rank`` exits without cleanup when about
to roll out that step, as a killed process would.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import torch

from ._tiny import OpRecipe, SGDOpRecipe, ZeroAdvantageRecipe, op_config

RECIPES = {"op": OpRecipe, "zero": ZeroAdvantageRecipe, "sgd": SGDOpRecipe}


class _Dies(OpRecipe):
    die_at: int | None = None
    die_rank = 1

    def rollout(self, states, step):  # type: ignore[no-untyped-def]
        if step == self.die_at and self.world.rank == self.die_rank:
            os._exit(3)
        return super().rollout(states, step)


def run(job: dict[str, Any]) -> None:
    base = RECIPES[job["recipe"]]
    cls = type("Run", (_Dies, base), {"die_at": job.get("die_at"), "die_rank": job.get("die_rank", 1)})
    recipe = cls(op_config(Path(job["model"]), Path(job["out"]), **job.get("config", {})))
    recipe.setup()
    try:
        recipe.train()
        torch.save(recipe.policy.adapter_state(), Path(job["out"]) / f"adapter-rank{recipe.world.rank}.pt")
    finally:
        recipe.rollouts.backend.close()  # not cleanup(): the next job reuses the process group
    recipe.world.barrier()


def main(argv: list[str]) -> int:
    jobs = json.loads(Path(argv[0]).read_text())
    for job in jobs:
        run(job)
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
