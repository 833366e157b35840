"""A long read's plan and progress (`MemoryClient.read`, MemAgent): the input checked and cut
into chunks, and a progress file after every finished chunk, so a read killed halfway is
resumed from its last finished chunk by the same call made again.

The progress file (``<data_dir>/reads/<read id>.json``) holds the chunk count, how many are
done and the memory so far; it is replaced atomically (written beside, then `os.replace`),
so a kill leaves the previous chunk's progress or this one's, never half a file. The read id
is a hash of the scope, the budgets and the chunks: the same input resumes, another starts
afresh. The file is removed when the memory is stored.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memsdk.errors import InvalidInput
from memsdk.policies.reader import CHARS_PER_TOKEN, Read, chunk_text, chunk_turns
from memsdk.policies.reader import MAX_READ_MEMORY_CHARS
from memsdk.types import Scope, Turn, check_text

__all__ = ["MAX_READ_CHARS", "ReadPlan", "plan_read"]

#: the longest input one read takes (a safety bound against a runaway caller, ~2.5M tokens)
MAX_READ_CHARS = 10_000_000
MIN_BUDGET_TOKENS, MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS = 16, 32, 32_768


@dataclass
class ReadPlan:
    scope: Scope
    chunks: list[str]
    budget_tokens: int
    chunk_tokens: int
    path: Path
    done: int = 0
    memory: str = ""
    resumed_from: int = 0
    kept_old: int = 0
    fallback: bool = False
    prompt_tokens: int = 0
    completion_tokens: int = 0
    last_calls: list[Any] = field(default_factory=list)  # the last chunk's calls only: memory stays flat

    def advance(self, step: Read) -> None:
        """Take one chunk's result and record the progress (atomically) before the next."""
        self.done += 1
        self.memory = step.memory
        self.kept_old += step.kept_old
        self.fallback |= step.fallback
        self.prompt_tokens += sum(c.prompt_tokens for c in step.calls)
        self.completion_tokens += sum(c.completion_tokens for c in step.calls)
        self.last_calls = step.calls
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"chunks": len(self.chunks), "done": self.done, "memory": self.memory}))
        os.replace(tmp, self.path)

    def remove_progress(self) -> None:
        self.path.unlink(missing_ok=True)


def _chunks(source: str | Sequence[Turn], chunk_tokens: int) -> list[str]:
    if isinstance(source, str):
        if len(source) > MAX_READ_CHARS:
            raise InvalidInput("source", f"is {len(source)} characters, the limit of one read is {MAX_READ_CHARS}")
        try:  # checked before the first chunk: a text the memory cannot hold would fail at the end
            check_text(source)
        except ValueError as exc:
            raise InvalidInput("source", str(exc)) from None
        return chunk_text(source, chunk_tokens)
    if sum(len(t.text) for t in source) > MAX_READ_CHARS:
        raise InvalidInput("source", f"the turns hold more than {MAX_READ_CHARS} characters, the limit of one read")
    return chunk_turns(source, chunk_tokens)


def _tokens(name: str, value: Any, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(name, f"must be an integer from {low} to {high}, got {value!r}")
    return value


def plan_read(source: str | Sequence[Turn], scope: Scope, budget_tokens: Any, chunk_tokens: Any, folder: Path) -> ReadPlan:
    """The chunks of ``source`` and the progress a killed read of the same input had made."""
    budget = _tokens("budget_tokens", budget_tokens, MIN_BUDGET_TOKENS, MAX_READ_MEMORY_CHARS // CHARS_PER_TOKEN)
    size = _tokens("chunk_tokens", chunk_tokens, MIN_CHUNK_TOKENS, MAX_CHUNK_TOKENS)
    chunks = _chunks(source, size)
    digest = hashlib.sha256(json.dumps([scope.key, budget, size]).encode())
    for chunk in chunks:
        digest.update(b"\x00" + chunk.encode("utf-8", "surrogatepass"))
    folder.mkdir(parents=True, exist_ok=True)
    plan = ReadPlan(scope, chunks, budget, size, folder / f"{digest.hexdigest()[:24]}.json")
    try:
        saved = json.loads(plan.path.read_text())
    except (FileNotFoundError, ValueError):  # none, or unreadable: start afresh
        return plan
    if saved.get("chunks") == len(chunks) and isinstance(saved.get("done"), int) and 0 < saved["done"] <= len(chunks) and isinstance(saved.get("memory"), str):
        plan.done = plan.resumed_from = saved["done"]
        plan.memory = saved["memory"]
    return plan


def as_source(source: Any, as_turns: Any) -> str | list[Turn]:
    """A read's input: text as it is, or turns validated as `ingest` validates them."""
    if isinstance(source, str):
        return source
    if isinstance(source, (bytes, bytearray)) or not isinstance(source, (Turn, dict, Iterable)):
        raise InvalidInput("source", f"expected text or a list of turns, got {type(source).__name__}")
    return as_turns(source)  # type: ignore[no-any-return]
