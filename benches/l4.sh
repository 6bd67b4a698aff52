#!/usr/bin/env bash
# L4 bench: redis-benchmark straight to Redis, through a sluice tcp listener and
# through HAProxy in `mode tcp`, each proxy with one worker thread.
#
#   direct   redis-benchmark to redis-server
#   sluice   `protocol: tcp` listener -> `kind: cache` cluster, runtime.threads: 1
#   haproxy  mode tcp, nbthread 1
#   baseline (with --baseline BIN) another sluice binary, e.g. a build of an
#            earlier commit, with the same config as `sluice`
# Each round runs `redis-benchmark -q -n N -t set,get` without and with
# pipelining (-P 16) against every target; the order of the targets rotates each
# round and the table reports the median of the rounds. With taskset and two or
# more cores, the proxies run on core 1 and redis + redis-benchmark on core 0.
# Every bench process starts in its own session with nice -19 (and autogroup nice
# -19 where the kernel groups by session) when allowed, as benches/compare.sh does.
#
#   benches/l4.sh                 3 rounds, -n 200000
# Options: --rounds N, --requests N, --pipeline N (default 16), --no-build,
#          --keep (keep the temp dir), --baseline BIN.
# Output: a markdown report on stdout; progress on stderr. Everything binds
# 127.0.0.1 on free ports and is killed on exit.
set -euo pipefail

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=3
requests=200000
pipeline=16
build=1
keep=0
baseline=""
niceness=-19
while [[ $# -gt 0 ]]; do
    case "$1" in
        --rounds) rounds=$2 && shift ;;
        --requests) requests=$2 && shift ;;
        --pipeline) pipeline=$2 && shift ;;
        --no-build) build=0 ;;
        --keep) keep=1 ;;
        --baseline) baseline=$2 && shift ;;
        *) not_an_option "$1" ;;
    esac
    shift
done

require "apt-get install redis-server" redis-server redis-benchmark redis-cli python3
if [[ $build == 1 ]]; then
    build_release
fi
sluice="${CARGO_TARGET_DIR:-$root/target}/release/sluice"
[[ -x $sluice ]] || die "$sluice missing (build it or drop --no-build)"

targets=(direct sluice)
if [[ -n $baseline ]]; then
    [[ -x $baseline ]] || die "$baseline is not an executable"
    targets+=(baseline)
fi
if command -v haproxy >/dev/null 2>&1; then
    targets+=(haproxy)
else
    log "haproxy not installed: skipped"
fi

pin_and_prioritise "redis-server and redis-benchmark"

start_work

# launch_logged PIN_ARRAY_NAME NAME CMD...: `launch` with the log in $work, and
# the process stopped on exit.
launch_logged() {
    local pin=$1 name=$2
    shift 2
    launch "$pin" "$work/$name.log" "$@"
    pids+=("$launched")
}

# wait_ping NAME PID PORT: polls until Redis answers PING through the port.
wait_ping() {
    wait_for "$1" "$2" "answering PING on 127.0.0.1:$3" redis_pong "$3"
}

declare -A port

redis_port="$(free_port)"
launch_logged load_pin redis redis-server --bind 127.0.0.1 --port "$redis_port" --save "" \
    --appendonly no --protected-mode yes --dir "$work"
wait_ping redis "$launched" "$redis_port"
port[direct]=$redis_port
log "redis on 127.0.0.1:$redis_port"

# start_sluice TARGET BIN: BIN serving a tcp listener for the redis cluster.
start_sluice() {
    local target=$1 bin=$2 listen admin
    listen="$(free_port)"
    admin="$(free_port)"
    cat >"$work/$target.yaml" <<EOF
runtime: { threads: 1, grace_period: 1s }
admin: { listen: 127.0.0.1:$admin }
listeners:
  - { name: cache, listen: 127.0.0.1:$listen, protocol: tcp, cluster: redis }
clusters:
  - { name: redis, kind: cache, endpoints: [127.0.0.1:$redis_port], timeouts: { connect: 500ms } }
EOF
    launch_logged proxy_pin "$target" "$bin" run -c "$work/$target.yaml"
    wait_ping "$target" "$launched" "$listen"
    port[$target]=$listen
    log "$target on 127.0.0.1:$listen"
}

start_sluice sluice "$sluice"
if [[ -n $baseline ]]; then
    start_sluice baseline "$baseline"
fi

if [[ " ${targets[*]} " == *" haproxy "* ]]; then
    haproxy_port="$(free_port)"
    cat >"$work/haproxy.cfg" <<EOF
global
    nbthread 1
    maxconn 4096
defaults
    mode tcp
    timeout connect 1s
    timeout client 60s
    timeout server 60s
frontend cache
    bind 127.0.0.1:$haproxy_port
    default_backend redis
backend redis
    server r1 127.0.0.1:$redis_port
EOF
    launch_logged proxy_pin haproxy haproxy -db -f "$work/haproxy.cfg"
    wait_ping haproxy "$launched" "$haproxy_port"
    port[haproxy]=$haproxy_port
    log "haproxy on 127.0.0.1:$haproxy_port"
fi

# results[target,mode,test] = space-separated req/s of each round.
declare -A results
modes=(plain piped)
tests=(SET GET)

bench_once() {
    local target=$1 mode=$2 out extra=()
    [[ $mode == piped ]] && extra=(-P "$pipeline")
    # In a session of its own like the servers, so its autogroup nice applies too.
    run_load "$work/redis-benchmark.log" redis-benchmark -h 127.0.0.1 -p "${port[$target]}" -q \
        -n "$requests" -t set,get "${extra[@]}"
    out="$(tr '\r' '\n' <"$work/redis-benchmark.log")"
    for t in "${tests[@]}"; do
        local rps
        rps="$(grep "^$t: .* requests per second" <<<"$out" | tail -n 1 | awk '{print $2}')"
        [[ -n $rps ]] || die "no $t figure from redis-benchmark against $target: $out"
        results[$target,$mode,$t]+="$rps "
    done
    log "round $round $target $mode: $(grep -E '^(SET|GET): .* requests per second' <<<"$out" | awk '{print $1, $2}' | tr '\n' ' ')"
}

for round in $(seq "$rounds"); do
    for target in $(rotation "$round" "${targets[@]}"); do
        for mode in "${modes[@]}"; do
            bench_once "$target" "$mode"
        done
    done
done

range() { tr ' ' '\n' | grep -v '^$' | sort -g | awk 'NR==1{lo=$1} {hi=$1} END {printf "%.0f–%.0f", lo, hi}'; }

declare -A med
for target in "${targets[@]}"; do
    for mode in "${modes[@]}"; do
        for t in "${tests[@]}"; do
            med[$target,$mode,$t]="$(tr ' ' '\n' <<<"${results[$target,$mode,$t]}" | median)"
        done
    done
done

# row TARGET CELL: a table row, `| TARGET | CELL TARGET MODE TEST |...` for
# every mode and test.
row() {
    local target=$1 cell=$2 mode t
    printf '| %s' "$target"
    for mode in "${modes[@]}"; do
        for t in "${tests[@]}"; do
            printf ' | %s' "$("$cell" "$target" "$mode" "$t")"
        done
    done
    echo " |"
}
median_cell() { printf '%.0f' "${med[$1,$2,$3]}"; }
ratio_cell() { awk -v a="${med[$1,$2,$3]}" -v b="${med[direct,$2,$3]}" 'BEGIN {printf "%.2f", a / b}'; }
range_cell() { range <<<"${results[$1,$2,$3]}"; }

echo "## L4: redis-benchmark (medians of $rounds rounds)"
echo
echo "- $(date -u '+%Y-%m-%d %H:%M UTC'); $(nproc) cores; $(redis-server --version | awk '{print $3}'); $(haproxy -v 2>/dev/null | head -n 1 | awk '{print "HAProxy", $3}')"
echo "- \`redis-benchmark -q -n $requests -t set,get\` (50 clients), and with \`-P $pipeline\`"
echo "- pinning: $pinning; priority: $priority"
echo
echo "| target | SET req/s | GET req/s | SET -P $pipeline req/s | GET -P $pipeline req/s |"
echo "|---|---:|---:|---:|---:|"
for target in "${targets[@]}"; do
    row "$target" median_cell
done
echo
echo "| ratio vs direct | SET | GET | SET -P $pipeline | GET -P $pipeline |"
echo "|---|---:|---:|---:|---:|"
for target in "${targets[@]}"; do
    [[ $target == direct ]] || row "$target" ratio_cell
done
echo
echo "Range over the rounds (min–max req/s):"
echo
echo "| target | SET | GET | SET -P $pipeline | GET -P $pipeline |"
echo "|---|---:|---:|---:|---:|"
for target in "${targets[@]}"; do
    row "$target" range_cell
done
