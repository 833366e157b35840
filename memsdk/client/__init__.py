"""The product surface: `MemoryClient` and its async twin `AsyncMemoryClient`, each embedded
or, with ``url=``, the client of a `memsdk serve` server (`memsdk.client.remote`)."""

from memsdk.client.aio import AsyncMemoryClient
from memsdk.client.remote import AsyncRemoteMemoryClient, RemoteMemoryClient
from memsdk.client.results import AnswerResult, IngestResult, ReadResult
from memsdk.client.sync import MemoryClient
from memsdk.docstrings import documented_as

# Wired here, where every client is known, so that no client module imports another's: the
# twins are documented by the calls they mirror (the async client's first, since the async
# remote client copies its docstrings), and ``url=`` makes the remote client.
documented_as(AsyncMemoryClient, MemoryClient)
documented_as(RemoteMemoryClient, MemoryClient)
documented_as(AsyncRemoteMemoryClient, AsyncMemoryClient)
MemoryClient._remote = RemoteMemoryClient
AsyncMemoryClient._remote = AsyncRemoteMemoryClient

__all__ = ["AnswerResult", "AsyncMemoryClient", "AsyncRemoteMemoryClient", "IngestResult", "MemoryClient", "ReadResult", "RemoteMemoryClient"]
