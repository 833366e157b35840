"""memsdk in five minutes, on the embedded default (no server, nothing beside the repository):
`make demo`.

1. Ingest a short conversation of our own (examples/data/demo_conversation.json: Maya and
   Leo over three dated sessions, with facts that change, get corrected and get forgotten),
   one memory per speaker, with the measured defaults over SmolLM2-135M in-process (the
   heuristic extractor, the trained pair manager, the SmolLM2 answerer with the adapter the
   package ships).
2. Show the ops the manager took for a few turns, and what is no longer true: memories the
   trained manager or a correction retired (kept as history) and what a forget deleted.
3. Answer the file's questions next to their gold answers (token F1 per answer).
4. The Buddy/Scout case: the manager's decision and the audit history.
5. Close, reopen, and show the memory survived the restart.

    MEMSDK_POLICIES=heuristic .venv/bin/python examples/quickstart.py  # no LLM at all
    MEMSDK_POLICIES=llm .venv/bin/python examples/quickstart.py        # SmolLM2 for every role
    MEMSDK_DEMO_FILE=other.json .venv/bin/python examples/quickstart.py  # any file in LoCoMo's shape
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

from memsdk import MemoryClient, Turn
from memsdk.datasets.locomo import load_locomo
from memsdk.scoring import token_f1

HERE = Path(__file__).resolve().parent
DATA_DIR = Path(os.environ.get("MEMSDK_DEMO_DIR", HERE.parent / "build" / "demo-data"))
CONVERSATION = Path(os.environ.get("MEMSDK_DEMO_FILE", HERE / "data" / "demo_conversation.json"))


def main() -> None:
    shutil.rmtree(DATA_DIR, ignore_errors=True)  # a fresh run each time
    conv = load_locomo(str(CONVERSATION))[0]
    run_id = conv.sample_id
    turns = conv.turns()
    speakers = [{"user_id": s.lower(), "run_id": run_id} for s in conv.speakers]

    def scope_of(turn: Turn) -> dict[str, str]:
        return {"user_id": turn.speaker.lower(), "run_id": run_id}

    started = time.perf_counter()
    with MemoryClient(data_dir=DATA_DIR) as client:
        print(f"data dir: {DATA_DIR}\npolicies: { {r: (p.version, p.model) for r, p in client.policies.items()} }")
        print(f"\n== 1. ingest {len(turns)} turns of {conv.sample_id} ({len(conv.sessions)} sessions, {' and '.join(conv.speakers)})")
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
        kept = {s["user_id"]: {t: client.bank.count(s, tier=t) for t in ("episodic", "semantic")} for s in speakers}
        print(f"totals: {len(ops)} ops ({', '.join(f'{k} {ops.count(k)}' for k in ('ADD', 'UPDATE', 'DELETE'))}), "
              f"{sum(len(r.failures) for r in results)} guarded failures, "
              f"{sum(r.prompt_tokens for r in results) / len(results):.0f} prompt tokens per turn; memories kept {kept}")
        old_number = [h.record.text for h in client.search("phone number 07700 900123", scope=speakers[0], limit=3) if "900123" in h.record.text]
        print(f"asked to forget the old phone number (D3:1): {'still remembered: ' + repr(old_number[0]) if old_number else 'not in memory'}")

        print("\n== 2b. what is no longer true: retired (kept as history, restorable) and forgotten (deleted until erase)")
        for s in speakers:
            for m in client.list(scope=s, include_deleted=True):
                if m.deleted:
                    print(f"    [{s['user_id']}] forgotten  {m.tier:8} {m.text[:70]!r}")
                elif m.superseded:
                    by = client.get(m.superseded_by, scope=s).text[:50] if m.superseded_by else "a correction"
                    print(f"    [{s['user_id']}] retired    {m.tier:8} {m.text[:70]!r}\n{'':26}until {m.invalid_at:%d %b %Y}, replaced by {by!r}")

        print("\n== 3. questions, with the gold answers")
        scores = []
        for qa in conv.questions():
            a = client.answer(qa.question, scope=speakers)
            scores.append(token_f1(a.text, qa.answer))
            print(f"Q: {qa.question}\n   memsdk: {a.text!r:40} gold: {qa.answer!r}  F1 {scores[-1]:.2f} ({a.latency_s:.1f} s)")
        print(f"mean F1 over {len(scores)} questions: {sum(scores) / len(scores):.2f}")

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
        hit = client.search("cat", scope=speakers[0], limit=1)
        print(f"search after restart: {hit[0].record.text if hit else '(none)'}")
        print(f"interaction log: {client.log.count() if client.log else 0} trajectories")
    print(f"\ndone in {time.perf_counter() - started:.0f} s")


if __name__ == "__main__":
    main()
