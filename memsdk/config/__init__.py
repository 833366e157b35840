"""How a client is configured: its settings (`ClientConfig`, `client.py`) and what serves each
policy role (`LLMSpec`, `RolePolicies`, `roles.py`: the types of ``ClientConfig.policies``)."""

from memsdk.config.client import ClientConfig
from memsdk.config.roles import MEASURED_DEFAULTS, POLICY_ROLES, LLMSpec, RolePolicies, label, role_choice

__all__ = ["ClientConfig", "LLMSpec", "RolePolicies", "MEASURED_DEFAULTS", "POLICY_ROLES", "label", "role_choice"]
