"""Load benchmark: N scopes ingesting at once through one `AsyncMemoryClient`.

For each N (default 1, 2, 4, 8, 16, 32, 64) a fresh embedded store gets N asyncio tasks, one
per scope, each ingesting ``--turns`` distinct synthetic turns one after another. It reports
throughput (turns/s over the wall time of the whole round), per-turn ingest latency p50 /
p95, where a turn's time goes (embedding, store = `MemoryBank.apply`, llm; p50 ms), and the
speed-up over N=1. With ``--baseline`` every N is run twice in this process: once with the
bank's writes behind one lock (``lock_stripes=1``, the bank before per-scope locking), once
with per-scope locks (the default), and the last column is after / before.

    .venv/bin/python benchmarks/load.py                          # heuristic policies, MiniLM
    .venv/bin/python benchmarks/load.py --embedder hash --baseline
    .venv/bin/python benchmarks/load.py --llm-base-url http://127.0.0.1:8000/v1 --scopes 1 2 4 --turns 2
    .venv/bin/python benchmarks/load.py --llm-base-url http://127.0.0.1:8000/v1 --llm-concurrency 8 64   # the client's cap on requests in flight

Heuristic policies isolate the store / bank path (no LLM); ``--llm-base-url`` runs the SmolLM2
policies against a vLLM server, whose batching is then what N concurrent scopes exercise.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from memsdk import AsyncMemoryClient
from memsdk.bank import MemoryBank
from memsdk.embedding import Embedder, HashEmbedder
from memsdk.store import open_transport
from memsdk.types import Scope

STAGES = ("embedding", "store", "llm")
WORK = ("facts", "tokens out")
PEOPLE = ("Sam", "Ana", "Lee", "Kim", "Joe", "Eva", "Tom", "Ivy")
THINGS = ("bike", "guitar", "garden", "kayak", "novel", "piano", "camera", "tent", "oven", "drone")
PLACES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Perth", "Lima", "Kyoto", "Tunis", "Riga")


def turn(scope: int, i: int) -> dict[str, str]:
    """A distinct first-person sentence: scopes and turns never repeat one another's facts."""
    who = PEOPLE[scope % len(PEOPLE)]
    thing, place = THINGS[i % len(THINGS)], PLACES[(i // len(THINGS) + scope) % len(PLACES)]
    return {"speaker": who, "text": f"I bought a {thing} in {place} for trip {scope}-{i} and I plan to use it every week."}


@dataclass(frozen=True)
class Round:
    scopes: int
    turns: int
    wall_s: float
    latencies_s: list[float]
    stages_s: dict[str, list[float]]
    #: per turn: facts extracted and tokens generated (the manager decides each fact in turn,
    #: so a turn's LLM time grows with both)
    work: dict[str, list[float]]

    @property
    def throughput(self) -> float:
        return self.scopes * self.turns / self.wall_s


def ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q)) if values else float("nan")


async def ingest_scope(client: AsyncMemoryClient, scope: Scope, index: int, turns: int, done: tqdm) -> list[tuple[float, dict[str, float]]]:
    out = []
    for i in range(turns):
        start = time.perf_counter()
        result = await client.ingest(turn(index, i), scope=scope)
        out.append((time.perf_counter() - start, {**result.timings, "facts": len(result.facts), "tokens out": result.completion_tokens}))
        done.update()
    return out


async def run_round(embedder: Embedder, workdir: Path, n: int, turns: int, lock_stripes: int | None, llm_base_url: str | None, llm_concurrency: int = 8) -> Round:
    kwargs = {} if lock_stripes is None else {"lock_stripes": lock_stripes}
    bank = MemoryBank(open_transport(workdir / "store", dim=embedder.dim), embedder, **kwargs)
    policies = "llm" if llm_base_url else "heuristic"
    try:
        async with AsyncMemoryClient(data_dir=workdir, bank=bank, policies=policies, llm_base_url=llm_base_url, llm_max_concurrency=llm_concurrency, fallback_to_heuristic=False) as client:
            await client.ingest({"speaker": "Warm", "text": "I warm up the embedder, the engine and the server."}, scope={"user_id": "warm-up"})
            scopes = [Scope(user_id=f"user-{n}-{k}", run_id="load") for k in range(n)]
            with tqdm(total=n * turns, desc=f"N={n}", unit="turn", leave=False) as done:
                start = time.perf_counter()
                per_scope = await asyncio.gather(*(ingest_scope(client, s, k, turns, done) for k, s in enumerate(scopes)))
                wall = time.perf_counter() - start
    finally:
        bank.close()
    calls = [c for calls in per_scope for c in calls]
    return Round(n, turns, wall, [lat for lat, _ in calls], {s: [t.get(s, 0.0) for _, t in calls] for s in STAGES}, {w: [t[w] for _, t in calls] for w in WORK})


def row(r: Round, label: str, single: Round, before: Round | None, compared: bool) -> str:
    stages = " | ".join(f"{ms(r.stages_s[s], 50):.1f}" for s in STAGES)
    work = " | ".join(f"{np.mean(r.work[w]):.1f} / {np.max(r.work[w]):.0f}" for w in WORK)
    ratio = "" if not compared else " | –" if before is None else f" | {r.throughput / before.throughput:.2f}x"
    return f"| {label} | {r.scopes} | {r.scopes * r.turns} | {r.throughput:.1f} | {ms(r.latencies_s, 50):.0f} / {ms(r.latencies_s, 95):.0f} | {stages} | {work} | {r.throughput / single.throughput:.2f}x{ratio} |"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--scopes", type=int, nargs="+", default=[1, 2, 4, 8, 16, 32, 64], help="concurrent scopes per round")
    parser.add_argument("--turns", type=int, default=6, help="turns each scope ingests")
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
            for label, stripes, cap in variants:
                workdir = root / f"{label.replace(' ', '-').replace(',', '')}-{n}"
                rounds[label].append(asyncio.run(run_round(embedder, workdir, n, args.turns, stripes, args.llm_base_url, cap)))
                shutil.rmtree(workdir, ignore_errors=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    policies = "SmolLM2 on " + args.llm_base_url if args.llm_base_url else "heuristic"
    print(f"\n{policies} policies, {args.embedder} embedder, {args.turns} turns per scope; latency and stages in ms per turn")
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
