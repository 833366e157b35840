"""Policy checkpoints: what the trainer publishes and the client hot-swaps in."""

from memsdk.registry.registry import BASE_VERSION, PACKAGED_DIR, ROLES, PolicyManifest, PolicyRegistry, Promotion, model_key

__all__ = ["BASE_VERSION", "PACKAGED_DIR", "ROLES", "PolicyManifest", "PolicyRegistry", "Promotion", "model_key"]
