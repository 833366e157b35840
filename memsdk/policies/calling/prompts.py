"""Versioned prompt templates, kept as data files in ``prompts/`` (``<role>.<version>.toml``).

A template is a system text and a user text with ``$name`` placeholders (string.Template,
so the JSON braces in the instructions need no escaping), and optionally a
``response_prefix`` the reply is forced to start with when decoding is not constrained,
and a ``stop`` string that ends the JSON (a small model otherwise keeps writing after it
until the token limit: half the latency). The version goes into every
logged policy call, so a trajectory says exactly which prompt produced it.

A prompt's id, ``<role>/<version>`` (``r2_manager/v2``), names it outside the code: a
published policy's manifest records the id its adapter was trained with.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from string import Template

__all__ = ["PromptTemplate", "load_prompt", "split_prompt_id", "DEFAULT_PROMPTS"]

#: The version each role uses unless told otherwise. Chosen on the 20 hand-made manager
#: cases and conv-26 turns (train split) with SmolLM2-135M: v1 replies were prose in nearly
#: every unconstrained call; the later versions start the reply inside the JSON.
DEFAULT_PROMPTS = {"extractor": "v2", "manager": "v3", "answerer": "v3", "r2_extractor": "v2", "r2_manager": "v2", "writer": "v1", "reader": "v1"}


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    role: str
    version: str
    system: str
    user: str
    response_prefix: str = ""
    stop: str = ""

    @property
    def id(self) -> str:
        return f"{self.role}/{self.version}"

    def render(self, **values: str) -> list[dict[str, str]]:
        """Chat messages; a missing placeholder is a programming error and raises KeyError."""
        return [
            {"role": "system", "content": self.system},
            {"role": "user", "content": Template(self.user).substitute(values)},
        ]


@lru_cache(maxsize=None)
def load_prompt(role: str, version: str | None = None) -> PromptTemplate:
    version = version or DEFAULT_PROMPTS.get(role, "v1")
    name = f"{role}.{version}.toml"
    try:
        text = resources.files("memsdk.policies.calling").joinpath("prompts", name).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"no prompt {name} in memsdk/policies/calling/prompts") from None
    data = tomllib.loads(text)
    if (data.get("role"), data.get("version")) != (role, version):
        raise ValueError(f"{name} declares role={data.get('role')!r} version={data.get('version')!r}")
    return PromptTemplate(
        role=role, version=version, system=data["system"].strip(), user=data["user"].strip(),
        response_prefix=data.get("response_prefix", ""), stop=data.get("stop", ""),
    )


def split_prompt_id(prompt_id: str) -> tuple[str, str]:
    """``"r2_manager/v2"`` -> ``("r2_manager", "v2")``: the arguments of `load_prompt`."""
    role, sep, version = prompt_id.partition("/")
    if not (sep and role and version) or "/" in version:
        raise ValueError(f"{prompt_id!r} is not a prompt id (<role>/<version>, e.g. 'manager/v3')")
    return role, version
