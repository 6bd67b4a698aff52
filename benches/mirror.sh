#!/usr/bin/env bash
# Shadow traffic bench: what mirroring costs the primary. Four sluice processes
# in front of the same upstream, measured alternately in one run:
#   off      no mirror
#   off-b    no mirror again: a second, identical process, whose distance from
#            `off` is the noise floor of the run (an A/A test)
#   x1       mirror { copies: 1 } to a shadow upstream (100%)
#   x3       mirror { copies: 3 } to the shadow (100%)
#   x3-normal  x3 with the sender at runtime.mirror_priority: normal (not
#            the default idle)
#   x3-apart x3 with the sender's threads moved to the load's core (taskset
#            -p): a sender with CPU time of its own, as on a machine where
#            the sidecar is not held to one core
#            (x3-normal and x3-apart are not in the default target list)
#   x3-dead  mirror { copies: 3 } to a port nobody listens on
#   x3-slow  mirror { copies: 3 } to a shadow answering in 5 s (`sluice mock-llm --ttft 5s`)
#   x3-reset mirror { copies: 3 } to a shadow that accepts and resets every connection
#   x1-llm   mirror { copies: 1 } to the shadow as a cluster of kind llm: its answer
#            text is read and compared with the primary's (token-set similarity)
#   x1-embed x1-llm with compare.embeddings: after each copy the sender embeds
#            both answers in one POST /v1/embeddings to a mock embedder (nginx
#            answering two 576-dimension vectors, SmolLM2's size, with no model
#            latency: the most embedding work the sender can be given per copy)
#            and scores the pair into the drift window
#            (x1-llm and x1-embed are not in the default target list:
#            --targets off,off-b,x1-llm,x1-embed is embedding comparison on vs off)
# The primary and the shadow are two nginx instances answering `return 200` with a
# fixed JSON body (worker_processes 1 each). Every shadow server runs under
# SCHED_IDLE (`chrt --idle`): a shadow cluster has machines of its own, and here
# it must not take core 0 from the primary nginx and the load generator. Every sluice has runtime.threads: 1;
# its mirror sender (its own 2-thread runtime) shares the proxy's core. Load: wrk
# POSTing a small chat-completions JSON body over HTTP/1.1 keep-alive, one wrk
# thread, fixed connections, a short unmeasured warm-up per run (saturation:
# what the proxy's core can do), in rounds whose target order rotates (the table
# gives the median of the rounds); then h2load --h1 at a fixed request rate (a
# sidecar's usual state: p50/p99 at the same offered load) in many short slices,
# the targets interleaved so that the machine's drift over minutes lands on all
# of them alike, every slice's requests pooled per target. `off-b` measures what
# that leaves: two identical processes differ by this much. Each sluice's mirror
# counters (copies answered, dropped by reason) are read at the end. With
# taskset and two cores: the sluices on core 1; wrk, h2load and both nginx on core 0.
#
#   benches/mirror.sh            3 rounds x 8 s, then 12 slices x 3 s per target (~11 min)
#   benches/mirror.sh --quick    2 rounds x 4 s, then 4 slices x 3 s per target (~4 min)
#
# Options: --rounds N, --duration SECONDS, --connections N, --rate REQ_PER_S
#          (fixed-rate phase, default 4000; 0 = skip), --slices N (fixed-rate
#          slices per target, default 12), --slice SECONDS (default 3), --targets off,x3-dead,... (a
#          subset; keep `off`, the reference), --nice N (default -19;
#          0 = no change), --no-install (skip scripts/install-deps.sh), --keep.
#          --no-build (measure the release binary already in CARGO_TARGET_DIR or target/).
# Output: a markdown report on stdout, also saved to target/bench/mirror-<date>.md.
# Besides the medians, each table gives the spread of the rounds (min–max) and
# throughput and p99 as ratios to `off`.
set -euo pipefail

# shellcheck source=benches/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

only=""
rounds=3
duration=8
warmup=1
niceness=-19
connections=32
rate=4000
slices=12
slice=3
install=1
build=1
keep=0
while [[ $# -gt 0 ]]; do
    case "$1" in
        --quick)
            rounds=2
            duration=4
            slices=4
            ;;
        --rate) rate=$2 && shift ;;
        --slices) slices=$2 && shift ;;
        --slice) slice=$2 && shift ;;
        --targets) only=$2 && shift ;;
        --no-build) build=0 ;;
        *) shared_option "$@" && shift $((taken - 1)) ;;
    esac
    shift
done

bench_tools "$install" wrk nginx curl $( ((rate > 0)) && echo h2load)
((build == 0)) || build_release
sluice="${CARGO_TARGET_DIR:-$root/target}/release/sluice"

pin_and_prioritise "wrk and both nginx"
start_work

# wait_ready NAME PORT: polls until a POST answers 200 through the port.
wait_ready() {
    wait_for "$1" "" "ready on 127.0.0.1:$2" http_200 -X POST -d '{}' "http://127.0.0.1:$2/v1/chat/completions"
}

# Shadow servers: on core 0 like the load, but only on CPU time nothing else wants
# (SCHED_IDLE in a session whose autogroup has the lowest weight).
shadow_pin=("${load_pin[@]}" chrt --idle 0)
shadow_nice=19

# start_nginx NAME PORT PIN NICE: one worker answering every request with a fixed
# JSON body, launched with PIN and autogroup nice NICE.
start_nginx() {
    local name=$1 p=$2 pin=$3 nice=$4
    nginx_json "$work/$name" "$p" \
        '{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"hello"},"finish_reason":"stop"}]}'
    launch_nice=$nice launch_nginx "$pin" "$work/$name.log" "$work/$name"
    pids+=("$launched")
    wait_ready "$name" "$p"
}

primary_port="$(free_port)"
shadow_port="$(free_port)"
dead_port="$(free_port)"
start_nginx primary "$primary_port" load_pin "$niceness"
start_nginx shadow "$shadow_port" shadow_pin "$shadow_nice"
slow_port="$(free_port)"
launch_nice=$shadow_nice launch shadow_pin "$work/slow.log" "$sluice" mock-llm --listen "127.0.0.1:$slow_port" --ttft 5s --tokens 1
pids+=("$launched")
reset_port="$(free_port)"
# Accepts every connection and closes it with SO_LINGER 0: the client sees a RST.
launch_nice=$shadow_nice launch shadow_pin "$work/reset.log" python3 -c '
import socket, struct, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen(4096)
while True:
    c, _ = s.accept()
    c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    c.close()
' "$reset_port"
pids+=("$launched")
# The mock embedder: every POST answered with two 576-dimension vectors, one per
# input of an x1 copy's batch (the primary's answer and the shadow's).
embedder_port="$(free_port)"
vector="$(awk 'BEGIN { for (i = 0; i < 576; i++) printf "%s%.6f", (i ? "," : ""), sin(i + 1) / 24 }')"
# Too long for nginx's `return`: a static file, which nginx refuses to POST (405)
# until error_page sends the request back to it as a GET.
mkdir -p "$work/embedder"
printf '{"object":"list","data":[{"index":0,"embedding":[%s]},{"index":1,"embedding":[%s]}]}' \
    "$vector" "$vector" >"$work/embedder/embed.json"
nginx_conf "$work/embedder" "    server {
        listen 127.0.0.1:$embedder_port;
        root $work/embedder;
        location / {
            default_type application/json;
            error_page 405 =200 /embed.json;
            try_files /embed.json =404;
        }
    }"
launch_nice=$shadow_nice launch_nginx shadow_pin "$work/embedder.log" "$work/embedder"
pids+=("$launched")
wait_ready embedder "$embedder_port"

targets=(off off-b x1 x3 x3-dead x3-slow x3-reset)
if [[ -n $only ]]; then
    # --targets off,x3-dead: a subset, in that order (`off` is the reference).
    IFS=, read -r -a targets <<<"$only"
fi
declare -A port admin proxy_pid
for t in "${targets[@]}"; do
    p="$(free_port)"
    a="$(free_port)"
    case $t in
        off | off-b) mirror="" ;;
        x1) mirror=", mirror: { cluster: shadow, copies: 1 }" ;;
        x3 | x3-normal | x3-apart) mirror=", mirror: { cluster: shadow, copies: 3 }" ;;
        x3-dead) mirror=", mirror: { cluster: dead, copies: 3 }" ;;
        x3-slow) mirror=", mirror: { cluster: slow, copies: 3 }" ;;
        x3-reset) mirror=", mirror: { cluster: reset, copies: 3 }" ;;
        x1-llm) mirror=", mirror: { cluster: shadow-llm, copies: 1 }" ;;
        x1-embed) mirror=", mirror: { cluster: shadow-llm, copies: 1, compare: { embeddings: { cluster: embedder } } }" ;;
        *) die "unknown target $t (off, off-b, x1, x3, x3-normal, x3-apart, x3-dead, x3-slow, x3-reset, x1-llm, x1-embed)" ;;
    esac
    sender=""
    [[ $t == x3-normal ]] && sender=", mirror_priority: normal"
    {
        sluice_config_head 1 "$a" "$p" "$sender"
        cat <<CONF
  - { name: primary, kind: http, endpoints: [127.0.0.1:$primary_port] }
  - { name: shadow, kind: http, endpoints: [127.0.0.1:$shadow_port] }
  - { name: dead, kind: http, endpoints: [127.0.0.1:$dead_port] }
  - { name: slow, kind: http, endpoints: [127.0.0.1:$slow_port] }
  - { name: reset, kind: http, endpoints: [127.0.0.1:$reset_port] }
  - { name: shadow-llm, kind: llm, endpoints: [127.0.0.1:$shadow_port] }
  - { name: embedder, kind: llm, endpoints: [127.0.0.1:$embedder_port] }
routes:
  - { name: chat, listener: public, split: { primary: 100 }$mirror }
CONF
    } >"$work/sluice-$t.yaml"
    launch proxy_pin "$work/sluice-$t.log" "$sluice" run -c "$work/sluice-$t.yaml"
    pids+=("$launched")
    port[$t]=$p
    admin[$t]=$a
    proxy_pid[$t]=$launched
done
for t in "${targets[@]}"; do wait_ready "sluice-$t" "${port[$t]}"; done
# x3-apart: the sender's threads (named sluice-mirror) leave the proxy's core.
if [[ " ${targets[*]} " == *" x3-apart "* ]]; then
    [[ ${#load_pin[@]} -gt 0 ]] || die "x3-apart needs taskset and two cores"
    moved=0
    for task in /proc/"${proxy_pid[x3-apart]}"/task/*; do
        if [[ $(cat "$task/comm") == sluice-mirror ]]; then
            taskset -pc 0 "${task##*/}" >/dev/null
            moved=$((moved + 1))
        fi
    done
    log "x3-apart: $moved sender threads moved to core 0"
fi

cat >"$work/post.lua" <<'LUA'
wrk.method = "POST"
wrk.body = '{"model":"m","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}'
wrk.headers["Content-Type"] = "application/json"
LUA
printf '%s' '{"model":"m","messages":[{"role":"user","content":"Say hello."}],"max_tokens":16}' >"$work/body.json"
# Fixed rate: 16 clients, each at rate/16 requests per second.
rate_clients=16

results="$work/results.tsv"
: >"$results"
: >"$work/rate.tsv"
for round in $(seq "$rounds"); do
    for t in $(rotation "$round" "${targets[@]}"); do
        url="http://127.0.0.1:${port[$t]}/v1/chat/completions"
        run_load "$work/warmup.txt" wrk -c "$connections" -t 1 -d "${warmup}s" -s "$work/post.lua" "$url"
        out="$work/wrk-$round-$t.txt"
        run_load "$out" wrk -c "$connections" -t 1 -d "${duration}s" --latency -s "$work/post.lua" "$url"
        rps="$(awk '/^Requests\/sec:/ { print $2 }' "$out")"
        p50="$(to_ms "$(awk '$1 == "50%" { print $2 }' "$out")")"
        p99="$(to_ms "$(awk '$1 == "99%" { print $2 }' "$out")")"
        non2xx="$(awk '/Non-2xx/ { print $NF }' "$out")"
        sockerr="$(awk '/Socket errors/ { print $0 }' "$out")"
        printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$round" "$t" "$rps" "$p50" "$p99" "${non2xx:-0}" >>"$results"
        log "round $round $t: $rps req/s, p50 $p50 ms, p99 $p99 ms, non-2xx ${non2xx:-0}${sockerr:+, $sockerr}"
    done
done

# Fixed rate: short slices, the targets interleaved (order rotated each slice), so
# drift in the machine's load over minutes falls on every target alike.
if ((rate > 0)); then
    for sl in $(seq "$slices"); do
        for t in $(rotation "$sl" "${targets[@]}"); do
            url="http://127.0.0.1:${port[$t]}/v1/chat/completions"
            rlog="$work/h2load-$sl-$t.log"
            run_load "$work/h2load-$sl-$t.txt" h2load --h1 -c "$rate_clients" \
                --rps=$((rate / rate_clients)) -D "$slice" --warm-up-time=1 \
                -d "$work/body.json" -H 'content-type: application/json' --log-file="$rlog" "$url"
            n="$(wc -l <"$rlog")"
            ((n > 0)) || die "h2load logged no request: $(cat "$work/h2load-$sl-$t.txt")"
            done_rps="$(awk -v n="$n" -v d="$slice" 'BEGIN { printf "%.0f", n / d }')"
            rerr="$(awk -F'\t' '$2 != 200 { e++ } END { print e + 0 }' "$rlog")"
            printf '%s\t%s\t%s\t-\t-\t%s\n' "$sl" "$t" "$done_rps" "$rerr" >>"$work/rate.tsv"
        done
        log "fixed rate: slice $sl of $slices done"
    done
fi

col() { awk -v t="$1" -v c="$2" -F'\t' '$2 == t { print $c }' "${3:-$results}"; }
counters() {
    curl -s "http://127.0.0.1:$1/metrics" |
        awk '/^sluice_mirror_(embedding_)?requests_total/ && $NF != 0 {
            e = ($0 ~ /^sluice_mirror_embedding/) ? "embed " : ""
            sub(/.*result="/, ""); sub(/".*\} /, "="); printf "%s%s ", e, $0 }'
}
# spread TARGET COLUMN [FILE]: the rounds' min–max of a column.
spread() { col "$@" | sort -g | awk 'NF { v[++n] = $1 } END { if (n) printf "%s–%s", v[1], v[n]; else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", (b > 0 ? a / b : 0) }'; }

report="$(
    echo "### Mirroring cost to the primary ($(date -u +%Y-%m-%d))"
    echo
    echo "- command: \`benches/mirror.sh --rounds $rounds --duration $duration --rate $rate --slices $slices --slice $slice\`"
    echo "- machine: $(machine); pinning: $pinning; priority: $priority"
    echo "- sluice: $(sluice_revision)"
    echo "- load: \`wrk -c $connections -t 1 -d ${duration}s --latency -s post.lua\` (POST, 84-byte JSON body), ${warmup}s warm-up per run; $rounds rounds, order rotated; medians"
    echo
    echo "| target | req/s | req/s min–max | ÷ off | p50 ms | p99 ms | p99 min–max | p99 vs off | non-2xx | copies at the end (result=count) |"
    echo "|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    off_p99="$(col off 5 | median)"
    off_rps="$(col off 3 | median)"
    for t in "${targets[@]}"; do
        rps="$(col "$t" 3 | median)"
        p50="$(col "$t" 4 | median)"
        p99="$(col "$t" 5 | median)"
        non2xx="$(col "$t" 6 | awk '{ s += $1 } END { print s + 0 }')"
        vs="$(awk -v a="$p99" -v b="$off_p99" 'BEGIN { printf "%+.1f%%", (b > 0 ? 100 * (a - b) / b : 0) }')"
        echo "| $t | $rps | $(spread "$t" 3) | $(ratio "$rps" "$off_rps") | $p50 | $p99 | $(spread "$t" 5) | $vs | $non2xx | $(counters "${admin[$t]}") |"
    done
    if ((rate > 0)); then
        echo
        echo "Fixed rate: \`h2load --h1 -c $rate_clients --rps=$((rate / rate_clients)) -D $slice --warm-up-time=1\` ($rate req/s offered)"
        echo "in $slices slices per target, interleaved; latencies from h2load's per-request log, every"
        echo "slice's requests pooled per target. \`off-b\` vs \`off\` is the noise floor."
        echo
        echo "| target | req/s done | p50 ms | p99 ms | p99.9 ms | p99 vs off | p99 of the slices min–max | non-200 |"
        echo "|---|---:|---:|---:|---:|---:|---:|---:|"
        pooled() { cat "$work"/h2load-*-"$1".log | cut -f3 | sort -n >"$work/pooled-$1.txt"; }
        quantile() { awk -v q="$2" '{ v[NR] = $1 } END { k = int(NR * q) + 1; if (k > NR) k = NR; printf "%.3f", v[k] / 1000 }' "$work/pooled-$1.txt"; }
        pooled off
        off_r99="$(quantile off 0.99)"
        for t in "${targets[@]}"; do
            pooled "$t"
            r="$(col "$t" 3 "$work/rate.tsv" | median)"
            r50="$(quantile "$t" 0.50)"
            r99="$(quantile "$t" 0.99)"
            r999="$(quantile "$t" 0.999)"
            rerr="$(col "$t" 6 "$work/rate.tsv" | awk '{ s += $1 } END { print s + 0 }')"
            vs="$(awk -v a="$r99" -v b="$off_r99" 'BEGIN { printf "%+.1f%%", (b > 0 ? 100 * (a - b) / b : 0) }')"
            # Each slice's own p99: how far the slices spread.
            slice_p99="$(for f in "$work"/h2load-*-"$t".log; do cut -f3 "$f" | sort -n |
                awk '{ v[NR] = $1 } END { k = int(NR * 0.99) + 1; if (k > NR) k = NR; printf "%.3f\n", v[k] / 1000 }'; done |
                sort -g | awk 'NF { v[++n] = $1 } END { if (n) printf "%s–%s", v[1], v[n] }')"
            echo "| $t | $r | $r50 | $r99 | $r999 | $vs | $slice_p99 | $rerr |"
        done
    fi
)"
save_report mirror <<<"$report"
