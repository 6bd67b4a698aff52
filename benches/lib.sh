# Shared by the side-by-side bench scripts (compare.sh, l4.sh); sourced, not run.
# The caller sets `niceness`, `keep`, `work`, `pids=()` and defines `log`.

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

# stop_processes: TERM every pid in `pids`, KILL what is left after ~3 s, then
# remove `work` unless `keep` is 1. For `trap ... EXIT`.
stop_processes() {
    local pid
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

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
