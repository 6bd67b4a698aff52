#!/usr/bin/env bash
# The test command: installs what the tests need (idempotent), then runs every test
# in the workspace. Extra arguments go to `cargo test`, e.g. `scripts/test.sh -- redis`.
# Ends with one line adding up every test binary: `tests: N passed, N failed`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
# The e2e helpers find the venv interpreter (openai SDK, llama.cpp server) through this.
export SLUICE_PYTHON="$PWD/.venv/bin/python"

log="$(mktemp)"
trap 'rm -f "$log"' EXIT
status=0
cargo test --workspace --locked "$@" 2>&1 | tee "$log" || status=$?
# cargo's last line is a doc-test binary with 0 tests: add every binary up.
awk '/^test result:/ { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
     END { printf "tests: %d passed, %d failed\n", p, f }' "$log"
exit "$status"
