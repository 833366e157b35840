"""Fakes for the environment tests: a sampling backend that picks by role, and small answerers."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from memsdk.llm.base import Choice, Completion, SamplingParams
from memsdk.policies import Answer, load_prompt
from memsdk.types import ScoredMemory

ROLES = ("manager", "r2_extractor", "r2_manager")


class SamplingFake:
    """Replies from a pool of candidate outputs per policy role (found by the system prompt).

    Greedy requests always get the pool's first entry, as a real model would repeat itself;
    sampled ones pick with ``Random(params.seed)``, or from the fake's own RNG without a seed,
    so a seeded request is repeatable and differently seeded ones differ.
    """

    model = "fake"
    supports_schema = False

    def __init__(self, **pools: Sequence[str]) -> None:
        self.pools = {role: list(replies) for role, replies in pools.items()}
        self._system = {load_prompt(role).system: role for role in ROLES}
        self._rng = random.Random(0)
        self.requests: list[dict] = []

    def chat(self, messages: Sequence[dict], *, params: SamplingParams, model: str | None = None, schema: dict | None = None) -> Completion:
        # a re-ask appends turns after the system prompt, so the first message still names the role
        role = self._system[messages[0]["content"]]
        self.requests.append({"role": role, "messages": [dict(m) for m in messages], "params": params, "model": model})
        pool = self.pools[role]
        rng = random.Random(params.seed) if params.seed is not None else self._rng
        texts = [pool[0] if params.temperature == 0 else rng.choice(pool) for _ in range(params.n)]
        prefix = messages[-1]["content"] if messages[-1]["role"] == "assistant" else ""
        texts = [t[len(prefix) :] if prefix and t.startswith(prefix) else t for t in texts]  # a model continues its prefix
        return Completion(model=model or self.model, choices=[Choice(index=i, text=t) for i, t in enumerate(texts)], prompt_tokens=50, completion_tokens=10 * len(texts))


@dataclass
class KeywordAnswerer:
    """Answers ``rules[keyword]`` when a shown memory contains the keyword, else "unknown";
    remembers every question and the memories it was shown."""

    rules: dict[str, str]
    role: str = "answerer"
    seen: list[tuple[str, list[str]]] = field(default_factory=list)

    def answer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        texts = [m.record.text for m in memories]
        self.seen.append((question, texts))
        for keyword, reply in self.rules.items():
            if keyword.lower() in question.lower() and any(keyword.lower() in t.lower() for t in texts):
                return Answer(reply, [])
        return Answer("unknown", [])

    async def aanswer(self, question: str, memories: Sequence[ScoredMemory]) -> Answer:
        return self.answer(question, memories)
