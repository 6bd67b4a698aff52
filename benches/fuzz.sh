#!/usr/bin/env bash
# The fuzzers of issue 19: every target in fuzz/fuzz_targets/ (the event framer
# and token meter, the RESP request and reply parsers, the fault headers, the
# request-body scan, the head limits, the config loader, the trace readers and
# the scenario parser), one after the other, each with cargo-fuzz (libFuzzer)
# on the nightly toolchain. Each starts from its seeds (fuzz/corpus/TARGET) and
# its saved crash inputs (fuzz/regressions/TARGET); what it learns goes to a
# scratch corpus, so the committed seeds stay small. Built with debug
# assertions (integer overflow is a crash) and no sanitizer: the parsers are
# safe Rust, so AddressSanitizer would only slow every execution.
#
# Per target: executions, executions per second, seconds, coverage (libFuzzer's
# `cov` and `ft` of its last line) and crashes; a crash input is left in
# fuzz/artifacts/TARGET/ and the script exits 1 after the others ran. Save a
# crash input to fuzz/regressions/TARGET/ once fixed: `cargo test` replays it.
#
# cargo-fuzz is installed once (`cargo install cargo-fuzz --locked`) if missing.
#
# usage: benches/fuzz.sh [--execs N] [--seconds S] [--target NAME]... [--quick] [--keep]
#   --execs N     executions per target (10M, 500k and 2000 all read)
#   --seconds S   seconds per target (the default, 20, is what CI runs)
#   --target NAME only this target; repeat for several
#   --quick       only the targets of the filters crate (meter, resp_request,
#                 resp_reply, fault_headers, request_scan, head_scan), built
#                 without the `full` feature: what CI runs, since building
#                 control's and workload's dependencies instrumented takes
#                 some ten minutes here
#   --keep        keep the scratch corpora and logs (the path is logged)
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

execs=""
seconds=""
targets=()
keep=0
quick=0
while (($#)); do
    case "$1" in
        --quick) quick=1 && shift ;;
        --execs) execs=$2 && shift 2 ;;
        --seconds) seconds=$2 && shift 2 ;;
        --target) targets+=("$2") && shift 2 ;;
        --keep) keep=1 && shift ;;
        *) not_an_option "$1" ;;
    esac
done
[[ -n $execs || -n $seconds ]] || seconds=20

# count TEXT: 10M → 10000000, 500k → 500000.
count() {
    case "$1" in
        *[mM]) echo $((${1%[mM]} * 1000000)) ;;
        *[kK]) echo $((${1%[kK]} * 1000)) ;;
        *) echo "$1" ;;
    esac
}

cargo +nightly --version >/dev/null 2>&1 || die "no nightly toolchain (rustup toolchain install nightly)"
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    log "installing cargo-fuzz (once)"
    cargo install cargo-fuzz --locked
fi
# The targets that need the `full` feature (fuzz/Cargo.toml).
full_targets=(config trace scenario)
if ! ((${#targets[@]})); then
    mapfile -t targets < <(cd fuzz/fuzz_targets && ls -- *.rs | sed 's/\.rs$//')
    if ((quick)); then
        mapfile -t targets < <(printf '%s\n' "${targets[@]}" | grep -vxF -f <(printf '%s\n' "${full_targets[@]}"))
    fi
fi

# The same flags for the build and every run, or cargo rebuilds.
flags=(--debug-assertions --sanitizer none)
((quick)) || flags+=(--features full)
limit=()
if [[ -n $execs ]]; then
    limit+=("-runs=$(count "$execs")")
else
    limit+=("-max_total_time=$seconds")
fi
log "building ${#targets[@]} targets ($(cargo +nightly --version))"
(cd fuzz && cargo +nightly fuzz build "${flags[@]}" 2>&1 | grep -E '^(error|warning: unused)' || true)

start_work
failed=()
printf '%-14s %12s %10s %8s %7s %7s %8s\n' target execs execs/s seconds cov ft crashes
for t in "${targets[@]}"; do
    mkdir -p "$work/corpus/$t" "fuzz/artifacts/$t"
    seeds=("fuzz/corpus/$t")
    [[ -d fuzz/regressions/$t ]] && seeds+=("fuzz/regressions/$t")
    began=$(date +%s%N)
    rc=0
    # cargo fuzz runs from fuzz/: the paths are made absolute.
    (cd fuzz && cargo +nightly fuzz run "${flags[@]}" "$t" "$work/corpus/$t" "${seeds[@]/#/$root/}" -- \
        "${limit[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$root/fuzz/artifacts/$t/") >"$work/$t.log" 2>&1 || rc=$?
    took=$(awk -v a="$began" -v b="$(date +%s%N)" 'BEGIN { printf "%.1f", (b - a) / 1e9 }')
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/$t.log" | tail -1)
    last=$(grep -E '^#[0-9]+' "$work/$t.log" | tail -1 || true)
    cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
    ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
    crashes=$(grep -c '^Test unit written to\|^artifact_prefix=.*Test unit written' "$work/$t.log" || true)
    if ((rc != 0)); then
        ((crashes > 0)) || crashes=1
        failed+=("$t")
        grep -E 'panicked at|^[a-z_]+: |Test unit written to' "$work/$t.log" | head -5 >&2 || true
        cp "$work/$t.log" "fuzz/artifacts/$t/last-run.log"
    fi
    printf '%-14s %12s %10s %8s %7s %7s %8s\n' "$t" "${runs:-?}" "${rate:-?}" "$took" "${cov:-?}" "${ft:-?}" "$crashes"
done
if ((${#failed[@]})); then
    die "crashed: ${failed[*]} (inputs and logs in fuzz/artifacts/)"
fi
