"""Read benchmark (MemAgent, `MemoryClient.read`): cost per chunk and memory use as the input grows.

For each size (default 1, 4, 16, 64 chunks) a synthetic document of exactly that many chunks
is read into a fresh embedded store, and the table says: seconds per chunk, prompt tokens per
chunk (what each request costs the model: flat when the memory is bounded), the process's
peak RSS during the read (flat when nothing grows with the input), and the memory's size.
Each size runs twice in this process, with the LLM reader (SmolLM2 in-process, or a vLLM
server with ``--llm-base-url``) and with the window reader (no LLM) as the baseline; the
last column is the LLM reader's seconds per chunk over the window reader's.

    .venv/bin/python benchmarks/read.py                               # SmolLM2 in-process
    .venv/bin/python benchmarks/read.py --sizes 1 4 --chunk-tokens 256 --budget-tokens 64
    .venv/bin/python benchmarks/read.py --llm-base-url http://127.0.0.1:8000/v1
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from memsdk import LLMSpec, MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.policies.reader import CHARS_PER_TOKEN, approx_tokens, chunk_text

PEOPLE = ("Sam", "Ana", "Lee", "Kim", "Joe", "Eva", "Tom", "Ivy")
PLACES = ("Lisbon", "Oslo", "Quito", "Hanoi", "Accra", "Perth", "Lima", "Kyoto", "Tunis", "Riga")
NO_LLM = {"extractor": "heuristic", "manager": "heuristic", "answerer": "heuristic"}


def document(chunks: int, chunk_tokens: int) -> str:
    """Distinct sentences, cut to exactly ``chunks`` chunks of ``chunk_tokens``."""
    sentences = []
    i = 0
    while approx_tokens(" ".join(sentences)) < chunks * chunk_tokens:
        sentences.append(f"In {1900 + i} {PEOPLE[i % 8]} moved to {PLACES[i % 10]} street {i} and kept {i % 9 + 2} goats there.")
        i += 1
    return " ".join(chunk_text(" ".join(sentences), chunk_tokens)[:chunks])


class PeakRss:
    """The process's resident set size, sampled every 20 ms while a block runs (MiB)."""

    def __enter__(self) -> PeakRss:
        self.peak, self._stop = _rss_mib(), threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, _rss_mib())

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, _rss_mib())


def _rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@dataclass(frozen=True)
class Row:
    reader: str
    chunks: int
    s_per_chunk: float
    prompt_tokens_per_chunk: float
    peak_rss_mib: float
    memory_chars: int


def run(reader: object, chunks: int, args: argparse.Namespace, work: Path) -> Row:
    text = document(chunks, args.chunk_tokens)
    data = Path(tempfile.mkdtemp(dir=work))
    with MemoryClient(data_dir=data, embedder=HashEmbedder(64), policies={**NO_LLM, "reader": reader}, log_interactions=False) as client:
        with PeakRss() as rss:
            started = time.perf_counter()
            result = client.read(text, scope={"user_id": "bench"}, budget_tokens=args.budget_tokens, chunk_tokens=args.chunk_tokens, progress=args.progress)
            wall = time.perf_counter() - started
    shutil.rmtree(data, ignore_errors=True)
    assert result.chunks == chunks, (result.chunks, chunks)
    name = "window" if reader == "heuristic" else "llm"
    return Row(name, chunks, wall / chunks, result.prompt_tokens / chunks, rss.peak, len(result.text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 4, 16, 64])
    parser.add_argument("--chunk-tokens", type=int, default=256)
    parser.add_argument("--budget-tokens", type=int, default=64)
    parser.add_argument("--llm-base-url", help="a vLLM server (default: SmolLM2 in-process)")
    parser.add_argument("--model", default="smollm2")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    llm: object
    if args.llm_base_url:
        llm = LLMSpec(base_url=args.llm_base_url, model=args.model, fallback=False)
    else:
        from memsdk.llm import TransformersBackend

        llm = LLMSpec(backend=TransformersBackend(num_threads=1).load(), fallback=False)
    work = Path(tempfile.mkdtemp(prefix="memsdk-read-bench-"))
    rows = []
    try:
        for chunks in args.sizes:
            for reader in (llm, "heuristic"):
                rows.append(run(reader, chunks, args, work))
                print(f"  done: {rows[-1]}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"\nread: chunks of {args.chunk_tokens} tokens, memory budget {args.budget_tokens} tokens ({args.budget_tokens * CHARS_PER_TOKEN} chars)")
    print("| chunks | reader | s / chunk | prompt tokens / chunk | peak RSS MiB | memory chars | llm / window s per chunk |")
    print("|---|---|---|---|---|---|---|")
    window = {r.chunks: r for r in rows if r.reader == "window"}
    for r in rows:
        ratio = f"{r.s_per_chunk / window[r.chunks].s_per_chunk:.0f}x" if r.reader == "llm" and window[r.chunks].s_per_chunk > 0 else "-"
        print(f"| {r.chunks} | {r.reader} | {r.s_per_chunk:.3f} | {r.prompt_tokens_per_chunk:.0f} | {r.peak_rss_mib:.0f} | {r.memory_chars} | {ratio} |")


if __name__ == "__main__":
    main()
