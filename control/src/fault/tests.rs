// Tests may spawn bare tasks (each test's runtime ends with it) and read std time.
#![allow(clippy::disallowed_methods)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_filters::{FaultTarget, RequestParts, Skip};
use tokio_util::sync::CancellationToken;

use super::halt::evaluate;
use super::*;
use crate::config::RawFault;
use crate::shared::Shared;
use crate::stats::Sample;
use crate::store::SnapshotStore;
use crate::testing;

const CONFIG: &str = r#"
listeners:
  - { name: public, listen: 127.0.0.1:18080, protocol: http }
clusters:
  - { name: a, kind: llm, version: v1, endpoints: [127.0.0.1:18001] }
routes:
  - { name: chat, listener: public, split: { a: 100 } }
faults:
  - id: slow
    match: { route: chat }
    ttl: 2s
    max_active: 2
    halt_if: { error_rate: 50%, window: 5s }
    action: { delay: { delay: 10ms } }
"#;

/// A request to `/` without headers.
static NO_HEADERS: RequestParts<'static> = RequestParts::new("/", &[]);

fn target() -> FaultTarget<'static, RequestParts<'static>> {
    FaultTarget {
        listener: "public",
        route: Some("chat"),
        cluster: Some("a"),
        model: None,
        request: Some(&NO_HEADERS),
    }
}

fn store() -> (Arc<SnapshotStore>, Shared) {
    testing::store(CONFIG)
}

#[test]
fn fires_within_ttl_never_after_and_caps_concurrency() {
    let (s, shared) = store();
    let f = s.load().faults[0].clone();
    let now = Instant::now();
    let first = f.try_fire_at(&target(), 0, now).unwrap();
    let second = f.try_fire_at(&target(), 0, now).unwrap();
    assert_eq!(
        f.try_fire_at(&target(), 0, now).unwrap_err(),
        Skip::AtMaxActive
    );
    assert_eq!(f.active(), 2);
    drop(first);
    let third = f.try_fire_at(&target(), 0, now).unwrap();
    drop((second, third));
    assert_eq!((f.injected(), f.active()), (3, 0));
    let later = now + Duration::from_secs(3);
    assert_eq!(
        f.try_fire_at(&target(), 0, later).unwrap_err(),
        Skip::Expired
    );
    assert_eq!(f.state_at(later), FaultState::Expired);
    assert_eq!(f.time_left_at(later), Duration::ZERO);
    let text = shared.metrics.encode();
    assert!(text.contains("sluice_faults_injected_total{experiment=\"slow\",kind=\"delay\"} 3"));
}

#[test]
fn state_survives_unrelated_changes_and_removal_stops_the_experiment() {
    let (s, shared) = store();
    let f = s.load().faults[0].clone();
    let _ = f.try_fire(&target(), || 0).unwrap();
    s.apply("api", "set split", |raw| {
        raw.routes[0].split.insert("a".into(), 50);
        Ok(())
    })
    .unwrap();
    assert!(Arc::ptr_eq(&s.load().faults[0], &f));
    assert!(f.still_on());
    s.apply("api", "remove fault slow", |raw| {
        raw.faults.clear();
        Ok(())
    })
    .unwrap();
    assert!(s.load().faults.is_empty());
    assert!(!f.still_on());
    assert_eq!(f.try_fire(&target(), || 0).unwrap_err(), Skip::Halted);
    // Its series left /metrics with it: experiments that come and go do not
    // grow the metric families.
    assert!(!shared
        .metrics
        .encode()
        .contains("sluice_faults_injected_total{experiment=\"slow\""));
}

/// Records 8 answers of 503 in 10 on the experiment's route and runs the
/// loop until the experiment halts on it (the aggregator folds on its own
/// timer: waited for, bounded).
async fn answer_eight_of_ten_503_until_halted(
    s: &Arc<SnapshotStore>,
    shared: &Shared,
    f: &Arc<FaultRuntime>,
) {
    let key = shared.stats.key("chat", "a", "v1");
    for i in 0..10 {
        shared.stats.record(Sample {
            load: false,
            grpc: None,
            key,
            status: if i < 8 { 503 } else { 200 },
            latency: Duration::from_millis(1),
            tokens: None,
        });
    }
    for _ in 0..200 {
        evaluate(s, shared, Instant::now());
        if f.state_at(Instant::now()) == FaultState::Halted {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(f.state_at(Instant::now()), FaultState::Halted);
}

#[tokio::test]
async fn the_loop_halts_on_error_rate_and_notes_expiry() {
    let (s, shared) = store();
    let cancel = CancellationToken::new();
    let aggregator = tokio::spawn(shared.stats.clone().run_aggregator(cancel.clone()));
    let f = s.load().faults[0].clone();
    evaluate(&s, &shared, Instant::now());
    assert_eq!(shared.metrics.faults.active.get(), 1);
    answer_eight_of_ten_503_until_halted(&s, &shared, &f).await;
    assert_eq!(shared.metrics.faults.active.get(), 0);
    let events = shared.events.list();
    assert!(
        events.iter().any(|e| e
            .action
            .starts_with("halt fault slow: route error rate 80.0%")),
        "{events:?}"
    );
    // A second experiment, already past its ttl, is noted once.
    let mut expired: RawFault =
        RawFault::from_yaml("{id: gone, ttl: 1ms, action: {abort: {status: 503}}}").unwrap();
    expired.percent = None;
    s.apply("api", "add fault gone", |raw| {
        raw.faults.push(expired);
        Ok(())
    })
    .unwrap();
    let later = Instant::now() + Duration::from_millis(50);
    evaluate(&s, &shared, later);
    evaluate(&s, &shared, later);
    let noted = shared
        .events
        .list()
        .iter()
        .filter(|e| e.action == "expire fault gone (ttl ended)")
        .count();
    assert_eq!(noted, 1);
    cancel.cancel();
    aggregator.await.unwrap();
}

#[test]
fn generated_ids_are_valid_names_and_differ() {
    let a = new_fault_id();
    let b = new_fault_id();
    assert_ne!(a, b);
    assert!(a.starts_with("f-") && a.len() == 10, "{a}");
}

#[tokio::test]
async fn a_halt_hands_its_breach_to_the_feedback_writer() {
    let text = format!("{CONFIG}feedback: {{ dir: /nonexistent/never-written }}\n");
    let (s, shared) = testing::store(&text);
    let mut breaches = shared.feedback.take().unwrap();
    let cancel = CancellationToken::new();
    let aggregator = tokio::spawn(shared.stats.clone().run_aggregator(cancel.clone()));
    let f = s.load().faults[0].clone();
    answer_eight_of_ten_503_until_halted(&s, &shared, &f).await;
    let breach = breaches.try_recv().unwrap();
    assert_eq!(breach.kind, sluice_filters::TriggerKind::FaultHalt);
    assert_eq!(
        (breach.fault.as_deref(), breach.route.as_str()),
        (Some("slow"), "chat")
    );
    assert_eq!(breach.gate, "halt_if.error_rate");
    assert_eq!((breach.value, breach.bound), (Some(80.0), 50.0));
    let a = crate::lineage::cluster_id(&s.load().config.clusters[0]);
    assert_eq!(breach.parents, vec![a]);
    // Halted once: reported once.
    evaluate(&s, &shared, Instant::now());
    assert!(breaches.try_recv().is_err());
    cancel.cancel();
    aggregator.await.unwrap();
}
