#!/usr/bin/env bash
# The main job: builds sluice and serves the embedded default (a proxy on
# 127.0.0.1:8080 in front of a built-in mock LLM, control API on 127.0.0.1:9901).
# Installs what the build lacks (cmake) first. Extra arguments go to `sluice`,
# e.g. `scripts/run.sh validate configs/sidecar.yaml`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cmake >/dev/null 2>&1; then
    echo "run: installing cmake (pingora's zlib build needs it)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null
fi
cargo build --release -p sluice-proxy --bin sluice
if [[ $# -eq 0 ]]; then
    set -- run
fi
exec target/release/sluice "$@"
