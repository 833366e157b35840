"""Versioned prompt templates, kept as data files in ``prompts/`` (``<role>.<version>.toml``).

A template is a system text and a user text with ``$name`` placeholders (string.Template,
so the JSON braces in the instructions need no escaping). The version goes into every
logged policy call, so a trajectory says exactly which prompt produced it.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template

__all__ = ["PromptTemplate", "load_prompt"]


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    role: str
    version: str
    system: str
    user: str

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages; a missing placeholder is a programming error and raises KeyError."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": Template(self.user).substitute(values)},
        ]


@lru_cache(maxsize=None)
def load_prompt(role: str, version: str = "v1") -> PromptTemplate:
    name = f"{role}.{version}.toml"
    try:
        text = resources.files("memsdk.policies").joinpath("prompts", name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"no prompt {name} in memsdk/policies/prompts") from None
    data = tomllib.loads(text)
    if (data.get("role"), data.get("version")) != (role, version):
        raise ValueError(f"{name} declares role={data.get('role')!r} version={data.get('version')!r}")
    return PromptTemplate(role=role, version=version, system=data["system"].strip(), user=data["user"].strip())
