//! Gates that compare with stable or read the observers.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_canary_slower_than_stable_is_rolled_back() {
    let mut h = Harness::start(&rollout(", gates: { p99_vs_stable: 1.25 }")).await;
    let slow = Shape {
        latency_ms: 2000,
        ..GOOD
    };
    let s = h
        .drive(Duration::from_secs(60), 10_000, |_| slow, is_final)
        .await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    let e = &s.events.unwrap().pop().unwrap().evidence[0];
    assert_eq!(e.gate.as_str(), "p99_vs_stable");
    assert!((1.95..=2.05).contains(&e.value.unwrap()), "{e:?}");
    assert!(e.stable_samples.unwrap() >= 50);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_canary_as_fast_as_stable_steps_up() {
    let mut h = Harness::start(&rollout(
        ", gates: { p99_vs_stable: 1.25, ttft_vs_stable: 1.5 }",
    ))
    .await;
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |s| s.weight == 5)
        .await;
    assert_eq!((s.state, s.weight), (State::Progressing, 5));
    assert_eq!(s.gates["p99_vs_stable"].value, Some(1.0));
    assert_eq!(s.gates["ttft_vs_stable"].ok, Some(true));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn gpu_memory_and_queue_gates_read_the_observers() {
    let mut h = Harness::start(&rollout(
        ", gates: { gpu_memory_max: 90%, upstream_queue_max: 8 }",
    ))
    .await;
    // No readings: not judged, so no step up however long.
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Progressing, 1));
    assert_eq!(s.gates["gpu_memory_max"].ok, None);
    h.signals.set(Some(50.0), Some(2.0));
    let s = h
        .drive(Duration::from_secs(70), 1000, |_| GOOD, |s| s.weight == 5)
        .await;
    assert_eq!(s.weight, 5);
    // The model server's queue grows: rolled back.
    h.signals.set(Some(50.0), Some(12.0));
    let s = h
        .drive(Duration::from_secs(5), 1000, |_| GOOD, is_final)
        .await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    let e = &s.events.unwrap().pop().unwrap().evidence[0];
    assert_eq!(
        (e.gate.as_str(), e.value, e.bound),
        ("upstream_queue_max", Some(12.0), 8.0)
    );
    h.stop().await;
}

/// A healthy canary for users, while a load test hammers it: 50 slow load
/// requests per 100 ms beside the users' share.
async fn under_slow_load(gates: &str) -> RolloutStatus {
    let mut h = Harness::start(&rollout(&format!(", gates: {{ {gates} }}"))).await;
    let slow = Shape {
        ttft_ms: 900,
        latency_ms: 3000,
        errors: 50,
    };
    h.load = Some((50, slow));
    let s = h
        .drive(
            Duration::from_secs(120),
            10_000,
            |_| GOOD,
            |s| is_final(s) || s.weight == 5,
        )
        .await;
    h.stop().await;
    s
}

#[tokio::test(start_paused = true)]
async fn load_traffic_moves_the_gates_unless_excluded() {
    // By default load traffic counts: the canary is rolled back.
    let s = under_slow_load("ttft_p95: 150ms, error_rate: 5%").await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    // Excluded, the gates read users' traffic only: the canary steps up.
    let s = under_slow_load("ttft_p95: 150ms, error_rate: 5%, exclude_load: true").await;
    assert_eq!(
        (s.state, s.weight),
        (State::Progressing, 5),
        "{:?}",
        s.gates
    );
    let ttft = s.gates["ttft_p95"].value.unwrap();
    assert!((99.0..=101.0).contains(&ttft), "{ttft}");
    assert_eq!(s.gates["error_rate"].value, Some(0.0));
}

/// A rollout gated on `grpc_success_rate_min: 95` whose canary's calls end
/// with `code` in `percent` of cases; `extra` adds gate keys.
async fn grpc_canary(percent: u64, code: u32, extra: &str) -> RolloutStatus {
    let gates = format!(", steps: [5, 100], gates: {{ grpc_success_rate_min: 95{extra} }}");
    let mut h = Harness::start(&rollout(&gates)).await;
    h.grpc = Some((percent, code));
    let s = h
        .drive(Duration::from_secs(300), 1000, |_| GOOD, is_final)
        .await;
    h.stop().await;
    s
}

#[tokio::test(start_paused = true)]
async fn grpc_success_rate_rolls_back_a_canary_that_fails_calls() {
    // 20% UNAVAILABLE: 80% success, under the 95% bound.
    let s = grpc_canary(20, 14, "").await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    let e = &s.events.unwrap().pop().unwrap().evidence[0];
    assert_eq!(e.gate.as_str(), "grpc_success_rate_min");
    assert!((79.0..=81.0).contains(&e.value.unwrap()), "{e:?}");
    assert!(e.samples >= 50, "{e:?}");
    assert!(e.describe().contains("% < 95%"), "{}", e.describe());
}

#[tokio::test(start_paused = true)]
async fn grpc_success_rate_counts_only_the_failure_codes() {
    // NOT_FOUND is the caller's: by default the canary is healthy.
    let s = grpc_canary(20, 5, "").await;
    assert_eq!((s.state, s.weight), (State::Promoted, 100));
    // Listed as a failure, it is not.
    let s = grpc_canary(20, 5, ", grpc_failure_codes: [5, 14]").await;
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
}

#[tokio::test(start_paused = true)]
async fn grpc_success_rate_without_grpc_calls_is_not_judged() {
    let mut h = Harness::start(&rollout(", gates: { grpc_success_rate_min: 95 }")).await;
    let s = h
        .drive(Duration::from_secs(120), 1000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Progressing, 1));
    let g = &s.gates["grpc_success_rate_min"];
    assert_eq!((g.value, g.samples, g.ok), (None, 0, None));
    h.stop().await;
}
