#!/usr/bin/env bash
# Side-by-side HTTP/1.1 bench: the same small GET, through sluice and its peers.
#
# One upstream (nginx answering `GET /v1/models` with a fixed 102-byte JSON body
# from `return 200`, or with --upstream mock-llm the `sluice mock-llm` server), and
# in front of it, each on its own free loopback port, each with one worker thread:
#   direct   wrk straight to the upstream (the ceiling of this load setup)
#   sluice   one http listener, one cluster, one route, runtime.threads: 1
#   sluice-mirror3  the same, with the route mirrored 100% x3 to a shadow cluster
#            (the same upstream: its core serves the copies too)
#   nginx    reverse proxy, worker_processes 1, upstream keepalive
#   envoy    --concurrency 1, static config, HTTP connection manager + router
#   haproxy  nbthread 1 (when haproxy is installed)
#   sluice-record  (--record) sluice with the recorder on: every request
#            recorded (percent 100, bodies redacted) to a trace file; its
#            writer at the default `priority: idle`
#   sluice-record-normal  (--record) the same with the writer at `priority: normal`
#   sluice-limits  (--limits) the same with a rate limit on the route, keyed by
#            a header and the model, high enough never to refuse: every request
#            pays the limit's decision (key, admission, settlement) and carries
#            the x-ratelimit-* headers
#   sluice-base    (--baseline BIN) the same config as `sluice`, served by
#            another sluice binary (an earlier commit's), for before/after
# (--threads N gives each proxy N workers instead of 1.)
# Every target is measured with the same wrk command (fixed connections, one wrk
# thread, --latency) after a short unmeasured warm-up, in rounds whose order
# rotates; the table reports the median of the rounds. With taskset and two or
# more cores, the proxies run on core 1 and wrk + upstream on core 0.
#
# Other work on a shared machine (compiles) would take cores from the bench, so
# every bench process (upstream, proxies, wrk) starts in a session of its own with
# a raised priority (nice, and the session's autogroup nice where the kernel groups
# by session) where allowed. Each run records how busy each core was beyond the
# bench's own processes; a run with more than 15% of foreign load on the core that
# bounds it (core 0 for direct, the proxy's core otherwise) is repeated, at most
# twice and within an overall budget, and the last attempt kept. Every attempt,
# kept or not, is listed in the report.
#
#   benches/compare.sh            5 rounds x 8 s per target (~4-5 min)
#   benches/compare.sh --quick    2 rounds x 4 s per target (~1.5 min)
#
# Options: --rounds N, --duration SECONDS, --connections N, --upstream nginx|mock-llm,
#          --threads N (worker threads of every proxy, default 1: sluice
#          runtime.threads, nginx worker_processes, Envoy --concurrency, HAProxy
#          nbthread; with N > 1 the proxies get cores 1..N when the machine has
#          N + 1 cores, else they share every core with the load),
#          --record (add sluice-record), --limits (add sluice-limits),
#          --baseline BIN (add sluice-base),
#          --nice N (default -19; 0 = no change), --no-install (skip
#          scripts/install-deps.sh), --keep (keep the temp dir).
# Output: a markdown report on stdout, also saved to target/bench/compare-<date>.md.
# Progress goes to stderr.
set -euo pipefail

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

rounds=5
duration=8
warmup=1
niceness=-19
connections=32
upstream_kind=nginx
threads=1
record=0
limits=0
baseline=""
install=1
keep=0
mode=full
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick)
            mode=quick
            rounds=2
            duration=4
            ;;
        --upstream) upstream_kind=$2 && shift ;;
        --threads) threads=$2 && shift ;;
        --record) record=1 ;;
        --limits) limits=1 ;;
        --baseline) baseline=$2 && shift ;;
        *) shared_option "$@" && shift $((taken - 1)) ;;
    esac
    shift
done
case "$upstream_kind" in
    nginx | mock-llm) ;;
    *)
        log "--upstream must be nginx or mock-llm"
        exit 2
        ;;
esac

# ------------------------------------------------------------------ tools

bench_tools "$install" wrk nginx curl
python="$root/.venv/bin/python"
[[ -x $python ]] || die ".venv missing (run scripts/install-deps.sh --bench)"
envoy_bin="$(envoy_path)"

build_release open_loop
sluice="${CARGO_TARGET_DIR:-$root/target}/release/sluice"

targets=(direct sluice sluice-mirror3 nginx envoy)
((record)) && targets+=(sluice-record sluice-record-normal)
((limits)) && targets+=(sluice-limits)
if [[ -n $baseline ]]; then
    [[ -x $baseline ]] || die "--baseline $baseline is not an executable"
    targets+=(sluice-base)
fi
if command -v haproxy >/dev/null 2>&1; then
    targets+=(haproxy)
else
    log "haproxy not installed: skipped"
fi

# Two cores: proxies on core 1, wrk and the upstream on core 0 (benches/lib.sh).
pin_and_prioritise "wrk and upstream" "$threads"

# ------------------------------------------------------------------ processes

start_work

# wait_ready NAME PID PORT: polls until GET /v1/models answers 200 through the port.
wait_ready() {
    wait_for "$1" "$2" "ready on 127.0.0.1:$3" http_200 "http://127.0.0.1:$3/v1/models"
}

declare -A port pid_of

upstream_port="$(free_port)"
if [[ $upstream_kind == nginx ]]; then
    nginx_json "$work/upstream" "$upstream_port" \
        '{"data":[{"created":1795982543,"id":"mock-llm","object":"model","owned_by":"sluice"}],"object":"list"}'
    launch_nginx load_pin "$work/upstream.log" "$work/upstream"
    upstream_desc="nginx \`return 200\` of a fixed 102-byte JSON body (worker_processes 1)"
else
    launch load_pin "$work/upstream.log" "$sluice" mock-llm --listen "127.0.0.1:$upstream_port"
    upstream_desc="\`sluice mock-llm\`, \`GET /v1/models\` (102-byte JSON)"
fi
upstream_pid=$launched
pids+=("$upstream_pid")
wait_ready upstream "$upstream_pid" "$upstream_port"
port[direct]=$upstream_port
log "upstream ($upstream_kind) on 127.0.0.1:$upstream_port"

# start_TARGET PORT: each launches its target listening on 127.0.0.1:PORT.

# start_sluice_as NAME PORT ROUTE_EXTRA [TAIL [BIN]]: a sluice process; ROUTE_EXTRA is
# added to its route, TAIL (more top-level sections) after the routes; BIN serves it.
start_sluice_as() {
    local name=$1 p=$2 extra=$3 tail=${4:-} bin=${5:-$sluice} admin
    admin="$(free_port)"
    admin_of[$name]=$admin
    {
        sluice_config_head "$threads" "$admin" "$p"
        cat <<EOF
  - { name: upstream, kind: http, endpoints: [127.0.0.1:$upstream_port] }
  - { name: shadow, kind: http, endpoints: [127.0.0.1:$upstream_port] }
routes:
  - { name: all, listener: public, match: { path_prefix: / }, split: { upstream: 100 }$extra }
$tail
EOF
    } >"$work/$name.yaml"
    launch proxy_pin "$work/$name.log" "$bin" run -c "$work/$name.yaml"
}

start_sluice() { start_sluice_as sluice "$1" ""; }

# Every request copied three times to a shadow cluster (the same upstream, so the
# upstream's core also serves the copies).
start_sluice-mirror3() { start_sluice_as sluice-mirror3 "$1" ", mirror: { cluster: shadow, percent: 100, copies: 3 }"; }

# Every request recorded, bodies redacted, to a trace file in the work dir; the
# writer at its default (idle) CPU priority, or at the data plane's.
declare -A admin_of
start_sluice-record() {
    start_sluice_as sluice-record "$1" "" \
        "recorder: { path: $work/trace-idle.jsonl, percent: 100, bodies: redacted, max_bytes: 8GiB }"
}
start_sluice-record-normal() {
    start_sluice_as sluice-record-normal "$1" "" \
        "recorder: { path: $work/trace-normal.jsonl, percent: 100, bodies: redacted, max_bytes: 8GiB, priority: normal }"
}

# Limits that never refuse at this load, so every request is admitted and settled.
start_sluice-limits() {
    start_sluice_as sluice-limits "$1" \
        ", limits: { descriptor: [header:x-tenant, model], requests_per_minute: 1000000000, total_tokens_per_minute: 1000000000000 }"
}

start_sluice-base() { start_sluice_as sluice-base "$1" "" "" "$baseline"; }

start_nginx() {
    local p=$1
    nginx_conf "$work/nginx" "    upstream up {
        server 127.0.0.1:$upstream_port;
        keepalive 64;
        keepalive_requests 1000000;
    }
    server {
        listen 127.0.0.1:$p;
        location / {
            proxy_pass http://up;
            proxy_http_version 1.1;
            proxy_set_header Connection \"\";
        }
    }" "$threads"
    launch_nginx proxy_pin "$work/nginx.log" "$work/nginx"
}

start_envoy() {
    start_envoy_proxy proxy_pin "$1" "$upstream_port"
}

start_haproxy() {
    local p=$1
    cat >"$work/haproxy.cfg" <<EOF
global
    nbthread $threads
    maxconn 4096
defaults
    mode http
    option http-keep-alive
    timeout connect 1s
    timeout client 30s
    timeout server 30s
frontend public
    bind 127.0.0.1:$p
    default_backend upstream
backend upstream
    server u1 127.0.0.1:$upstream_port
EOF
    launch proxy_pin "$work/haproxy.log" haproxy -db -f "$work/haproxy.cfg"
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
    wait_ready "$t" "${pid_of[$t]}" "${port[$t]}"
    log "$t on 127.0.0.1:${port[$t]} (pid ${pid_of[$t]})"
done
for pid in "${pids[@]}"; do
    [[ $(ps -o sid= -p "$pid" | tr -d ' ') == "$pid" ]] || die "pid $pid is not its own session leader"
done

# ------------------------------------------------------------------ measuring

# proc_family PID: the process and its direct children (nginx workers).
proc_family() {
    echo "$1" "$(cat /proc/"$1"/task/*/children 2>/dev/null || true)"
}

# CPU ticks (user + system) of a process and its direct children.
proc_ticks() {
    local total=0 p stat fields
    for p in $(proc_family "$1"); do
        stat="$(cat /proc/"$p"/stat 2>/dev/null)" || continue
        # Fields after the `(comm)`, which may contain spaces: utime is the 12th, stime the 13th.
        read -r -a fields <<<"${stat##*) }"
        total=$((total + fields[11] + fields[12]))
    done
    echo "$total"
}

# Context switches (voluntary + involuntary) of every thread of a process and of
# its direct children.
proc_switches() {
    local p
    for p in $(proc_family "$1"); do
        cat /proc/"$p"/task/*/status 2>/dev/null || true
    done | awk '/^(voluntary|nonvoluntary)_ctxt_switches:/ { s += $2 } END { print s + 0 }'
}

# Resident memory (MiB) of a process and its direct children.
proc_rss_mib() {
    local p
    for p in $(proc_family "$1"); do
        cat /proc/"$p"/status 2>/dev/null || true
    done | awk '/^VmRSS:/ { kb += $2 } END { printf "%.1f", kb / 1024 }'
}

# "busy total" ticks of one core from /proc/stat.
core_ticks() {
    awk -v c="cpu$1" '$1 == c { t = 0; for (i = 2; i <= NF; i++) t += $i; print t - $5 - $6, t }' /proc/stat
}

hz="$(getconf CLK_TCK)"
results="$work/results.tsv"
: >"$results"
url_of() { echo "http://127.0.0.1:${port[$1]}/v1/models"; }

# CPU ticks of this shell's reaped children (fields 16 and 17 of /proc/$$/stat):
# read around `wait` for wrk, they give wrk's own CPU time.
child_ticks() {
    local stat fields
    stat="$(</proc/$$/stat)"
    read -r -a fields <<<"${stat##*) }"
    echo $((fields[13] + fields[14]))
}

pct() { awk -v d="$1" -v t="$2" 'BEGIN { printf "%.0f", (t > 0 ? 100 * d / t : 0) }'; }
floor0() { awk -v v="$1" 'BEGIN { printf "%.0f", (v < 0 ? 0 : v) }'; }

threshold=15                # % of a core taken by something other than the bench
retries_each=2              # repeats of one measurement at most
retry_budget=$((2 * ${#targets[@]}))
retries_used=0

# measure_once ROUND TARGET ATTEMPT: one warm-up and one measured wrk run; sets
# $foreign (the foreign share of the core that bounds this target) and $line.
measure_once() {
    local round=$1 t=$2 attempt=$3 url out pt0 pt1 ut0 ut1 wt0 wt1 b0 b1 tot0 tot1 c0 c1 w0 w1 t0 t1
    local rps p50 p99 reqs non2xx sockerr proxy_cpu=- proxy_pct=0 core0 core1 up_pct wrk_pct f0 f1
    local sw0 sw1 us_req=- sw_req=- rss=-
    url="$(url_of "$t")"
    run_load "$work/warmup.txt" wrk -c "$connections" -t 1 -d "${warmup}s" "$url"
    out="$work/wrk-$round-$t-$attempt.txt"
    if [[ $t != direct ]]; then
        pt0="$(proc_ticks "${pid_of[$t]}")"
        sw0="$(proc_switches "${pid_of[$t]}")"
    fi
    ut0="$(proc_ticks "$upstream_pid")"
    wt0="$(child_ticks)"
    read -r b0 tot0 <<<"$(core_ticks 0)"
    read -r c0 w0 <<<"$(core_ticks 1)"
    t0="$(date +%s.%N)"
    run_load "$out" wrk -c "$connections" -t 1 -d "${duration}s" --latency "$url"
    t1="$(date +%s.%N)"
    read -r b1 tot1 <<<"$(core_ticks 0)"
    read -r c1 w1 <<<"$(core_ticks 1)"
    wt1="$(child_ticks)"
    ut1="$(proc_ticks "$upstream_pid")"
    local wall_ticks
    wall_ticks="$(awk -v a="$t0" -v b="$t1" -v hz="$hz" 'BEGIN { print (b - a) * hz }')"
    if [[ $t != direct ]]; then
        pt1="$(proc_ticks "${pid_of[$t]}")"
        sw1="$(proc_switches "${pid_of[$t]}")"
        proxy_pct="$(pct $((pt1 - pt0)) "$wall_ticks")"
        proxy_cpu=$proxy_pct
        # Read right after the run, its connections still warm in the proxy's pools.
        rss="$(proc_rss_mib "${pid_of[$t]}")"
    fi
    up_pct="$(pct $((ut1 - ut0)) "$wall_ticks")"
    wrk_pct="$(pct $((wt1 - wt0)) "$wall_ticks")"
    core0="$(pct $((b1 - b0)) $((tot1 - tot0)))"
    core1="$(pct $((c1 - c0)) $((w1 - w0)))"
    # What kept a core busy beyond the bench's own processes: foreign load, plus the
    # kernel's network work that no process is charged for (0-1% in a quiet run).
    f0="$(floor0 $((core0 - wrk_pct - up_pct)))"
    f1="$(floor0 $((core1 - proxy_pct)))"
    # The core that bounds the run: core 0 (wrk + upstream) for direct, the proxy's
    # core otherwise. Foreign load on core 0 during a proxied run mostly fills time
    # wrk and the upstream leave idle, so it is reported but not acted on.
    if [[ $t == direct ]]; then foreign=$f0; else foreign=$f1; fi
    rps="$(awk '/^Requests\/sec:/ { printf "%.0f", $2 }' "$out")"
    p50="$(to_ms "$(awk '$1 == "50%" { print $2 }' "$out")")"
    p99="$(to_ms "$(awk '$1 == "99%" { print $2 }' "$out")")"
    reqs="$(awk '/requests in/ { print $1 }' "$out")"
    if [[ $t != direct ]]; then
        # Requests wrk completed in the window the proxy's counters were read over.
        us_req="$(awk -v d=$((pt1 - pt0)) -v hz="$hz" -v n="${reqs:-0}" \
            'BEGIN { if (n > 0) printf "%.1f", 1e6 * d / hz / n; else print "-" }')"
        sw_req="$(awk -v d=$((sw1 - sw0)) -v n="${reqs:-0}" 'BEGIN { if (n > 0) printf "%.2f", d / n; else print "-" }')"
    fi
    non2xx="$(awk '/Non-2xx or 3xx responses:/ { print $NF }' "$out")"
    sockerr="$(awk '/Socket errors:/ { gsub(",", ""); print $4 + $6 + $8 + $10 }' "$out")"
    line="$(printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s' "$round" "$t" "$attempt" \
        "$rps" "$p50" "$p99" "$reqs" "${non2xx:-0}" "${sockerr:-0}" "$proxy_cpu" "$core0" "$core1" "$f0" "$f1" \
        "$us_req" "$sw_req" "$rss")"
    log "round $round $t #$attempt: $rps req/s, p50 $p50 ms, p99 $p99 ms, proxy cpu $proxy_cpu% ($us_req us/req, $sw_req switches/req, RSS $rss MiB), core0 $core0% (wrk $wrk_pct%, upstream $up_pct%, foreign $f0%), core1 $core1% (foreign $f1%), non-2xx ${non2xx:-0}, socket errors ${sockerr:-0}"
}

# measure ROUND TARGET: measure_once, repeated while foreign load spoilt it (within
# the limits); every attempt goes to results, the last one marked kept.
measure() {
    local round=$1 t=$2 attempt=1 foreign line
    while true; do
        measure_once "$round" "$t" "$attempt"
        if ((foreign > threshold && attempt <= retries_each && retries_used < retry_budget)); then
            printf '%s\tno\n' "$line" >>"$results"
            retries_used=$((retries_used + 1))
            attempt=$((attempt + 1))
            log "round $round $t: $foreign% foreign load on its bounding core, measuring again"
            continue
        fi
        printf '%s\tyes\n' "$line" >>"$results"
        return
    done
}

load_before="$(cut -d' ' -f1-3 /proc/loadavg)"
started="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
for ((r = 1; r <= rounds; r++)); do
    for t in $(rotation "$r" "${targets[@]}"); do
        measure "$r" "$t"
    done
done

# ------------------------------------------------------------------ fixed-rate latency

# Added latency is read at a fixed rate, half of what the slowest proxy served in
# the closed-loop rounds, with an open-loop generator (benches/src/bin/open_loop.rs:
# latency counts from when a request was due, so queueing behind a stall is
# charged). Same rotation of targets, one run per target per round.
slowest="$(awk -F'\t' '$2 != "direct" && $18 == "yes" { print $4 }' "$results" | sort -g | head -1)"
fixed_rate=$((${slowest:-2000} / 2))
latency_results="$work/latency.tsv"
: >"$latency_results"
for ((r = 1; r <= rounds; r++)); do
    for t in $(rotation "$r" "${targets[@]}"); do
        out="$work/open-loop-$r-$t.txt"
        run_load "$out" "${CARGO_TARGET_DIR:-$root/target}/release/open_loop" --url "$(url_of "$t")" --rate "$fixed_rate" \
            --duration "$duration" --connections "$connections"
        line="$(tail -1 "$out")"
        log "fixed rate round $r $t: $line"
        # rate_asked=.. rate_reached=.. p50_us=.. p90_us=.. p99_us=.. p999_us=.. errors=..
        printf '%s\t%s\t%s\n' "$r" "$t" "$(echo "$line" | tr ' ' '\n' | cut -d= -f2 | paste -sd'\t')" >>"$latency_results"
    done
done
load_after="$(cut -d' ' -f1-3 /proc/loadavg)"

# ------------------------------------------------------------------ report

# kept_median COLUMN TARGET: median over the kept measurements of one column of results.tsv.
kept_median() {
    awk -F'\t' -v c="$1" -v t="$2" '$2 == t && $18 == "yes" && $c != "-" { print $c }' "$results" | median
}
# Errors count in every attempt, kept or not.
sum_col() { awk -F'\t' -v c="$1" -v t="$2" '$2 == t { s += $c } END { print s + 0 }' "$results"; }

declare -A med_rps
{
    echo "# sluice side-by-side HTTP bench ($started)"
    echo
    echo "- machine: $(machine)"
    echo "- sluice: $(sluice_revision)"
    echo "- peers: $(nginx -v 2>&1 | sed 's/^nginx version: //'), envoy $(envoy_version), $(command -v haproxy >/dev/null && haproxy -v | awk 'NR == 1 { print "HAProxy " $3 }'), $(wrk -v 2>&1 | awk 'NR == 1 { print "wrk " $2 }')"
    echo "- upstream: $upstream_desc"
    echo "- load: \`wrk -c $connections -t 1 -d ${duration}s --latency http://127.0.0.1:PORT/v1/models\` (HTTP/1.1 keep-alive), after a ${warmup}s unmeasured warm-up"
    echo "- pinning: $pinning"
    echo "- priority: $priority"
    echo "- worker threads per proxy: $threads"
    echo "- rounds: $rounds, order rotated each round; figures are medians of the rounds"
    echo "- load average (1/5/15 min) before: $load_before, after: $load_after"
    echo
    echo "| target | req/s | p50 ms | p99 ms | proxy CPU % | proxy CPU µs/req (÷10: CPU s per 100k req) | proxy context switches/req | proxy RSS MiB | non-2xx | socket errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    for t in "${targets[@]}"; do
        med_rps[$t]="$(kept_median 4 "$t")"
        printf '| %s | %.0f | %.3f | %.3f | %s | %s | %s | %s | %s | %s |\n' "$t" "${med_rps[$t]}" \
            "$(kept_median 5 "$t")" "$(kept_median 6 "$t")" "$(kept_median 10 "$t")" "$(kept_median 15 "$t")" "$(kept_median 16 "$t")" \
            "$(kept_median 17 "$t")" "$(sum_col 8 "$t")" "$(sum_col 9 "$t")"
    done
    echo
    ratios=()
    for peer in direct nginx envoy haproxy; do
        [[ -n ${med_rps[$peer]:-} ]] || continue
        ratios+=("sluice/$peer $(awk -v a="${med_rps[sluice]}" -v b="${med_rps[$peer]}" 'BEGIN { printf "%.2f", a / b }')")
    done
    for own in sluice-record sluice-record-normal sluice-limits sluice-base; do
        [[ -n ${med_rps[$own]:-} ]] || continue
        ratios+=("$own/sluice $(awk -v a="${med_rps[$own]}" -v b="${med_rps[sluice]}" 'BEGIN { printf "%.3f", a / b }')")
    done
    echo "req/s ratios: $(
        IFS=';'
        echo "${ratios[*]}" | sed 's/;/ · /g'
    )"
    if [[ -n $baseline ]]; then
        echo
        echo "sluice-base is \`$baseline\`."
    fi
    if ((limits)); then
        echo
        curl -fsS "http://127.0.0.1:${admin_of[sluice-limits]}/metrics" | awk '
            /^sluice_ratelimit_decisions_total/ && /result="allowed"/ { allowed += $2 }
            /^sluice_ratelimit_decisions_total/ && /result="limited"/ { limited += $2 }
            END { printf "sluice-limits decided %d requests: %d allowed, %d limited.\n", allowed + limited, allowed, limited }'
    fi
    if ((record)); then
        echo
        for t in sluice-record sluice-record-normal; do
            curl -fsS "http://127.0.0.1:${admin_of[$t]}/metrics" | awk -v t="$t" '
                /^sluice_recorder_lines_total/ { lines = $2 }
                /^sluice_recorder_dropped_total/ { dropped += $2 }
                /^sluice_recorder_bytes_total/ { bytes = $2 }
                END { printf "%s wrote %d trace lines (%d bytes) and dropped %d (queue full): %.0f%% of the requests it served, warm-ups included, were recorded.\n",
                      t, lines, bytes, dropped, (lines + dropped > 0 ? 100 * lines / (lines + dropped) : 0) }'
        done
    fi
    echo
    echo "proxy CPU % is the proxy's user+system time over the run's wall time (100 = one core);"
    echo "µs/req and context switches/req divide the proxy's CPU time and the context switches of"
    echo "all its threads (nginx: master and worker) by the requests wrk completed. RSS is the"
    echo "proxy's resident memory (all its processes) right after each measured run."
    echo "non-2xx and socket errors are summed over every attempt. Foreign % is how busy a core"
    echo "was beyond the bench's own processes on it (core 0: wrk + upstream; core 1: the proxy)."
    awk -F'\t' -v th="$threshold" '
        $18 == "no" { dropped++ }
        $18 == "yes" { kept++; f = ($2 == "direct") ? $13 : $14; if (f > th) dirty++ }
        END {
            printf "A run with more than %d%% foreign load on its bounding core (core 0 for direct, core 1\n", th
            printf "otherwise) was measured again: %d repeats; kept runs still above it: %d of %d.\n", dropped, dirty, kept
        }' "$results"
    echo
    echo "### Added latency at a fixed rate: $fixed_rate req/s (half the slowest proxy's req/s above)"
    echo
    echo "Open loop (\`open_loop --rate $fixed_rate --duration $duration --connections $connections\`): each"
    echo "request's latency counts from when it was due. Medians over the rounds; added = target − direct."
    echo
    echo "| target | rate reached | p50 µs | p90 µs | p99 µs | p99.9 µs | added p50 µs | added p99 µs | errors |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    lat_median() { awk -F'\t' -v c="$1" -v t="$2" '$2 == t { print $c }' "$latency_results" | median; }
    d50="$(lat_median 5 direct)"
    d99="$(lat_median 7 direct)"
    for t in "${targets[@]}"; do
        p50="$(lat_median 5 "$t")"
        p99="$(lat_median 7 "$t")"
        printf '| %s | %.0f | %.0f | %.0f | %.0f | %.0f | %+.0f | %+.0f | %s |\n' "$t" "$(lat_median 4 "$t")" \
            "$p50" "$(lat_median 6 "$t")" "$p99" "$(lat_median 8 "$t")" \
            "$(awk -v a="$p50" -v b="$d50" 'BEGIN { print a - b }')" \
            "$(awk -v a="$p99" -v b="$d99" 'BEGIN { print a - b }')" \
            "$(awk -F'\t' -v t="$t" '$2 == t { s += $9 } END { print s + 0 }' "$latency_results")"
    done
    echo
    echo "<details><summary>every attempt</summary>"
    echo
    echo "| round | target | attempt | req/s | p50 ms | p99 ms | requests | non-2xx | socket errors | proxy CPU % | core 0 busy % | core 1 busy % | core 0 foreign % | core 1 foreign % | proxy CPU µs/req | proxy switches/req | proxy RSS MiB | kept |"
    echo "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    awk -F'\t' -v OFS=' | ' '{ $1 = $1; print "| " $0 " |" }' "$results"
    echo
    echo "</details>"
} | save_report compare
log "$mode run done"
