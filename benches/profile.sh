#!/usr/bin/env bash
# Instructions per proxied GET, counted by callgrind (repeatable whatever else the
# machine does). sluice (release, runtime.threads: 1) runs under
# `valgrind --tool=callgrind` in front of `sluice mock-llm`; open_loop sends
# RATE x (DURATION + 1 s warm-up) `GET /v1/models`; the figure is the inclusive
# count of the app's `ServerApp::process_new` (a connection's life, every request on
# it) over the requests sent.
#
#   benches/profile.sh                 500 req/s for 16 s (~8 500 requests), ~1 min
#   benches/profile.sh --rate 300 --duration 10 --keep
#   benches/profile.sh --limits        the route with a rate limit that never refuses
#                                      (as compare.sh --limits), to count what it costs
# The callgrind file is kept in target/bench/callgrind-<date>.out for
# `callgrind_annotate --inclusive=yes FILE`.
set -euo pipefail

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rate=500
duration=16
keep=0
route_extra=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rate) rate=$2 && shift ;;
        --duration) duration=$2 && shift ;;
        --keep) keep=1 ;;
        --limits)
            route_extra=", limits: { descriptor: [header:x-tenant, model], requests_per_minute: 1000000000, total_tokens_per_minute: 1000000000000 }"
            ;;
        *) not_an_option "$1" ;;
    esac
    shift
done
require "apt-get install valgrind" valgrind callgrind_annotate

build_release open_loop
start_work
mock_port="$(free_port)"
port="$(free_port)"
{
    sluice_config_head 1 0 "$port"
    cat <<YAML
  - { name: up, kind: http, endpoints: [127.0.0.1:$mock_port] }
routes:
  - { name: r, listener: public, split: { up: 100 }$route_extra }
YAML
} >"$work/sluice.yaml"
"${CARGO_TARGET_DIR:-$root/target}/release/sluice" mock-llm --listen "127.0.0.1:$mock_port" >"$work/mock.log" 2>&1 &
pids+=($!)
out="$root/target/bench/callgrind-$(date -u +%Y-%m-%dT%H%M%SZ).out"
mkdir -p "$(dirname "$out")"
valgrind --tool=callgrind --callgrind-out-file="$out" "${CARGO_TARGET_DIR:-$root/target}/release/sluice" run -c "$work/sluice.yaml" \
    >"$work/valgrind.log" 2>&1 &
sluice_pid=$!
pids+=("$sluice_pid")
# Under valgrind sluice starts some 50 times slower than natively.
wait_seconds=60 wait_for valgrind "$sluice_pid" "ready on 127.0.0.1:$port" http_200 "http://127.0.0.1:$port/v1/models"
"${CARGO_TARGET_DIR:-$root/target}/release/open_loop" --url "http://127.0.0.1:$port/v1/models" --rate "$rate" \
    --duration "$duration" --connections 8 >&2
kill -INT "$sluice_pid"
wait "$sluice_pid" || true
callgrind_annotate --inclusive=yes "$out" >"$work/annotate.txt" 2>/dev/null
# The app's `process_new` (sluice's listener-limits wrapper around pingora's), the
# top inclusive line of that name: a connection's whole life, every request on it.
line="$(grep -m1 'ServerApp>::process_new::{{closure}}' "$work/annotate.txt")"
total="$(awk '{ gsub(",", "", $1); print $1 }' <<<"$line")"
# Every request open_loop sent (warm-up included) plus the readiness probe.
requests=$(((1 + duration) * rate + 1))
echo "instructions in process_new: $total; requests sent: ~$requests;" \
    "per request: $(awk -v t="$total" -v n="$requests" 'BEGIN { printf "%.1f k", t / n / 1000 }')"
echo "callgrind file: $out"
