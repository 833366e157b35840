"""The answerer trained for real: SmolLM2-135M on CPU, LoCoMo conv-26 -> gate on conv-30 ->
publish -> hot-swap into a running client.

    python benchmarks/train_answerer_cpu.py [--config training/configs/answerer_grpo_cpu.yaml] [--steps N] [--out DIR] [--package VERSION] [--against base|packaged] [--nproc N]
    python benchmarks/train_answerer_cpu.py --regate VERSION AGAINST [--out DIR]   # a packaged adapter gated again on today's view

1. train: the answerer recipe (`memsdk_training.recipes.answerer`) on conv-26's questions, each
   with the memories the answer path shows after a heuristic ingest (`answer_cases`): a warm
   start on the golds, then GRPO on token F1; the best of its validation checkpoints (a part of
   conv-30) is published, not promoted;
2. gate: a client serving base SmolLM2 (``--against packaged``: the adapter the package ships)
   in-process runs ``promote("answerer", version, on=states)``: all of conv-30's questions
   (and the management benchmark's val questions when the config trains on its train split),
   over the bank the config's states are built with, through the candidate and the
   incumbent, paired; on a pass the running client serves the new adapter from its next answer;
3. report: val F1 / BLEU-1 / EM of both (the gate's states), steps, wall time, peak RSS, the
   curves (``OUT/curves.png``) and ``OUT/report.json``;
   ``--nproc N`` trains data-parallel in N processes (``memsdk_training train answerer
   --nproc N`` on the same config, each rank one Nth of the config's threads); the gate then
   runs here, in one. Rerun on the same ``--out``, training resumes from its checkpoint (a
   finished run goes straight to the gate);
4. ``--package VERSION``, on a pass: the gated adapter, cast to fp16 (`half_precision`: half
   the bytes, under the repository's 5 MB file limit), into the package's own adapters (``memsdk/registry/packaged/answerer/VERSION``) with its gate decision, which every
   client over SmolLM2 then serves by default (README, *Defaults, measured*).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from memsdk import MemoryClient
from memsdk.gate import GateFailed
from memsdk.registry import PACKAGED_DIR, PolicyRegistry
from memsdk.gate import GateDecision
from memsdk_training.checkpoint import TRAINER, latest_checkpoint
from memsdk_training.distributed import launch_command
from memsdk_training.recipes import AnswererGRPOConfig, PublishSettings, load_config, read_metrics
from memsdk.eval.manage.cases import manage_answer_cases
from memsdk.gate import AnswerCase, locomo_answer_cases
from memsdk_training.recipes.answerer import AnswererRecipe
from memsdk.serving.policy_set import rules_manager
from memsdk_training.recipes.manager import make_embedder

VERSION = "locomo-grpo"


def package(registry: PolicyRegistry, decision: GateDecision, as_version: str) -> Path:
    """The gated adapter into the package under ``as_version``, its manifest carrying the
    gate's figures and its decision beside it (the candidate renamed: the same weights)."""
    manifest = registry.get("answerer", decision.candidate.version)
    gate = {"gate_f1": decision.candidate.mean, "gate_base_f1": decision.incumbent.mean, "gate_ci_low": decision.paired.ci_low, "gate_states": float(decision.paired.n)}
    gate |= {f"gate_{k}": v for k, v in decision.candidate.metrics.items()}
    shipped = PolicyRegistry(PACKAGED_DIR)
    shipped.publish(registry.adapter_dir(manifest), manifest.model_copy(update={"version": as_version, "eval_metrics": {**manifest.eval_metrics, **gate}}))
    shipped.record_decision(decision.model_copy(update={"candidate": decision.candidate.model_copy(update={"version": as_version})}))
    folder = PACKAGED_DIR / "answerer" / as_version
    # the trainer's machine path means nothing elsewhere; peft's generated model card is not needed to load it
    adapter_config = json.loads((folder / "adapter_config.json").read_text())
    (folder / "adapter_config.json").write_text(json.dumps({**adapter_config, "base_model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct"}, indent=2))
    (folder / "README.md").unlink(missing_ok=True)
    print(f"fp16 cast: largest weight change {half_precision(folder / 'adapter_model.safetensors'):.1e}")
    return folder


def half_precision(weights: Path) -> float:
    """Cast a LoRA file's fp32 tensors to fp16 in place; the largest absolute change. LoRA
    factors sit well inside fp16's range, so the change is rounding (~1e-5 for r16 here)."""
    import torch
    from safetensors.torch import load_file, save_file

    tensors = load_file(weights)
    half = {name: t.half() if t.dtype == torch.float32 else t for name, t in tensors.items()}
    save_file(half, weights, metadata={"format": "pt"})
    return max((float((t.float() - half[n].float()).abs().max()) for n, t in tensors.items()), default=0.0)


def gate_states(config: AnswererGRPOConfig) -> list[AnswerCase]:
    """All of conv-30's questions, then the management benchmark's val questions when the
    config trains on its train split, each over the bank the config's states are built with."""
    embedder = make_embedder(config.embedder)
    states = locomo_answer_cases(embedder, split="val", k=config.answer_k, manager=rules_manager(config.manager, embedder))
    if config.manage_val_scenarios:
        states += manage_answer_cases("val", embedder, k=config.answer_k, manager=config.manager)
    return states


def train(config: AnswererGRPOConfig, out: Path, nproc: int) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
    """Step 1, in this process or data-parallel in ``nproc``; the run's evaluations and its best one."""
    if nproc == 1:
        recipe = AnswererRecipe(config)
        recipe.setup()
        recipe.train()
        recipe.cleanup()
        return recipe.evals, recipe.best
    threads = max(1, (config.num_threads or 1) // nproc)  # the config's threads shared out: more would contend for the cores
    spec = out / "config.json"
    spec.write_text(config.model_copy(update={"num_threads": threads}).model_dump_json(indent=2))
    done = subprocess.run(launch_command(nproc, ["train", "answerer", "--config", str(spec)]), env={**os.environ, "OMP_NUM_THREADS": str(threads)})
    if done.returncode != 0:
        sys.exit(f"training failed (exit {done.returncode}); rerun to resume from its last checkpoint")
    last = latest_checkpoint(out / "checkpoints" / "last")
    assert last is not None
    extra = torch.load(last / TRAINER, map_location="cpu", weights_only=False)["extra"]  # our own file: evals and best
    return extra["evals"], extra["best"]


def regate(config: AnswererGRPOConfig, version: str, against: str, out: Path) -> None:
    """Train nothing: gate the packaged ``version`` against the packaged ``against`` on the
    states as the answer path builds them today. The view an adapter was gated on moves
    under it (a new default manager retires other facts), and a shipped adapter should still
    beat its rollback on the view it is served."""
    started = time.perf_counter()
    states = gate_states(config)
    with MemoryClient(data_dir=out / "regate", answer_k=config.answer_k, log_interactions=False, packaged_adapters=True) as client:
        decision = client.evaluate_policy("answerer", version, against=against, on=states)
    print(f"{decision.summary()}\ngate wall {time.perf_counter() - started:.0f} s, {decision.paired.n} states, {config.answer_k} memories")
    (out / "regate.json").write_text(decision.model_dump_json(indent=2))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default="training/configs/answerer_grpo_cpu.yaml")
    parser.add_argument("--steps", type=int, default=None, help="GRPO steps (default: the config's)")
    parser.add_argument("--out", default=None, help="default: the config's output_dir")
    parser.add_argument("--package", metavar="VERSION", help="on a pass, ship the adapter inside memsdk as VERSION")
    parser.add_argument("--against", choices=("base", "packaged"), default="base", help="the gate's incumbent: base SmolLM2, or the adapter the package ships")
    parser.add_argument("--nproc", type=int, default=1, help="train data-parallel in N processes (torchrun, gloo); the gate runs in this one")
    parser.add_argument("--regate", nargs=2, metavar=("VERSION", "AGAINST"), help="train nothing: gate two packaged adapters on today's states (e.g. locomo-v2 locomo-v1)")
    args = parser.parse_args()
    out = Path(args.out or load_config(args.config, AnswererGRPOConfig).output_dir)
    out.mkdir(parents=True, exist_ok=True)
    if args.regate:
        version, against = args.regate
        regate(load_config(args.config, AnswererGRPOConfig, output_dir=str(out)), version, against, out)
        return
    data_dir = Path(tempfile.mkdtemp(prefix="client-", dir=out.parent))  # the app's: its registry receives the adapter
    steps = {"steps": args.steps} if args.steps is not None else {}
    config = load_config(args.config, AnswererGRPOConfig, output_dir=str(out), publish=PublishSettings(registry_dir=str(data_dir / "checkpoints"), version=VERSION), **steps)

    started = time.perf_counter()
    evals, best = train(config, out, args.nproc)
    rows = read_metrics(out / "metrics.jsonl")
    train_wall = time.perf_counter() - started
    warm = read_metrics(out / "warm_start.jsonl") if config.warm_start_steps else []

    started = time.perf_counter()
    states = gate_states(config)
    # against base SmolLM2, or the adapter the package ships (the version a default client serves)
    with MemoryClient(data_dir=data_dir, answer_k=config.answer_k, log_interactions=False, packaged_adapters=args.against == "packaged") as client:
        try:
            decision = client.promote("answerer", VERSION, on=states)
            assert decision is not None
        except GateFailed as failed:
            decision = failed.decision
        serving = client.policies["answerer"].version
    gate_wall = time.perf_counter() - started
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    sides = {"base SmolLM2" if args.against == "base" else "packaged": decision.incumbent, "trained": decision.candidate}
    print(f"\nanswerer: warm start {len(warm)} SFT steps x {config.warm_start_batch_size}, then {len(rows)} GRPO steps of {config.prompts_per_step} x {config.group_size}, {config.answer_k} memories, CPU x{config.num_threads}")
    if warm:
        print(f"warm start on {warm[0]['examples']} golds: {sum(r['seconds'] for r in warm):.0f} s, loss {warm[0]['loss']:.3f} -> {warm[-1]['loss']:.3f}")
    if rows:
        print(f"GRPO: {sum(r['seconds'] for r in rows) / len(rows):.0f} s/step, train reward first {rows[0]['reward_mean']:.3f} last {rows[-1]['reward_mean']:.3f}, zero-variance groups {sum(r['zero_variance_fraction'] for r in rows) / len(rows):.2f}")
    print(f"training wall {train_wall:.0f} s, gate wall {gate_wall:.0f} s, peak RSS {peak_mb:.0f} MB; best validation checkpoint at step {best and best['step']}")
    print(f"\n| gate states ({decision.paired.n} questions, {config.answer_k} memories) | F1 | BLEU-1 | EM | parse failures | p50 s |\n|---|---|---|---|---|---|")
    for name, side in sides.items():
        print(f"| {name} ({side.version}) | {side.mean:.3f} | {side.metrics.get('bleu1', 0):.3f} | {side.metrics.get('em', 0):.3f} | {side.guards.get('parse_failure_rate', 0):.3f} | {side.latency_p50_s:.1f} |")
    print(f"\n{decision.summary()}\nserving now: {serving}")
    report = {
        "decision": decision.model_dump(mode="json", exclude={"candidate": {"rewards"}, "incumbent": {"rewards"}}), "serving": serving,
        "evals": evals, "warm_start": warm, "steps": rows, "train_wall_s": train_wall, "gate_wall_s": gate_wall, "peak_rss_mb": peak_mb,
    }  # fmt: skip
    (out / "report.json").write_text(json.dumps(report, indent=2, default=str))
    if args.package and decision.passed:
        print(f"packaged: {package(PolicyRegistry(data_dir / 'checkpoints'), decision, args.package)}")


if __name__ == "__main__":
    main()
