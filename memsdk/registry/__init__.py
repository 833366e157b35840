"""Policy checkpoints: what the trainer publishes and the client hot-swaps in."""

from memsdk.registry.registry import BASE_VERSION, ROLES, PolicyManifest, PolicyRegistry

__all__ = ["BASE_VERSION", "ROLES", "PolicyManifest", "PolicyRegistry"]
