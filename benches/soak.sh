#!/usr/bin/env bash
# The soak (issue 19): the release `sluice` binary under mixed traffic (HTTP/1.1 and
# h2c, bodies with a length or chunked, answers with a length, chunked or SSE, every
# body checksummed) while the split swaps every 100 ms, delay experiments toggle, the
# config is read back and put again every 5 s, and the mirror (x2) and the recorder
# run. Every --sample-seconds it reads sluice's RSS and open fds (/proc) and its
# runtimes' live tasks (sluice_runtime_tasks). Prints the series as a Markdown table
# and the goals: no unexpected error, RSS growth under 5% after the warm-up (a third of
# the run), fds and tasks flat, exit 0 on SIGTERM. Exits 1 when one is missed.
#
# usage: benches/soak.sh [--minutes M] [--sample-seconds S] [--max-body BYTES] [--concurrency N]
#   defaults: 30 minutes, 10 s, 65536 bytes, 8 in flight.
#   CI runs 3 minutes of it on the debug build: cargo test -p sluice-benches --test soak
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

args=()
while (($#)); do
    case "$1" in
        --minutes | --sample-seconds | --max-body | --concurrency | --warm-up-minutes)
            args+=("$1" "$2")
            shift 2
            ;;
        *) not_an_option "$1" ;;
    esac
done

log "building (release)"
cargo build --release --locked -p sluice-cli --bin sluice >&2
cargo build --release --locked -p sluice-benches --bin soak >&2
target="${CARGO_TARGET_DIR:-$root/target}"
exec "$target/release/soak" --sluice "$target/release/sluice" "${args[@]}"
