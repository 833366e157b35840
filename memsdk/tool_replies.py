"""What the memory tools say back to a model, in one place: the LangChain tools
(`memsdk_adapters.langchain.tools`) and the MCP server (`memsdk.server.mcp`) reply alike, so
a prompt written for one works with the other."""

from __future__ import annotations

from collections.abc import Sequence

from memsdk.types import MemoryRecord, ScoredMemory

__all__ = ["recalled", "remembered", "forgotten"]


def recalled(hits: Sequence[ScoredMemory]) -> str:
    if not hits:
        return "No memories found."
    return "\n".join(f"[{h.record.id}] {h.record.render()}" for h in hits)


def remembered(record: MemoryRecord) -> str:
    return f"Remembered as memory {record.id}."


def forgotten(record: MemoryRecord) -> str:
    return f"Forgot memory {record.id} (it can be restored)."
