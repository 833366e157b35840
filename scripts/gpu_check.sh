#!/usr/bin/env bash
# Checks a GPU machine for training in a few minutes: bf16 autocast, an update on CUDA
# against the same update on CPU, 2-GPU data parallelism where there are two GPUs, peak
# memory and steps/min (scripts/gpu_check.py says what each check asserts). Needs torch
# with CUDA, transformers and peft; no vllm, no memsdk install, no model download.
#   bash scripts/gpu_check.sh [--seconds 20]      PYTHON=python3.11 bash scripts/gpu_check.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-$( [ -x .venv/bin/python ] && echo .venv/bin/python || echo python3 )}"
exec "$PYTHON" scripts/gpu_check.py "$@"
