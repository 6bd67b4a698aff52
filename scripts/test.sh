#!/usr/bin/env bash
# The test command: installs what the tests need (idempotent), then runs every test
# in the workspace. Extra arguments go to `cargo test`, e.g. `scripts/test.sh -- redis`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

bash scripts/install-deps.sh
# The e2e helpers find the venv interpreter (with the openai SDK) through this.
export SLUICE_PYTHON="$PWD/.venv/bin/python"
exec cargo test --workspace "$@"
