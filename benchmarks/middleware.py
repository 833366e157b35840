"""Middleware benchmark: what `MemsdkMiddleware` adds to an agent's reply latency.

Five ``create_agent`` agents with the same fake chat model (LangChain's
``GenericFakeChatModel`` replaying Leo's lines of examples/data/demo_conversation.json) and
the embedded client (real MiniLM, embedded Qdrant, heuristic policies, or SmolLM2 with
``--policies llm``). Maya's lines are the user's; every line and reply is made unique, so
the client's embedding cache never answers for MiniLM. Each agent answers ``--replies``
lines, twice: with a model that answers at once (every millisecond is the agent's and
memory's), and with a model that waits ``--model-latency-ms`` like a served LLM. The first
four take turns line by line, so noise on the machine hits them alike:

    none                  no middleware
    recall only           MemsdkMiddleware with after_agent turned off: the read path alone
    memsdk, user pauses   MemsdkMiddleware: recall, then the turns committed to the outbox;
                          the worker has drained the queue before the next line (untimed
                          ``flush`` between lines: a person takes longer than that to type)
    inline ingest         recall, then client.ingest inside after_agent: the reply waits for
                          the write (what mem0 #4479 / #2813 report)
    memsdk, back-to-back  alone afterwards, lines sent without a pause: the worker ingests the
                          earlier turns while the next replies are served, and competes with
                          them for the CPU and the GIL

The memory-write latency a reply pays is "memsdk, user pauses" minus "recall only" (one
fsync'd sqlite commit); "inline ingest" minus "recall only" is what writing in line costs.

    .venv/bin/python benchmarks/middleware.py [--replies 60] [--model-latency-ms 200] [--policies heuristic|llm]
"""

from __future__ import annotations

import argparse
import itertools
import shutil
import statistics
import tempfile
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import numpy as np
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import HumanMessage

from memsdk import MemoryClient
from memsdk.datasets.locomo import load_locomo
from memsdk_adapters.langchain.middleware import MemsdkMiddleware

DEMO = Path(__file__).resolve().parents[1] / "examples" / "data" / "demo_conversation.json"
USER = {"user_id": "maya", "run_id": "bench"}
WARMUP = 3


class FakeModel(GenericFakeChatModel):
    """The fake chat model, optionally waiting ``latency_s`` (off the GIL, like a network call)."""

    latency_s: float = 0.0

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        time.sleep(self.latency_s)
        return super()._generate(*args, **kwargs)


class RecallOnly(MemsdkMiddleware):
    def after_agent(self, state: Any, runtime: Any) -> None:
        return None


class InlineIngest(MemsdkMiddleware):
    def after_agent(self, state: Any, runtime: Any) -> None:
        scope, turns = self._turns(state, runtime)
        for turn in turns:
            self.client.ingest(turn, scope=scope, progress=False)


def ms(values: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(values) * 1000, q))


def unique(texts: list[str], n: int, tag: str) -> list[str]:
    return [f"{text} ({tag}{i})" for i, text in zip(range(n), itertools.cycle(texts))]


def run(client: MemoryClient, said: dict[str, list[str]], replies: int, latency_s: float, workdir: Path, tag: str) -> tuple[dict[str, list[float]], str]:
    """Seconds per ``invoke`` for each agent, the first `WARMUP` left out.

    The four agents that leave nothing running in the background take turns line by line
    (so a noisy neighbour on the machine hits them alike); before each timed call the
    memsdk outbox is drained, untimed. "memsdk, back-to-back" runs alone afterwards."""
    maya, leo = said
    n = WARMUP + replies
    lines = unique(said[maya], n, f"{tag}-")
    model = lambda name: FakeModel(messages=iter(unique(said[leo], n, f"{tag}-{name}-")), latency_s=latency_s)  # noqa: E731
    with ExitStack() as stack:
        memory = {kind: stack.enter_context(kind(client, outbox_path=workdir / f"outbox-{tag}-{kind.__name__}.sqlite3")) for kind in (RecallOnly, MemsdkMiddleware, InlineIngest)}
        agents = {
            "none": create_agent(model("none")),
            "recall only": create_agent(model("recall"), middleware=[memory[RecallOnly]]),
            "memsdk, user pauses": create_agent(model("memsdk"), middleware=[memory[MemsdkMiddleware]]),
            "inline ingest": create_agent(model("inline"), middleware=[memory[InlineIngest]]),
        }
        took: dict[str, list[float]] = {name: [] for name in agents}
        for i, line in enumerate(lines):
            for name, agent in agents.items():
                memory[MemsdkMiddleware].flush()  # the person typing the next line
                started = time.perf_counter()
                agent.invoke({"messages": [HumanMessage(f"{line} {name}")]}, context=USER)
                took[name].append(time.perf_counter() - started)
        back_to_back = create_agent(model("back-to-back"), middleware=[memory[MemsdkMiddleware]])
        took["memsdk, back-to-back"] = []
        for line in lines:
            started = time.perf_counter()
            back_to_back.invoke({"messages": [HumanMessage(f"{line} back-to-back")]}, context=USER)
            took["memsdk, back-to-back"].append(time.perf_counter() - started)
        queued, drain_started = memory[MemsdkMiddleware].outbox.pending, time.perf_counter()
        assert memory[MemsdkMiddleware].flush(3600), "the outbox did not drain"
        note = f"back-to-back: {queued} turns still queued when the last reply returned, drained in {time.perf_counter() - drain_started:.2f} s"
    return {name: t[WARMUP:] for name, t in took.items()}, note


def table(title: str, rows: dict[str, list[float]], note: str) -> None:
    base, recall = ms(rows["none"], 50), ms(rows["recall only"], 50)
    added = lambda name: ms(rows[name], 50) - recall  # noqa: E731
    print(f"\n{title}")
    print("| agent | p50 | p95 | mean | p50 added vs none | p50 ratio vs none |")
    print("|---|---|---|---|---|---|")
    for name, took in rows.items():
        p50 = ms(took, 50)
        print(f"| {name} | {p50:.1f} | {ms(took, 95):.1f} | {statistics.fmean(took) * 1000:.1f} | {p50 - base:+.1f} | {p50 / base:.2f}x |")
    print(f"memory-write latency on the reply, p50 over recall only: memsdk {added('memsdk, user pauses'):+.1f} ms "
          f"(back-to-back {added('memsdk, back-to-back'):+.1f} ms), inline ingest {added('inline ingest'):+.1f} ms; {note}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--replies", type=int, default=60, help="replies measured per agent")
    parser.add_argument("--model-latency-ms", type=float, default=200.0, help="the slow model's wait per call")
    parser.add_argument("--policies", choices=("heuristic", "llm"), default="heuristic")
    args = parser.parse_args()

    conv = load_locomo(str(DEMO))[0]
    said = {s: [t.text for t in conv.turns() if t.speaker == s] for s in conv.speakers}
    workdir = Path(tempfile.mkdtemp(prefix="bench-middleware-"))
    started = time.perf_counter()
    try:
        with MemoryClient(data_dir=workdir / "data", policies=args.policies) as client:
            # a memory to recall from: the whole conversation, ingested up front
            client.ingest(conv.turns(), scope=lambda t: {**USER, "user_id": t.speaker.lower()}, progress=False)
            worker: list[float] = []
            real_ingest = client.ingest

            def timed_ingest(turn: Any, **kwargs: Any) -> Any:
                result = real_ingest(turn, **kwargs)
                if threading.current_thread().name.startswith("memsdk-outbox"):
                    worker.append(result.latency_s)
                return result

            client.ingest = timed_ingest  # type: ignore[method-assign]
            instant = run(client, said, args.replies, 0.0, workdir, "a")
            slow = run(client, said, args.replies, args.model_latency_ms / 1000, workdir, "b")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)

    print(f"\nreply latency in ms, {args.replies} replies per agent, the same fake chat model for all; embedded client, MiniLM, {args.policies} policies")
    table("model answers at once", *instant)
    table(f"model waits {args.model_latency_ms:.0f} ms per call", *slow)
    print(f"\nthe worker's ingests (never waited for by a reply): {len(worker)} turns, p50 {ms(worker, 50):.1f} ms, p95 {ms(worker, 95):.1f} ms each")
    print(f"wall time {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
