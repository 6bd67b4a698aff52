#!/usr/bin/env bash
# A real capacity search (issue 16, "Show"): `sluice capacity` against the
# queueing mock (`--max-concurrency 8 --itl 5ms`, 20 ms to the first token,
# 32-96 output tokens a request) behind `sluice run`, release builds. Then:
#
#   capacity   the mock's own: 8 slots over the mean service time of the
#              lowest stage (no queueing there), as the mock really paced it
#   found      max_rate of the search; goal within 10% of the capacity
#   knee       the throughput knee; goal at the saturation point
#   slope      the P99 slope at the lowest stage that has one, against that
#              stage's mean TPOT (the mock's real cost of a token); goal 15%
#
# usage: benches/capacity.sh [--stage SECONDS] [--budget SECONDS] [--sla SLA] [--keep]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stage=15
budget=360
sla="ttft_p95=250ms,error_rate=1%"
install=0
keep=0
niceness=0
rounds=1
connections=0
duration=0
while (($#)); do
    case "$1" in
        --stage) stage=$2 && shift 2 ;;
        --budget) budget=$2 && shift 2 ;;
        --sla) sla=$2 && shift 2 ;;
        *) shared_option "$@" && shift "$taken" ;;
    esac
done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
bench_tools "$install" curl python3
[[ -n ${SLUICE_BIN:-} ]] || build_release
start_work
pin_and_prioritise "sluice capacity"
cp "${SLUICE_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/sluice}" "$work/sluice"
sluice="$work/sluice"
no_pin=()

mock_port=$(free_port)
launch no_pin "$work/mock.log" "$sluice" mock-llm --listen "127.0.0.1:$mock_port" \
    --ttft 20ms --itl 5ms --tokens 1000 --max-concurrency 8
pids+=("$launched")
wait_for mock "$launched" "answering" curl -s -o /dev/null "http://127.0.0.1:$mock_port/v1/models"

admin_port=$(free_port)
proxy_port=$(free_port)
{
    sluice_config_head 1 "$admin_port" "$proxy_port"
    echo "  - { name: llm, kind: llm, endpoints: [\"127.0.0.1:$mock_port\"], timeouts: { first_byte: 60s } }"
    echo "routes:"
    echo "  - { name: chat, listener: public, split: { llm: 100 } }"
} >"$work/proxy.yaml"
launch proxy_pin "$work/proxy.log" "$sluice" run -c "$work/proxy.yaml"
pids+=("$launched")
wait_for proxy "$launched" "answering" curl -s -o /dev/null "http://127.0.0.1:$proxy_port/v1/models"

cat >"$work/scenario.yaml" <<EOT
scenario: capacity-bench
target: { base_url: "http://127.0.0.1:$proxy_port" }
workload: { arrival: { kind: constant, rate: 4 }, duration: 10s, warmup: 2s, seed: 5 }
steps:
  - { name: answer, service: llm, model: m, prompt: hi, max_tokens: 32-96, stream: true }
EOT
log "searching (stage ${stage}s, budget ${budget}s, --sla $sla)"
run_load "$work/capacity.out" "$sluice" capacity "$work/scenario.yaml" --sla "$sla" \
    --stage "${stage}s" --confirm "$((stage * 2))s" --budget "${budget}s" --drain 5s \
    -o "$work/capacity.json"

figures=$(python3 - "$work/capacity.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
stages = r["stages"]
low = min(stages, key=lambda s: s["rate"])
service_s = low["run"]["summary"]["mean_service_time_ms"] / 1000
capacity = 8 / service_s
found = r["max_rate"]
knee = r["knee"]["rate"]
sloped = min((s for s in stages if s.get("p99_slope_ms_per_token") is not None), key=lambda s: s["rate"])
slope = sloped["p99_slope_ms_per_token"]
tpot = sloped["run"]["summary"]["mean_tpot_ms"]
fmt = lambda v: "none" if v is None else f"{v:.2f}"
print(f"| mock capacity (8 / mean service time {service_s*1000:.0f} ms at {low['rate']:.1f} req/s) | {capacity:.2f} req/s | |")
print(f"| found: max_rate | {fmt(found)} req/s | {fmt(found / capacity if found else None)}× capacity (goal within 10%) |")
print(f"| recommended_rate | {fmt(r['recommended_rate'])} req/s | {r['binding']} |")
print(f"| throughput knee | {fmt(knee)} req/s | {fmt(knee / capacity if knee else None)}× capacity (goal: at saturation) |")
print(f"| P99 slope at {sloped['rate']:.1f} req/s | {slope:.2f} ms/token | {slope / tpot:.2f}× its mean TPOT {tpot:.2f} ms (goal within 15%) |")
print(f"| stages | {len(stages)} in {r['elapsed_s']:.0f} s | |")
PY
)

{
    echo "## sluice capacity against the queueing mock (issue 16)"
    echo
    echo "Machine: $(machine). Revision: $(sluice_revision). Pinning: $pinning."
    echo "Command: \`benches/capacity.sh --stage $stage --budget $budget --sla $sla\`"
    echo "(mock: \`--ttft 20ms --itl 5ms --tokens 1000 --max-concurrency 8\`, 32-96 tokens a request, behind \`sluice run\`)."
    echo
    echo "| figure | value | against |"
    echo "|---|---|---|"
    echo "$figures"
    echo
    echo "Load average at the start and the end: $load_start; $(cut -d' ' -f1-3 /proc/loadavg)."
} | save_report capacity
