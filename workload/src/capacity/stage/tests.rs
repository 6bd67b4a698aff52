#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;
use std::time::Duration;

use super::*;
use crate::load::{summarize, Failure, Goodput, Lineage, RunInfo};

/// 10 req/s for 20 s after 2 s of warm-up, priced at $3.6 a GPU-hour.
fn scenario() -> Scenario {
    let text = "scenario: s\ntarget: { base_url: 'http://127.0.0.1:1' }\n\
        workload: { arrival: { kind: constant, rate: 10 }, duration: 22s, warmup: 2s }\n\
        steps: [ { name: answer, service: llm, model: m, prompt: hi } ]\n\
        thresholds: { ttft_p95: 400ms, error_rate: 5% }\ncost: { gpu_hour: 3.6 }\n";
    Scenario::from_yaml(text, Path::new("."), &|_| None).unwrap()
}

/// Arrival `i` (100 ms apart): 50 ms to the first token, then 5 ms for
/// each of its `tokens`, with 10 input tokens.
fn answer(i: u64, tokens: u64) -> Outcome {
    let at = i * 100_000;
    Outcome {
        index: i,
        warmup: at < 2_000_000,
        intended_us: at,
        sent_us: at,
        first_content_us: Some(at + 50_000),
        end_us: at + 50_000 + 5_000 * tokens,
        status: Some(200),
        input_tokens: Some(10),
        output_tokens: Some(tokens),
        ..Outcome::default()
    }
}

pub(crate) fn run(outcomes: Vec<Outcome>, ran_us: u64) -> RunOutput {
    RunOutput {
        outcomes,
        closed: None,
        journeys: 0,
        span_us: 22_000_000,
        ran_us,
        queued: 0,
        cut_in_flight: 0,
        cut_waiting: 0,
        elapsed: Duration::from_micros(ran_us),
        interrupted: false,
        setup: Vec::new(),
        teardown: Vec::new(),
    }
}

pub(crate) fn report(s: &Scenario, out: &RunOutput) -> RunReport {
    summarize(
        s,
        out,
        RunInfo {
            run_id: "r".into(),
            shard: "0/1".into(),
            started_at: "2026-01-01T00:00:00Z".into(),
            lineage: Lineage {
                scenario_sha256: "0".repeat(64),
                target: "http://127.0.0.1:1".into(),
                sluice_version: "0".into(),
                from_model: None,
                id: None,
                parents: Vec::new(),
            },
            goodput: Goodput::default(),
            detailed: false,
        },
    )
}

#[test]
fn a_stage_by_hand() {
    let s = scenario();
    // 220 arrivals, 20 of them warm-up; lengths 10, 20, …, 100 in turn.
    let mut outcomes: Vec<Outcome> = (0..220).map(|i| answer(i, 10 * (i % 10 + 1))).collect();
    outcomes[100].failure = Some(Failure::Status);
    let out = run(outcomes, 22_000_000);
    let r = measure(&s, 10.0, Purpose::Probe, &out, report(&s, &out), None);
    assert_eq!(r.duration_s, 20.0);
    // 200 measured journeys; the last arrivals end after the window.
    assert_eq!(r.achieved_rate, 10.0);
    assert_eq!(r.requests_per_journey, 1.0);
    let ended: Vec<&Outcome> = out.outcomes[20..]
        .iter()
        .filter(|o| o.end_us <= 22_000_000)
        .collect();
    assert_eq!(r.request_rate, ended.len() as f64 / 20.0);
    let tokens: u64 = ended
        .iter()
        .filter(|o| o.failure.is_none())
        .map(|o| o.output_tokens.unwrap())
        .sum();
    assert_eq!(r.output_tokens, tokens);
    assert_eq!(r.token_throughput, tokens as f64 / 20.0);
    // E2E = 50 + 5·tokens exactly: the slope is 5 ms a token.
    assert!(
        (r.p99_slope_ms_per_token.unwrap() - 5.0).abs() < 1e-9,
        "{r:?}"
    );
    // $3.6/h for 20 s is $0.02, over (input + output) tokens.
    let want = 0.02 * 1000.0 / (r.input_tokens + r.output_tokens) as f64;
    assert!((r.cost_per_1k.unwrap() - want).abs() < 1e-12);
    // TTFT 50 ms of 400 (margin 0.875); one error in 200 is 0.5% of 5%
    // (margin 0.9): the worst is 0.875.
    assert!(r.passed);
    assert!((r.worst_margin - 0.875).abs() < 0.01, "{}", r.worst_margin);
}

#[test]
fn an_early_stop_fails_the_stage_and_counts_only_its_window() {
    let s = scenario();
    let outcomes: Vec<Outcome> = (0..120).map(|i| answer(i, 100)).collect();
    // Stopped 10 s in: what ended after 10 s is not the window's.
    let out = run(outcomes, 10_000_000);
    let r = measure(
        &s,
        10.0,
        Purpose::Probe,
        &out,
        report(&s, &out),
        Some("over_saturated"),
    );
    assert!(!r.passed);
    assert_eq!(r.worst_margin, -1.0);
    assert_eq!(r.duration_s, 8.0);
    let ended = out.outcomes[20..]
        .iter()
        .filter(|o| o.end_us <= 10_000_000)
        .count();
    assert_eq!(r.request_rate, ended as f64 / 8.0);
}

#[test]
fn the_worst_margin_of_nothing_measured_is_minus_one() {
    let c = |value, bound| SlaCheck {
        gate: Gate::TtftP95,
        value,
        bound,
        passed: false,
    };
    assert_eq!(worst(&[]), 1.0);
    assert_eq!(worst(&[c(Some(200.0), 800.0), c(None, 800.0)]), -1.0);
    assert_eq!(worst(&[c(Some(1000.0), 800.0)]), -0.25);
}
