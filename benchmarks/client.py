"""Client benchmark: where the time of one ingest and one answer goes, at 10k memories.

The embedded client (edge store, real MiniLM) is preloaded with ``--memories`` memories in
each of two speaker scopes (random unit vectors: search cost does not depend on what the
vectors mean). Then LoCoMo conv-26 turns are ingested and its questions answered, with the
heuristic policies and with SmolLM2-135M in-process. Each call's `timings` split it into
embedding / retrieval / llm / store / log; "overhead" is everything but the LLM.

    .venv/bin/python benchmarks/client.py [--memories 10000] [--turns 40] [--llm-turns 6]

Target (issue 4): overhead under 20 ms per call at 10k memories (one embedding included).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from memsdk import MemoryClient
from memsdk.bank import codec
from memsdk.datasets.locomo import load_locomo
from memsdk.types import MemoryRecord, Scope, content_hash

STAGES = ("embedding", "retrieval", "llm", "store", "log")


def preload(client: MemoryClient, scopes: list[Scope], n: int) -> None:
    rng = np.random.default_rng(0)
    now = datetime.now(UTC)
    for scope in scopes:
        vectors = rng.standard_normal((n, client.bank.embedder.dim)).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        points = []
        for i in range(n):
            text = f"{scope.user_id} mentioned background fact {i}"
            rec = MemoryRecord(id=uuid.uuid4(), text=text, scope=scope, created_at=now, updated_at=now, version=1, content_hash=content_hash(text))
            points.append(codec.record_point(rec, vectors[i]))
        for i in range(0, n, 1024):
            client.bank.transport.upsert(points[i : i + 1024])


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q)) if values else float("nan")


def row(label: str, results: list) -> str:
    stages = {s: [r.timings.get(s, 0.0) for r in results] for s in STAGES}
    overhead = [r.latency_s - r.timings.get("llm", 0.0) for r in results]
    total = [r.latency_s for r in results]
    cells = " | ".join(f"{pct(stages[s], 50):.1f} / {pct(stages[s], 95):.1f}" for s in STAGES)
    return f"| {label} | {len(results)} | {pct(total, 50):.1f} / {pct(total, 95):.1f} | {cells} | {pct(overhead, 50):.1f} / {pct(overhead, 95):.1f} |"


def run(policies: str, n_memories: int, turns: int, questions: int, workdir: Path) -> list[str]:
    conv = next(c for c in load_locomo() if c.sample_id == "conv-26")
    scope_of = lambda t: {"user_id": t.speaker.lower(), "run_id": "bench"}  # noqa: E731
    speakers = [Scope(user_id=s.lower(), run_id="bench") for s in conv.speakers]
    with MemoryClient(data_dir=workdir / policies, policies=policies) as client:
        preload(client, speakers, n_memories)
        client.search("warm up the embedder and the engine", scope=speakers[0])
        ingested = client.ingest(conv.turns()[:turns], scope=scope_of, progress=True)
        answered = [client.answer(q.question, scope=speakers) for q in conv.questions()[:questions]]
    return [row(f"{policies} ingest", ingested), row(f"{policies} answer", answered)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=10_000, help="preloaded memories per speaker scope")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--llm-turns", type=int, default=6)
    parser.add_argument("--llm-questions", type=int, default=4)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-client-"))
    started = time.perf_counter()
    try:
        rows = run("heuristic", args.memories, args.turns, args.questions, workdir)
        rows += run("llm", args.memories, args.llm_turns, args.llm_questions, workdir)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\n{args.memories} memories per speaker scope; milliseconds p50 / p95 per call")
    print("| policies, call | n | total | " + " | ".join(STAGES) + " | overhead (all but llm) |")
    print("|---" * (4 + len(STAGES)) + "|")
    print("\n".join(rows))
    print(f"\nwall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
