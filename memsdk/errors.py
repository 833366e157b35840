"""Every error memsdk raises, in one tree.

    MemsdkError
    ├── ClientClosed            a call on a client after close()
    ├── InvalidInput            bad caller input; names the field (``ops[2].text``) and why
    │   └── ScopeRequired       a call that needs a scope got none, or an empty one
    ├── MemoryNotFound          no such memory *in this scope* (ids of other scopes look the same)
    ├── Conflict                the request is well formed but clashes with the current state
    │   └── ImportConflict      an imported id already exists
    ├── StoreError              the storage engine failed
    │   ├── StoreLocked         another process holds the embedded data directory
    │   └── StoreUnavailable    a Qdrant server cannot be reached
    ├── EmbedderError           the embedding model could not load or run
    ├── NotAuthorized           a memsdk server refused the API key (401) or what it may do (403)
    ├── DatasetNotFound         a benchmark data set (LoCoMo) is not where memsdk looked
    └── PolicyError             an LLM policy could not produce a decision
        ├── GateFailed          the release gate kept a candidate from serving (`memsdk.gate`,
        │                       beside the decision it carries: this module imports no memsdk module)
        ├── PolicyUnavailable   its backend is down, refusing or timing out (after bounded retries)
        │   └── BackendTimeout  no answer within the configured timeout
        └── BackendError        the LLM backend rejected the request; ``status_code`` when HTTP
            ├── ModelNotFound   no such model or LoRA adapter name (served or in-process)
            └── ContextTooLong  prompt + max_tokens exceed the model's context window

Backends map their native exceptions onto this tree (``raise ... from exc``), so the
embedded engine and a Qdrant server raise the same class for the same failure.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pydantic

__all__ = [
    "MemsdkError",
    "ClientClosed",
    "InvalidInput",
    "ScopeRequired",
    "MemoryNotFound",
    "Conflict",
    "ImportConflict",
    "StoreError",
    "StoreLocked",
    "StoreUnavailable",
    "EmbedderError",
    "NotAuthorized",
    "DatasetNotFound",
    "PolicyError",
    "PolicyUnavailable",
    "BackendTimeout",
    "BackendError",
    "ModelNotFound",
    "ContextTooLong",
]


class MemsdkError(Exception):
    """Base class of every error raised by memsdk."""


class ClientClosed(MemsdkError, RuntimeError):
    """The client was closed; open a new one."""


class InvalidInput(MemsdkError, ValueError):
    """Caller input failed validation. ``field`` is a dotted path such as ``ops[0].text``."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")

    @classmethod
    def from_pydantic(cls, exc: pydantic.ValidationError, prefix: str = "") -> InvalidInput:
        """The first pydantic error, with its location rendered as a field path."""
        first = exc.errors()[0]
        path = prefix
        for part in first["loc"]:
            if part == "[key]":  # pydantic's marker for "the dict key itself is invalid"
                path += " (the key)"
            elif isinstance(part, int):
                path += f"[{part}]"
            else:
                path += f".{part}" if path else str(part)
        return cls(path or "input", first["msg"])


class ScopeRequired(InvalidInput):
    """A scope needs at least one of user_id, agent_id, run_id."""

    def __init__(self, field: str = "scope", reason: str = "at least one of user_id, agent_id, run_id is required") -> None:
        super().__init__(field, reason)


class MemoryNotFound(MemsdkError, KeyError):
    """No memory with this id in the caller's scope.

    A memory of another scope is reported exactly like a missing one, so ids cannot be
    probed across scopes.
    """

    def __init__(self, memory_id: object, field: str = "memory_id") -> None:
        self.memory_id = str(memory_id)
        self.field = field
        super().__init__(f"{field}: memory {self.memory_id} not found in this scope")

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0])


class Conflict(MemsdkError):
    """The request is valid on its own but not against the current state."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class ImportConflict(Conflict):
    """An imported record or event id already exists in the store."""


class StoreError(MemsdkError):
    """The storage engine failed; the batch that hit it was not applied."""


class StoreLocked(StoreError):
    """The embedded data directory is open in another process (or another client)."""


class StoreUnavailable(StoreError):
    """A remote store cannot be reached."""


class NotAuthorized(MemsdkError):
    """A memsdk server (`memsdk serve`) refused the request's API key: missing, unknown or
    revoked (``status_code`` 401), or an admin call with a tenant's key (403)."""

    def __init__(self, message: str, *, status_code: int = 401) -> None:
        self.status_code = status_code
        super().__init__(message)


class EmbedderError(MemsdkError):
    """The embedding model could not be loaded or failed on an input."""


class DatasetNotFound(MemsdkError, FileNotFoundError):
    """A data set that is not shipped (LoCoMo's licence forbids it) is missing; the message
    says where to put it and where it comes from."""


class PolicyError(MemsdkError):
    """An LLM policy could not produce a decision."""


class PolicyUnavailable(PolicyError):
    """The policy's LLM backend is down, refusing, or too slow."""


# --- LLM backends (memsdk.llm) ----------------------------------------------------------


class BackendTimeout(PolicyUnavailable):
    """The LLM backend did not answer within the configured timeout."""


class BackendError(PolicyError):
    """The LLM backend answered with an error that retrying would not fix.

    ``status_code`` is the HTTP status for server backends, ``None`` in-process.
    """

    def __init__(self, message: str, *, status_code: int | None = None) -> None:
        self.status_code = status_code
        super().__init__(message)


class ModelNotFound(BackendError):
    """No served model or loaded LoRA adapter has this name."""

    def __init__(self, model: str, message: str | None = None, *, status_code: int | None = None) -> None:
        self.model = model
        super().__init__(message or f"model {model!r} not found", status_code=status_code)


class ContextTooLong(BackendError):
    """The prompt plus ``max_tokens`` does not fit the model's context window."""
