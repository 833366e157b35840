"""Cold start of `memsdk serve`: how long a restarted server takes to say ready, and what its
first ingest and its first answer cost beside warm ones.

    .venv/bin/python benchmarks/cold_start.py [--runs 3] [--source DIR ...]

Each run starts `memsdk serve` (the defaults: real MiniLM, ``--policies auto``) as a process
on a data dir a previous run of the same source wrote (a restart, not a first install),
then measures, over loopback: seconds from the start until the port answers and until
``/readyz`` says 200; the first ``/v1/ingest`` after that, and the median of the next ten;
the first ``/v1/answer``, and the median of the next two. ``--source`` names other checkouts
of memsdk to run the same way (their ``memsdk`` package first on the path), interleaved run
by run with this one so that a busy machine weighs on each alike; ``git archive HEAD | tar
-x -C /tmp/head`` makes one of the last commit.
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
KEY = "cold-key"
AUTH = {"Authorization": f"Bearer {KEY}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def timed(call: Callable[[], httpx.Response]) -> float:
    started = time.perf_counter()
    r = call()
    assert r.status_code == 200, r.text
    return time.perf_counter() - started


def run(source: Path, data_dir: Path, n: int) -> dict[str, float]:
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "MEMSDK_API_KEYS": f"{KEY}=cold", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "PYTHONPATH": str(source)}
    started = time.perf_counter()
    log = open(data_dir.parent / f"{data_dir.name}-{n}.log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "memsdk.cli", "--data-dir", str(data_dir), "serve", "--port", str(port)], cwd=source, env=env, stdout=log, stderr=subprocess.STDOUT)
    listening = None
    try:
        while True:
            try:
                ready = httpx.get(f"{url}/readyz", timeout=2).status_code == 200
                listening = listening or time.perf_counter() - started
                if ready:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, f"memsdk serve exited; see {log.name}"
            time.sleep(0.05)
        out = {"listening_s": listening or 0.0, "ready_s": time.perf_counter() - started}
        with httpx.Client(base_url=url, headers=AUTH, timeout=600) as h:
            scope = {"user_id": f"run-{n}"}
            ingests = [timed(lambda i=i: h.post("/v1/ingest", json={"scope": scope, "turn": {"speaker": "Bob", "text": f"Run {n}: I moved to city {i} last week"}})) for i in range(11)]
            answers = [timed(lambda q=q: h.post("/v1/answer", json={"scope": scope, "question": q})) for q in ("Where did Bob move?", "Where does Bob live now?", "When did Bob move?")]
        return out | {"first_ingest_s": ingests[0], "warm_ingest_s": statistics.median(ingests[1:]), "first_answer_s": answers[0], "warm_answer_s": statistics.median(answers[1:])}
    finally:
        proc.terminate()
        proc.wait(timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--source", type=Path, nargs="*", default=[], help="other checkouts of memsdk to measure the same way")
    args = parser.parse_args()
    sources = [ROOT, *args.source]
    work = Path(tempfile.mkdtemp(prefix="memsdk-cold-start-"))
    results: dict[Path, list[dict[str, float]]] = {s: [] for s in sources}
    for n in range(args.runs + 1):  # run 0 writes the data dir (a first install): not reported
        for i, source in enumerate(sources):
            got = run(source, work / f"data-{i}", n)
            if n:
                results[source].append(got)
    print(f"\nmemsdk serve, restarted on its data dir: median of {args.runs} runs, seconds (loopback, real MiniLM, --policies auto)\n")
    print("| source | port answers | /readyz 200 | first ingest | warm ingest | first / warm | first answer | warm answer |")
    print("|---|---|---|---|---|---|---|---|")
    for source, runs in results.items():
        m = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        print(f"| {source} | {m['listening_s']:.1f} | {m['ready_s']:.1f} | {m['first_ingest_s']:.3f} | {m['warm_ingest_s']:.3f} | {m['first_ingest_s'] / m['warm_ingest_s']:.1f}x | {m['first_answer_s']:.2f} | {m['warm_answer_s']:.2f} |")


if __name__ == "__main__":
    main()
