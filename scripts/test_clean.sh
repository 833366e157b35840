#!/usr/bin/env bash
# `make test-clean`: what CI does, here and before CI. Clone HEAD (committed work only) into
# an empty temporary folder, lay ../shared beside it when there is one (as CI does), and run
# `CI=true make test` there, venvs built from nothing. Prints the wall time; the folder is
# removed afterwards unless KEEP=1.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(mktemp -d "${TMPDIR:-/tmp}/memsdk-clean.XXXXXX")
trap '[[ "${KEEP:-0}" == 1 ]] && echo "kept $root" || rm -rf "$root"' EXIT
git clone -q . "$root/main"
if [[ -d ../shared ]]; then
    cp -r ../shared "$root/shared"
fi
echo "test-clean: $(git rev-parse --short HEAD) in $root/main (../shared: $([[ -d $root/shared ]] && echo yes || echo no))"
start=$(date +%s)
status=0
(cd "$root/main" && CI=true make test) || status=$?
echo "test-clean: exit $status after $(( $(date +%s) - start )) s"
exit $status
