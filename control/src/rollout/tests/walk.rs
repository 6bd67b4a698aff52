//! The rollout's own decisions: promotion, rollback, patience.

use super::*;

#[tokio::test(start_paused = true)]
async fn a_healthy_canary_walks_every_step_to_promoted() {
    let mut h = Harness::start(&rollout(", gates: { ttft_p95: 150ms, error_rate: 1% }")).await;
    let started = Instant::now();
    assert_eq!(h.status().state, State::Progressing);
    assert_eq!(h.split(), (99, 1));
    let s = h
        .drive(Duration::from_secs(600), 1000, |_| GOOD, is_final)
        .await;
    assert_eq!(s.state, State::Promoted);
    assert_eq!((s.step, s.weight), (5, 100));
    assert_eq!(h.split(), (0, 100));
    assert_eq!(h.weights, [1, 5, 20, 50, 100]);
    // Four holds of a minute, each once the first samples are in.
    let took = Instant::now() - started;
    assert!(
        took >= Duration::from_secs(240) && took < Duration::from_secs(300),
        "{took:?}"
    );
    let events = h.rollouts.status("chat-v2").unwrap().events.unwrap();
    let path: Vec<_> = events.iter().map(|e| (e.to, e.weight)).collect();
    assert_eq!(
        path,
        [
            (State::Progressing, 1),
            (State::Progressing, 5),
            (State::Progressing, 20),
            (State::Progressing, 50),
            (State::Promoted, 100),
        ]
    );
    assert_eq!(events[1].reason, "held 1m with every judged gate passing");
    assert_eq!(events[1].evidence.len(), 2);
    assert!(events[1].evidence.iter().all(|r| r.ok == Some(true)));
    assert_eq!(
        h.audit(),
        [
            "rollout chat-v2: step 1 → weight 1 (started)",
            "rollout chat-v2: step 2 → weight 5 (held 1m with every judged gate passing)",
            "rollout chat-v2: step 3 → weight 20 (held 1m with every judged gate passing)",
            "rollout chat-v2: step 4 → weight 50 (held 1m with every judged gate passing)",
            "rollout chat-v2: promoted → weight 100 (held 1m with every judged gate passing)",
            "rollout chat-v2: finished (promoted), out of the config",
        ]
    );
    // Out of the config, still listed, with its series.
    assert!(h.store.load().config.rollouts.is_empty());
    assert_eq!(h.rollouts.list()[0].state, State::Promoted);
    let m = h.metrics();
    assert!(
        m.contains(r#"sluice_rollout_weight{rollout="chat-v2"} 100"#),
        "{m}"
    );
    assert!(m.contains(r#"sluice_rollout_state{rollout="chat-v2",state="promoted"} 1"#));
    assert!(m.contains(r#"sluice_rollout_state{rollout="chat-v2",state="progressing"} 0"#));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_slow_canary_is_rolled_back_within_two_seconds() {
    let config =
        rollout(", gates: { ttft_p95: 150ms }").replace("min_requests: 50", "min_requests: 100");
    let mut h = Harness::start(&config).await;
    let slow = Shape {
        ttft_ms: 400,
        ..GOOD
    };
    let mut enough_at = None;
    let end = Instant::now() + Duration::from_secs(30);
    while Instant::now() < end && h.status().state == State::Progressing {
        h.slice(10_000, &|_| slow).await;
        if h.canary_sent >= 100 && enough_at.is_none() {
            enough_at = Some(Instant::now());
        }
    }
    let done = Instant::now();
    let s = h.status();
    assert_eq!((s.state, s.weight), (State::RolledBack, 0));
    assert_eq!(h.split(), (100, 0));
    assert_eq!(h.weights, [1, 0]);
    let from_first = done - h.first_canary.unwrap();
    let from_enough = done - enough_at.unwrap();
    assert!(from_first <= Duration::from_secs(2), "{from_first:?}");
    assert!(from_enough <= Duration::from_secs(1), "{from_enough:?}");
    // The evidence: the gate, its value, bound and samples.
    let events = s.events.unwrap();
    let last = events.last().unwrap();
    assert_eq!(
        (last.from, last.to),
        (State::Progressing, State::RolledBack)
    );
    let e = &last.evidence[0];
    assert_eq!(
        (e.gate.as_str(), e.bound, e.ok),
        ("ttft_p95", 150.0, Some(false))
    );
    assert!(e.samples >= 100, "{e:?}");
    assert!((395.0..=405.0).contains(&e.value.unwrap()), "{e:?}");
    let audit = h.audit();
    assert!(
        audit[1].starts_with("rollout chat-v2: rolled_back → weight 0 (ttft_p95 40"),
        "{audit:?}"
    );
    let m = h.metrics();
    assert!(
        m.contains(r#"sluice_rollout_rollbacks_total{rollout="chat-v2"} 1"#),
        "{m}"
    );
    assert!(m.contains(r#"sluice_rollout_state{rollout="chat-v2",state="rolled_back"} 1"#));
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn no_decision_below_min_requests() {
    // 1% of 400 rps is 4 canary requests a second: 40 in the window, fewer
    // than the 50 needed, however bad they are.
    let mut h = Harness::start(&rollout(", gates: { ttft_p95: 150ms, error_rate: 1% }")).await;
    let bad = Shape {
        ttft_ms: 900,
        latency_ms: 5000,
        errors: 50,
    };
    let s = h
        .drive(Duration::from_secs(180), 400, |_| bad, is_final)
        .await;
    assert_eq!((s.state, s.weight, s.breaches), (State::Progressing, 1, 0));
    let gate = &s.gates["ttft_p95"];
    assert_eq!(gate.ok, None);
    assert!((35..50).contains(&gate.samples), "{gate:?}");
    assert!(gate.value.unwrap() > 800.0);
    assert_eq!(h.weights, [1]);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn a_canary_failing_half_way_is_rolled_back() {
    let mut h = Harness::start(&rollout(", gates: { error_rate: 1% }")).await;
    // Healthy until it takes a fifth of the traffic, then 5% errors.
    let canary = |w: u32| match w >= 20 {
        true => Shape { errors: 5, ..GOOD },
        false => GOOD,
    };
    let s = h
        .drive(Duration::from_secs(600), 1000, canary, is_final)
        .await;
    assert_eq!((s.state, s.weight, s.step), (State::RolledBack, 0, 3));
    assert_eq!(h.weights, [1, 5, 20, 0]);
    assert_eq!(h.split(), (100, 0));
    let last = s.events.unwrap().pop().unwrap();
    assert_eq!(last.evidence[0].gate.as_str(), "error_rate");
    assert!(last.evidence[0].value.unwrap() > 1.0);
    h.stop().await;
}

#[tokio::test(start_paused = true)]
async fn on_breach_pause_holds_the_weight() {
    let mut h = Harness::start(&rollout(
        ", on_breach: pause, consecutive: 3, gates: { ttft_p95: 150ms }",
    ))
    .await;
    let slow = Shape {
        ttft_ms: 400,
        ..GOOD
    };
    let s = h
        .drive(
            Duration::from_secs(60),
            10_000,
            |_| slow,
            |s| s.state != State::Progressing,
        )
        .await;
    assert_eq!((s.state, s.weight), (State::Paused, 1));
    assert_eq!(h.split(), (99, 1));
    let last = s.events.unwrap().pop().unwrap();
    assert!(
        last.reason.ends_with("breached 3 evaluation(s) in a row"),
        "{}",
        last.reason
    );
    // Paused: nothing moves, however long.
    let s = h
        .drive(Duration::from_secs(120), 10_000, |_| GOOD, |_| false)
        .await;
    assert_eq!((s.state, s.weight), (State::Paused, 1));
    assert_eq!(s.gates["ttft_p95"].ok, Some(true));
    assert!(h
        .metrics()
        .contains(r#"sluice_rollout_rollbacks_total{rollout="chat-v2"} 0"#));
    h.stop().await;
}
