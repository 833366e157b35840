"""The public surface: what `import memsdk` exports, and what it must not drag in."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
from pathlib import Path

import memsdk

ROOT = Path(__file__).resolve().parents[1]
#: httpx: only the remote client needs it, imported when `url=` asks for one
HEAVY = ("torch", "transformers", "sentence_transformers", "qdrant_client", "qdrant_edge", "httpx")


def test_every_exported_name_exists_and_is_listed() -> None:
    assert sorted(memsdk.__all__) == memsdk.__all__
    for name in memsdk.__all__:
        assert getattr(memsdk, name) is not None
    public = {n for n in vars(memsdk) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(memsdk.__all__), public - set(memsdk.__all__)


def test_every_public_method_of_both_clients_is_documented_and_the_twins_alike() -> None:
    from memsdk import AsyncMemoryClient, MemoryClient

    for cls in (MemoryClient, AsyncMemoryClient):
        bare = [n for n in dir(cls) if not n.startswith("_") and not (getattr(cls, n).__doc__ or "").strip()]
        assert bare == [], (cls.__name__, bare)
    # the async twin says what the sync one says, unless it documents something of its own
    own = {"aclose", "start"}
    for name in {n for n in dir(AsyncMemoryClient) if not n.startswith("_") and callable(getattr(AsyncMemoryClient, n))} - own:
        assert AsyncMemoryClient.__dict__.get(name, getattr(AsyncMemoryClient, name)).__doc__ == getattr(MemoryClient, name).__doc__, name


def test_the_async_twin_takes_the_same_arguments_as_the_sync_client() -> None:
    """aio.py mirrors sync.py by hand (README "Where things live": the ~66 lines that differ
    are the I/O itself); what an app calls must not drift: same methods, same parameters,
    same defaults, each awaited."""
    import inspect

    from memsdk import AsyncMemoryClient, MemoryClient

    own = {"aclose", "start"}  # the async lifecycle; the sync client's is close()
    for name in sorted(n for n in dir(MemoryClient) if not n.startswith("_") and n != "close" and callable(getattr(MemoryClient, n))):
        sync, twin = inspect.signature(getattr(MemoryClient, name)), inspect.signature(getattr(AsyncMemoryClient, name))
        assert [(p.name, p.kind, p.default) for p in sync.parameters.values()] == [(p.name, p.kind, p.default) for p in twin.parameters.values()], name
        # watch_policies only starts a background task, on the running loop: nothing to await
        assert inspect.iscoroutinefunction(getattr(AsyncMemoryClient, name)) == (name != "watch_policies"), name
    assert {n for n in dir(AsyncMemoryClient) if not n.startswith("_")} - own == {n for n in dir(MemoryClient) if not n.startswith("_")} - {"close"}


def test_every_exported_class_and_function_and_their_methods_have_a_docstring() -> None:
    """What the API page shows (docs/api.md) is never a bare signature."""
    import inspect

    bare = []
    for name in memsdk.__all__:
        obj = getattr(memsdk, name)
        if (inspect.isclass(obj) or inspect.isfunction(obj)) and not (obj.__doc__ or "").strip():
            bare.append(name)
        for member, value in vars(obj).items() if inspect.isclass(obj) else ():
            call = value.fget if isinstance(value, property) else value
            if not member.startswith("_") and callable(call) and not (getattr(call, "__doc__", None) or "").strip():
                bare.append(f"{name}.{member}")
    assert bare == [], bare


def test_import_memsdk_stays_light() -> None:
    code = f"import sys, memsdk; print([m for m in {HEAVY!r} if m in sys.modules])"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


def test_every_package_folder_is_listed_in_pyproject() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    for import_name, folder in config["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(ROOT / folder).parts
            assert ".".join((import_name, *rel)) in listed, f"{init.parent} is not in pyproject's packages"


#: what memsdk/ must never import: the trainer and the adapters, by their installed names
#: and by their folder names (importable from the repository root only, so such an import
#: passes here and fails for every user)
FORBIDDEN = ("memsdk_training", "memsdk_adapters", "training", "adapters")


def forbidden_imports(source: str) -> list[str]:
    """The modules of ``FORBIDDEN`` that ``source`` imports, wherever the import is: at the
    top, lazily inside a function or under TYPE_CHECKING (`ast.walk` sees every node), or by
    name through importlib.import_module / __import__."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else []  # relative: inside memsdk
        elif isinstance(node, ast.Call) and _callee(node.func) in ("import_module", "__import__") and node.args:
            first = node.args[0]
            names = [first.value] if isinstance(first, ast.Constant) and isinstance(first.value, str) else []
        else:
            names = []
        found += [n for n in names if n.split(".")[0] in FORBIDDEN]
    return found


def _callee(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def test_the_runtime_never_imports_the_trainer_or_the_adapters() -> None:
    # a runtime install must not need the trainer (README, dependency direction)
    offenders = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "memsdk").rglob("*.py"))
        for name in forbidden_imports(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_the_layering_check_sees_every_form_of_import() -> None:
    # each form once, so the test above cannot pass by not looking
    source = """
import memsdk_training
import os, memsdk_adapters.langchain as lc
from memsdk_training.recipes import grpo
from training.env import episodes
from . import training
from .adapters import x
import memsdk.training_notes

def lazy():
    from memsdk_adapters.langchain import MemsdkStore
    import importlib
    importlib.import_module("memsdk_training.cli")
    __import__("adapters.langchain")
    importlib.import_module(name_from_config)

if TYPE_CHECKING:
    from memsdk_training.checkpoint import Checkpoint
"""
    assert sorted(forbidden_imports(source)) == sorted([
        "memsdk_training", "memsdk_adapters.langchain", "memsdk_training.recipes", "training.env",
        "memsdk_adapters.langchain", "memsdk_training.cli", "adapters.langchain", "memsdk_training.checkpoint",
    ])  # fmt: skip
