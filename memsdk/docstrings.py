"""One docstring for a call that several classes implement alike.

The async and remote clients mirror `MemoryClient`, and the transports and embedders
implement their protocols: the same calls, arguments and errors. Writing each docstring
once, where the call is defined, keeps the copies from drifting apart; `help()` and the API
reference (docs/_ext) read the copy made at import.
"""

from __future__ import annotations

__all__ = ["documented_as"]


def documented_as(cls: type, twin: type) -> None:
    """Give each public method (or property) of ``cls`` without a docstring the one of its
    namesake in ``twin`` (the client it mirrors, the protocol it implements)."""
    for name, member in vars(cls).items():
        own = member.fget if isinstance(member, property) else member
        other = getattr(twin, name, None)
        if name.startswith("_") or other is None or not callable(own) or own.__doc__:
            continue
        own.__doc__ = (other.fget if isinstance(other, property) else other).__doc__
