"""Manager GRPO (or PPO with a value head) with the real SmolLM2-135M on CPU: speed, memory,
and held-out reward before vs after.

    python benchmarks/train_cpu.py [--algorithm grpo|ppo] [--steps 8] [--warm-start 30] [--out build/bench/train_cpu]
    python benchmarks/train_cpu.py --compare "1x1 1x2 2x1"    # processes x threads, one run each: the wall-time table

``--nproc N`` runs the recipe data-parallel in N processes (torchrun, gloo; `training.distributed`).
``--compare`` runs the same training once per processes x threads setting, each a fresh
child process, and prints wall time and steps/minute against the first setting.

Peak memory is dominated by the backward pass over ~700-token prompts (the attention
probabilities of every layer are kept): ``--micro-batch`` bounds the rows per forward pass.

Train: LoCoMo conv-26 manager states; validation: conv-30 states, greedy decisions judged by
the frozen extractive answerer. Reports steps/minute (training steps only, evaluation
excluded), peak RSS (getrusage), and on validation the valid-op rate (replies that parse and
whose ops the guard and bank accept) and answer F1 / EM, at step 0, after the supervised warm
start (``--warm-start N`` SFT steps on the heuristic manager's replies) and after RL.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

from memsdk_training.distributed import drop_option, launch_command, launched
from memsdk_training.recipes import ManagerGRPOConfig, ManagerPPOConfig, read_metrics
from memsdk_training.recipes.manager import ManagerRecipe

CONFIGS = {"grpo": ManagerGRPOConfig, "ppo": ManagerPPOConfig}  # the config picks the learner


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--algorithm", choices=sorted(CONFIGS), default="grpo")
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--out", default="build/bench/train_cpu")
    parser.add_argument("--threads", type=int, default=1, help="1: two threads crawl whenever the other core is busy (docs/platform-notes.md)")
    parser.add_argument("--format-reward", type=float, default=0.5, help="added to F1 when a reply applies cleanly (0: F1 only)")
    parser.add_argument("--lr", type=float, default=1e-4)
    parser.add_argument("--group-size", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--micro-batch", type=int, default=2)
    parser.add_argument("--warm-start", type=int, default=0, help="SFT steps on the heuristic manager's valid replies before RL")
    parser.add_argument("--warm-start-lr", type=float, default=5e-4)
    parser.add_argument("--update-uniform", action="store_true", help="keep groups whose rewards are all equal (their rows still carry the KL term): every step runs an update, so a timing includes the backward pass")
    parser.add_argument("--nproc", type=int, default=1, help="data-parallel processes (torchrun, gloo)")
    parser.add_argument("--compare", help='processes x threads settings, e.g. "1x1 1x2 2x1": one child run each, then the table')
    args = parser.parse_args()
    if args.compare:
        return compare(args.compare.split(), drop_option(sys.argv[1:], "--compare"), args.out)
    if args.nproc > 1 and not launched():
        child = drop_option(sys.argv[1:], "--nproc")
        sys.exit(subprocess.run(launch_command(args.nproc, child, script=__file__), env={**os.environ, "OMP_NUM_THREADS": str(args.threads)}).returncode)
    config = CONFIGS[args.algorithm](
        output_dir=args.out, steps=args.steps, num_threads=args.threads, group_size=args.group_size, prompts_per_step=2, max_tokens=args.max_tokens,
        lr=args.lr, format_reward=args.format_reward, metric="f1", answerer="extractive", embedder="minilm", max_train_states=16, max_val_states=8,
        qa_per_group=2, micro_batch_size=args.micro_batch, eval_every=0, checkpoint_every=1000, progress=True,
        warm_start_steps=args.warm_start, warm_start_lr=args.warm_start_lr, drop_zero_variance=not args.update_uniform,
    )  # fmt: skip
    started = time.perf_counter()
    recipe = ManagerRecipe(config)
    recipe.setup()
    setup_s = time.perf_counter() - started
    rows = recipe.train()
    total_s = time.perf_counter() - started
    train_s = sum(r["seconds"] for r in rows)
    warm_evals = [e for e in recipe.evals if e.get("phase") == "warm_start"]
    points = {"before": recipe.evals[0], **({"after warm start": warm_evals[0]} if warm_evals else {}), "after RL": recipe.evals[-1]}
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if not recipe.world.main:
        recipe.cleanup()
        return
    print(f"\nmanager {args.algorithm.upper()}, SmolLM2-135M, {recipe.world.size} process(es) x {args.threads} CPU threads, {args.steps} steps of {config.prompts_per_step} states x {config.group_size} replies, format reward {args.format_reward}, lr {args.lr}")
    if args.warm_start:
        warm = read_metrics(recipe.out / "warm_start.jsonl")
        print(f"warm start {args.warm_start} SFT steps x {config.warm_start_batch_size} of {warm[0]['examples']} teacher replies, lr {args.warm_start_lr}: "
              f"{sum(r['seconds'] for r in warm):.0f} s, loss {warm[0]['loss']:.3f} -> {warm[-1]['loss']:.3f}")  # fmt: skip
    print(f"setup {setup_s:.0f} s, total {total_s:.0f} s, steps/minute {60 * len(rows) / train_s:.2f}, peak RSS {peak_mb:.0f} MB (rank 0)")
    print(f"zero-variance groups {sum(r['zero_variance_fraction'] for r in rows) / len(rows):.2f}, rows reaching the optimizer {sum(r['rows'] for r in rows)}")
    print(f"train reward (F1 + format) first 2 steps {sum(r['reward_mean'] for r in rows[:2]) / 2:.3f}, last 2 steps {sum(r['reward_mean'] for r in rows[-2:]) / 2:.3f}")
    print(f"\n| conv-30 val ({len(recipe.data.val)} states, greedy) | {' | '.join(points)} |\n|---|{'---|' * len(points)}")
    for key in ("valid_op_rate", "parse_failure_rate", "answer_f1", "answer_em"):
        print(f"| {key} | {' | '.join(f'{p[key]:.3f}' for p in points.values())} |")
    print(json.dumps({"steps_per_minute": 60 * len(rows) / train_s, "train_s": train_s, "total_s": total_s, "peak_rss_mb": peak_mb, **points}))
    recipe.cleanup()


def compare(settings: list[str], argv: list[str], out: str) -> None:
    """One child run per "PxT" setting (P processes x T threads each), fresh output folders;
    the table: wall time of the child, training seconds and steps/minute against 1x1 (or the
    first setting), val F1 after RL."""
    results = []
    for setting in settings:
        nproc, threads = (int(x) for x in setting.split("x"))
        child = [*drop_option(drop_option(argv, "--threads"), "--out"), "--nproc", str(nproc), "--threads", str(threads), "--out", f"{out}/{setting}"]
        started = time.perf_counter()
        done = subprocess.run([sys.executable, __file__, *child], capture_output=True, text=True)
        wall = time.perf_counter() - started
        if done.returncode != 0:
            raise SystemExit(f"{setting} failed:\n{done.stderr[-2000:]}")
        summary = json.loads(done.stdout.strip().splitlines()[-1])
        results.append((setting, wall, summary))
    base = next((r for r in results if r[0] == "1x1"), results[0])  # one process, one thread: the baseline
    base_wall, base_train = base[1], base[2]["train_s"]
    print(f"\n| processes x threads | wall s | training s | steps/min | training speed vs {base[0]} | val answer F1 after RL |\n|---|---|---|---|---|---|")
    for setting, wall, s in results:
        print(f"| {setting} | {wall:.0f} | {s['train_s']:.0f} | {s['steps_per_minute']:.2f} | {base_train / s['train_s']:.2f}x | {s['after RL']['answer_f1']:.3f} |")
    print(f"(wall: the whole child, setup and evaluation included; {base[0]}: {base_wall:.0f} s)")


if __name__ == "__main__":
    main()
