"""Checks a GPU machine for training in a few minutes, with randomly initialised small models.

    bash scripts/gpu_check.sh            # = python scripts/gpu_check.py (+ torchrun --nproc-per-node 2 ... --ddp)

Needs torch, transformers and peft (no vllm, no memsdk install, no model download); it
imports the trainer's pure-torch parts from the repository (`training.losses`, the
PPO-clip and KL of every recipe; `training.distributed`, the data-parallel world), so the
repository folder is all it needs beside those packages.

    1. update    one PPO-clip + KL step (SGD) on CUDA against the same step on CPU, float32
                 with TF32 off: the LoRA weights must agree within 1e-4
    2. bf16      the same loss under bf16 autocast, and with bf16 weights: finite, within
                 5e-2 of float32, and finite gradients
    3. speed     a ~100M-parameter random Llama with LoRA, bf16 autocast: update steps per
                 minute, tokens per second, peak memory; again with gradient checkpointing
    4. ddp       (2+ GPUs; on CPU: 2 gloo processes) 2 ranks x half the batch, gradients
                 summed by `training.distributed.World`, against one device with the whole
                 batch: weights within 1e-4

Without CUDA every check runs on the CPU at small sizes, which is how the test suite runs it.
Prints one table; exits 1 if a check failed.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from contextlib import nullcontext
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repository root: `training` from source

from training.distributed import World, launch_command  # noqa: E402
from training.losses import aggregate, kl_estimate, ppo_clip_loss  # noqa: E402
from training.losses.ppo import PPOClipConfig  # noqa: E402

SEED = 0


def tiny_policy(hidden: int, layers: int, vocab: int, *, seed: int = SEED) -> Any:
    """A random Llama with a LoRA (r 8 on q, k, v, o) from ``seed``: the same weights on every device."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab, hidden_size=hidden, intermediate_size=hidden * 2, num_hidden_layers=layers,
        num_attention_heads=max(1, hidden // 64), num_key_value_heads=max(1, hidden // 128), max_position_embeddings=2048,
    )  # fmt: skip
    model = get_peft_model(LlamaForCausalLM(config), LoraConfig(r=8, lora_alpha=16, target_modules=["q_proj", "k_proj", "v_proj", "o_proj"]))
    with torch.no_grad():  # B = 0 at init would make the first step's LoRA-A gradients zero
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.02)
    return model.eval()


def batch(vocab: int, rows: int, prompt: int, completion: int, *, seed: int = SEED) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {
        "ids": torch.randint(0, vocab, (rows, prompt + completion), generator=g),
        "advantages": torch.randn(rows, generator=g),
        "completion": torch.tensor(completion),
    }


def loss_of(model: Any, b: dict[str, torch.Tensor], device: str, weight: float = 1.0) -> torch.Tensor:
    """PPO-clip (pi_old = this pass, detached) + 0.01 KL_k3 to the adapter-free model, seq-mean-token-mean, as the recipes take it."""
    ids, n = b["ids"].to(device), int(b["completion"])
    mask = torch.ones(ids.shape[0], n, device=device)

    def logp(reference: bool) -> torch.Tensor:
        with model.disable_adapter() if reference else nullcontext():
            logits = model(input_ids=ids).logits[:, -n - 1 : -1].float()
        return logits.log_softmax(-1).gather(-1, ids[:, -n:].unsqueeze(-1)).squeeze(-1)

    new = logp(False)
    with torch.no_grad():
        ref = logp(True)
    config = PPOClipConfig(aggregation="seq-mean-token-mean")
    pg = ppo_clip_loss(new, new.detach(), b["advantages"].to(device), mask, config)
    kl = aggregate(kl_estimate(new, ref, "k3"), mask, "seq-mean-token-mean")
    return (pg.loss + 0.01 * kl) * weight


def lora_weights(model: Any) -> dict[str, torch.Tensor]:
    return {n: p.detach().float().cpu().clone() for n, p in model.named_parameters() if p.requires_grad}


def sgd_step(model: Any, parts: list[tuple[dict[str, torch.Tensor], float]], device: str, world: World = World()) -> dict[str, torch.Tensor]:
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    opt.zero_grad()
    for b, w in parts:
        loss_of(model, b, device, w).backward()
    world.sum_grads(params)
    opt.step()
    return lora_weights(model)


def gap(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def check_update(device: str, small: dict[str, int]) -> dict[str, Any]:
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    b = batch(small["vocab"], 8, 32, 8)
    cpu = sgd_step(tiny_policy(**small), [(b, 1.0)], "cpu")
    dev = sgd_step(tiny_policy(**small).to(device), [(b, 1.0)], device)
    moved = gap(cpu, lora_weights(tiny_policy(**small)))
    g = gap(cpu, dev)
    return {"check": f"update on {device} vs cpu", "ok": g < 1e-4 and moved > 1e-6, "detail": f"max weight gap {g:.1e} (step moved weights by up to {moved:.1e})"}


def check_bf16(device: str, small: dict[str, int]) -> dict[str, Any]:
    b = batch(small["vocab"], 8, 32, 8)
    model = tiny_policy(**small).to(device)
    full = float(loss_of(model, b, device))
    with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
        mixed = loss_of(model, b, device)
    mixed.backward()
    grads_ok = all(p.grad is not None and bool(torch.isfinite(p.grad).all()) for p in model.parameters() if p.requires_grad)
    halves = float(loss_of(tiny_policy(**small).to(device, dtype=torch.bfloat16), b, device))
    ok = grads_ok and abs(float(mixed) - full) < 5e-2 and abs(halves - full) < 5e-2
    return {"check": f"bf16 on {device}", "ok": ok, "detail": f"loss fp32 {full:.4f}, autocast {float(mixed):.4f}, bf16 weights {halves:.4f}, grads finite {grads_ok}"}


def check_speed(device: str, big: dict[str, int], rows: int, length: int, seconds: float) -> list[dict[str, Any]]:
    out = []
    for checkpointing in (False, True):
        model = tiny_policy(**big).to(device)
        if checkpointing:
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            model.train()  # transformers recomputes only in train mode; the random Llama has no dropout
        params = [p for p in model.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=1e-5)
        b = batch(big["vocab"], rows, length - 64, 64)
        cuda = device.startswith("cuda")
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        steps, started = 0, time.perf_counter()
        while time.perf_counter() - started < seconds or steps < 2:
            opt.zero_grad()
            with torch.autocast(device_type=device.split(":")[0], dtype=torch.bfloat16):
                loss = loss_of(model, b, device)
            loss.backward()
            opt.step()
            if cuda:
                torch.cuda.synchronize()
            steps += 1
        elapsed = time.perf_counter() - started
        peak = f"{torch.cuda.max_memory_allocated() / 2**20:.0f} MiB" if cuda else "n/a on CPU"
        size = sum(p.numel() for p in model.parameters()) / 1e6
        out.append({
            "check": f"speed {size:.1f}M params{' + checkpointing' if checkpointing else ''}", "ok": True,
            "detail": f"{60 * steps / elapsed:.1f} steps/min, {steps * rows * length / elapsed:.0f} tokens/s, peak {peak} ({rows} x {length} tokens, bf16 autocast)",
        })  # fmt: skip
        del model, opt
    return out


def ddp_worker(device: str, small: dict[str, int]) -> None:
    """One rank of check 4: half the batch each, gradients summed, against one device with the whole batch."""
    world = World.from_env(device)
    b = batch(small["vocab"], 8, 32, 8)
    half = world.part(8)
    mine = {"ids": b["ids"][half.start : half.stop], "advantages": b["advantages"][half.start : half.stop], "completion": b["completion"]}
    # seq-mean-token-mean is a mean over rows: a rank's share of the batch weighs rows_r / rows
    split = sgd_step(tiny_policy(**small).to(world.device), [(mine, len(half) / 8)], world.device, world)
    if world.main:
        whole = sgd_step(tiny_policy(**small).to(world.device), [(b, 1.0)], world.device)
        g = gap(whole, split)
        print(json.dumps({"check": f"ddp {world.size} x {world.device.split(':')[0]}", "ok": g < 1e-4, "detail": f"max weight gap to one device {g:.1e}"}))
    world.close()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ddp", action="store_true", help="run as one rank of check 4 (under torchrun)")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each speed run lasts")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    small = {"hidden": 128, "layers": 2, "vocab": 512}
    if args.ddp:
        ddp_worker(device, small)
        return 0
    print(f"torch {torch.__version__}, CUDA {'available: ' + str(torch.cuda.device_count()) + ' x ' + torch.cuda.get_device_name(0) if cuda else 'not available: every check on the CPU, small'}")
    results = [check_update(device, small), check_bf16(device, small)]
    if cuda:
        results += check_speed(device, {"hidden": 768, "layers": 12, "vocab": 32000}, rows=8, length=1024, seconds=args.seconds)
    else:
        results += check_speed(device, {"hidden": 128, "layers": 2, "vocab": 512}, rows=4, length=128, seconds=min(args.seconds, 3.0))
    ranks = 2 if not cuda or torch.cuda.device_count() >= 2 else 0
    if ranks:
        import subprocess

        command = launch_command(ranks, ["--ddp"], script=__file__)
        done = subprocess.run(command, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
        lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
        results.append(json.loads(lines[-1]) if done.returncode == 0 and lines else {"check": "ddp", "ok": False, "detail": done.stderr[-500:]})
    else:
        results.append({"check": "ddp", "ok": True, "detail": "skipped: one GPU"})
    print("\n| check | result | detail |\n|---|---|---|")
    for r in results:
        print(f"| {r['check']} | {'pass' if r['ok'] else 'FAIL'} | {r['detail']} |")
    return 0 if all(r["ok"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
