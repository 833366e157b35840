"""The product surface: `MemoryClient` and its async twin `AsyncMemoryClient`, each embedded
or, with ``url=``, the client of a `memsdk serve` server (`memsdk.client.remote`, imported
only then: it brings httpx)."""

from memsdk.client.aio import AsyncMemoryClient
from memsdk.client.results import AnswerResult, ForgetResult, IngestResult, ReadResult
from memsdk.client.sync import MemoryClient
from memsdk.docstrings import documented_as

# here, where both twins are known, so that neither module imports the other
documented_as(AsyncMemoryClient, MemoryClient)

__all__ = ["AnswerResult", "AsyncMemoryClient", "ForgetResult", "IngestResult", "MemoryClient", "ReadResult"]
