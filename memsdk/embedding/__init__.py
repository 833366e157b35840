"""Embedders: the protocol, the real MiniLM model, and a hashing fake for unit tests."""

from memsdk.embedding.base import CachedEmbedder, Embedder, HashEmbedder
from memsdk.embedding.minilm import SentenceTransformerEmbedder, minilm_path

__all__ = ["CachedEmbedder", "Embedder", "HashEmbedder", "SentenceTransformerEmbedder", "minilm_path"]
