//! `plan: auto`: the rollout's steps, hold and gates from the change
//! between its clusters' versions, walked under real traffic.

use super::*;

/// The rollout harness's config with the clusters at `stable` and `canary`
/// versions, `plans` (a `plans:` block or nothing) and a `plan: auto`
/// rollout with `gates`.
fn planned(stable: &str, canary: &str, plans: &str, gates: &str) -> String {
    let text = stable_canary()
        .replacen("version: v1,", &format!("version: {stable},"), 1)
        .replacen("version: v2,", &format!("version: {canary},"), 1);
    format!(
        "{text}{plans}rollouts:\n  - {{ name: chat-v2, route: chat, stable: stable, \
         canary: canary, plan: auto, min_requests: 50{gates} }}\n"
    )
}

fn path(h: &Harness) -> Vec<(State, u32)> {
    let events = h.rollouts.status("chat-v2").unwrap().events.unwrap();
    events.iter().map(|e| (e.to, e.weight)).collect()
}

#[tokio::test(start_paused = true)]
async fn a_patch_runs_two_steps_of_a_minute() {
    let mut h = Harness::start_config(&planned("v1.4.2", "v1.4.3", "", "")).await;
    let started = Instant::now();
    let s = h
        .drive(Duration::from_secs(600), 1000, |_| GOOD, is_final)
        .await;
    assert_eq!(s.state, State::Promoted);
    assert_eq!(path(&h), [(State::Progressing, 20), (State::Promoted, 100)]);
    let took = Instant::now() - started;
    assert!(
        took >= Duration::from_secs(60) && took < Duration::from_secs(120),
        "{took:?}"
    );
    // The first event names the plan and the rule behind each part.
    let events = h.rollouts.status("chat-v2").unwrap().events.unwrap();
    assert_eq!(
        events[0].reason,
        "started; plan patch (v1.4.2 → v1.4.3): steps [20, 100] and hold 1m by rule patch; \
         gates error_rate (patch), grpc_success_rate_min (patch), gpu_memory_max (patch), upstream_queue_max (patch), \
         p99_vs_stable (traffic); checks none"
    );
    // The error rate (its default bound) and, at 1,000 req/s, p99_vs_stable were judged.
    let judged: Vec<_> = events[1]
        .evidence
        .iter()
        .filter(|r| r.ok.is_some())
        .map(|r| (r.gate.as_str(), r.bound))
        .collect();
    assert_eq!(judged, [("error_rate", 1.0), ("p99_vs_stable", 1.2)]);
    let plan = s.plan.unwrap();
    assert!(plan.reasons.iter().any(|r| r.part == "gates.gpu_memory_max"
        && r.why == "not judged: the rollout sets no bound for it"));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_major_change_runs_five_steps_with_the_configs_hold() {
    let text = planned(
        "v1.4.2",
        "v2.0.0",
        "plans:\n  major: { hold: 30s }\n",
        ", gates: { ttft_p95: 150ms }",
    );
    let mut h = Harness::start_config(&text).await;
    let started = Instant::now();
    let s = h
        .drive(Duration::from_secs(900), 1000, |_| GOOD, is_final)
        .await;
    assert_eq!(s.state, State::Promoted);
    assert_eq!(
        path(&h),
        [
            (State::Progressing, 1),
            (State::Progressing, 5),
            (State::Progressing, 20),
            (State::Progressing, 50),
            (State::Promoted, 100),
        ]
    );
    let took = Instant::now() - started;
    assert!(
        took >= Duration::from_secs(120) && took < Duration::from_secs(240),
        "{took:?}"
    );
    // The rollout's own bound for ttft_p95 is kept: a major change judges it.
    let plan = s.plan.unwrap();
    assert_eq!(plan.change, sluice_filters::Change::Major);
    assert!(s.gates.contains_key("ttft_p95"), "{:?}", s.gates);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_failing_patch_still_rolls_back_on_its_error_gate() {
    let mut h = Harness::start_config(&planned("v1.4.2", "v1.4.3", "", "")).await;
    let bad = Shape { errors: 20, ..GOOD };
    let s = h
        .drive(Duration::from_secs(600), 1000, |_| bad, is_final)
        .await;
    assert_eq!(s.state, State::RolledBack);
    assert_eq!((s.step, s.weight), (1, 0));
    h.stop().await;
}
