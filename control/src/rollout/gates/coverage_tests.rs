//! `min_coverage` on made-up coverage readings: judged only once met and
//! resting on `min_requests` prompts, never a breach, and a step held
//! until it is met.

#![allow(clippy::unwrap_used)]

use std::time::Duration;

use sluice_filters::CoverageReading;
use tokio::time::Instant;

use super::*;
use crate::config::RolloutConfig;
use crate::rollout::policy::{Policy, State};
use crate::stats::{Sample, Stats};

fn config() -> RolloutConfig {
    RolloutConfig {
        steps: vec![10, 50, 100],
        min_requests: 10,
        consecutive: 1,
        hold: Duration::from_secs(1),
        ..crate::testing::rollout_config(Gates::from([
            (Gate::ErrorRate, 1.0),
            (Gate::MinCoverage, 50.0),
        ]))
    }
}

/// `n` canary answers with status 200.
fn healthy(n: u64) -> WindowView {
    let mut v = WindowView::default();
    let key = Stats::new().key("chat", "canary", "v2");
    for _ in 0..n {
        v.add(&Sample {
            load: false,
            grpc: None,
            key,
            status: 200,
            latency: Duration::from_millis(20),
            tokens: None,
        });
    }
    v
}

/// `touched` of `seen` clusters, from `prompts_seen` prompts embedded.
fn coverage(touched: usize, seen: usize, prompts_seen: u64) -> Option<CoverageReading> {
    Some(CoverageReading {
        touched,
        seen,
        prompts: 1,
        prompts_seen,
    })
}

fn observe<'a>(
    canary: &'a WindowView,
    stable: &'a WindowView,
    coverage: Option<CoverageReading>,
) -> Observation<'a> {
    Observation::Windows {
        canary,
        stable,
        gpu_memory_percent: None,
        upstream_waiting: None,
        shadow: None,
        coverage,
    }
}

fn min_coverage(readings: &[GateReading]) -> &GateReading {
    readings
        .iter()
        .find(|r| r.gate == Gate::MinCoverage)
        .unwrap()
}

#[test]
fn below_its_bound_min_coverage_is_read_but_not_judged_and_never_breached() {
    let (canary, stable) = (healthy(20), WindowView::default());
    let readings = judge(&config(), &observe(&canary, &stable, coverage(2, 6, 30)));
    let r = min_coverage(&readings);
    // 2 of 6 clusters: 33.3%, under 50%: not enough evidence yet.
    assert!((r.value.unwrap() - 100.0 / 3.0).abs() < 1e-9, "{r:?}");
    assert_eq!((r.ok, r.samples, r.unit), (None, 30, Unit::Percent));
    assert!(!r.breached());
    assert_eq!(r.describe(), "min_coverage 33.333% vs 50% (30 samples)");
    // At the bound it passes.
    let readings = judge(&config(), &observe(&canary, &stable, coverage(3, 6, 30)));
    let r = min_coverage(&readings);
    assert_eq!((r.value, r.ok), (Some(50.0), Some(true)));
    assert_eq!(r.describe(), "min_coverage 50% >= 50% (30 samples)");
    // One prompt seen, served by the canary, is 100% of one cluster: with
    // fewer than min_requests (10) prompts behind it, not judged.
    let readings = judge(&config(), &observe(&canary, &stable, coverage(1, 1, 1)));
    assert_eq!(min_coverage(&readings).ok, None);
    // Nothing seen, or no coverage measured: nothing to read.
    for c in [coverage(0, 0, 0), None] {
        let readings = judge(&config(), &observe(&canary, &stable, c));
        assert_eq!(
            (min_coverage(&readings).value, min_coverage(&readings).ok),
            (None, None)
        );
    }
}

#[test]
fn a_step_holds_past_its_hold_until_coverage_is_met_then_steps_up() {
    let mut policy = Policy::new(config());
    let t0 = Instant::now();
    let (canary, stable) = (healthy(20), WindowView::default());
    let (_, start) = policy.evaluate(t0, &observe(&canary, &stable, None));
    assert_eq!(start.unwrap().apply, Some(10));
    // Long past the hold, every other gate passing, coverage 33%: held,
    // with no breach counted.
    for s in 1..=20 {
        let at = t0 + Duration::from_secs(s);
        let (readings, t) = policy.evaluate(at, &observe(&canary, &stable, coverage(2, 6, 40)));
        assert_eq!(t, None);
        assert_eq!(
            readings
                .iter()
                .find(|r| r.gate == Gate::ErrorRate)
                .unwrap()
                .ok,
            Some(true)
        );
    }
    assert_eq!(
        (
            policy.state(),
            policy.step(),
            policy.weight(),
            policy.breaches()
        ),
        (State::Progressing, 1, 10, 0)
    );
    // Met: the next evaluation steps up, with the coverage as evidence.
    let at = t0 + Duration::from_secs(21);
    let (_, t) = policy.evaluate(at, &observe(&canary, &stable, coverage(4, 6, 60)));
    let t = t.unwrap();
    assert_eq!((t.to, t.apply), (State::Progressing, Some(50)));
    assert!(
        t.evidence
            .iter()
            .any(|r| r.gate == Gate::MinCoverage && r.ok == Some(true)),
        "{t:?}"
    );
}

#[test]
fn min_coverage_alone_steps_up_once_met() {
    let mut c = config();
    c.gates = Gates::from([(Gate::MinCoverage, 50.0)]);
    let mut policy = Policy::new(c);
    let t0 = Instant::now();
    let empty = WindowView::default();
    policy.evaluate(t0, &observe(&empty, &empty, None));
    let (_, t) = policy.evaluate(
        t0 + Duration::from_secs(2),
        &observe(&empty, &empty, coverage(1, 6, 20)),
    );
    assert_eq!(t, None);
    let (_, t) = policy.evaluate(
        t0 + Duration::from_secs(3),
        &observe(&empty, &empty, coverage(3, 6, 20)),
    );
    assert_eq!(t.unwrap().apply, Some(50));
}
