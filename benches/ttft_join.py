"""Client and proxy timings, request by request, for benches/ttft_match.sh.

usage: python3 benches/ttft_join.py RUN_JSON TRACE_JSONL

RUN_JSON is `sluice load --detailed -o`'s report: each `requests[]` row carries the
`trace_id` of the `traceparent` it sent, `sent_us`, `first_content_us` and `gaps_us`
(between content chunks: SSE events, or gRPC messages). TRACE_JSONL is the proxy's
recorder: each line carries the same `trace_id` (sluice continues the client's trace),
`ttft_ms` and `gaps_ms`, metered the same way (the token meter of `filters`). Rows are
joined by trace id; printed: the matched and unmatched counts, and |client - proxy|
p50 / p99 / max in ms and the share within 1 ms, for the TTFT and for every gap of the
requests whose two sides counted the same number of gaps (gap i to gap i).
"""
import json
import sys


def quantile(sorted_values, p):
    """Nearest rank below: the value at index floor(p * n)."""
    if not sorted_values:
        return float("nan")
    return sorted_values[min(len(sorted_values) - 1, int(p * len(sorted_values)))]


def spread(name, diffs):
    diffs = sorted(diffs)
    within = sum(1 for d in diffs if d <= 1.0)
    share = 100.0 * within / len(diffs) if diffs else float("nan")
    print(
        f"|client {name} - proxy {name}| ms: p50 {quantile(diffs, 0.5):.3f}, "
        f"p99 {quantile(diffs, 0.99):.3f}, max {diffs[-1] if diffs else float('nan'):.3f}"
    )
    print(f"{name} within 1 ms: {within} of {len(diffs)} ({share:.1f}%)")


def main(run_path, trace_path):
    run = json.load(open(run_path))
    client = {}
    for r in run.get("requests") or []:
        if r.get("warmup") or not r.get("trace_id") or r.get("first_content_us") is None:
            continue
        ttft = (r["first_content_us"] - r["sent_us"]) / 1000.0
        client[r["trace_id"]] = (ttft, [g / 1000.0 for g in r.get("gaps_us") or []])
    proxy = {}
    for line in open(trace_path):
        t = json.loads(line)
        if t.get("trace_id") and t.get("ttft_ms") is not None:
            proxy[t["trace_id"]] = (t["ttft_ms"], t.get("gaps_ms") or [], t.get("load_run"))

    matched = sorted(set(client) & set(proxy))
    labelled = sum(1 for k in matched if proxy[k][2] == run.get("run_id"))
    print(f"requests with a TTFT: client {len(client)}, proxy {len(proxy)}")
    print(
        f"matched by trace id: {len(matched)}; unmatched: client {len(client) - len(matched)}, "
        f"proxy {len(proxy) - len(matched)}"
    )
    print(f"matched rows labelled load_run={run.get('run_id')}: {labelled}")
    ttfts = sorted(proxy[k][0] for k in matched)
    if ttfts:
        print(f"proxy TTFT ms: p50 {quantile(ttfts, 0.5):.1f}, max {ttfts[-1]:.1f}")
    spread("TTFT", [abs(client[k][0] - proxy[k][0]) for k in matched])

    gap_diffs, same_count, proxy_gaps = [], 0, []
    for k in matched:
        c, p = client[k][1], proxy[k][1]
        if len(c) != len(p):
            continue
        same_count += 1
        proxy_gaps.extend(p)
        gap_diffs.extend(abs(a - b) for a, b in zip(c, p))
    print(
        f"requests with as many gaps on both sides: {same_count} of {len(matched)} "
        f"({len(gap_diffs)} gaps compared)"
    )
    if proxy_gaps:
        proxy_gaps.sort()
        print(f"proxy gap ms: p50 {quantile(proxy_gaps, 0.5):.1f}, max {proxy_gaps[-1]:.1f}")
    spread("gap", gap_diffs)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
