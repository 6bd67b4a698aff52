#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;
use sluice_filters::Gate;

#[test]
fn the_sla_takes_the_gates_and_the_cost_bound() {
    let (sla, cost) = split_sla("ttft_p95=800ms, error_rate=1%, cost_per_1k_max=$0.012").unwrap();
    assert_eq!(sla, [(Gate::TtftP95, 800.0), (Gate::ErrorRate, 1.0)]);
    assert_eq!(cost, Some(0.012));
    assert_eq!(
        split_sla("cost_per_1k_max=0.5").unwrap(),
        (vec![], Some(0.5))
    );
}

#[test]
fn a_bad_sla_is_said_whole() {
    assert_eq!(
        split_sla("ttft_p95=800ms,tokens=5,cost_per_1k_max=free").unwrap_err(),
        [
            "--sla: cost_per_1k_max: `free` is not a price in USD > 0 like 0.012",
            "--sla: tokens: unknown gate `tokens` (expected one of ttft_p95, ttft_p99, gap_p99, tpot_p95, latency_p99, error_rate, p99_vs_stable, ttft_vs_stable, gpu_memory_max, upstream_queue_max, cost_per_1k_max, grpc_success_rate_min, embedding_similarity_p10_min, embedding_drift_kl_max, answer_dispersion_max, min_coverage)",
        ]
    );
    assert_eq!(
        split_sla(" ").unwrap_err(),
        ["--sla: give at least one, e.g. ttft_p95=800ms"]
    );
}

#[test]
fn a_share_is_a_percent_or_a_fraction() {
    assert_eq!(share("5%"), Ok(0.05));
    assert_eq!(share("0.1"), Ok(0.1));
    assert_eq!(
        share("100%").unwrap_err(),
        "`100%` must be between 0 and 100%"
    );
    assert_eq!(
        share("x").unwrap_err(),
        "`x` is not a share like 5% or 0.05"
    );
}

#[test]
fn a_live_reading_shows_the_stage_its_signals_and_slas() {
    let p = sluice_workload::StageProgress {
        index: 2,
        rate: 12.0,
        purpose: sluice_workload::Purpose::Probe,
        elapsed_s: 8.2,
        length_s: 20.0,
        backlog: 14,
        request_rate: 11.94,
        token_throughput: 1430.4,
        p99_slope_ms_per_token: Some(5.214),
        p99_excess_ms_per_token: Some(0.31),
        cost_per_1k: Some(0.004123),
        sla: vec![(Gate::TtftP95, Some(312.4)), (Gate::ErrorRate, None)],
    };
    assert_eq!(
        render::progress_line(&p),
        "capacity:   probe 12.00 req/s  8/20 s  backlog 14  11.9 req/s ended  1430 tok/s  \
         p99 slope 5.21 ms/token (excess +0.31)  $0.00412/1k tok  ttft_p95 312ms  error_rate -"
    );
    let bare = sluice_workload::StageProgress {
        p99_slope_ms_per_token: None,
        cost_per_1k: None,
        sla: Vec::new(),
        ..p
    };
    assert_eq!(
        render::progress_line(&bare),
        "capacity:   probe 12.00 req/s  8/20 s  backlog 14  11.9 req/s ended  1430 tok/s"
    );
}

#[test]
fn into_rollout_writes_the_cost_bound_as_a_gate() {
    let text = render::gates_block(
        "chat",
        Some(14.13),
        &[
            (Gate::TtftP95, 250.0, Some(245.0)),
            (Gate::CostPer1kMax, 0.012, Some(0.004114)),
        ],
    );
    assert_eq!(
        text,
        "# from sluice capacity on `chat`: recommended 14.13 req/s; measured there in comments\n\
         gates:\n  ttft_p95: 250ms  # 245ms\n  cost_per_1k_max: 0.012  # $0.00411"
    );
    // What it writes reads back as a rollout's gates.
    let yaml = format!(
        "listeners: [{{ name: public, listen: 127.0.0.1:0, protocol: http }}]\n\
         clusters:\n  - {{ name: a, kind: llm, endpoints: [127.0.0.1:1] }}\n\
         \x20 - {{ name: b, kind: llm, endpoints: [127.0.0.1:2], cost: {{ gpu_hour: 2 }} }}\n\
         routes: [{{ name: chat, listener: public, split: {{ a: 100, b: 0 }} }}]\n\
         rollouts:\n  - name: r\n    route: chat\n    stable: a\n    canary: b\n{}",
        text.lines()
            .skip(1)
            .map(|l| format!("    {l}\n"))
            .collect::<String>()
    );
    let config = sluice_control::Config::from_yaml(&yaml).unwrap();
    assert_eq!(
        config.rollouts[0].gates.bounds(),
        [(Gate::TtftP95, 250.0), (Gate::CostPer1kMax, 0.012)]
    );
}
