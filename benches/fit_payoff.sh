#!/usr/bin/env bash
# The fit pays off (issue 15): does load from `sluice fit`'s model reproduce
# the tail that the recorded traffic itself produces on a target with a knee?
#
#   record   `sluice load` sends bursty arrivals (a two-component Weibull
#            mixture, seeded) of chat completions through `sluice run` with the
#            recorder on, into `sluice mock-llm --max-concurrency 4` (20 ms to
#            the first token, 5 ms between 8 tokens: ~60 ms a request, so about
#            66 req/s at most; the mixture's mean is ~36 req/s, its bursts go
#            past the knee and queue at the mock).
#   fit      `sluice fit` on the recorded trace, its model written to a file.
#   loads    three runs of DURATION s against the same queueing mock, directly:
#            the replay of the trace (`workload: { replay: trace.jsonl }`), the
#            fitted model (`from_model:`), and Poisson at the trace's mean rate.
#
# Printed: p99 response time (end - intended, `p99_e2el_ms`) of each, and the
# error of the fitted and Poisson runs against the replay's. Goal: the fitted
# model within 10%; Poisson beside it. `--repeats K` runs the fitted and
# Poisson loads K times each (seeds seed+1+2j and seed+2+2j), so that the
# error of the fit shows apart from the noise of one bursty sample; the
# medians are printed. Nothing is tuned.
#
# The noise floor: the recording's own generator (the true process, new seeds
# seed+100+j) is run K times too. Its error against the replay is what a
# perfect fit would score: a p99 of one bursty sample is itself noisy, so the
# fitted model cannot be judged closer than the truth lands.
#
# --time-scale K runs the same queue K times faster: the mixture's gaps are
# divided by K, and the mock should answer K times sooner (`--ttft`, `--itl`,
# `--tokens` set its pacing; the defaults are the 60 ms above). What decides how
# noisy one recording's p99 is, is how many bursts it holds, not how many
# seconds: a 240 s run at K = 8 holds the bursts of 1,920 s at K = 1 (see
# benches/fit_payoff_floor.py for the noise floor by length). The mock's service
# time is probed (one user, closed loop, 3 s) and printed, so that the ratio of
# service to arrivals can be checked against the 60 ms the mixture was made for.
#
# --no-build measures the release binary already in CARGO_TARGET_DIR (or target/) as it is;
# SLUICE_BIN=PATH measures that binary instead.
#
# usage: benches/fit_payoff.sh [--duration SECONDS] [--seed N] [--repeats K] [--time-scale K]
#            [--ttft D] [--itl D] [--tokens N] [--no-install] [--no-build] [--keep]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

duration=45
seed=11
repeats=1
time_scale=1
ttft=20ms
itl=5ms
tokens=8
build=1
install=1
keep=0
niceness=0
rounds=1
connections=0
while (($#)); do
    case "$1" in
        --seed) seed=$2 && shift 2 ;;
        --repeats) repeats=$2 && shift 2 ;;
        --time-scale) time_scale=$2 && shift 2 ;;
        --ttft) ttft=$2 && shift 2 ;;
        --itl) itl=$2 && shift 2 ;;
        --tokens) tokens=$2 && shift 2 ;;
        --no-build) build=0 && shift ;;
        *) shared_option "$@" && shift "$taken" ;;
    esac
done

load_start=$(cut -d' ' -f1-3 /proc/loadavg)
bench_tools "$install" curl python3
((build == 0)) || build_release
start_work
pin_and_prioritise "sluice load"
# Copied, so that a build in the same target dir during the run does not change it.
cp "${SLUICE_BIN:-${CARGO_TARGET_DIR:-$root/target}/release/sluice}" "$work/sluice"
sluice="$work/sluice"
no_pin=()
export SLUICE_ADMIN_TOKEN=fit-payoff

# p99 FILE: the run's p99 response time in ms.
p99() {
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; m=s.get("metrics", s); print(m["p99_e2el_ms"])' "$1"
}
# count FILE KEY: a count of the run's summary.
count() {
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["summary"][sys.argv[2]])' "$1" "$2"
}

mock_port=$(free_port)
launch no_pin "$work/mock.log" "$sluice" mock-llm --listen "127.0.0.1:$mock_port" \
    --ttft "$ttft" --itl "$itl" --tokens "$tokens" --max-concurrency 4
pids+=("$launched")
wait_for mock "$launched" "answering" curl -s -o /dev/null "http://127.0.0.1:$mock_port/v1/models"

admin_port=$(free_port)
proxy_port=$(free_port)
{
    sluice_config_head 1 "$admin_port" "$proxy_port" | sed "s/^admin: { listen: \(.*\) }$/admin: { listen: \1, token_env: SLUICE_ADMIN_TOKEN }/"
    echo "  - { name: llm, kind: llm, endpoints: [\"127.0.0.1:$mock_port\"], timeouts: { first_byte: 60s } }"
    echo "routes:"
    echo "  - { name: chat, listener: public, split: { llm: 100 } }"
    echo "recorder: { path: \"$work/trace.jsonl\", percent: 100 }"
} >"$work/proxy.yaml"
launch no_pin "$work/proxy.log" "$sluice" run -c "$work/proxy.yaml"
pids+=("$launched")
wait_for proxy "$launched" "answering" http_200 -H "Authorization: Bearer $SLUICE_ADMIN_TOKEN" \
    "http://127.0.0.1:$admin_port/v1/recorder"

# The step every synthetic run sends: the same prompt and output length.
step='  - { name: answer, service: llm, model: m, prompt: "Summarise the queueing behaviour of this request", max_tokens: '"$tokens"' }'
# The mixture's gaps, K times shorter at --time-scale K.
short_scale=$(python3 -c "print(0.004 / $time_scale)")
long_scale=$(python3 -c "print(0.13 / $time_scale)")

# ---- probe: the mock's service time, one user back to back for 3 s
cat >"$work/probe.yaml" <<EOT
scenario: probe
target: { base_url: "http://127.0.0.1:$mock_port" }
workload: { arrival: { kind: constant, rate: 1 }, duration: 3s, seed: $seed }
steps:
$step
EOT
run_load "$work/probe.out" "$sluice" load "$work/probe.yaml" --closed 1 -o "$work/probe.json"
service_ms=$(python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["summary"]; m=s.get("metrics", s); print(m["mean_e2el_ms"])' "$work/probe.json")
log "the mock's service time: $service_ms ms (the mixture was made for 60 ms at time scale 1; here 1/$time_scale of it)"

# ---- record: bursts (mean gap 4 ms, 80%) between lulls (mean 125 ms, 20%)
cat >"$work/record.yaml" <<EOT
scenario: record
target: { base_url: "http://127.0.0.1:$proxy_port" }
workload:
  arrival: { kind: weibull_mixture, components: [ { weight: 0.8, shape: 0.9, scale: $short_scale }, { weight: 0.2, shape: 1.2, scale: $long_scale } ] }
  duration: ${duration}s
  seed: $seed
steps:
$step
EOT
log "record: ${duration}s of mixture arrivals through the proxy into the mock (max concurrency 4)"
run_load "$work/record.out" "$sluice" load "$work/record.yaml" -o "$work/record.json"
curl -s -X DELETE -H "Authorization: Bearer $SLUICE_ADMIN_TOKEN" \
    "http://127.0.0.1:$admin_port/v1/recorder" >"$work/recorder.json"
recorded=$(wc -l <"$work/trace.jsonl")
log "recorded $recorded requests"

# ---- fit
"$sluice" fit "$work/trace.jsonl" -o "$work/model.yaml" >"$work/fit.txt" 2>&1 ||
    die "sluice fit failed: $(tail -n 20 "$work/fit.txt")"
best=$(awk '/^kind:|^  kind:/ { print $2; exit }' "$work/model.yaml")
# The trace's mean rate: requests over the span of their arrivals.
mean_rate=$(python3 - "$work/trace.jsonl" <<'PY'
import json, sys
t = sorted(json.loads(l)["arrival_us"] for l in open(sys.argv[1]) if l.strip())
print(f"{(len(t) - 1) / ((t[-1] - t[0]) / 1e6):.4f}")
PY
)
log "fitted: $best; mean rate $mean_rate req/s"

# ---- the three loads, against the mock directly
cat >"$work/replay.yaml" <<EOT
scenario: replay
target: { base_url: "http://127.0.0.1:$mock_port" }
workload: { replay: trace.jsonl, seed: $seed }
EOT
cat >"$work/fitted.yaml" <<EOT
scenario: fitted
target: { base_url: "http://127.0.0.1:$mock_port" }
workload: { from_model: model.yaml, duration: ${duration}s, seed: $((seed + 1)) }
steps:
$step
EOT
cat >"$work/poisson.yaml" <<EOT
scenario: poisson
target: { base_url: "http://127.0.0.1:$mock_port" }
workload: { arrival: { kind: poisson, rate: $mean_rate }, duration: ${duration}s, seed: $((seed + 2)) }
steps:
$step
EOT
# The generator of the recording, straight at the mock.
sed -e "s/^scenario: record$/scenario: generator/" \
    -e "s|base_url: \"http://127.0.0.1:$proxy_port\"|base_url: \"http://127.0.0.1:$mock_port\"|" \
    "$work/record.yaml" >"$work/generator.yaml"
# Run NAME SEED: one load, its result in $work/NAME-SEED.json.
runs=("replay:$seed")
for ((j = 0; j < repeats; j++)); do
    runs+=("fitted:$((seed + 1 + 2 * j))" "poisson:$((seed + 2 + 2 * j))" "generator:$((seed + 100 + j))")
done
for r in "${runs[@]}"; do
    log "load: ${r%%:*} (seed ${r##*:})"
    run_load "$work/${r/:/-}.out" "$sluice" load "$work/${r%%:*}.yaml" --seed "${r##*:}" \
        -o "$work/${r/:/-}.json"
done
p_replay=$(p99 "$work/replay-$seed.json")
err() { python3 -c "print(f'{100 * abs($1 - $p_replay) / $p_replay:.1f}%')"; }
# median_p99 NAME: the median p99 of NAME's runs.
median_p99() {
    local r
    for r in "${runs[@]}"; do
        if [[ ${r%%:*} == "$1" ]]; then p99 "$work/${r/:/-}.json"; fi
    done | median
}

{
    echo "## sluice load: the fit pays off"
    echo
    echo "Machine: $(machine); load average at the start $load_start, at the end $(cut -d' ' -f1-3 /proc/loadavg). Revision: $(sluice_revision). Pinning: the loads ${load_pin[*]:-unpinned}; the mock and the proxy unpinned."
    echo "Command: \`benches/fit_payoff.sh --duration $duration --seed $seed --repeats $repeats --time-scale $time_scale --ttft $ttft --itl $itl --tokens $tokens\`"
    echo
    echo "The mock's service time (one user, closed loop): $service_ms ms; the mixture's gap scales $short_scale s and $long_scale s."
    echo
    echo "Recorded: $recorded requests in ${duration} s, mean $mean_rate req/s; \`sluice fit\`'s best: $best."
    echo
    echo "| load | seed | requests | p99 response time | error vs replay |"
    echo "|---|---|---|---|---|"
    for r in "${runs[@]}"; do
        f="$work/${r/:/-}.json"
        p=$(p99 "$f")
        e="-"
        [[ ${r%%:*} == replay ]] || e=$(err "$p")
        echo "| ${r%%:*} | ${r##*:} | $(count "$f" requests) | $p ms | $e |"
    done
    m_fitted=$(median_p99 fitted)
    m_poisson=$(median_p99 poisson)
    m_generator=$(median_p99 generator)
    echo
    echo "Goal: the fitted model within 10% of the replay's p99. Median of $repeats: fitted $m_fitted ms ($(err "$m_fitted")), Poisson $m_poisson ms ($(err "$m_poisson")); the noise floor, the recording's own generator: $m_generator ms ($(err "$m_generator"))."
} | save_report fit_payoff
