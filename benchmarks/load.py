"""Load benchmark: N scopes ingesting at once through one `AsyncMemoryClient`.

For each N (default 1, 2, 4, 8, 16, 32, 64) a fresh embedded store gets N asyncio tasks, one
per scope, each ingesting ``--turns`` distinct synthetic turns one after another. It reports
throughput (turns/s over the wall time of the whole round), per-turn ingest latency p50 /
p95, where a turn's time goes (embedding, store = `MemoryBank.apply`, llm; p50 ms), the work
per turn (facts, tokens generated, embedder calls) and the speed-up over N=1. With
``--baseline`` every N is run twice in this process: once with the bank's writes behind one
lock (``lock_stripes=1``, the bank before per-scope locking), once with per-scope locks (the
default), and the last column is after / before.

    .venv/bin/python benchmarks/load.py                          # heuristic policies, MiniLM
    .venv/bin/python benchmarks/load.py --embedder hash --baseline
    .venv/bin/python benchmarks/load.py --scopes 1 2 --turns 5 --seed 1
    .venv/bin/python benchmarks/load.py --llm-base-url http://127.0.0.1:8000/v1 --scopes 1 2 4 --turns 2
    .venv/bin/python benchmarks/load.py --llm-base-url http://127.0.0.1:8000/v1 --llm-concurrency 8 64   # the client's cap on requests in flight

Heuristic policies isolate the store / bank path (no LLM); ``--llm-base-url`` runs the SmolLM2
policies against a vLLM server, whose batching is then what N concurrent scopes exercise.

N=1 is a fair baseline: each turn's thing, place and speaker are drawn on their own from one
generator seeded with ``--seed``, scope by scope, so every scope sees the same mix of turns
(how often a turn is close enough to a stored fact for the manager to merge it rather than add
it), and scope 0's turns, the whole of N=1, are the same turns at every N.

Embedding is timed here (`EmbedClock`), around the embedder this benchmark hands the bank it
injects: the client times only the embeddings it asks for itself and books an injected bank's
as store, so the client's own embedding stage would leave out the texts the bank writes.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from memsdk import AsyncMemoryClient
from memsdk.bank import MemoryBank
from memsdk.embedding import CachedEmbedder, Embedder, HashEmbedder
from memsdk.embedding.base import EmbedderWrapper
from memsdk.store import open_transport
from memsdk.types import Scope

STAGES = ("embedding", "store", "llm")
WORK = ("facts", "tokens out", "embedder calls")
PEOPLE = ("Sam", "Ana", "Lee", "Kim", "Joe", "Eva", "Tom", "Ivy")
THINGS = ("bike", "guitar", "garden", "kayak", "novel", "piano", "camera", "tent", "oven", "drone")
PLACES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Perth", "Lima", "Kyoto", "Tunis", "Riga")


@dataclass
class Spent:
    """What the embedder cost one timed call (`measured`): seconds and calls into the model."""

    seconds: float = 0.0
    calls: int = 0


# a context variable, not a thread-local: the async client embeds in asyncio.to_thread workers,
# which run in a copy of the calling task's context, so each concurrent turn finds its own Spent
_spent: ContextVar[Spent | None] = ContextVar("embedder_spent", default=None)


class EmbedClock(EmbedderWrapper):
    """The embedder as this benchmark times it, whoever calls it: the client's queries, an
    injected bank's writes (the client books these as store) or a policy's own embeddings (the
    client books these as llm). Cache hits in front of it cost nothing and are not counted."""

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        start = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            if (spent := _spent.get()) is not None:
                spent.seconds += time.perf_counter() - start
                spent.calls += 1


@contextmanager
def measured() -> Iterator[Spent]:
    """What `EmbedClock` spends inside the block, in this task or thread and what it starts."""
    spent = Spent()
    token = _spent.set(spent)
    try:
        yield spent
    finally:
        _spent.reset(token)


def ms(values: Sequence[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q)) if len(values) else float("nan")


def spread(values: Sequence[float]) -> str:
    """p50 / p95 in ms, the cell every latency in these benchmarks is shown as."""
    return f"{ms(values, 50):.1f} / {ms(values, 95):.1f}"


def draw_turns(scopes: int, turns: int, seed: int) -> list[list[dict[str, str]]]:
    """Each scope's turns, each drawn on its own; the serial keeps every text distinct (a
    repeated text would be a cache hit) and, zero-padded, the same length at every N."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(scopes):
        drawn = []
        for i in range(turns):
            who, thing, place = (str(rng.choice(options)) for options in (PEOPLE, THINGS, PLACES))
            drawn.append({"speaker": who, "text": f"I bought a {thing} in {place} for trip {k * turns + i:05d} and I plan to use it every week."})
        out.append(drawn)
    return out


@dataclass(frozen=True)
class Round:
    scopes: int
    turns: int
    wall_s: float
    latencies_s: list[float]
    stages_s: dict[str, list[float]]
    #: per turn: facts extracted, tokens generated (the manager decides each fact in turn, so a
    #: turn's LLM time grows with both) and calls into the embedding model
    work: dict[str, list[float]]

    @property
    def throughput(self) -> float:
        return self.scopes * self.turns / self.wall_s


async def ingest_scope(client: AsyncMemoryClient, scope: Scope, turns: list[dict[str, str]], done: tqdm[Any]) -> list[tuple[float, dict[str, float]]]:
    out = []
    for turn in turns:
        start = time.perf_counter()
        with measured() as spent:
            result = await client.ingest(turn, scope=scope)
        latency, booked = time.perf_counter() - start, result.timings
        # what the clock saw beyond the client's embedding stage is the bank's (no policy run
        # here embeds), which the client booked as store
        unseen = max(0.0, spent.seconds - booked.get("embedding", 0.0))
        stages = {**booked, "embedding": spent.seconds, "store": booked.get("store", 0.0) - unseen}
        out.append((latency, {**stages, "facts": len(result.facts), "tokens out": result.completion_tokens, "embedder calls": spent.calls}))
        done.update()
    return out


async def run_round(embedder: Embedder, workdir: Path, turns: list[list[dict[str, str]]], lock_stripes: int | None, llm_base_url: str | None, llm_concurrency: int = 8) -> Round:
    kwargs: dict[str, Any] = {} if lock_stripes is None else {"lock_stripes": lock_stripes}
    # behind a cache of its own, fresh each round, as the bank a client makes for itself is:
    # without one the bank would embed again each fact the client just embedded to find its
    # related memories, a cost the default client does not pay
    bank = MemoryBank(open_transport(workdir / "store", dim=embedder.dim), CachedEmbedder(EmbedClock(embedder)), **kwargs)
    policies = "llm" if llm_base_url else "heuristic"
    n = len(turns)
    try:
        async with AsyncMemoryClient(data_dir=workdir, bank=bank, policies=policies, llm_base_url=llm_base_url, llm_max_concurrency=llm_concurrency, fallback_to_heuristic=False) as client:
            await client.ingest({"speaker": "Warm", "text": "I warm up the embedder, the engine and the server."}, scope={"user_id": "warm-up"})
            scopes = [Scope(user_id=f"user-{n}-{k}", run_id="load") for k in range(n)]
            with tqdm(total=sum(map(len, turns)), desc=f"N={n}", unit="turn", leave=False) as done:
                start = time.perf_counter()
                per_scope = await asyncio.gather(*(ingest_scope(client, s, t, done) for s, t in zip(scopes, turns)))
                wall = time.perf_counter() - start
    finally:
        bank.close()
    calls = [c for calls in per_scope for c in calls]
    return Round(n, len(turns[0]), wall, [lat for lat, _ in calls], {s: [t.get(s, 0.0) for _, t in calls] for s in STAGES}, {w: [t[w] for _, t in calls] for w in WORK})


def row(r: Round, label: str, single: Round, before: Round | None, compared: bool) -> str:
    stages = " | ".join(f"{ms(r.stages_s[s], 50):.1f}" for s in STAGES)
    work = " | ".join(f"{np.mean(r.work[w]):.1f} / {np.max(r.work[w]):.0f}" for w in WORK)
    ratio = "" if not compared else " | –" if before is None else f" | {r.throughput / before.throughput:.2f}x"
    return f"| {label} | {r.scopes} | {r.scopes * r.turns} | {r.throughput:.1f} | {spread(r.latencies_s)} | {stages} | {work} | {r.throughput / single.throughput:.2f}x{ratio} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scopes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="concurrent scopes per round")
    parser.add_argument("--turns", type=int, default=6, help="turns each scope ingests")
    parser.add_argument("--seed", type=int, default=0, help="seeds the one generator every turn is drawn from")
    parser.add_argument("--policies", choices=["heuristic"], default="heuristic", help="without --llm-base-url: no LLM, the store/bank path alone")
    parser.add_argument("--llm-base-url", help="run the SmolLM2 policies on this OpenAI-compatible (vLLM) server")
    parser.add_argument("--llm-concurrency", type=int, nargs="+", default=[8], help="with --llm-base-url: the client's cap on requests in flight (ClientConfig.llm_max_concurrency); several values: a sweep")
    parser.add_argument("--embedder", choices=["minilm", "hash"], default="minilm", help="hash: no model, isolates locking and the engine")
    parser.add_argument("--baseline", action="store_true", help="also run each N with one bank-wide write lock (lock_stripes=1)")
    args = parser.parse_args()
    if args.embedder == "hash":
        embedder: Embedder = HashEmbedder(384)
    else:
        from memsdk.embedding.minilm import SentenceTransformerEmbedder

        embedder = SentenceTransformerEmbedder()
    # (label, lock stripes, LLM requests in flight); several caps only matter with a server
    caps = args.llm_concurrency if args.llm_base_url else [8]
    variants: list[tuple[str, int | None, int]] = [("one lock", 1, caps[0])] if args.baseline else []
    variants += [("per scope" if len(caps) == 1 else f"per scope, {c} in flight", None, c) for c in caps]
    root = Path(tempfile.mkdtemp(prefix="bench-load-"))
    started = time.perf_counter()
    rounds: dict[str, list[Round]] = {label: [] for label, _, _ in variants}
    try:
        for n in args.scopes:
            turns = draw_turns(n, args.turns, args.seed)
            for label, stripes, cap in variants:
                workdir = root / f"{label.replace(' ', '-').replace(',', '')}-{n}"
                rounds[label].append(asyncio.run(run_round(embedder, workdir, turns, stripes, args.llm_base_url, cap)))
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    policies = "SmolLM2 on " + args.llm_base_url if args.llm_base_url else "heuristic"
    print(f"\n{policies} policies, {args.embedder} embedder, {args.turns} turns per scope (seed {args.seed}); latency and stages in ms per turn")
    header = "| bank writes | N scopes | turns | turns/s | latency p50 / p95 | " + " | ".join(f"{s} p50" for s in STAGES) + " | " + " | ".join(f"{w} mean / max" for w in WORK) + " | vs N=1 |"
    print(header + (" after / before |" if args.baseline else ""))
    print("|---" * (header.count("|") - 1 + args.baseline) + "|")
    for label, _, _ in variants:
        for i, r in enumerate(rounds[label]):
            before = rounds["one lock"][i] if args.baseline and label != "one lock" else None
            print(row(r, label, rounds[label][0], before, args.baseline))
    print(f"\nwall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
