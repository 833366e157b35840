"""API keys and the tenants they belong to.

Every request to `memsdk serve` carries ``Authorization: Bearer <key>``; the key names a
tenant, and every scope the request names is a sub-scope of that tenant (`tenancy`). Keys
come from the environment for the simple case::

    MEMSDK_API_KEYS="key1=tenant-a,key2=tenant-b"

or from a keys file for production, where only a key's sha256 is stored::

    {"keys": [{"sha256": "<hex>", "tenant": "tenant-a", "admin": true},
              {"sha256": "<hex>", "tenant": "tenant-b", "revoked": true}]}

(`hash_key` gives the hex for a key). A presented key is hashed and compared with every
known hash in constant time (`hmac.compare_digest`), so neither a match's position nor a
near miss shows in the timing; keys are never logged, and `Tenant` holds no key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from memsdk.errors import InvalidInput

__all__ = ["Tenant", "Keyring", "hash_key", "TENANT_NAME", "KEYS_ENV", "KEY_REQUIRED"]

KEYS_ENV = "MEMSDK_API_KEYS"
#: what a request without a valid key is told, over REST and MCP alike
KEY_REQUIRED = "a valid API key is required: Authorization: Bearer <key>"
#: a tenant's name: it prefixes every scope id the tenant's requests name, so it holds no "/"
TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def hash_key(key: str) -> str:
    """The hex sha256 a keys file stores for ``key``."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class Tenant:
    """Whose data a request may reach: a tenant's name, and whether its key may switch policies."""

    name: str
    admin: bool = False


@dataclass(frozen=True)
class _Entry:
    digest: bytes
    tenant: Tenant
    revoked: bool


class Keyring:
    """The keys a server accepts. `tenant_for` is the only lookup."""

    def __init__(self, entries: Iterable[tuple[str, Tenant, bool]]) -> None:
        """``entries``: (hex sha256 of a key, its tenant, revoked)."""
        self._entries: list[_Entry] = []
        for n, (digest, tenant, revoked) in enumerate(entries):
            if not TENANT_NAME.fullmatch(tenant.name):
                raise InvalidInput(f"keys[{n}].tenant", f"must match {TENANT_NAME.pattern} (it prefixes the tenant's scope ids), got {tenant.name!r}")
            try:
                raw = bytes.fromhex(digest)
            except ValueError:
                raw = b""
            if len(raw) != 32:
                raise InvalidInput(f"keys[{n}].sha256", "must be the 64 hex digits of a key's sha256")
            self._entries.append(_Entry(raw, tenant, revoked))
        if not any(not e.revoked for e in self._entries):
            raise InvalidInput("keys", f"no usable API key: set {KEYS_ENV}=\"key=tenant,...\" or give a keys file")

    @classmethod
    def from_pairs(cls, spec: str, *, admin: Iterable[str] = ()) -> Keyring:
        """``"key1=tenant-a,key2=tenant-b"`` (the `KEYS_ENV` form); tenants in ``admin`` get admin keys."""
        admins = set(admin)
        entries = []
        for n, part in enumerate(p.strip() for p in spec.split(",") if p.strip()):
            key, sep, tenant = part.partition("=")
            if not sep or not key.strip() or not tenant.strip():
                raise InvalidInput(f"{KEYS_ENV}[{n}]", "must be key=tenant")
            entries.append((hash_key(key.strip()), Tenant(tenant.strip(), tenant.strip() in admins), False))
        return cls(entries)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str]) -> Keyring:
        """A keys file (module docstring)."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InvalidInput("keys_file", f"cannot read {path}: {exc}") from None
        rows = data.get("keys") if isinstance(data, Mapping) else None
        if not isinstance(rows, list):
            raise InvalidInput("keys_file", 'must be {"keys": [{"sha256": ..., "tenant": ...}, ...]}')
        entries = []
        for n, row in enumerate(rows):
            if not isinstance(row, Mapping) or not isinstance(row.get("sha256"), str) or not isinstance(row.get("tenant"), str):
                raise InvalidInput(f"keys[{n}]", "needs a string sha256 and a string tenant")
            entries.append((row["sha256"], Tenant(row["tenant"], bool(row.get("admin", False))), bool(row.get("revoked", False))))
        return cls(entries)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None, *, keys_file: str | os.PathLike[str] | None = None) -> Keyring:
        """The keys file when given, else `KEYS_ENV`; `InvalidInput` when neither holds a key."""
        if keys_file is not None:
            return cls.from_file(keys_file)
        return cls.from_pairs((os.environ if environ is None else environ).get(KEYS_ENV, ""))

    def tenant_of(self, authorization: str | None) -> Tenant | None:
        """The tenant of an ``Authorization: Bearer <key>`` header's value, or None."""
        scheme, _, key = (authorization or "").partition(" ")
        return self.tenant_for(key.strip()) if scheme.lower() == "bearer" and key.strip() else None

    def tenant_for(self, key: str) -> Tenant | None:
        """The tenant of ``key``, or None for an unknown or revoked key. Every entry is
        compared, whatever matched, so the time taken does not say which one did."""
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).digest()
        found: Tenant | None = None
        for entry in self._entries:
            if hmac.compare_digest(entry.digest, digest) and not entry.revoked:
                found = entry.tenant
        return found
