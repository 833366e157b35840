"""Retrain the manager from a client's own traffic, publish it, hot-swap it, compare.

    python examples/retrain_from_logs.py [--steps 3] [--workdir build/examples/retrain]

1. An app's client (heuristic policies, fast) ingests a short conversation and answers
   questions about it; each answer gets feedback with the gold answer (`client.feedback`).
2. `log_states` turns the interaction log into manager states: the bank as it was before each
   ingest (rebuilt from its audit history), the facts, and the judged questions that ingest fed.
3. The manager GRPO recipe trains a LoRA adapter on those states for a few steps and publishes
   it into the client's checkpoint directory.
4. A client on SmolLM2 policies ingests the same conversation and answers the same questions
   with the base manager, switches with `use_policy("manager", ...)` while running, and does
   it again: before/after side by side.

A 135M model with a few CPU steps moves little; this shows the loop, not a quality gain.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path

from memsdk import MemoryClient
from memsdk.embedding import Embedder
from memsdk.llm import TransformersBackend
from memsdk_training.env import MemoryState, log_states
from memsdk_training.recipes import ManagerGRPOConfig, PublishSettings
from memsdk_training.recipes.manager import ManagerRecipe
from memsdk_training.rewards import token_f1

CONVERSATION = [
    {"speaker": "Caroline", "text": "I adopted a dog last week, his name is Buddy."},
    {"speaker": "Melanie", "text": "That's lovely! I just started painting sunsets on weekends."},
    {"speaker": "Caroline", "text": "I work as a nurse at the Boston children's hospital."},
]
QUESTIONS = [
    ("What is the name of Caroline's dog?", "Buddy"),
    ("What does Melanie paint?", "sunsets"),
    ("Where does Caroline work?", "Boston children's hospital"),
]


def run_conversation(client: MemoryClient, scope: dict[str, str]) -> list[tuple[str, str, float]]:
    """Ingest the conversation, answer every question, give feedback; (question, answer, F1)."""
    client.ingest(CONVERSATION, scope=scope, progress=False)
    out = []
    for question, gold in QUESTIONS:
        answer = client.answer(question, scope=scope)
        client.feedback(answer.answer_id, gold=gold)
        out.append((question, answer.text, token_f1(answer.text, gold)))
    return out


class LogRecipe(ManagerRecipe):
    """The manager recipe on states from the log (no held-out data here: validation = train states)."""

    def __init__(self, config: ManagerGRPOConfig, states: list[MemoryState]) -> None:
        super().__init__(config)
        self.log_states = states

    def states(self, embedder: Embedder) -> tuple[list[MemoryState], list[MemoryState]]:
        return self.log_states, self.log_states


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=2)
    parser.add_argument("--workdir", default="build/examples/retrain")
    args = parser.parse_args()
    work = Path(args.workdir)
    shutil.rmtree(work, ignore_errors=True)
    started = time.perf_counter()

    # The app's traffic, logged by a client on the heuristic policies: its answers name the
    # memories they used, which is how feedback is linked back to the ingest that wrote them.
    with MemoryClient(policies="heuristic", data_dir=work / "app") as app:
        print("1. app traffic: ingest, answer, feedback (heuristic policies)")
        run_conversation(app, {"user_id": "caroline"})
        states = list(log_states(app.log, app.bank))
    print(f"2. {len(states)} manager states from the log ({sum(len(s.qa) for s in states)} judged questions)")
    if not states:
        print("   no ingest wrote a memory that a judged answer used as evidence: nothing to train on")
        return

    version = f"from-logs-{int(time.time())}"
    config = ManagerGRPOConfig(
        output_dir=str(work / "train"), steps=args.steps, num_threads=1, group_size=4, prompts_per_step=2,
        max_tokens=64, lr=1e-4, metric="f1", embedder="minilm", qa_per_group=2, checkpoint_every=1000,
        publish=PublishSettings(registry_dir=str(work / "checkpoints"), version=version),
    )  # fmt: skip
    recipe = LogRecipe(config, states)
    recipe.setup()
    rows = recipe.train()
    recipe.cleanup()
    print(f"3. trained {len(rows)} steps (train reward {rows[0]['reward_mean']:.3f} -> {rows[-1]['reward_mean']:.3f}), published manager {version}")

    # A client on SmolLM2 policies: the same conversation and questions, base manager first,
    # then the published adapter, hot-swapped while the client runs.
    with TransformersBackend(num_threads=1) as backend, MemoryClient(backend=backend, data_dir=work / "serve", checkpoint_dir=work / "checkpoints") as client:
        before = run_conversation(client, {"user_id": "caroline", "run_id": "before"})
        client.use_policy("manager", version)
        print(f"4. the client now runs manager {client.policies['manager'].version}")
        after = run_conversation(client, {"user_id": "caroline", "run_id": "after"})

    print("\n| question | gold | base manager: answer (F1) | retrained manager: answer (F1) |\n|---|---|---|---|")
    for (q, a0, f0), (_, a1, f1), (_, gold) in zip(before, after, QUESTIONS):
        print(f"| {q} | {gold} | {a0} ({f0:.2f}) | {a1} ({f1:.2f}) |")
    mean0, mean1 = (sum(x[2] for x in r) / len(r) for r in (before, after))
    print(f"\nmean F1 {mean0:.3f} -> {mean1:.3f}; {time.perf_counter() - started:.0f} s in all")


if __name__ == "__main__":
    main()
