#!/usr/bin/env bash
# The test command: installs what the tests need (idempotent), then runs every test
# in the workspace. Extra arguments go to `cargo test`, e.g. `scripts/test.sh -- redis`.
# Ends with one line adding up every test binary: `tests: N passed, N failed`.
# Then, on a whole run (no arguments), the fuzzers: benches/fuzz.sh, 20 s per target
# (SLUICE_FUZZ_SECONDS; 0 skips), if the nightly toolchain is there and cargo-fuzz is or
# installs; a crash fails the run.
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

fuzz_seconds=${SLUICE_FUZZ_SECONDS:-20}
if (($#)) || [[ $fuzz_seconds == 0 ]]; then
    echo "fuzz: skipped (a filtered run or SLUICE_FUZZ_SECONDS=0)"
elif ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz: skipped: no nightly toolchain, which cargo-fuzz needs (rustup toolchain install nightly)"
elif ! cargo +nightly fuzz --version >/dev/null 2>&1 && ! cargo install cargo-fuzz --locked; then
    echo "fuzz: skipped: cargo-fuzz is not installed and did not install (cargo install cargo-fuzz --locked)"
else
    began=$SECONDS
    bash benches/fuzz.sh --quick --seconds "$fuzz_seconds" || status=$?
    echo "fuzz: $((SECONDS - began)) s"
fi
exit "$status"
