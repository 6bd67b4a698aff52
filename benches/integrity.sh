#!/usr/bin/env bash
# Integrity under churn (issue 19): checksummed requests through sluice while the
# split swaps every 100 ms, delay experiments come and go, the config is read back
# and put again every 5 s, and every request is mirrored twice. Every body, each
# way, carries its SHA-256; bodies are log-uniform from 1 B to --max-body (median
# its square root: 2 KiB at 4 MiB); HTTP/1.1 and h2c, requests with a length or
# chunked, answers with a length, chunked or SSE. Prints the totals (what the
# client, the upstreams, the shadow and sluice each counted) and exits 1 unless
# they add up with nothing corrupted and nothing failed.
#
# usage: benches/integrity.sh [--requests N] [--max-body BYTES] [--concurrency N] [--seed S]
#   defaults: 1000000 requests, 4194304 bytes, 32 in flight, seed 1.
#   CI runs 50,000 with bodies up to 128 KiB: cargo test -p sluice-benches --test integrity
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

args=()
while (($#)); do
    case "$1" in
        --requests | --max-body | --concurrency | --seed)
            args+=("$1" "$2")
            shift 2
            ;;
        *) not_an_option "$1" ;;
    esac
done

log "building (release)"
cargo build --release --locked -p sluice-benches --bin integrity >&2
target="${CARGO_TARGET_DIR:-$root/target}"
exec "$target/release/integrity" "${args[@]}"
