"""The public surface: what `import memsdk` exports, and what it must not drag in."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import memsdk

ROOT = Path(__file__).resolve().parents[1]
HEAVY = ("torch", "transformers", "sentence_transformers", "qdrant_client", "qdrant_edge")


def test_every_exported_name_exists_and_is_listed() -> None:
    assert sorted(memsdk.__all__) == memsdk.__all__
    for name in memsdk.__all__:
        assert getattr(memsdk, name) is not None
    public = {n for n in vars(memsdk) if not n.startswith("_") and n[0].isupper()}
    assert public <= set(memsdk.__all__), public - set(memsdk.__all__)


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


def test_the_runtime_never_imports_the_trainer_or_the_adapters() -> None:
    # a runtime install must not need the trainer (ARCHITECTURE.md, dependency direction)
    import ast

    offenders = []
    for path in (ROOT / "memsdk").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in ("memsdk_training", "memsdk_adapters")]
    assert offenders == []
