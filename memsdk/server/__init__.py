"""memsdk as a service: `memsdk serve` (``pip install 'memsdk[server]'``).

`create_app` builds the FastAPI app over a `MemoryClient` (`memsdk.server.app`, which lists
the routes); `Keyring` maps API keys to tenants (`memsdk.server.keys`); `memsdk.server.tenancy`
binds every scope a request names to its key's tenant. The names load on first use, so the
``memsdk`` command (which registers ``serve`` from `memsdk.server.cli`) needs no FastAPI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memsdk.server.app import create_app
    from memsdk.server.limits import ServerLimits
    from memsdk.server.keys import Keyring, Tenant, hash_key

__all__ = ["create_app", "ServerLimits", "Keyring", "Tenant", "hash_key"]

_WHERE = {"create_app": "app", "ServerLimits": "limits", "Keyring": "keys", "Tenant": "keys", "hash_key": "keys"}


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module 'memsdk.server' has no attribute {name!r}")
    from importlib import import_module

    return getattr(import_module(f"memsdk.server.{_WHERE[name]}"), name)
