"""A `memsdk serve` app for the crash test: ``python -m tests.server.crash_server DATA_DIR PORT``.

The hashing embedder and heuristic policies make it start in about a second, so the test
can kill and restart it thirty times; everything else is what `memsdk serve` runs.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path

import uvicorn

from memsdk import MemoryClient
from memsdk.embedding import HashEmbedder
from memsdk.server import Keyring, create_app

KEY = "crash-key"

if __name__ == "__main__":
    data_dir, port = sys.argv[1], int(sys.argv[2])
    # beside the data: what each life of the server replayed, for a failure's post-mortem
    logging.basicConfig(filename=Path(data_dir).parent / "server.log", level=logging.INFO)
    with MemoryClient(data_dir=data_dir, embedder=HashEmbedder(64), policies="heuristic") as client:
        uvicorn.run(create_app(client, Keyring.from_pairs(f"{KEY}=crash")), host="127.0.0.1", port=port, log_level="warning")
