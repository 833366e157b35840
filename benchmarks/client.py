"""Client benchmark: where the time of one ingest and one answer goes, and how it compares
with one embedding of the same text.

Two tables (``--tables``; both by default):

``stages``: for each ``--sizes`` (default 1k, 10k, 100k) a fresh embedded store gets that many
memories in ONE scope, then ``--stage-turns`` LoCoMo conv-26 turns are ingested into that
scope one call per turn and ``--stage-questions`` of its questions are retrieved for
(`client.retrieve`: query embedding, dense + BM25 search of each tier, fusion; no LLM). Right
before each call, in the same process, its turn's text or its question is embedded once with
the same embedder: the baseline both rows are divided by, measured beside the calls it divides. Rows: per
``--stage-policies`` (heuristic, and the client's default policies, whose manager is the trained
pair classifier), ingest and retrieve, with the total p50 / p95, the p50 of each stage the
client books (`IngestResult.timings`; the default manager's own embeddings are booked as llm),
and the embedder's time and calls per call as this benchmark's clock counts them.

With ``--alone`` each row is followed by the same calls on a fresh copy of the store, every
vector they need remembered from a first pass ("vectors remembered"): the pipeline's own cost,
with no model call between two of its calls, divided by the same one embedding.

``calls`` (the earlier table): ``--memories`` memories in each of two speaker scopes, conv-26
turns ingested and questions answered with the heuristic policies and with SmolLM2-135M
in-process; "overhead" is everything but the LLM.

The preloaded memories have random unit vectors (dense search cost does not depend on what
they mean) and the texts of the other LoCoMo conversations' turns, BM25-indexed as the bank
indexes what it writes, so the sparse half of a hybrid search has real postings to walk.

    .venv/bin/python benchmarks/client.py                                          # both tables
    .venv/bin/python benchmarks/client.py --tables stages --sizes 1000 10000 --stage-turns 30
    .venv/bin/python benchmarks/client.py --tables stages --alone --stage-policies heuristic
    .venv/bin/python benchmarks/client.py --tables calls [--memories 10000] [--turns 40] [--llm-turns 6]

Targets: an ingest (heuristic policies, one turn per call) p50 at most 1.3x one embedding of
the turn's text at 10k and 100k memories in the scope, and a retrieve at most 1.3x one
embedding of the question at 100k (issue: ingest speed); the calls table's overhead under
20 ms per call at 10k memories, one embedding included (issue 4).
"""

from __future__ import annotations

import argparse
import importlib.util
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from memsdk import MemoryClient
from memsdk.bank import codec
from memsdk.config import ClientConfig
from memsdk.datasets.locomo import load_locomo
from memsdk.embedding import CachedEmbedder, Embedder
from memsdk.embedding.bm25 import Bm25Encoder
from memsdk.store import StoreTransport
from memsdk.store.edge import EdgeTransport
from memsdk.types import MemoryRecord, Scope, Turn, content_hash

STAGES = ("embedding", "retrieval", "llm", "store", "log")
CONVERSATION = "conv-26"
#: the one scope of the stage table: preloaded, then ingested into and retrieved from
SCOPE = Scope(user_id="bench", run_id="stages")
#: the stage table's target (issue: ingest speed): a call's p50 at most this many times one
#: embedding's p50
TARGET_RATIO = 1.3


def _sibling(name: str) -> Any:
    """benchmarks/<name>.py as a module: load.py's embedder clock and percentile cells, so
    both benchmarks time the embedder the same way."""
    spec = importlib.util.spec_from_file_location(f"{name}_benchmark", Path(__file__).with_name(f"{name}.py"))
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


load: Any = _sibling("load")
ms, spread = load.ms, load.spread


def background_texts() -> list[str]:
    """What preloaded memories say: the turns of every LoCoMo conversation but the one
    ingested, so BM25 sees a conversation's vocabulary without matching its questions' turns."""
    return [f"{t.speaker}: {t.text}" for c in load_locomo() if c.sample_id != CONVERSATION for t in c.turns()]


def preload(transport: StoreTransport, scopes: list[Scope], n: int, texts: Sequence[str]) -> None:
    """``n`` memories per scope written straight to the store (no embedding model: far faster
    than ingesting them, and a search cannot tell the difference), then its HNSW index built:
    in production the store builds it in the background as it grows, and a search timed
    while a build runs would time the build."""
    rng = np.random.default_rng(0)
    now = datetime.now(UTC)
    bm25, batch = Bm25Encoder(), 1024
    with tqdm(total=n * len(scopes), desc="preload", unit="memory", leave=False) as bar:
        for scope in scopes:
            for start in range(0, n, batch):
                vectors = rng.standard_normal((min(batch, n - start), transport.dim)).astype(np.float32)
                vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
                points = []
                for i, vector in enumerate(vectors, start):
                    # numbered: texts repeat once n passes their count, and a record's hash is its text's
                    text = f"{texts[i % len(texts)]} ({i})"
                    rec = MemoryRecord(id=uuid.uuid4(), text=text, scope=scope, created_at=now, updated_at=now, version=1, content_hash=content_hash(text))
                    points.append(codec.record_point(rec, vector, bm25.document(rec.index_text())))
                transport.upsert(points)
                bar.update(len(points))
    if isinstance(transport, EdgeTransport):
        transport.optimize()


# -- the stage table ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """One call as the app sees it: wall seconds, the stages the client booked, and what the
    embedding model cost inside it by this benchmark's clock."""

    total_s: float
    stages: dict[str, float]
    embedder_s: float
    embedder_calls: int


def timed(call: Callable[[], Any]) -> Timed:
    with load.measured() as spent:
        start = time.perf_counter()
        result = call()
        total = time.perf_counter() - start
    # a retrieve books no stages: its time is the clock's embedding and the search around it
    stages = getattr(result, "timings", None) or {"embedding": spent.seconds, "retrieval": total - spent.seconds}
    return Timed(total, stages, spent.seconds, spent.calls)


def one_embedding(embedder: Embedder, text: str) -> float:
    """Seconds of one embedder call on ``text``: the least a call that embeds it can cost."""
    start = time.perf_counter()
    embedder.embed([text])
    return time.perf_counter() - start


def paired(calls: Sequence[tuple[str, Callable[[], Any]]], embedder: Embedder, desc: str) -> tuple[list[Timed], list[float]]:
    """Each (text, call) timed: the call right after one embedding of its text. Paired, not in
    two phases: this machine's pace drifts by a third within minutes (a shared VM), and a
    baseline measured after all the calls divided one stretch of it by another."""
    timings, baseline = [], []
    for text, call in tqdm(calls, desc=desc, unit="call", leave=False):
        baseline.append(one_embedding(embedder, text))
        timings.append(timed(call))
    return timings, baseline


def stage_row(policies: str, size: int, call: str, timings: list[Timed], baseline: list[float]) -> str:
    total = [t.total_s for t in timings]
    stages = " | ".join(f"{ms([t.stages[s] for t in timings], 50):.1f}" if s in timings[0].stages else "–" for s in STAGES)
    embedder = f"{ms([t.embedder_s for t in timings], 50):.1f} / {np.mean([t.embedder_calls for t in timings]):.1f}"
    ratio = ms(total, 50) / ms(baseline, 50)
    return f"| {policies} | {size:,} | {call} | {len(timings)} | {spread(total)} | {stages} | {embedder} | {ms(baseline, 50):.1f} | {ratio:.2f}x |"


def policy_label(client: MemoryClient, policies: str) -> str:
    served = client.policies
    return f"{policies} ({served['extractor'].version} / {served['manager'].version})"


def preloaded(size: int, dim: int, background: list[str], workdir: Path) -> Path:
    """A client data folder whose store holds ``size`` memories in `SCOPE`, made once per size
    and copied for each policies run (a 100k preload takes minutes, a copy seconds)."""
    folder = workdir / f"preloaded-{size}"
    # no background build per 20k written: one build at the end (`preload`)
    transport = EdgeTransport(folder / "store", dim=dim, index_after=None)
    try:
        preload(transport, [SCOPE], size, background)
    finally:
        transport.close()
    return folder


#: --stage-policies beside "default" and "heuristic": the default with its manager's pair head
#: alone (no cross-encoder), what the default's cost is weighed against
STAGE_POLICIES: dict[str, Any] = {"pairs-head": {"extractor": "heuristic", "manager": "pairs-head", "answerer": "heuristic"}}


@contextmanager
def stage_client(policies: str, size: int, embedder: Embedder, template: Path) -> Iterator[MemoryClient]:
    """A client on a copy of ``template`` (``size`` memories in `SCOPE`), warmed up in a scope
    of its own, so the measured one holds exactly ``size`` memories before its turns.
    ``embedder`` should have a `load.EmbedClock` in front of the model: the client's stages
    leave out what a policy embeds itself (the default manager), the clock counts every call
    into the model."""
    data_dir = shutil.copytree(template, template.with_name(f"{policies}-{size}"))
    chosen = {} if policies == "default" else {"policies": STAGE_POLICIES.get(policies, policies)}
    try:
        with MemoryClient(ClientConfig.from_env(data_dir=data_dir, **chosen), embedder=embedder) as client:
            warm = Scope(user_id="warm-up", run_id="warm-up")
            client.ingest({"speaker": "Warm", "text": "I warm up the embedder, the engine and the policies."}, scope=warm)
            client.retrieve("What warms up the retrieval path?", scope=warm)
            yield client
    finally:
        shutil.rmtree(data_dir, ignore_errors=True)


def run_stages(policies: str, size: int, embedder: Embedder, turns: list[Turn], questions: list[str], template: Path, *, alone: bool) -> list[str]:
    with stage_client(policies, size, load.EmbedClock(embedder), template) as client:
        ingested, per_turn = paired([(t.text, partial(client.ingest, t, scope=SCOPE)) for t in turns], embedder, f"{policies} {size:,} ingest")
        retrieved, per_question = paired([(q, partial(client.retrieve, q, scope=SCOPE)) for q in questions], embedder, f"{policies} {size:,} retrieve")
        label = policy_label(client, policies)
    rows = [stage_row(label, size, "ingest", ingested, per_turn), stage_row(label, size, "retrieve", retrieved, per_question)]
    if alone:
        # the same calls twice more on fresh copies, the second pass finding every vector the
        # first one embedded: what the pipeline costs with no model call between two of its
        # calls (the clock behind the cache counts only misses)
        remembered = CachedEmbedder(load.EmbedClock(embedder), size=100_000)
        for _ in ("fill", "measure"):
            with stage_client(policies, size, remembered, template) as client:
                ingested = [timed(partial(client.ingest, t, scope=SCOPE)) for t in turns]
                retrieved = [timed(partial(client.retrieve, q, scope=SCOPE)) for q in questions]
        label = f"{label}, vectors remembered"
        rows += [stage_row(label, size, "ingest", ingested, per_turn), stage_row(label, size, "retrieve", retrieved, per_question)]
    return rows


def stage_table(args: argparse.Namespace, workdir: Path) -> list[str]:
    from memsdk.embedding.minilm import SentenceTransformerEmbedder

    conv = next(c for c in load_locomo() if c.sample_id == CONVERSATION)
    turns, questions = conv.turns()[: args.stage_turns], [q.question for q in conv.questions()[: args.stage_questions]]
    background = background_texts()
    # the embedder the client would make for itself, made here so the baseline calls the same one
    embedder = SentenceTransformerEmbedder(threads=ClientConfig.from_env(data_dir=workdir).embedder_threads)
    rows = []
    for size in args.sizes:
        folder = preloaded(size, embedder.dim, background, workdir)
        for policies in args.stage_policies:
            rows += run_stages(policies, size, embedder, turns, questions, folder, alone=args.alone)
        shutil.rmtree(folder, ignore_errors=True)
    header = "| policies (extractor / manager) | memories in the scope | call | n | total p50 / p95 | " + " | ".join(f"{s} p50" for s in STAGES)
    header += " | embedder p50 ms / calls per call | one embedding p50 | total p50 / one embedding |"
    return [
        f"\n{CONVERSATION} turns ingested one per call, questions retrieved (no LLM), into one scope; milliseconds",
        header,
        "|---" * (header.count("|") - 1) + "|",
        *rows,
        f"\ntargets: ingest (heuristic) <= {TARGET_RATIO}x at 10k and 100k; retrieve <= {TARGET_RATIO}x at 100k",
    ]


# -- the calls table (issue 4) -----------------------------------------------------------------


def calls_row(label: str, results: list[Any]) -> str:
    stages = " | ".join(spread([r.timings.get(s, 0.0) for r in results]) for s in STAGES)
    overhead = [r.latency_s - r.timings.get("llm", 0.0) for r in results]
    return f"| {label} | {len(results)} | {spread([r.latency_s for r in results])} | {stages} | {spread(overhead)} |"


def run_calls(policies: str, n_memories: int, turns: int, questions: int, background: list[str], workdir: Path) -> list[str]:
    conv = next(c for c in load_locomo() if c.sample_id == CONVERSATION)
    scope_of = lambda t: {"user_id": t.speaker.lower(), "run_id": "bench"}  # noqa: E731
    speakers = [Scope(user_id=s.lower(), run_id="bench") for s in conv.speakers]
    with MemoryClient(data_dir=workdir / policies, policies=policies) as client:
        preload(client.bank.transport, speakers, n_memories, background)
        client.search("warm up the embedder and the engine", scope=speakers[0])
        ingested = client.ingest(conv.turns()[:turns], scope=scope_of, progress=True)
        answered = [client.answer(q.question, scope=speakers) for q in conv.questions()[:questions]]
    return [calls_row(f"{policies} ingest", ingested), calls_row(f"{policies} answer", answered)]


def calls_table(args: argparse.Namespace, workdir: Path) -> list[str]:
    background = background_texts()
    rows = run_calls("heuristic", args.memories, args.turns, args.questions, background, workdir)
    rows += run_calls("llm", args.memories, args.llm_turns, args.llm_questions, background, workdir)
    return [
        f"\n{args.memories} memories per speaker scope; milliseconds p50 / p95 per call",
        "| policies, call | n | total | " + " | ".join(STAGES) + " | overhead (all but llm) |",
        "|---" * (4 + len(STAGES)) + "|",
        *rows,
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", nargs="+", choices=["stages", "calls"], default=["stages", "calls"])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000], help="stages: memories preloaded in the one scope")
    parser.add_argument("--stage-turns", type=int, default=50, help="stages: turns ingested, one per call")
    parser.add_argument("--stage-questions", type=int, default=30, help="stages: questions retrieved for")
    parser.add_argument("--stage-policies", nargs="+", choices=["heuristic", "default", *STAGE_POLICIES], default=["heuristic", "default"], help="stages: 'default' is MemoryClient()'s")
    parser.add_argument("--alone", action="store_true", help="stages: also each row's calls with every vector remembered (no model call in the loop), divided by the same one embedding")
    parser.add_argument("--memories", type=int, default=10_000, help="calls: preloaded memories per speaker scope")
    parser.add_argument("--turns", type=int, default=40)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--llm-turns", type=int, default=6)
    parser.add_argument("--llm-questions", type=int, default=4)
    args = parser.parse_args()
    workdir = Path(tempfile.mkdtemp(prefix="bench-client-"))
    started = time.perf_counter()
    try:
        # each table printed as it is done: the calls table can take minutes more
        for name, table in (("stages", stage_table), ("calls", calls_table)):
            if name in args.tables:
                print("\n".join(table(args, workdir)), flush=True)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    print(f"\nwall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
