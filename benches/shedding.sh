#!/usr/bin/env bash
# Adaptive shedding side by side (issue 22, "Show"): the queueing mock
# (`--max-concurrency 8 --ttft 20ms --itl 5ms`, 40 tokens an answer: about
# 37 answers a second) behind `sluice run`, pushed past its capacity by two
# `sluice load` runs at once, `interactive` (12 req/s) and `batch` (36 req/s)
# in `x-priority`, 48 req/s in all. Run twice on fresh processes: without
# `shedding:` on the route, then with
#
#   shedding: { priority: { levels: [interactive, batch] },
#               bounds: { ttft_p95: 250ms }, window: 2s, interval: 250ms,
#               hold: 5s, min_requests: 10, retry_after: 2s }
#
# and prints per class and mode: requests, answered, shed (503), the TTFT
# p95 and p99 of the answered ones (from the intended send time), and the
# level changes sluice logged. Release builds.
#
# usage: benches/shedding.sh [--duration SECONDS] [--keep]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

duration=40
install=0
keep=0
niceness=0
rounds=1
connections=0
interactive_rate=12
batch_rate=36
while (($#)); do
    case "$1" in
        *) shared_option "$@" && shift "$taken" ;;
    esac
done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
bench_tools "$install" curl python3
[[ -n ${SLUICE_BIN:-} ]] || build_release
start_work
pin_and_prioritise "sluice load"
cp "${SLUICE_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/sluice}" "$work/sluice"
sluice="$work/sluice"
no_pin=()

shedding="shedding: { priority: { levels: [interactive, batch] }, bounds: { ttft_p95: 250ms }, \
window: 2s, interval: 250ms, hold: 5s, min_requests: 10, retry_after: 2s }"

# run_mode MODE ROUTE_EXTRA: a fresh mock and proxy, both classes at once;
# the results in $work/MODE-{interactive,batch}.json and $work/MODE-events.json.
run_mode() {
    local mode=$1 extra=$2 class rate
    local mock_port admin_port proxy_port mock_pid proxy_pid
    mock_port=$(free_port)
    launch no_pin "$work/mock-$mode.log" "$sluice" mock-llm --listen "127.0.0.1:$mock_port" \
        --ttft 20ms --itl 5ms --tokens 1000 --max-concurrency 8
    mock_pid=$launched
    pids+=("$mock_pid")
    wait_for "mock-$mode" "$mock_pid" "answering" curl -s -o /dev/null "http://127.0.0.1:$mock_port/v1/models"
    admin_port=$(free_port)
    proxy_port=$(free_port)
    {
        sluice_config_head 1 "$admin_port" "$proxy_port"
        echo "  - { name: llm, kind: llm, endpoints: [\"127.0.0.1:$mock_port\"], timeouts: { first_byte: 120s } }"
        echo "routes:"
        echo "  - { name: chat, listener: public, split: { llm: 100 }${extra:+, $extra} }"
    } >"$work/proxy-$mode.yaml"
    launch proxy_pin "$work/proxy-$mode.log" "$sluice" run -c "$work/proxy-$mode.yaml"
    proxy_pid=$launched
    pids+=("$proxy_pid")
    wait_for "proxy-$mode" "$proxy_pid" "answering" curl -s -o /dev/null "http://127.0.0.1:$proxy_port/v1/models"
    for class in interactive batch; do
        rate=$interactive_rate
        [[ $class == batch ]] && rate=$batch_rate
        cat >"$work/$mode-$class.yaml" <<EOT
scenario: shedding-$class
target: { base_url: "http://127.0.0.1:$proxy_port", headers: { x-priority: $class } }
workload: { arrival: { kind: constant, rate: $rate }, duration: ${duration}s, warmup: 2s, seed: 3 }
steps:
  - { name: answer, service: llm, model: m, prompt: hi, max_tokens: 40, stream: true, timeout: 120s }
EOT
    done
    log "$mode: interactive $interactive_rate req/s and batch $batch_rate req/s for ${duration}s"
    launch load_pin "$work/$mode-interactive.out" "$sluice" load "$work/$mode-interactive.yaml" \
        -o "$work/$mode-interactive.json"
    local interactive_pid=$launched
    launch load_pin "$work/$mode-batch.out" "$sluice" load "$work/$mode-batch.yaml" \
        -o "$work/$mode-batch.json"
    local batch_pid=$launched
    wait "$interactive_pid" || [[ $? == 99 ]] || die "interactive load failed: $(tail -n 20 "$work/$mode-interactive.out")"
    wait "$batch_pid" || [[ $? == 99 ]] || die "batch load failed: $(tail -n 20 "$work/$mode-batch.out")"
    local token
    token=$(sed -n 's/^admin token (generated, none configured): //p' "$work/proxy-$mode.log" | head -n 1)
    curl -s "http://127.0.0.1:$admin_port/v1/events" -H "authorization: Bearer $token" \
        >"$work/$mode-events.json"
    curl -s "http://127.0.0.1:$admin_port/metrics" >"$work/$mode-metrics.txt"
    kill -TERM "$proxy_pid" "$mock_pid" 2>/dev/null || true
    wait "$proxy_pid" "$mock_pid" 2>/dev/null || true
}

run_mode off ""
run_mode on "$shedding"

table=$(python3 - "$work" <<'PY'
import json, sys, os
work = sys.argv[1]
def shed(mode, cls):
    # sluice's own count of the class's 503s.
    for line in open(os.path.join(work, f"{mode}-metrics.txt")):
        if line.startswith("sluice_shed_requests_total{") and f'priority="{cls}"' in line:
            return int(float(line.rsplit(" ", 1)[1]))
    return 0
def row(mode, cls):
    r = json.load(open(os.path.join(work, f"{mode}-{cls}.json")))
    s = r["summary"]
    m = s.get("metrics", s)
    fmt = lambda v: "n/a" if v is None else f"{v:.0f}"
    return (f"| {mode} | {cls} | {s['requests']} | {s['completed']} | {s['failed']} | {shed(mode, cls)} "
            f"| {fmt(m.get('p95_ttft_ms'))} | {fmt(m.get('p99_ttft_ms'))} |")
for mode in ("off", "on"):
    for cls in ("interactive", "batch"):
        print(row(mode, cls))
PY
)
changes=$(python3 - "$work/on-events.json" <<'PY'
import json, sys
try:
    events = json.load(open(sys.argv[1]))["events"]
except Exception as e:
    print(f"(events not read: {e})")
    sys.exit(0)
for e in events:
    if e["source"] == "shedding":
        print(f"- {e['action']}")
PY
)

{
    echo "## Adaptive shedding against the queueing mock (issue 22)"
    echo
    echo "Machine: $(machine). Revision: $(sluice_revision). Pinning: $pinning."
    echo "Command: \`benches/shedding.sh --duration $duration\`"
    echo "(mock: \`--ttft 20ms --itl 5ms --tokens 1000 --max-concurrency 8\`, 40 tokens an answer;"
    echo "interactive $interactive_rate req/s and batch $batch_rate req/s, open loop, from the intended send time;"
    echo "shedding on: \`$shedding\`)."
    echo
    echo "| shedding | class | requests | answered | failed | shed (sluice's count) | TTFT p95 ms | TTFT p99 ms |"
    echo "|---|---|---|---|---|---|---|---|"
    echo "$table"
    echo
    echo "Level changes with shedding on:"
    echo
    echo "$changes"
    echo
    echo "Load average at the start and the end: $load_start; $(cut -d' ' -f1-3 /proc/loadavg)."
} | save_report shedding
