#!/usr/bin/env bash
# Re-resolve both venvs' dependencies from scratch and write the locks (`make lock`):
#   constraints/dev.txt   .venv       (pyproject.toml's extras test,training,charts,langchain,server,otel)
#   constraints/vllm.txt  .venv-vllm  (scripts/setup_vllm.sh)
# Each venv is built exactly as make builds it, but with an empty constraints file, so pip
# takes the newest versions the metadata allows; `pip freeze` then records them. torch is
# left out: the Makefile and setup_vllm.sh pin it themselves (the platform's wheel).
# Then run `make test`: a lock is only worth committing once the suite passes with it.
set -euo pipefail
cd "$(dirname "$0")/.."
scratch=build/lock
rm -rf "$scratch" && mkdir -p "$scratch"

write_lock() {  # venv, lock file, what it is for
    {
        echo "# $3"
        echo "# Written by \`make lock\` on $(date -u +%Y-%m-%d) with $("$1/bin/python" --version); do not edit by hand."
        "$1/bin/python" -m pip freeze --exclude-editable --disable-pip-version-check | grep -viE '^(torch)==' | LC_ALL=C sort -f
    } > "$2"
    echo "lock: wrote $2 ($(grep -vc '^#' "$2") packages)"
}

make --no-print-directory venv VENV="$scratch/dev" LOCK=/dev/null
write_lock "$scratch/dev" constraints/dev.txt "Versions .venv is built with (make venv: pip install -c constraints/dev.txt)."
scripts/setup_vllm.sh "$scratch/vllm" /dev/null
write_lock "$scratch/vllm" constraints/vllm.txt "Versions .venv-vllm is built with (scripts/setup_vllm.sh: pip install -c constraints/vllm.txt)."
rm -rf "$scratch"
