"""Examples that cannot rot: each runs here end to end on the embedded default (real
MiniLM, embedded Qdrant), with heuristic policies so that the outcome does not depend on a
135M model's numerics."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(script: str, stdin: str, tmp_path: Path, *args: str) -> str:
    env = {**os.environ, "MEMSDK_POLICIES": "heuristic", "MEMSDK_DATA_DIR": str(tmp_path / "data"), "HF_HUB_OFFLINE": "1"}
    done = subprocess.run([sys.executable, str(ROOT / "examples" / script), *args], input=stdin, capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout


@pytest.mark.slow
def test_the_chatbot_remembers_across_runs_and_forgets_on_request(tmp_path: Path) -> None:
    first = _run("chatbot.py", "My dog is called Buddy\nI work as a nurse in Boston\n/quit\n", tmp_path, "--user", "alice")
    assert first.count("noted (") == 2
    # a second process on the same data dir: the memory survived, and it is alice's only
    second = _run("chatbot.py", "What is my dog called?\n/memories\n", tmp_path, "--user", "alice")
    answer = second.split("> What is my dog called?\n", 1)[1].split("> /memories", 1)[0]
    assert "My dog is called Buddy" in answer  # cited as evidence, whatever the answer text
    assert "I work as a nurse in Boston" in second.split("> /memories", 1)[1]
    other = _run("chatbot.py", "/memories\n", tmp_path, "--user", "bob")
    assert "(nothing yet)" in other
    listing = second.split("> /memories", 1)[1]
    buddy_id = next(line.split()[0] for line in listing.splitlines() if "[episodic]" in line and "Buddy" in line)
    gone = _run("chatbot.py", f"/forget {buddy_id}\n/forget not-an-id\n/memories\n", tmp_path, "--user", "alice")
    assert "forgot: My dog is called Buddy (restorable)" in gone
    assert "not a memory id" in gone
    assert buddy_id not in gone.split("> /memories", 1)[1]
