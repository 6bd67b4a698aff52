#!/usr/bin/env bash
# Streaming scale bench: N concurrent SSE streams from `sluice mock-llm`, direct vs
# through sluice (runtime.threads: 1). Prints a markdown table: TTFT and its
# overhead, gaps between chunks, coalesced chunks, sluice RSS idle → all streams
# open, and RSS per open stream. sluice runs on core 1; the mock and the client on
# core 0; every process in its own session at nice -19 (as benches/compare.sh).
#
#   benches/streams.sh                      1k and 10k streams, 2 rounds each
#   benches/streams.sh --streams 100 --ramp-ms 1000
# nginx, when installed, is measured beside sluice as a peer (one worker on
# sluice's core, proxy_buffering off); --no-nginx leaves it out.
# Every other flag goes to `stream_scale` (see `stream_scale --help`).
set -euo pipefail

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

niceness=-19
keep=0
args=()
with_nginx=1
for a in "$@"; do
    case $a in
        --no-nginx) with_nginx=0 ;;
        -h | --help) not_an_option "$a" ;;
        *) args+=("$a") ;;
    esac
done
peer=()
if ((with_nginx)); then
    if nginx_bin="$(command -v nginx)"; then
        peer=(--nginx "$nginx_bin")
    else
        log "nginx not installed: measuring without a peer"
    fi
fi

build_release stream_scale
start_work
pin_and_prioritise "mock LLM and client"
sluice_core=()
[[ ${#proxy_pin[@]} -gt 0 && $(nproc) -ge 2 ]] && sluice_core=(--sluice-core 1)
log "pinning: $pinning; priority: $priority"
run_load "$work/stream_scale.out" "${CARGO_TARGET_DIR:-$root/target}/release/stream_scale" "${sluice_core[@]}" "${peer[@]}" "${args[@]}"
cat "$work/stream_scale.out"
