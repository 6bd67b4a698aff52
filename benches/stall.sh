#!/usr/bin/env bash
# The stall that a closed loop hides (issue 15, "Fidelity"): `sluice mock-llm
# --stall-at 5s --stall-for 2s` holds every completion it reads in that window
# (timed from the first completion it reads) until the window's end. Against
# it, one run of `sluice load` open loop at RATE req/s (constant arrivals, no
# warm-up, `--detailed`), then one with `--closed USERS` for the same length,
# each against a fresh mock. Per run, from its requests:
#
#   in the stall   requests whose intended start falls in the window, on the
#                  load's clock (its start is the first request's send: the
#                  mock reads it within that request's service time, a few ms)
#   show it        of them, those whose response_time (end - intended) is at
#                  least the stall left at their intended start, less 50 ms
#                  (the slack of the two clocks' start)
#   p99 / max      response_time of the whole run, and its requests
#
# SLUICE_BIN=PATH measures that binary instead of the release build (a before/after).
#
# usage: benches/stall.sh [--rate N] [--users N] [--duration SECONDS] [--keep]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rate=200
users=4
duration=12
stall_at=5
stall_for=2
install=0
keep=0
niceness=0
rounds=1
connections=0
while (($#)); do
    case "$1" in
        --rate) rate=$2 && shift 2 ;;
        --users) users=$2 && shift 2 ;;
        *) shared_option "$@" && shift "$taken" ;;
    esac
done

bench_tools "$install" curl python3
[[ -n ${SLUICE_BIN:-} ]] || build_release
start_work
pin_and_prioritise "sluice load"
target_pin=(taskset -c 1)
[[ ${#load_pin[@]} -gt 0 ]] || target_pin=()
cp "${SLUICE_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/sluice}" "$work/sluice"
sluice="$work/sluice"
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# run NAME [LOAD FLAGS...]: a fresh stalling mock, one load run against it.
run() {
    local name=$1 port
    shift
    port=$(free_port)
    launch target_pin "$work/mock-$name.log" "$sluice" mock-llm --listen "127.0.0.1:$port" \
        --ttft 1ms --itl 1ms --tokens 2 --stall-at "${stall_at}s" --stall-for "${stall_for}s"
    local mock=$launched
    pids+=("$mock")
    wait_for "mock-$name" "$mock" "answering" curl -s -o /dev/null "http://127.0.0.1:$port/v1/models"
    cat >"$work/$name.yaml" <<EOT
scenario: stall
target: { base_url: "http://127.0.0.1:$port" }
workload: { arrival: { kind: constant, rate: $rate }, duration: ${duration}s, max_in_flight: 4096, seed: 1 }
steps:
  - { name: answer, service: llm, model: m, prompt: "Say hi", max_tokens: 2, stream: true, timeout: 10s }
EOT
    log "$name: $*"
    run_load "$work/$name.out" "$sluice" load "$work/$name.yaml" --detailed -o "$work/$name.json" "$@"
    kill "$mock" 2>/dev/null || true
}

run open
run closed --closed "$users"

# figures FILE: the row of one run.
figures() {
    python3 - "$1" "$stall_at" "$stall_for" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
at, lasts = float(sys.argv[2]) * 1e6, float(sys.argv[3]) * 1e6
reqs = sorted(r["requests"], key=lambda o: o["intended_us"])
t0 = reqs[0]["sent_us"]
start, end = t0 + at, t0 + at + lasts
inside = [o for o in reqs if start <= o["intended_us"] < end]
shows = [o for o in inside if o["end_us"] - o["intended_us"] >= end - o["intended_us"] - 50_000]
s = r["summary"]
print(f"{len(reqs)} | {len(inside)} | {len(shows)} | {s['p99_e2el_ms']:.1f} | {s['max_e2el_ms']:.1f}")
PY
}

{
    echo "## sluice load: a 2 s stall, open loop and closed loop"
    echo
    echo "Machine: $(machine). Revision: $(sluice_revision). Pinning: $pinning."
    echo "Command: \`benches/stall.sh --rate $rate --users $users --duration $duration\`"
    echo "(mock: \`--ttft 1ms --itl 1ms --tokens 2 --stall-at ${stall_at}s --stall-for ${stall_for}s\`)."
    echo
    echo "| run | requests | intended in the stall | of them, response_time >= stall left | p99 response_time ms | max ms |"
    echo "|---|---|---|---|---|---|"
    echo "| open loop, $rate req/s | $(figures "$work/open.json") |"
    echo "| closed loop, --closed $users | $(figures "$work/closed.json") |"
    echo
    echo "Load average at the start and the end: $load_start; $(cut -d' ' -f1-3 /proc/loadavg)."
} | save_report stall
