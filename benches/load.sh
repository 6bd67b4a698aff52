#!/usr/bin/env bash
# The load generator's own figures (issue 15, "Fidelity" and "Speed"):
#
#   fidelity  `sluice load` at RATE req/s (default 2000, constant arrivals) of
#             streamed chat completions against `sluice mock-llm` (1 ms to the
#             first token, 2 tokens): p99_dispatch_lag_ms (goal <= 1 ms) and the
#             achieved rate against the offered (goal within 1%).
#   floor     the machine's own wake-up lateness at the same rate, on the load's
#             core, just before: a bare python thread sleeping to each time of a
#             RATE/s schedule for DURATION seconds, its p99 lateness. No
#             dispatcher on that core can beat it; sluice's lag above it is its own.
#   speed     the most open-loop requests per second `sluice load` sends on one
#             core against an nginx `return 200`, beside wrk (closed loop, 1
#             thread, the same core) on the same nginx. Goal >= 0.8x wrk. The
#             open-loop figure is the highest offered rate of a doubling-then-
#             bisecting search whose run keeps up: achieved within 1% of offered,
#             no request failed, and p99 response time from the intended send
#             <= 5 ms. A rate that misses is run once more before it counts as lost.
#             Every client has the same 64 connections (sluice's
#             `target.max_connections`, the peers' -c).
#
#             oha runs beside them when it is installed (the install step builds
#             it with `cargo install oha --locked` into ~/.cache/sluice-bench, a
#             few minutes, once; where that fails its lines say so and the rest
#             runs): closed loop (-c the same connections), and open loop
#             (`-q RATE --latency-correction`, so its latency is measured from
#             the intended send too) through the same search as sluice's: the
#             open-loop peer.
#
#             wrk2 (wrk's open-loop fork, `-R RATE`, latency from the intended
#             send) runs through the same search when a binary is found: $WRK2,
#             `wrk2` on the PATH, or ~/.cache/sluice-bench/bin/wrk2. No package
#             registry carries it, so this script does not install it; build it
#             from github.com/giltene/wrk2 with `make`. wrk2 keeps its first
#             10 s for calibration out of its percentiles, so each of its runs
#             lasts DURATION + 20 s, and its achieved rate counts the whole run.

# Load on core 0, the target on core 1 (taskset). The sluice binary is copied
# into the work dir first, so that a build in the same target dir during the
# run does not change it.
#
# SLUICE_BIN=PATH measures that binary instead of the release build (a before/after).
#
# usage: benches/load.sh [--rate N] [--duration SECONDS] [--no-install] [--keep]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rate=2000
duration=10
install=1
keep=0
niceness=0
rounds=1
connections=64
while (($#)); do
    case "$1" in
        --rate) rate=$2 && shift 2 ;;
        *) shared_option "$@" && shift "$taken" ;;
    esac
done

bench_tools "$install" wrk nginx curl python3
[[ -n ${SLUICE_BIN:-} ]] || build_release
start_work
pin_and_prioritise "sluice load"
target_pin=(taskset -c 1)
[[ ${#load_pin[@]} -gt 0 ]] || target_pin=()
cp "${SLUICE_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/sluice}" "$work/sluice"
sluice="$work/sluice"
oha_root="${XDG_CACHE_HOME:-$HOME/.cache}/sluice-bench"
oha="$oha_root/bin/oha"
if [[ ! -x $oha && $install == 1 ]] && command -v cargo >/dev/null 2>&1; then
    log "installing oha: cargo install oha --locked --root $oha_root"
    cargo install oha --locked --root "$oha_root" >"$work/oha-install.log" 2>&1 ||
        log "oha did not install (the end of its log follows); its figure is skipped: $(tail -n 3 "$work/oha-install.log")"
fi
wrk2="${WRK2:-$(command -v wrk2 || echo "$oha_root/bin/wrk2")}"
[[ -x $wrk2 ]] || log "wrk2 not found (WRK2, PATH, $oha_root/bin/wrk2): its open-loop figure is skipped"

# result FILE KEY: a number of the run's summary (python: the file is JSON).
result() {
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; print(s.get(sys.argv[2], "nan"))' "$1" "$2"
}

load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# ---- fidelity against the mock
mock_port=$(free_port)
launch target_pin "$work/mock.log" "$sluice" mock-llm --listen "127.0.0.1:$mock_port" \
    --ttft 1ms --itl 1ms --tokens 2
pids+=("$launched")
wait_for mock "$launched" "answering" curl -s -o /dev/null "http://127.0.0.1:$mock_port/v1/models"
cat >"$work/fidelity.yaml" <<EOT
scenario: fidelity
target: { base_url: "http://127.0.0.1:$mock_port" }
workload: { arrival: { kind: constant, rate: $rate }, duration: ${duration}s, warmup: 2s, seed: 1 }
steps:
  - { name: answer, service: llm, model: m, prompt: "Say hi", max_tokens: 2, stream: true }
EOT
log "floor: a bare sleeper at $rate/s for ${duration}s"
cat >"$work/floor.py" <<'PY'
import sys, time
rate, seconds = float(sys.argv[1]), float(sys.argv[2])
late, t = [], time.perf_counter()
for _ in range(int(rate * seconds)):
    t += 1 / rate
    time.sleep(max(0.0, t - time.perf_counter()))
    late.append(time.perf_counter() - t)
late.sort()
print(f"{late[int(0.99 * len(late)) - 1] * 1e3:.3f} {late[-1] * 1e3:.3f}")
PY
launch load_pin "$work/floor.txt" python3 "$work/floor.py" "$rate" "$duration"
wait "$launched" || die "the floor sleeper failed: $(tail -n 5 "$work/floor.txt")"
read -r floor_p99 floor_max <"$work/floor.txt"
log "fidelity: $rate req/s for ${duration}s"
run_load "$work/fidelity.out" "$sluice" load "$work/fidelity.yaml" -o "$work/fidelity.json"
lag=$(result "$work/fidelity.json" p99_dispatch_lag_ms)
achieved=$(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); s=r["summary"]; print(s["requests"]/s["duration"])' "$work/fidelity.json")
failed=$(result "$work/fidelity.json" failed)

# ---- speed against nginx return 200
nginx_port=$(free_port)
nginx_json "$work/nginx" "$nginx_port" '{"ok":true}'
launch_nginx target_pin "$work/nginx.log" "$work/nginx"
pids+=("$launched")
wait_for nginx "$launched" "answering" http_200 "http://127.0.0.1:$nginx_port/"
run_load "$work/wrk-warm.txt" wrk -t 1 -c "$connections" -d 2s "http://127.0.0.1:$nginx_port/"
run_load "$work/wrk.txt" wrk -t 1 -c "$connections" -d "${duration}s" "http://127.0.0.1:$nginx_port/"
wrk_rps=$(awk '/^Requests\/sec/ { printf "%.0f", $2 }' "$work/wrk.txt")
oha_rps=""
if [[ -x $oha ]]; then
    run_load "$work/oha-warm.json" "$oha" --no-tui --output-format json -c "$connections" -z 2s \
        "http://127.0.0.1:$nginx_port/"
    run_load "$work/oha.json" "$oha" --no-tui --output-format json -c "$connections" -z "${duration}s" \
        "http://127.0.0.1:$nginx_port/"
    oha_rps=$(python3 -c 'import json,sys; print(round(json.load(open(sys.argv[1]))["summary"]["requestsPerSec"]))' "$work/oha.json")
fi

# The open-loop criterion, the same for sluice and oha: achieved within 1% of
# offered, no request failed, and p99 response time measured from the intended
# send (sluice's end - intended; oha's --latency-correction) <= 5 ms.
#
# sluice_keeps_up RATE: one open-loop run of sluice load at RATE.
sluice_keeps_up() {
    cat >"$work/speed.yaml" <<EOT
scenario: speed
target: { base_url: "http://127.0.0.1:$nginx_port", max_connections: $connections }
workload: { arrival: { kind: constant, rate: $1 }, duration: ${duration}s, warmup: 1s, max_in_flight: 4096, seed: 1 }
steps:
  - { name: get, service: http, method: GET, path: / }
EOT
    run_load "$work/speed.out" "$sluice" load "$work/speed.yaml" -o "$work/speed-$1.json"
    python3 - "$work/speed-$1.json" "$1" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
offered = float(sys.argv[2])
achieved = s["completed"] / s["duration"]
lag = s.get("p99_dispatch_lag_ms", 0.0)
p99 = s.get("metrics", s)["p99_e2el_ms"]
ok = s["failed"] == 0 and achieved >= 0.99 * offered and p99 <= 5.0
print(f"  sluice: offered {offered:.0f}  achieved {achieved:.0f}  p99 response {p99:.2f} ms  p99 lag {lag:.2f} ms  failed {s['failed']}  -> {'keeps up' if ok else 'falls behind'}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# oha_keeps_up RATE: one open-loop run of oha -q RATE --latency-correction.
oha_keeps_up() {
    run_load "$work/oha-q-$1.json" "$oha" --no-tui --output-format json -c "$connections" -q "$1" \
        --latency-correction -z "${duration}s" "http://127.0.0.1:$nginx_port/"
    python3 - "$work/oha-q-$1.json" "$1" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
s = r["summary"]
offered = float(sys.argv[2])
achieved = s["requestsPerSec"]
# Requests still in flight when -z ends are oha's "aborted due to deadline":
# cut, not failed (sluice counts them apart too).
failed = sum(n for e, n in r.get("errorDistribution", {}).items() if "deadline" not in e)
failed += sum(n for code, n in r.get("statusCodeDistribution", {}).items() if not code.startswith("2"))
p99 = r["latencyPercentiles"]["p99"] * 1000
ok = failed == 0 and achieved >= 0.99 * offered and p99 <= 5.0
print(f"  oha -q: offered {offered:.0f}  achieved {achieved:.0f}  p99 response {p99:.2f} ms  failed {failed}  -> {'keeps up' if ok else 'falls behind'}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# wrk2_keeps_up RATE: one open-loop run of wrk2 -R RATE (the same connections).
wrk2_keeps_up() {
    local seconds=$((duration + 20))
    run_load "$work/wrk2-$1.txt" "$wrk2" -t 1 -c "$connections" -d "${seconds}s" -R "$1" --latency \
        "http://127.0.0.1:$nginx_port/"
    python3 - "$work/wrk2-$1.txt" "$1" "$seconds" <<'PY'
import re, sys
text = open(sys.argv[1]).read()
offered, seconds = float(sys.argv[2]), float(sys.argv[3])
done = int(re.search(r"(\d+) requests in", text).group(1))
achieved = done / seconds
unit = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}
m = re.search(r"^\s*99\.000%\s+([\d.]+)(us|ms|s|m)\s*$", text, re.M)
p99 = float(m.group(1)) * unit[m.group(2)]
errors = re.search(r"Socket errors: (.*)", text)
failed = sum(int(n) for n in re.findall(r"(\d+)", errors.group(1))) if errors else 0
failed += int((re.search(r"Non-2xx or 3xx responses: (\d+)", text) or [0, 0])[1])
ok = failed == 0 and achieved >= 0.99 * offered and p99 <= 5.0
print(f"  wrk2 -R: offered {offered:.0f}  achieved {achieved:.0f}  p99 response {p99:.2f} ms  failed {failed}  -> {'keeps up' if ok else 'falls behind'}", file=sys.stderr)
sys.exit(0 if ok else 1)
PY
}

# twice FN RATE: FN keeps up at RATE in one run, or in a second one after a
# miss: one noisy second on this VM (a p99 of 5.03 ms at 8,000 req/s between
# 0.95 ms at 7,000 and 0.78 ms at 7,500) stopped a search where it did not belong.
twice() {
    "$1" "$2" || "$1" "$2"
}

# most_kept_up FN: the highest rate FN keeps up, doubling from 4000 req/s,
# then bisecting three times; a rate counts as lost after two misses.
most_kept_up() {
    local low=0 high=4000 mid
    while twice "$1" "$high"; do
        low=$high
        high=$((high * 2))
        ((high <= 256000)) || break
    done
    for _ in 1 2 3; do
        mid=$(((low + high) / 2))
        if twice "$1" "$mid"; then low=$mid; else high=$mid; fi
    done
    echo "$low"
}
log "speed: sluice load open loop, doubling from 4000 req/s, then bisecting"
low=$(most_kept_up sluice_keeps_up)
oha_open=""
if [[ -x $oha ]]; then
    log "speed: oha -q open loop, the same search"
    oha_open=$(most_kept_up oha_keeps_up)
fi
wrk2_open=""
if [[ -x $wrk2 ]]; then
    log "speed: wrk2 -R open loop, the same search"
    wrk2_open=$(most_kept_up wrk2_keeps_up)
fi

{
    echo "## sluice load: fidelity and speed"
    echo
    echo "Machine: $(machine). Revision: $(sluice_revision). Pinning: $pinning."
    echo "Command: \`benches/load.sh --rate $rate --duration $duration\`"
    echo
    echo "| figure | value | goal |"
    echo "|---|---|---|"
    echo "| fidelity: p99 dispatch lag at $rate req/s | $lag ms | <= 1 ms |"
    echo "| floor: p99 (max) wake-up lateness of a bare sleeper, $rate/s, same core | $floor_p99 ms ($floor_max ms) | |"
    echo "| fidelity: achieved / offered | $(python3 -c "print(f'{$achieved / $rate:.4f}')") ($achieved req/s, failed $failed) | within 1% |"
    echo "| speed: sluice load open loop, most req/s kept up (p99 response <= 5 ms) | $low | |"
    [[ -z $oha_open ]] || echo "| speed: oha -q --latency-correction open loop, most req/s kept up (the same test) | $oha_open | |"
    [[ -z $wrk2_open ]] || echo "| speed: wrk2 -t1 -c$connections -R open loop, most req/s kept up (the same test) | $wrk2_open | |"
    echo "| speed: wrk -t1 -c$connections closed loop | $wrk_rps | |"
    if [[ -n $oha_rps ]]; then
        echo "| speed: oha -c$connections closed loop | $oha_rps | |"
    else
        echo "| speed: oha | not run (not installed) | |"
    fi
    echo "| speed: sluice load / wrk | $(python3 -c "print(f'{$low / $wrk_rps:.2f}')") | >= 0.8 |"
    [[ -z $oha_rps ]] || echo "| speed: sluice load / oha | $(python3 -c "print(f'{$low / $oha_rps:.2f}')") | |"
    [[ -z $oha_open ]] || echo "| speed: sluice load / oha -q, both open loop | $(python3 -c "print(f'{$low / $oha_open:.2f}')") | |"
    [[ -z $wrk2_open ]] || echo "| speed: sluice load / wrk2, both open loop | $(python3 -c "print(f'{$low / $wrk2_open:.2f}')") | |"
    [[ -z $wrk2_open ]] || echo "| speed: wrk2 / wrk (the C open loop against the closed loop) | $(python3 -c "print(f'{$wrk2_open / $wrk_rps:.2f}')") | |"
    [[ -z $oha_open ]] || echo "| speed: oha -q / wrk | $(python3 -c "print(f'{$oha_open / $wrk_rps:.2f}')") | |"
    echo
    echo "Load average at the start and the end: $load_start; $(cut -d' ' -f1-3 /proc/loadavg)."
} | save_report load
