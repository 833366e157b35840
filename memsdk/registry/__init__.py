"""Policy checkpoints: what the trainer publishes and the client hot-swaps in."""

from memsdk.registry.gate import GateConfig, GateDecision, decide, paired_comparison
from memsdk.registry.registry import BASE_VERSION, ROLES, PolicyManifest, PolicyRegistry, Promotion

__all__ = ["BASE_VERSION", "ROLES", "GateConfig", "GateDecision", "PolicyManifest", "PolicyRegistry", "Promotion", "decide", "paired_comparison"]
