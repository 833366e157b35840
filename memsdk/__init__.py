"""memsdk: agent memory whose decisions are made by trained, hot-swappable policies.

The names here are what an app uses: the clients, their configuration, what their calls
return, the records they hold, and the errors worth catching. Everything else stays
importable from its subpackage: the bank (`memsdk.bank.MemoryBank`, `BankSnapshot`), the
stores (`memsdk.store`), the embedders (`memsdk.embedding`), ops and actors
(`memsdk.types`), the release gate (`memsdk.gate`) and every error (`memsdk.errors`).

Importing memsdk is cheap: torch, sentence-transformers, transformers and qdrant-client
are imported only when a model or a server-backed store is first used.
"""

from memsdk._version import __version__
from memsdk.client import AnswerResult, AsyncMemoryClient, ForgetResult, IngestResult, MemoryClient, ReadResult
from memsdk.config import ClientConfig, LLMSpec
from memsdk.errors import BackendError, Conflict, InvalidInput, MemoryNotFound, MemsdkError, PolicyError, PolicyUnavailable, StoreLocked
from memsdk.gate import GateDecision, GateFailed
from memsdk.serving.policy_set import PolicyInfo
from memsdk.types import HistoryEvent, MemoryRecord, Scope, ScoredMemory, Tier, Turn

__all__ = [
    "AnswerResult",
    "AsyncMemoryClient",
    "BackendError",
    "ClientConfig",
    "Conflict",
    "ForgetResult",
    "GateDecision",
    "GateFailed",
    "HistoryEvent",
    "IngestResult",
    "InvalidInput",
    "LLMSpec",
    "MemoryClient",
    "MemoryNotFound",
    "MemoryRecord",
    "MemsdkError",
    "PolicyError",
    "PolicyInfo",
    "PolicyUnavailable",
    "ReadResult",
    "Scope",
    "ScoredMemory",
    "StoreLocked",
    "Tier",
    "Turn",
    "__version__",
]
