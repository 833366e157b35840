"""Retrain a policy from a client's own judged traffic; it serves only if the gate says so.

    python examples/retrain_from_logs.py [--role answerer|manager] [--steps 2] [--workdir build/examples/retrain]

1. An app's client (heuristic extractor, the SmolLM2 answerer in-process, and the manager
   heuristic or, for ``--role manager``, SmolLM2 too) ingests a short conversation and answers
   questions about it; each answer gets the gold answer as feedback (`client.feedback`), as an
   app's users or reviewers would give it.
2. `memsdk_training.retrain` does the rest in one call, the same as
   ``memsdk train ROLE --from-log DATA_DIR``: the log becomes states (answerer: a judged
   question, the memories it was shown then, gold; manager: an ingest a judged answer cited,
   with the bank it saw then), 30% are held out, the role's recipe trains on the rest and
   publishes a LoRA adapter, and the release gate replays the held-out states through the
   candidate and the version serving now. The candidate serves only if it wins.
3. The gate's verdict is printed, and the version the client now serves.

A 135M model after a few CPU steps rarely beats itself: expect the gate to say FAIL, which is
the point of a gate. ``--steps`` and a bigger served model (``MEMSDK_LLM_BASE_URL``) change that.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from memsdk import MemoryClient
from memsdk_training.retrain import RetrainConfig, retrain

CONVERSATION = [
    {"speaker": "Caroline", "text": "I adopted a dog last week, his name is Buddy."},
    {"speaker": "Melanie", "text": "That's lovely! I just started painting sunsets on weekends."},
    {"speaker": "Caroline", "text": "I work as a nurse at the Boston children's hospital."},
    {"speaker": "Melanie", "text": "My son Leo turned seven on Saturday."},
    {"speaker": "Caroline", "text": "I'm learning to play the cello with a teacher called Mrs. Park."},
    {"speaker": "Melanie", "text": "We are driving to Lake Tahoe for our summer holiday."},
]
QUESTIONS = [
    ("What is the name of Caroline's dog?", "Buddy"),
    ("What does Melanie paint?", "sunsets"),
    ("Where does Caroline work?", "Boston children's hospital"),
    ("What pet did Caroline adopt?", "a dog"),
    ("When does Melanie paint?", "on weekends"),
    ("What is Caroline's job?", "nurse"),
    ("How old is Melanie's son?", "seven"),
    ("What instrument is Caroline learning?", "the cello"),
    ("Where is Melanie going for the summer holiday?", "Lake Tahoe"),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--role", choices=["answerer", "manager"], default="answerer")
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--workdir", default="build/examples/retrain")
    args = parser.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()
    scope = {"user_id": "caroline"}
    policies = {"extractor": "heuristic", "manager": "llm" if args.role == "manager" else "heuristic", "answerer": "llm"}
    with MemoryClient(data_dir=work, policies=policies) as client:
        client.ingest(CONVERSATION, scope=scope, progress=False)
        for question, gold in QUESTIONS:
            answer = client.answer(question, scope=scope)
            client.feedback(answer.trajectory_id, gold=gold)
            print(f"1. {question!r}: {answer.text!r} (gold {gold!r})")
        result = retrain(client, RetrainConfig(role=args.role, steps=args.steps, version=f"from-logs-{int(time.time())}"))
        print(f"2. trained the {args.role} on {result.train_states} states, {result.held_out_states} held out for the gate: {result.training}")
        print(f"3. {result.decision.summary()}")
        print(f"   serving {args.role} {client.policies[args.role].version} ({'promoted' if result.promoted else 'not promoted'}); {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
