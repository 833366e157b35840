"""The product surface: `MemoryClient` and its async twin `AsyncMemoryClient`."""

from memsdk.client.aio import AsyncMemoryClient
from memsdk.client.results import AnswerResult, IngestResult, PolicyInfo
from memsdk.client.sync import MemoryClient

__all__ = ["AnswerResult", "AsyncMemoryClient", "IngestResult", "MemoryClient", "PolicyInfo"]
