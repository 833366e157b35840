"""Serve benchmark: `memsdk serve` under 1-64 concurrent HTTP clients, beside the embedded client.

Both sides run in this process on the same machine, with the same settings (real MiniLM,
embedded Qdrant, heuristic policies), each on a fresh data dir:

    embedded   C threads call one `MemoryClient` directly
    served     C threads, each with its own `MemoryClient(url=...)` (httpx, keep-alive), call
               a uvicorn server on a loopback port whose app owns one `MemoryClient`

Each of the C callers ingests its own user's turns (LoCoMo conv-26's, made unique so the
embedding cache, which both sides share, never answers) one call per turn, then asks
``--questions`` retrieves (unique too).
Reported per level: turns/s over the whole level, the per-call p50 / p95 latency, and the
served / embedded ratios. Loopback only; bounded by ``--turns`` per level.

    .venv/bin/python benchmarks/serve.py [--levels 1 4 16 64] [--turns 256] [--questions 64]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import uvicorn

from memsdk import MemoryClient
from memsdk.datasets.locomo import load_locomo
from memsdk.embedding import CachedEmbedder, SentenceTransformerEmbedder
from memsdk.server import Keyring, create_app

KEY = "bench-key"


def conv26_turns() -> list[dict[str, str]]:
    conv = next(c for c in load_locomo() if c.sample_id == "conv-26")
    return [{"speaker": t.speaker, "text": t.text} for t in conv.day_stamped_turns()]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run_level(callers: int, make: Callable[[], Any], turns: list[dict[str, str]], questions: int, tag: str, *, close: bool) -> dict[str, float]:
    """``callers`` threads, each with the client ``make()`` gives it (closed after when
    ``close``), ingesting its share of ``turns`` into its own scope, then retrieving;
    latencies per call in ms."""
    share = [turns[i::callers] for i in range(callers)]
    ingest_ms: list[float] = []
    ask_ms: list[float] = []
    lock = threading.Lock()

    def work(i: int) -> None:
        client = make()
        scope = {"user_id": f"{tag}-u{i}"}
        mine_ingest, mine_ask = [], []
        for n, turn in enumerate(share[i]):
            t0 = time.perf_counter()
            client.ingest({**turn, "text": f"{turn['text']} ({tag} {i}.{n})"}, scope=scope)
            mine_ingest.append((time.perf_counter() - t0) * 1000)
        for n in range(max(1, questions // callers)):
            t0 = time.perf_counter()
            client.retrieve(f"What did they say about {share[i][n % len(share[i])]['text'][:40]} ({tag} {i}.{n})?", scope=scope)
            mine_ask.append((time.perf_counter() - t0) * 1000)
        if close:
            client.close()
        with lock:
            ingest_ms.extend(mine_ingest)
            ask_ms.extend(mine_ask)

    started = time.perf_counter()
    with ThreadPoolExecutor(callers) as pool:
        list(pool.map(work, range(callers)))
    wall = time.perf_counter() - started
    return {
        "turns_s": len(ingest_ms) / wall, "ingest_p50": statistics.median(ingest_ms), "ingest_p95": percentile(ingest_ms, 0.95),
        "ask_p50": statistics.median(ask_ms), "ask_p95": percentile(ask_ms, 0.95),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--levels", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--turns", type=int, default=256, help="turns ingested per level (split over the callers)")
    parser.add_argument("--questions", type=int, default=64, help="retrieves per level (split over the callers)")
    args = parser.parse_args()
    turns = (conv26_turns() * 2)[: args.turns]
    work = Path(tempfile.mkdtemp(prefix="memsdk-serve-bench-"))
    embedder = CachedEmbedder(SentenceTransformerEmbedder())  # one model for both sides: the same work per text
    try:
        embedded_client = MemoryClient(data_dir=work / "embedded", embedder=embedder, policies="heuristic")
        served_client = MemoryClient(data_dir=work / "served", embedder=embedder, policies="heuristic")
        app = create_app(served_client, Keyring.from_pairs(f"{KEY}=bench"))
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        while not (server.started and server.servers):
            time.sleep(0.05)
        url = f"http://127.0.0.1:{server.servers[0].sockets[0].getsockname()[1]}"
        run_level(1, lambda: embedded_client, turns[:8], 2, "warm", close=False)  # load MiniLM and the store before timing
        rows = []
        for level in args.levels:
            embedded = run_level(level, lambda: embedded_client, turns, args.questions, f"e{level}", close=False)
            served = run_level(level, lambda: MemoryClient(url=url, api_key=KEY, data_dir=work / "local"), turns, args.questions, f"s{level}", close=True)
            rows.append((level, embedded, served))
        server.should_exit = True
        thread.join(timeout=30)
        served_client.close()
        embedded_client.close()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nmemsdk serve vs embedded: {args.turns} turns and {args.questions} retrieves per level, heuristic policies, MiniLM, loopback\n")
    print("| callers | embedded turns/s | served turns/s | ratio | ingest p50 / p95 ms, embedded | served | retrieve p50 / p95 ms, embedded | served |")
    print("|---|---|---|---|---|---|---|---|")
    for level, e, s in rows:
        print(
            f"| {level} | {e['turns_s']:.1f} | {s['turns_s']:.1f} | {s['turns_s'] / e['turns_s']:.2f}x | "
            f"{e['ingest_p50']:.1f} / {e['ingest_p95']:.1f} | {s['ingest_p50']:.1f} / {s['ingest_p95']:.1f} | "
            f"{e['ask_p50']:.1f} / {e['ask_p95']:.1f} | {s['ask_p50']:.1f} / {s['ask_p95']:.1f} |"
        )


if __name__ == "__main__":
    main()
