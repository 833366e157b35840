"""Data parallelism: N processes, one copy of the policy each, one update per step.

The processes are started by an existing launcher, ``torchrun`` or ``accelerate launch``
(`launch_command` writes the torchrun line ``--nproc N`` runs), which sets RANK, WORLD_SIZE,
LOCAL_RANK and the rendezvous address; `World.from_env` joins the process group
torch.distributed makes from them: gloo on CPU, NCCL on CUDA (rank r on GPU LOCAL_RANK).
Nothing here shards a model: every rank holds the whole policy.

How a step of `recipes.loop` divides:

    rollouts   rank r samples its contiguous share of the step's prompts_per_step states,
               each with the seed of its index in the whole step, so the groups are those
               one process would have drawn
    gather     every rank receives every group, in the step's order (``all_gather_object``):
               advantages are taken over whole groups, and the metrics row is identical on
               every rank
    update     rank r scores its contiguous share of the step's rows; micro-batch k's loss is
               weighted by rows_k / rows of the whole step and the accumulated gradients are
               summed across ranks (``all_reduce``) before clipping and the optimizer step:

                   grad = sum_ranks sum_k (rows_k / rows) grad L_k

               which is the one-process step over every row (exactly, up to float summation
               order, for the default seq-mean-token-mean aggregation, where a micro-batch's
               loss is a mean over its rows; for token-mean and step-mean it is the
               one-process step whose micro-batches are the ranks' micro-batches)
    writes     rank 0 alone evaluates (and broadcasts the result, so every rank keeps the
               same ``best``), writes metrics rows, checkpoints and the published adapter,
               and syncs the vLLM servers; the others wait at a barrier

Seeds and states depend only on (stage, step), and a checkpoint holds no rank's private
state, so a run resumes from its last checkpoint with any number of processes.

A `World` is passed to what needs it (the loop, the learners, the updates); ``World()`` is
the one-process world, where every collective is the identity. No module-level state.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, TypeVar

import torch

__all__ = ["World", "launch_command", "launched", "drop_option"]

T = TypeVar("T")

# a rank that died leaves the others in a collective; torchrun tears the group down on the
# first failure, and this bounds the wait where nothing does (evaluation on rank 0 is the
# longest stretch a rank waits for another)
TIMEOUT = timedelta(minutes=30)


def launched() -> bool:
    """True inside a process a distributed launcher started (WORLD_SIZE is set)."""
    return "WORLD_SIZE" in os.environ


@dataclass(frozen=True)
class World:
    """Where this process stands among the run's processes (module docstring)."""

    rank: int = 0
    size: int = 1
    device: str = "cpu"  # this rank's device: "cuda:<local rank>" for a CUDA run

    @classmethod
    def from_env(cls, device: str = "cpu") -> "World":
        """Join the launcher's process group (gloo on CPU, NCCL on CUDA); ``World(device=device)`` when not launched."""
        import torch.distributed as dist

        if not launched() or int(os.environ["WORLD_SIZE"]) == 1:
            return cls(device=device)
        rank, size, local = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", 0))
        cuda = device.startswith("cuda")
        if cuda:
            device = f"cuda:{local}"
            torch.cuda.set_device(local)
        if not dist.is_initialized():
            dist.init_process_group("nccl" if cuda else "gloo", timeout=TIMEOUT)
        return cls(rank, size, device)

    @property
    def main(self) -> bool:
        """Rank 0: the one process that writes."""
        return self.rank == 0

    def part(self, n: int) -> range:
        """This rank's contiguous share of n items (shares differ by at most one; a rank may get none)."""
        return range(self.rank * n // self.size, (self.rank + 1) * n // self.size)

    def share(self, items: Sequence[T]) -> list[T]:
        part = self.part(len(items))
        return list(items[part.start : part.stop])

    # -- collectives (identities in the one-process world) ----------------------------------------
    def gather(self, obj: T) -> list[T]:
        """Every rank's ``obj``, in rank order, on every rank."""
        if self.size == 1:
            return [obj]
        import torch.distributed as dist

        out: list[Any] = [None] * self.size
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj: T) -> T:
        """Rank 0's ``obj`` on every rank."""
        if self.size == 1:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def sum_grads(self, params: Sequence[torch.nn.Parameter]) -> None:
        """grad <- sum over ranks of grad, in one flat all_reduce; a parameter without a grad
        (a rank with no rows this step) contributes zeros, so every rank takes part."""
        if self.size == 1:
            return
        import torch.distributed as dist

        grads = [p.grad if p.grad is not None else torch.zeros_like(p) for p in params]
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat)
        for p, g, summed in zip(params, grads, flat.split([g.numel() for g in grads])):
            p.grad = g.copy_(summed.view_as(g))

    def sum(self, values: dict[str, float]) -> dict[str, float]:
        """Per-key sums over ranks (a key a rank lacks counts 0 there)."""
        if self.size == 1:
            return dict(values)
        out: dict[str, float] = {}
        for part in self.gather(values):
            for key, value in part.items():
                out[key] = out.get(key, 0.0) + value
        return out

    def barrier(self) -> None:
        if self.size > 1:
            import torch.distributed as dist

            dist.barrier()

    def broadcast_parameters(self, params: Sequence[torch.nn.Parameter]) -> None:
        """Rank 0's values into every rank's parameters: the runs start from one set of weights
        whatever each rank's initialisation drew."""
        if self.size == 1:
            return
        import torch.distributed as dist

        with torch.no_grad():
            for p in params:
                dist.broadcast(p.data, src=0)

    def close(self) -> None:
        """Leave the process group together: a rank that tore its connections down while another
        still worked made gloo abort that one at exit (measured: 1 run in 6)."""
        if self.size > 1:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.barrier()
                dist.destroy_process_group()


def launch_command(nproc: int, argv: Sequence[str], *, module: str = "memsdk_training", script: str | None = None) -> list[str]:
    """The torchrun line that runs ``python -m <module> <argv>`` (or ``python <script> <argv>``)
    in ``nproc`` processes on this machine (``--standalone``: a free rendezvous port, no
    address to configure)."""
    if nproc < 1:
        raise ValueError(f"--nproc must be at least 1, got {nproc}")
    target = [script] if script is not None else ["-m", module]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", *target, *argv]


def drop_option(argv: Sequence[str], name: str) -> list[str]:
    """``argv`` without ``name VALUE`` / ``name=VALUE``: the command a launcher re-runs in each process."""
    out, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == name:
            skip = True
        elif not arg.startswith(f"{name}="):
            out.append(arg)
    return out
