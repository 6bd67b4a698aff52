#!/usr/bin/env bash
# Unary gRPC through sluice and Envoy, side by side: the same tonic client and server.
#
# The server is `grpc_bench serve` (benches/src/bin/grpc_bench.rs): tonic over h2c,
# one method `/bench.Echo/Echo` answering the request's bytes. The client is
# `grpc_bench load`: tonic, closed loop, --concurrency callers sharing --connections
# HTTP/2 connections, each request --size bytes, a 1 s unmeasured warm-up, then
# --duration seconds measured. Targets, each on its own free loopback port:
#   direct   the client straight to the server (the ceiling of this load setup)
#   sluice   one http listener (h2c), one `kind: http, protocol: h2c` cluster, one
#            route, runtime.threads: --threads
#   envoy    --concurrency --threads, HTTP connection manager (codec AUTO) + router,
#            the cluster speaking HTTP/2 upstream (explicit http2_protocol_options)
# The targets run in rounds whose order rotates; the table gives the median of the
# rounds. With taskset and two or more cores the proxies run on core 1 (cores
# 1..N with --threads N), the client and the server on core 0, at a raised priority
# where allowed (benches/lib.sh, as benches/compare.sh).
#
#   benches/grpc.sh                 3 rounds x 10 s per target (~2 min)
#   benches/grpc.sh --rounds 1 --duration 3
#
# Options: --rounds N (3), --duration SECONDS (10), --concurrency N (32),
#          --connections N (1), --size BYTES (100), --threads N (1),
#          --nice N (default -19; 0 = no change), --no-install (skip
#          scripts/install-deps.sh), --no-build (use the release binaries already
#          built), --keep (keep the temp dir).
# Output: a markdown report on stdout, also saved to target/bench/grpc-<date>.md.
# Progress goes to stderr. Exits 0 whatever the figures: it measures, it does not test.
set -euo pipefail

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=3
duration=10
warmup=1
concurrency=32
connections=1
size=100
threads=1
niceness=-19
install=1
build=1
keep=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --concurrency) concurrency=$2 && shift ;;
        --size) size=$2 && shift ;;
        --threads) threads=$2 && shift ;;
        --no-build) build=0 ;;
        *) shared_option "$@" && shift $((taken - 1)) ;;
    esac
    shift
done

# ------------------------------------------------------------------ tools

bench_tools "$install" curl python3
python="$root/.venv/bin/python"
[[ -x $python ]] || die ".venv missing (run scripts/install-deps.sh --bench)"
envoy_bin="$(envoy_path)"

((build == 0)) || build_release grpc_bench
bin_dir="${CARGO_TARGET_DIR:-$root/target}/release"
sluice="$bin_dir/sluice"
grpc_bench="$bin_dir/grpc_bench"
[[ -x $sluice && -x $grpc_bench ]] || die "no release sluice and grpc_bench in $bin_dir"

targets=(direct sluice envoy)
pin_and_prioritise "client and server" "$threads"

# ------------------------------------------------------------------ processes

start_work
declare -A port pid_of

# grpc_ok PORT: a probe for wait_for, true when a short load through PORT makes
# calls and gets every one back.
grpc_ok() {
    local out
    out="$("$grpc_bench" load --target "http://127.0.0.1:$1" --warmup 0 --seconds 0.2 \
        --concurrency 1 --size "$size" 2>/dev/null)" || return 1
    python3 -c 'import json, sys; r = json.loads(sys.argv[1]); sys.exit(0 if r["calls"] > 0 and r["errors"] == 0 else 1)' "$out"
}

server_port="$(free_port)"
launch load_pin "$work/server.log" "$grpc_bench" serve --listen "127.0.0.1:$server_port"
server_pid=$launched
pids+=("$server_pid")
wait_for server "$server_pid" "serving gRPC on 127.0.0.1:$server_port" grpc_ok "$server_port"
port[direct]=$server_port
log "server on 127.0.0.1:$server_port"

start_sluice() {
    local p=$1 admin
    admin="$(free_port)"
    {
        sluice_config_head "$threads" "$admin" "$p"
        cat <<EOF
  - { name: grpc, kind: http, protocol: h2c, endpoints: [127.0.0.1:$server_port] }
routes:
  - { name: all, listener: public, match: { path_prefix: / }, split: { grpc: 100 } }
EOF
    } >"$work/sluice.yaml"
    launch proxy_pin "$work/sluice.log" "$sluice" run -c "$work/sluice.yaml"
}

start_envoy() {
    start_envoy_proxy proxy_pin "$1" "$server_port" h2
}

for t in "${targets[@]}"; do
    [[ $t == direct ]] && continue
    port[$t]="$(free_port)"
    "start_$t" "${port[$t]}"
    pid_of[$t]=$launched
    pids+=("$launched")
done
for t in "${targets[@]}"; do
    [[ $t == direct ]] && continue
    wait_for "$t" "${pid_of[$t]}" "serving gRPC on 127.0.0.1:${port[$t]}" grpc_ok "${port[$t]}"
    log "$t on 127.0.0.1:${port[$t]} (pid ${pid_of[$t]})"
done

# ------------------------------------------------------------------ measuring

results="$work/results.tsv"
: >"$results"
load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
for ((r = 1; r <= rounds; r++)); do
    for t in $(rotation "$r" "${targets[@]}"); do
        out="$work/load-$r-$t.json"
        run_load "$out" "$grpc_bench" load --target "http://127.0.0.1:${port[$t]}" --warmup "$warmup" \
            --seconds "$duration" --concurrency "$concurrency" --connections "$connections" --size "$size"
        # round, target, calls/s, p50, p99, max, calls, errors
        python3 -c 'import json, sys
r = json.loads(open(sys.argv[3]).read().strip().splitlines()[-1])
print("\t".join(str(v) for v in (sys.argv[1], sys.argv[2], round(r["calls_per_s"], 1), r["p50_ms"], r["p99_ms"], r["max_ms"], r["calls"], r["errors"])))' \
            "$r" "$t" "$out" >>"$results"
        log "round $r $t: $(tail -1 "$results" | awk -F'\t' '{ printf "%.0f calls/s, p50 %s ms, p99 %s ms, max %s ms, errors %s", $3, $4, $5, $6, $8 }')"
    done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------ report

# med COLUMN TARGET: the median over the rounds of one column of results.tsv.
med() { awk -F'\t' -v c="$1" -v t="$2" '$2 == t { print $c }' "$results" | median; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

{
    echo "# sluice unary gRPC bench ($started)"
    echo
    echo "- machine: $(machine)"
    echo "- sluice: $(sluice_revision)"
    echo "- envoy: $(envoy_version)"
    echo "- server: \`grpc_bench serve\` (tonic, h2c, \`/bench.Echo/Echo\` echoes the request's bytes, 1 runtime thread)"
    echo "- load: \`grpc_bench load --concurrency $concurrency --connections $connections --size $size --warmup $warmup --seconds $duration\` (tonic, closed loop)"
    echo "- pinning: $pinning"
    echo "- priority: $priority"
    echo "- worker threads per proxy: $threads"
    echo "- rounds: $rounds, order rotated each round; figures are medians of the rounds"
    echo "- load average (1/5/15 min) before: $load_before, after: $load_after"
    echo
    echo "| target | calls/s | p50 ms | p99 ms | max ms | errors |"
    echo "|---|---:|---:|---:|---:|---:|"
    for t in "${targets[@]}"; do
        printf '| %s | %.0f | %.3f | %.3f | %.3f | %s |\n' "$t" "$(med 3 "$t")" "$(med 4 "$t")" "$(med 5 "$t")" \
            "$(med 6 "$t")" "$(awk -F'\t' -v t="$t" '$2 == t { s += $8 } END { print s + 0 }' "$results")"
    done
    echo
    echo "sluice/envoy: calls/s $(ratio "$(med 3 sluice)" "$(med 3 envoy)") (goal >= 1.0), p99 $(ratio "$(med 5 sluice)" "$(med 5 envoy)") (lower is better)."
    echo "sluice/direct: calls/s $(ratio "$(med 3 sluice)" "$(med 3 direct)")."
    echo
    echo "<details><summary>every run</summary>"
    echo
    echo "| round | target | calls/s | p50 ms | p99 ms | max ms | calls | errors |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|"
    awk -F'\t' -v OFS=' | ' '{ $1 = $1; print "| " $0 " |" }' "$results"
    echo
    echo "</details>"
} | save_report grpc
exit 0
