"""memsdk: agent memory whose decisions are made by trained, hot-swappable policies.

Importing memsdk is cheap: torch, sentence-transformers, transformers and qdrant-client
are imported only when a model or a server-backed store is first used.
"""

from memsdk._version import __version__
from memsdk.bank import BankLimits, BankSnapshot, MemoryBank, Transition
from memsdk.client import AnswerResult, AsyncMemoryClient, IngestResult, MemoryClient, PolicyInfo
from memsdk.config import ClientConfig
from memsdk.policies.spec import LLMSpec
from memsdk.embedding import Embedder, HashEmbedder, SentenceTransformerEmbedder
from memsdk.errors import (
    ClientClosed,
    Conflict,
    DatasetNotFound,
    EmbedderError,
    ImportConflict,
    InvalidInput,
    MemoryNotFound,
    MemsdkError,
    NotAuthorized,
    PolicyError,
    PolicyUnavailable,
    ScopeRequired,
    StoreError,
    StoreLocked,
    StoreUnavailable,
)
from memsdk.gate import GateFailed
from memsdk.store import InMemoryTransport, StoreTransport, open_transport
from memsdk.types import API_ACTOR, Actor, EventType, HistoryEvent, MemoryRecord, Op, OpType, Scope, ScoredMemory, Tier, Turn


__all__ = [
    "API_ACTOR",
    "Actor",
    "AnswerResult",
    "AsyncMemoryClient",
    "BankLimits",
    "BankSnapshot",
    "ClientClosed",
    "ClientConfig",
    "Conflict",
    "DatasetNotFound",
    "Embedder",
    "EmbedderError",
    "EventType",
    "GateFailed",
    "HashEmbedder",
    "HistoryEvent",
    "ImportConflict",
    "InMemoryTransport",
    "IngestResult",
    "InvalidInput",
    "LLMSpec",
    "MemoryBank",
    "MemoryClient",
    "MemoryNotFound",
    "MemoryRecord",
    "MemsdkError",
    "NotAuthorized",
    "Op",
    "OpType",
    "PolicyError",
    "PolicyInfo",
    "PolicyUnavailable",
    "Scope",
    "ScopeRequired",
    "ScoredMemory",
    "SentenceTransformerEmbedder",
    "StoreError",
    "StoreLocked",
    "StoreTransport",
    "StoreUnavailable",
    "Tier",
    "Transition",
    "Turn",
    "open_transport",
]
