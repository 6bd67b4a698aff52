#!/usr/bin/env bash
# The main job: builds sluice and runs `sluice demo` (a stable and a canary
# mock LLM, the proxy, built-in traffic, a rollout rolled back live at step 3
# and a healthy one promoted; about a minute, then it exits). Installs what the
# build lacks (cmake) first. Extra arguments go to `sluice`, e.g.
# `scripts/run.sh run` to serve the embedded default (proxy on 127.0.0.1:8080,
# control API on 127.0.0.1:9901) until stopped, or
# `scripts/run.sh validate configs/sidecar.yaml`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if ! command -v cmake >/dev/null 2>&1; then
    echo "run: installing cmake (pingora's zlib build needs it)"
    apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq cmake >/dev/null
fi
cargo build --release -p sluice-cli --bin sluice
if [[ $# -eq 0 ]]; then
    set -- demo
fi
exec target/release/sluice "$@"
