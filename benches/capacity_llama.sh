#!/usr/bin/env bash
# A capacity search against a real model (issue 16, "Show"): `sluice capacity`
# against llama.cpp's own server (xllamacpp, 2 slots, 1 thread) serving
# SmolLM2-135M behind `sluice run`, within a 5-minute budget, then
# `sluice report` on the result and a screenshot of the page in headless
# Chromium with the network off. Prints the stages, the rate found, the knee,
# the P99 slope against the model's own TPOT, and the time the search took.
#
# usage: benches/capacity_llama.sh [--stage SECONDS] [--budget SECONDS] [--sla SLA] [--keep]
# Needs the test venv (scripts/install-deps.sh): SLUICE_PYTHON or .venv/bin/python.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

stage=40
budget=300
sla="ttft_p95=2s,error_rate=1%"
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

python=${SLUICE_PYTHON:-$root/.venv/bin/python}
[[ -x $python ]] || die "no venv python at $python (run scripts/install-deps.sh)"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)
bench_tools "$install" curl python3 chromium
[[ -n ${SLUICE_BIN:-} ]] || build_release
start_work
pin_and_prioritise "sluice capacity"
cp "${SLUICE_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/sluice}" "$work/sluice"
sluice="$work/sluice"
no_pin=()

llama_port=$(free_port)
launch no_pin "$work/llama.log" "$python" "$root/tests/e2e/py/llama_server.py" "$llama_port" 0
pids+=("$launched")
wait_seconds=60 wait_for llama "$launched" "answering" curl -s -o /dev/null "http://127.0.0.1:$llama_port/v1/models"

admin_port=$(free_port)
proxy_port=$(free_port)
{
    sluice_config_head 1 "$admin_port" "$proxy_port"
    echo "  - { name: llama, kind: llm, version: smollm2-q4_1, endpoints: [\"127.0.0.1:$llama_port\"], timeouts: { first_byte: 60s } }"
    echo "routes:"
    echo "  - { name: chat, listener: public, split: { llama: 100 } }"
} >"$work/proxy.yaml"
launch proxy_pin "$work/proxy.log" "$sluice" run -c "$work/proxy.yaml"
pids+=("$launched")
wait_for proxy "$launched" "answering" curl -s -o /dev/null "http://127.0.0.1:$proxy_port/v1/models"

cat >"$work/scenario.yaml" <<EOT
scenario: capacity-llama
target: { base_url: "http://127.0.0.1:$proxy_port" }
workload: { arrival: { kind: poisson, rate: 1 }, duration: 10s, warmup: 2s, seed: 5 }
steps:
  - { name: answer, service: llm, model: smollm2, prompt: "Tell me about {{topic}}.",
      max_tokens: 8-40, ignore_eos: true, stream: true, timeout: 60s }
data: { topic: { values: [rivers, bridges, caches, queues, lighthouses] } }
cost: { gpu_hour: 2.5, gpus: 1 }
EOT
log "searching (stage ${stage}s, budget ${budget}s, --sla $sla)"
begun=$(date +%s)
run_load "$work/capacity.out" "$sluice" capacity "$work/scenario.yaml" --sla "$sla" \
    --stage "${stage}s" --confirm "$((stage * 2))s" --budget "${budget}s" --drain 10s \
    --start 1 -o "$work/capacity.json" || true
took=$(($(date +%s) - begun))
[[ -s $work/capacity.json ]] || die "no capacity.json: $(tail -n 20 "$work/capacity.out")"
"$sluice" report "$work/capacity.json" -o "$work/report.html" >&2
mkdir -p target/artifacts
chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync --hide-scrollbars \
    --proxy-server=127.0.0.1:9 --host-resolver-rules="MAP * ~NOTFOUND" \
    --user-data-dir="$work/chromium" --window-size=1280,2600 \
    --screenshot="$root/target/artifacts/capacity-llama.png" "file://$work/report.html" 2>/dev/null >&2
cp "$work/report.html" "$root/target/artifacts/capacity-llama.html"

figures=$(python3 - "$work/capacity.json" "$work/report.html" "$took" "$budget" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
took, budget = int(sys.argv[3]), int(sys.argv[4])
stages = sorted(r["stages"], key=lambda s: s["rate"])
fmt = lambda v, d=2: "none" if v is None else f"{v:.{d}f}"
for s in stages:
    sla = ", ".join(f"{c['gate']} {fmt(c['value'], 0)}" for c in s["sla"])
    print(f"| {s['purpose']} {s['rate']:.2f} req/s | {s['achieved_rate']:.2f} req/s, {s['token_throughput']:.0f} tok/s, "
          f"p99 slope {fmt(s.get('p99_slope_ms_per_token'))} ms/token, ${fmt(s.get('cost_per_1k'), 5)}/1k tok | "
          f"{'held' if s['passed'] else 'failed'} ({sla}) |")
sloped = [s for s in stages if s.get("p99_slope_ms_per_token") is not None]
if sloped:
    s = sloped[0]
    tpot = s["run"]["summary"]["mean_tpot_ms"]
    print(f"| P99 slope at {s['rate']:.2f} req/s, the lowest with one | {s['p99_slope_ms_per_token']:.2f} ms/token | the model's mean TPOT there: {tpot:.2f} ms |")
print(f"| max_rate | {fmt(r['max_rate'])} req/s | every SLA held |")
print(f"| recommended_rate | {fmt(r['recommended_rate'])} req/s | {r['binding']} |")
print(f"| throughput knee | {fmt(r['knee']['rate'])} req/s | |")
stopped = r.get("stopped") or "no (confirmed)"
print(f"| search | {len(stages)} stages, {r['elapsed_s']:.0f} s of a {budget} s budget ({took} s with start-up) | stopped early: {stopped} |")
print(f"| report | {os.path.getsize(sys.argv[2]) / 1024:.0f} KiB, one file | target/artifacts/capacity-llama.png |")
PY
)

{
    echo "## sluice capacity against llama.cpp with SmolLM2 (issue 16)"
    echo
    echo "Machine: $(machine). Revision: $(sluice_revision). Pinning: $pinning."
    echo "Command: \`benches/capacity_llama.sh --stage $stage --budget $budget --sla $sla\`"
    echo "(llama.cpp server through xllamacpp: SmolLM2-135M-Instruct Q4_1 GGUF, 2 slots, 1 thread, behind \`sluice run\`;"
    echo "Poisson arrivals, 8-40 output tokens a request with \`ignore_eos\`)."
    echo
    echo "| stage / figure | value | verdict / against |"
    echo "|---|---|---|"
    echo "$figures"
    echo
    echo "Load average at the start and the end: $load_start; $(cut -d' ' -f1-3 /proc/loadavg)."
} | save_report capacity-llama
