"""MemAgent's memory agent: a long input read chunk by chunk into a fixed-budget memory that
each chunk's reply overwrites.

    m_0 = ""  (or the memory a resumed read had reached)
    m_k = reader(m_{k-1}, c_k)  cut to the budget; the new memory replaces the old one

Each request holds one chunk and a memory of at most the budget, so its size, and the cost
of a read per chunk, does not grow with the input: a document far longer than the model's
context is read in linear time with flat memory. The client stores the final memory as the
scope's core memory (`MemoryClient.read`), which every answer is shown.

Budgets are in tokens counted as characters / `CHARS_PER_TOKEN` (the usual English ratio;
the same for every backend, so a budget means the same size on vLLM and in-process).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, StringConstraints, model_validator

from memsdk.dates import render_timestamp
from memsdk.effects import Request, Steps, run
from memsdk.llm.base import AsyncLLMBackend, LLMBackend
from memsdk.policies.calling.caller import LLMCaller, PolicyCall, PolicyConfig, PolicyStats
from memsdk.policies.calling.prompts import load_prompt
from memsdk.policies.calling.schema import Notes, unloop
from memsdk.types import Turn, check_text

__all__ = ["CHARS_PER_TOKEN", "Read", "LLMReader", "approx_tokens", "cut_to", "chunk_text", "chunk_turns", "ReadMemory"]

CHARS_PER_TOKEN = 4


#: MemAgent's overwrite memory, as written: the budget a client asks for is at most this
#: (the bank's core memory holds 2,000 characters; `BankLimits.max_core_chars`)
MAX_READ_MEMORY_CHARS = 2000

class ReadMemory(BaseModel):
    """MemAgent's reply: the whole new memory, which replaces the old one."""

    model_config = ConfigDict(extra="ignore")

    memory: Annotated[str, StringConstraints(strip_whitespace=True, max_length=MAX_READ_MEMORY_CHARS)]

    @model_validator(mode="before")
    @classmethod
    def _cut_over_budget(cls, data: Any) -> Any:
        # a memory over the bound is cut at a word: the reader cuts it to the caller's budget
        # anyway, and keeping its start keeps what the rewrite put first
        if isinstance(data, dict) and isinstance(data.get("memory"), str) and len(text := data["memory"].strip()) > MAX_READ_MEMORY_CHARS:
            cut = text.rfind(" ", 0, MAX_READ_MEMORY_CHARS + 1)
            data = {**data, "memory": text[: cut if cut > 0 else MAX_READ_MEMORY_CHARS].rstrip()}
        return data

    @classmethod
    def salvage(cls, data: Any) -> tuple[Any, Notes]:
        notes: Notes = []
        if isinstance(data, dict) and isinstance(data.get("memory"), str):
            data = {**data, "memory": unloop(data["memory"], "memory", notes)}
        return data, notes


def approx_tokens(text: str) -> int:
    return math.ceil(len(text) / CHARS_PER_TOKEN)


def cut_to(text: str, budget_tokens: int, *, keep: str = "start") -> str:
    """``text`` within ``budget_tokens``, cut at a word: its start (a rewrite puts what matters
    first) or, with ``keep="end"``, its end (the most recent text)."""
    limit = budget_tokens * CHARS_PER_TOKEN
    text = text.strip()
    if len(text) <= limit:
        return text
    if keep == "end":
        tail = text[-limit:]
        space = tail.find(" ")
        return tail[space + 1 :] if 0 <= space < len(tail) - 1 else tail
    head = text[:limit]
    space = head.rfind(" ")
    return head[:space].rstrip() if space > 0 else head


def chunk_text(text: str, chunk_tokens: int) -> list[str]:
    """Whitespace-separated words packed into chunks of at most ``chunk_tokens`` (a word longer
    than a chunk is split)."""
    limit = chunk_tokens * CHARS_PER_TOKEN
    chunks: list[str] = []
    current = ""
    for word in text.split():
        while len(word) > limit:
            if current:
                chunks.append(current)
                current = ""
            chunks.append(word[:limit])
            word = word[limit:]
        if current and len(current) + 1 + len(word) > limit:
            chunks.append(current)
            current = ""
        current = f"{current} {word}" if current else word
    if current:
        chunks.append(current)
    return chunks


def chunk_turns(turns: Sequence[Turn], chunk_tokens: int) -> list[str]:
    """A conversation as ``speaker (on date): text`` lines, packed into chunks (a turn longer
    than a chunk is split at words)."""
    lines = []
    for turn in turns:
        when = f" (on {render_timestamp(turn.timestamp)})" if turn.timestamp else ""
        lines += chunk_text(f"{turn.speaker}{when}: {turn.text}", chunk_tokens)
    limit = chunk_tokens * CHARS_PER_TOKEN
    chunks: list[str] = []
    for line in lines:
        if chunks and len(chunks[-1]) + 1 + len(line) <= limit:
            chunks[-1] += "\n" + line
        else:
            chunks.append(line)
    return chunks


@dataclass
class Read:
    """One chunk read: the memory after it, and whether the old one was kept instead."""

    memory: str
    calls: list[PolicyCall] = field(default_factory=list)
    kept_old: bool = False
    fallback: bool = False


class LLMReader:
    """Rewrites the memory after each chunk (MemAgent). A reply that cannot be read, or an
    empty one, keeps the old memory (counted as ``kept_old_memory``): a failed step never
    loses what was read before it, and a failed first step keeps its chunk's text."""

    role = "reader"
    prompt_role = "reader"

    def __init__(self, backend: LLMBackend | AsyncLLMBackend, config: PolicyConfig = PolicyConfig(), *, fallback: object = None, stats: PolicyStats | None = None) -> None:
        self.backend, self.fallback = backend, fallback
        self.caller = LLMCaller(load_prompt(self.prompt_role, config.prompt_version), ReadMemory, config, default_max_tokens=64, stats=stats)

    @property
    def stats(self) -> PolicyStats:
        return self.caller.stats

    @staticmethod
    def prompt_values(memory: str, chunk: str, budget_tokens: int) -> dict[str, str]:
        return {"memory": memory or "(empty)", "chunk": chunk, "budget": str(max(1, budget_tokens * 3 // 4))}  # ~0.75 words a token

    @staticmethod
    def max_tokens(budget_tokens: int) -> int:
        # the reply is the memory plus the JSON around it; a little room over the budget so a
        # memory at the budget is not cut by the generation limit mid-word
        return budget_tokens + budget_tokens // 4 + 16

    def _finish(self, value: ReadMemory | None, call: PolicyCall, memory: str, chunk: str, budget_tokens: int) -> Read:
        if value is None and call.finish_reason == "length":
            value = _cut_short(call.raw_output, self.caller.prompt.response_prefix)
            if value is not None:
                self.stats.add("cut_at_token_limit")
        if value is not None and not _storable(value.memory):  # a NUL or a lone surrogate from a JSON escape
            value = None
        if value is None or not value.memory:
            self.stats.add("kept_old_memory")
            # with nothing to keep yet, the chunk's own text (the window reader's memory)
            # stands in: a read never ends with an empty memory
            return Read(memory or WindowReader().rewrite("", chunk, budget_tokens).memory, [call], kept_old=True)
        new = cut_to(value.memory, budget_tokens)
        if len(new) < len(value.memory):
            self.stats.add("cut_to_budget")
        return Read(new, [call])

    def request(self, memory: str, chunk: str, budget_tokens: int) -> Request:
        return self.caller.request(self.backend, self.prompt_values(memory, chunk, budget_tokens), max_tokens=self.max_tokens(budget_tokens))

    def read(self, request: Request, text: str, memory: str, chunk: str, budget_tokens: int) -> Read:
        """A sampled reply to `request` (its whole text) as serving would take it (the trainers' reading)."""
        return self._finish(*self.caller.read(self.backend, request, text), memory, chunk, budget_tokens)

    def steps(self, memory: str, chunk: str, budget_tokens: int) -> Steps[Read]:
        value, call = yield from self.caller.steps(self.backend, self.prompt_values(memory, chunk, budget_tokens), max_tokens=self.max_tokens(budget_tokens))
        return self._finish(value, call, memory, chunk, budget_tokens)

    def rewrite(self, memory: str, chunk: str, budget_tokens: int) -> Read:
        """`steps` run with blocking calls (a script, a test); the clients drive `steps`."""
        return run(self.steps(memory, chunk, budget_tokens))


def _cut_short(raw: str, prefix: str) -> ReadMemory | None:
    """A memory reply the token limit cut inside its string, up to its last whole sentence: a
    small model writes past its budget far more often than it writes nothing (SmolLM2 in
    `benchmarks/read.py`), and a memory is worth keeping up to where it stops making sense."""
    if not raw.startswith(prefix):
        return None
    body = raw[len(prefix) :]
    end = max(body.rfind(". "), body.rfind(".\n"))
    if end <= 0:
        return None
    try:
        return ReadMemory(memory=json.loads('"' + body[: end + 1] + '"'))
    except ValueError:  # a broken escape: no memory rather than a mangled one
        return None


def _storable(text: str) -> bool:
    try:
        check_text(text)
    except ValueError:
        return False
    return True


class WindowReader:
    """No LLM: the memory is the most recent text within the budget (the old memory and the
    chunk, cut at the start). The baseline, and the reader's fallback while its backend is down."""

    role = "reader"
    version = "window-v1"

    def rewrite(self, memory: str, chunk: str, budget_tokens: int) -> Read:
        return Read(cut_to(f"{memory}\n{chunk}" if memory else chunk, budget_tokens, keep="end"))
