"""`ServerLimits`: what one request may send. Apart from the app, so that the ``memsdk``
command reads its defaults for ``serve``'s flags without importing FastAPI."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["ServerLimits", "KEEP_ALIVE_S", "MAX_HEADER_BYTES"]

#: seconds an idle connection between requests stays open (uvicorn's own default)
KEEP_ALIVE_S = 5
#: bytes h11 buffers of a request line and headers not yet complete (its own default, made explicit)
MAX_HEADER_BYTES = 16 << 10


@dataclass(frozen=True)
class ServerLimits:
    """What one request may send: bodies over ``max_body_bytes`` (``max_import_bytes`` for
    an import, which carries a whole scope) are refused with 413 before they are read whole;
    a body that stops arriving for ``body_idle_s`` (its Content-Length promised more) is
    answered 408 and its connection closed; ``max_turns`` turns per ingest, ``max_scopes``
    scopes per answer."""

    max_body_bytes: int = 1 << 20
    max_import_bytes: int = 256 << 20
    max_turns: int = 1000
    max_scopes: int = 16
    body_idle_s: float = 15.0
