"""memsdk in five minutes, on the embedded default (no server): `make demo`.

1. Ingest the first session(s) of a LoCoMo *training* conversation (conv-26), one memory
   per speaker, with SmolLM2-135M in-process as extractor and manager.
2. Show the ops the manager took for a few turns.
3. Answer questions whose evidence lies in those sessions, next to the gold answers.
4. The Buddy/Scout case: the manager's decision and the audit history.
5. Close, reopen, and show the memory survived the restart.

    MEMSDK_DEMO_SESSIONS=2 .venv/bin/python examples/quickstart.py   # more sessions
    MEMSDK_POLICIES=heuristic .venv/bin/python examples/quickstart.py  # no LLM at all
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from memsdk import MemoryClient, Turn
from memsdk.datasets.locomo import load_locomo

DATA_DIR = Path(os.environ.get("MEMSDK_DEMO_DIR", Path(__file__).resolve().parents[1] / "build" / "demo-data"))
SESSIONS = int(os.environ.get("MEMSDK_DEMO_SESSIONS", "1"))
QUESTIONS = 6


def scope_of(turn: Turn) -> dict[str, str]:
    return {"user_id": turn.speaker.lower(), "run_id": "locomo-conv-26"}


def main() -> None:
    shutil.rmtree(DATA_DIR, ignore_errors=True)  # a fresh run each time
    conv = next(c for c in load_locomo() if c.sample_id == "conv-26")
    sessions = conv.sessions[:SESSIONS]
    turns = [t for s in sessions for t in s.turns]
    speakers = [{"user_id": s.lower(), "run_id": "locomo-conv-26"} for s in conv.speakers]

    started = time.perf_counter()
    with MemoryClient(data_dir=DATA_DIR) as client:
        print(f"data dir: {DATA_DIR}\npolicies: { {r: (p.version, p.model) for r, p in client.policies.items()} }")
        print(f"\n== 1. ingest {len(turns)} turns of {conv.sample_id} ({SESSIONS} session(s), {conv.split} split)")
        results = client.ingest(turns, scope=scope_of)

        print("\n== 2. what the manager did on the first turns")
        for turn, r in list(zip(turns, results))[:5]:
            print(f"[{turn.turn_id}] {turn.speaker}: {turn.text[:80]}")
            for fact in r.facts:
                print(f"    fact: {fact}")
            for op in r.ops:
                print(f"    {op.op:6} {op.before!r} -> {op.after!r}")
            if r.failures:
                print(f"    (guarded: {'; '.join(r.failures)[:120]})")
        ops = [op.op for r in results for op in r.ops]
        print(f"totals: {len(ops)} ops ({', '.join(f'{k} {ops.count(k)}' for k in ('ADD', 'UPDATE', 'DELETE'))}), "
              f"{sum(len(r.failures) for r in results)} guarded failures, "
              f"{sum(r.prompt_tokens for r in results) / len(results):.0f} prompt tokens per turn")

        print("\n== 3. questions about those sessions")
        seen = {t.turn_id for t in turns}
        for qa in [q for q in conv.questions() if set(q.evidence) <= seen][:QUESTIONS]:
            a = client.answer(qa.question, scope=speakers)
            print(f"Q: {qa.question}\n   memsdk: {a.text!r:40} gold: {qa.answer!r}  ({a.latency_s:.1f} s)")

        print("\n== 4. Buddy and Scout")
        pets = {"user_id": "demo-pets"}
        client.ingest({"speaker": "Sam", "text": "I have a dog named Buddy."}, scope=pets)
        r = client.ingest({"speaker": "Sam", "text": "I adopted another dog, her name is Scout!"}, scope=pets)
        for op in r.ops:
            print(f"    {op.op:6} {op.before!r} -> {op.after!r}")
        for e in client.history(scope=pets):
            print(f"    history: {e.event:7} {e.before!r} -> {e.after!r} by {e.actor}")
        counts = {tuple(s.values()): client.bank.count(s) for s in speakers}

    print("\n== 5. restart")
    with MemoryClient(data_dir=DATA_DIR) as client:
        after = {tuple(s.values()): client.bank.count(s) for s in speakers}
        print(f"memories before close {counts}, after reopening {after}")
        assert after == counts, "memories were lost across a restart"
        hit = client.search("support group", scope=speakers[0], limit=1)
        print(f"search after restart: {hit[0].record.text if hit else '(none)'}")
        print(f"interaction log: {client.log.count() if client.log else 0} trajectories")
    print(f"\ndone in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
