"""DeltaMem's recipe with the real SmolLM2-135M on CPU: speed, memory, and every reward term
(format, retrieval, soft state F1) before and after a few GRPO steps.

    python benchmarks/train_deltamem_cpu.py [--steps 4] [--out build/deltamem/smollm2]

Targets: the heuristic teacher's run over LoCoMo (conv-26 train, conv-30 validation, one turn
per state, MiniLM embeddings). Reports steps/minute (training steps only, evaluation
excluded), peak RSS (getrusage), the training terms of the first and last step, and the
greedy validation terms before and after training.
"""

from __future__ import annotations

import argparse
import json
import resource
import time

from memsdk_training.recipes import DeltaMemGRPOConfig
from memsdk_training.recipes.deltamem import TERMS, DeltaMemRecipe


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--out", default="build/deltamem/smollm2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--micro-batch", type=int, default=2)
    args = parser.parse_args()
    config = DeltaMemGRPOConfig(
        output_dir=args.out, steps=args.steps, num_threads=args.threads, group_size=args.group_size, prompts_per_step=1,
        max_tokens=args.max_tokens, lr=args.lr, micro_batch_size=args.micro_batch, embedder="minilm", max_train_states=8,
        max_val_states=2, eval_every=0, checkpoint_every=1000, progress=True,
    )  # fmt: skip
    started = time.perf_counter()
    recipe = DeltaMemRecipe(config)
    recipe.setup()
    setup_s = time.perf_counter() - started
    rows = recipe.train()
    total_s = time.perf_counter() - started
    train_s = sum(r["seconds"] for r in rows)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    before, after = recipe.evals[0], recipe.evals[-1]
    keys = ("reward", *TERMS, "lookups", "parse_failure_rate")
    print(f"\nDeltaMem GRPO, SmolLM2-135M, CPU x{args.threads} threads, {args.steps} steps of 1 state x {config.group_size} rollouts, lr {args.lr}, max_tokens {args.max_tokens}")
    print(f"setup {setup_s:.0f} s, total {total_s:.0f} s, steps/minute {60 * len(rows) / train_s:.2f}, peak RSS {peak_mb:.0f} MB, rows/step {[r['rows'] for r in rows]}")
    print("| train step | reward | " + " | ".join(TERMS) + " | lookups | parse failures |\n|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['step']} | {r['reward_mean']:.3f} | " + " | ".join(f"{r[t]:.3f}" for t in TERMS) + f" | {r['lookups']:.2f} | {r['parse_failure_rate']:.2f} |")
    print(f"\n| conv-30 val ({len(recipe.data.val)} states, greedy) | before | after |\n|---|---|---|")
    for k in keys:
        print(f"| {k} | {before[k]:.3f} | {after[k]:.3f} |")
    print(json.dumps({"steps_per_minute": 60 * len(rows) / train_s, "peak_rss_mb": peak_mb, "setup_s": setup_s, "total_s": total_s, "before": before, "after": after, "rows": rows}))
    recipe.cleanup()


if __name__ == "__main__":
    main()
