//! Every rule of the state machine, with made-up windows and times.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use super::*;
use crate::config::{Gate, Gates, Unit};
use crate::stats::{Sample, Stats, StatsKey, TokenSample, WindowView};

fn config(gates: Gates) -> RolloutConfig {
    crate::testing::rollout_config(gates)
}

fn ttft_gate(ms: u64) -> Gates {
    Gates::from([(Gate::TtftP95, ms as f64)])
}

fn key() -> StatsKey {
    Stats::new().key("chat", "b", "v2")
}

/// `n` streamed requests with this TTFT and status.
fn view(n: u64, ttft_ms: u64, status: u16) -> WindowView {
    let mut v = WindowView::default();
    let key = key();
    for _ in 0..n {
        v.add(&Sample {
            load: false,
            grpc: None,
            key,
            status,
            latency: Duration::from_millis(ttft_ms * 2),
            tokens: Some(TokenSample {
                ttft: Some(Duration::from_millis(ttft_ms)),
                tpot: Some(Duration::from_millis(20)),
                gaps: vec![Duration::from_millis(20)],
                output_tokens: 10,
                ..TokenSample::default()
            }),
        });
    }
    v
}

fn obs<'a>(canary: &'a WindowView, stable: &'a WindowView) -> Observation<'a> {
    Observation::Windows {
        canary,
        stable,
        gpu_memory_percent: None,
        upstream_waiting: None,
        shadow: None,
        coverage: None,
    }
}

/// A started policy (progressing at step 1) and the instant it started.
fn started(config: RolloutConfig) -> (Policy, Instant) {
    let mut p = Policy::new(config);
    let t0 = Instant::now();
    let empty = WindowView::default();
    let (_, t) = p.evaluate(t0, &obs(&empty, &empty));
    let t = t.unwrap();
    assert_eq!(
        (t.from, t.to, t.apply),
        (State::Pending, State::Progressing, Some(1))
    );
    (p, t0)
}

#[test]
fn starts_at_the_first_step() {
    let (p, _) = started(config(ttft_gate(150)));
    assert_eq!(
        (p.state(), p.step(), p.weight()),
        (State::Progressing, 1, 1)
    );
}

#[test]
fn a_single_step_of_100_is_promoted_at_once() {
    let mut c = config(ttft_gate(150));
    c.steps = vec![100];
    let mut p = Policy::new(c);
    let empty = WindowView::default();
    let (_, t) = p.evaluate(Instant::now(), &obs(&empty, &empty));
    assert_eq!(t.unwrap().to, State::Promoted);
    assert_eq!(p.weight(), 100);
}

#[test]
fn no_decision_below_min_requests() {
    let (mut p, t0) = started(config(ttft_gate(150)));
    let bad = view(99, 400, 500);
    let stable = view(1000, 100, 200);
    for i in 1..=400 {
        let (readings, t) = p.evaluate(t0 + Duration::from_millis(250 * i), &obs(&bad, &stable));
        assert_eq!(t, None);
        assert_eq!(readings[0].ok, None);
        assert_eq!(readings[0].samples, 99);
    }
    assert_eq!(
        (p.state(), p.weight(), p.breaches()),
        (State::Progressing, 1, 0)
    );
}

#[test]
fn steps_up_after_hold_and_walks_to_promoted() {
    let (mut p, t0) = started(config(ttft_gate(150)));
    let good = view(100, 100, 200);
    let stable = view(100, 100, 200);
    // Not before the hold has passed.
    let (readings, t) = p.evaluate(t0 + Duration::from_secs(29), &obs(&good, &stable));
    assert_eq!(readings[0].ok, Some(true));
    assert_eq!(t, None);
    let mut now = t0;
    let mut weights = Vec::new();
    while p.state() == State::Progressing {
        now += Duration::from_secs(30);
        let (_, t) = p.evaluate(now, &obs(&good, &stable));
        let t = t.unwrap();
        assert_eq!(t.reason, "held 30s with every judged gate passing");
        assert_eq!(t.evidence[0].gate, Gate::TtftP95);
        weights.push(t.apply.unwrap());
    }
    assert_eq!(weights, [5, 20, 50, 100]);
    assert_eq!((p.state(), p.step(), p.weight()), (State::Promoted, 5, 100));
    // Promoted is final: evaluations change nothing.
    assert_eq!(
        p.evaluate(now + Duration::from_secs(60), &obs(&good, &stable))
            .1,
        None
    );
}

#[test]
fn a_breach_held_for_consecutive_evaluations_rolls_back() {
    let (mut p, t0) = started(config(ttft_gate(150)));
    let bad = view(120, 400, 200);
    let good = view(120, 100, 200);
    let stable = view(1000, 100, 200);
    let at = |ms| t0 + Duration::from_millis(ms);
    // One breach, then a passing evaluation: the count starts again.
    assert_eq!(p.evaluate(at(250), &obs(&bad, &stable)).1, None);
    assert_eq!(p.breaches(), 1);
    assert_eq!(p.evaluate(at(500), &obs(&good, &stable)).1, None);
    assert_eq!(p.breaches(), 0);
    assert_eq!(p.evaluate(at(750), &obs(&bad, &stable)).1, None);
    let t = p.evaluate(at(1000), &obs(&bad, &stable)).1.unwrap();
    assert_eq!(
        (t.from, t.to, t.apply, t.weight),
        (State::Progressing, State::RolledBack, Some(0), 0)
    );
    assert_eq!(t.evidence.len(), 1);
    let e = &t.evidence[0];
    assert_eq!(
        (e.gate, e.bound, e.samples, e.ok),
        (Gate::TtftP95, 150.0, 120, Some(false))
    );
    assert!((395.0..=405.0).contains(&e.value.unwrap()), "{e:?}");
    assert!(
        t.reason.starts_with("ttft_p95 4")
            && t.reason
                .ends_with("ms > 150ms (120 samples) breached 2 evaluation(s) in a row"),
        "{}",
        t.reason
    );
    assert_eq!((p.state(), p.step()), (State::RolledBack, 1));
    // Final: no command moves it.
    assert_eq!(
        p.command(Command::Resume, at(2000)),
        Err("cannot resume a rollout that is rolled_back".into())
    );
}

#[test]
fn unjudged_evaluations_neither_clear_nor_add_to_a_breach() {
    let (mut p, t0) = started(config(ttft_gate(150)));
    let bad = view(120, 400, 200);
    let few = view(10, 100, 200);
    let stable = view(1000, 100, 200);
    p.evaluate(t0 + Duration::from_millis(250), &obs(&bad, &stable));
    p.evaluate(t0 + Duration::from_millis(500), &obs(&few, &stable));
    assert_eq!(p.breaches(), 1);
    let t = p
        .evaluate(t0 + Duration::from_millis(750), &obs(&bad, &stable))
        .1;
    assert_eq!(t.unwrap().to, State::RolledBack);
}

#[test]
fn on_breach_pause_holds_the_weight_until_resumed() {
    let mut c = config(Gates::from([(Gate::ErrorRate, 1.0)]));
    c.on_breach = OnBreach::Pause;
    c.consecutive = 1;
    let (mut p, t0) = started(c);
    let failing = view(200, 100, 503);
    let stable = view(1000, 100, 200);
    let t = p
        .evaluate(t0 + Duration::from_secs(1), &obs(&failing, &stable))
        .1
        .unwrap();
    assert_eq!((t.to, t.apply, t.weight), (State::Paused, None, 1));
    assert_eq!(t.evidence[0].value, Some(100.0));
    // Paused: readings go on, transitions do not.
    let good = view(200, 100, 200);
    let (readings, t) = p.evaluate(t0 + Duration::from_secs(90), &obs(&good, &stable));
    assert_eq!((readings[0].ok, t), (Some(true), None));
    // Resume re-sets the weight and starts the hold again.
    let t = p
        .command(Command::Resume, t0 + Duration::from_secs(100))
        .unwrap();
    assert_eq!(
        (t.to, t.apply, t.reason.as_str()),
        (State::Progressing, Some(1), "operator: resume")
    );
    assert_eq!(
        p.evaluate(t0 + Duration::from_secs(129), &obs(&good, &stable))
            .1,
        None
    );
    let t = p
        .evaluate(t0 + Duration::from_secs(130), &obs(&good, &stable))
        .1
        .unwrap();
    assert_eq!(t.apply, Some(5));
}

#[test]
fn relative_gates_need_stable_samples_and_compare_with_stable() {
    let gates = Gates::from([(Gate::P99VsStable, 1.25), (Gate::TtftVsStable, 1.5)]);
    let (mut p, t0) = started(config(gates));
    let canary = view(150, 200, 200);
    // Too few stable samples: not judged, however slow the canary.
    let thin = view(50, 100, 200);
    let (readings, _) = p.evaluate(t0 + Duration::from_secs(1), &obs(&canary, &thin));
    assert_eq!(readings[0].stable_samples, Some(50));
    assert!(readings.iter().all(|r| r.ok.is_none()), "{readings:?}");
    // Twice as slow as stable: both ratios breach.
    let stable = view(1000, 100, 200);
    let (readings, _) = p.evaluate(t0 + Duration::from_secs(2), &obs(&canary, &stable));
    for r in &readings {
        assert_eq!(r.ok, Some(false), "{r:?}");
        assert!((1.95..=2.05).contains(&r.value.unwrap()), "{r:?}");
        assert_eq!(r.unit, Unit::Ratio);
    }
    let t = p
        .evaluate(t0 + Duration::from_secs(3), &obs(&canary, &stable))
        .1;
    assert_eq!(t.unwrap().to, State::RolledBack);
    // As fast as stable: passing.
    let (mut p, t0) = started(config(Gates::from([(Gate::P99VsStable, 1.25)])));
    let same = view(150, 100, 200);
    let (readings, _) = p.evaluate(t0 + Duration::from_secs(1), &obs(&same, &stable));
    assert_eq!(readings[0].ok, Some(true));
    assert_eq!(readings[0].value, Some(1.0));
}

#[test]
fn gpu_and_queue_gates_are_not_judged_without_a_reading() {
    let gates = Gates::from([(Gate::GpuMemoryMax, 90.0), (Gate::UpstreamQueueMax, 8.0)]);
    let (mut p, t0) = started(config(gates));
    let canary = view(150, 100, 200);
    let stable = view(150, 100, 200);
    let (readings, t) = p.evaluate(t0 + Duration::from_secs(60), &obs(&canary, &stable));
    assert!(readings.iter().all(|r| r.ok.is_none() && r.value.is_none()));
    // Nothing judged: no step up however long the hold.
    assert_eq!(t, None);
    let o = Observation::Windows {
        canary: &canary,
        stable: &stable,
        gpu_memory_percent: Some(95.5),
        upstream_waiting: Some(3.0),
        shadow: None,
        coverage: None,
    };
    let (readings, _) = p.evaluate(t0 + Duration::from_secs(61), &o);
    assert_eq!(readings[0].ok, Some(false));
    assert_eq!(
        readings[0].describe(),
        "gpu_memory_max 95.5% > 90% (150 samples)"
    );
    assert_eq!(readings[1].ok, Some(true));
    assert_eq!(
        readings[1].describe(),
        "upstream_queue_max 3 <= 8 (150 samples)"
    );
}

#[test]
fn a_gate_without_a_reading_does_not_block_a_judged_one() {
    let gates = Gates::from([(Gate::ErrorRate, 1.0), (Gate::GpuMemoryMax, 90.0)]);
    let (mut p, t0) = started(config(gates));
    let canary = view(150, 100, 200);
    let (_, t) = p.evaluate(t0 + Duration::from_secs(30), &obs(&canary, &canary));
    let t = t.unwrap();
    assert_eq!(t.apply, Some(5));
    // Only the judged gate is evidence.
    assert_eq!(t.evidence.len(), 1);
    assert_eq!(t.evidence[0].gate, Gate::ErrorRate);
}

#[test]
fn every_measure_has_its_gate() {
    let gates = Gates::from([
        (Gate::TtftP99, 99.0),
        (Gate::GapP99, 25.0),
        (Gate::TpotP95, 15.0),
        (Gate::LatencyP99, 500.0),
    ]);
    let (mut p, t0) = started(config(gates));
    let canary = view(100, 100, 200);
    let (readings, _) = p.evaluate(t0, &obs(&canary, &canary));
    let ok: Vec<_> = readings.iter().map(|r| (r.gate, r.ok)).collect();
    assert_eq!(
        ok,
        [
            (Gate::TtftP99, Some(false)),
            (Gate::GapP99, Some(true)),
            (Gate::TpotP95, Some(false)),
            (Gate::LatencyP99, Some(true)),
        ]
    );
}

#[test]
fn operator_commands_and_where_they_are_allowed() {
    let now = Instant::now();
    // Pause before the first evaluation, resume starts at the first step.
    let mut p = Policy::new(config(ttft_gate(150)));
    assert_eq!(p.command(Command::Pause, now).unwrap().to, State::Paused);
    assert_eq!(
        p.command(Command::Pause, now),
        Err("cannot pause a rollout that is paused".into())
    );
    let t = p.command(Command::Resume, now).unwrap();
    assert_eq!((t.to, t.apply, t.step), (State::Progressing, Some(1), 1));
    assert_eq!(
        p.command(Command::Resume, now),
        Err("cannot resume a rollout that is progressing".into())
    );
    let t = p.command(Command::Promote, now).unwrap();
    assert_eq!(
        (t.from, t.to, t.apply),
        (State::Progressing, State::Promoted, Some(100))
    );
    assert_eq!(
        p.command(Command::Abort, now),
        Err("cannot abort a rollout that is promoted".into())
    );
    // Abort from paused sets the canary to 0.
    let (mut p, _) = started(config(ttft_gate(150)));
    p.command(Command::Pause, now).unwrap();
    let t = p.command(Command::Abort, now).unwrap();
    assert_eq!((t.to, t.apply, t.weight), (State::Aborted, Some(0), 0));
    assert_eq!(
        p.command(Command::Promote, now),
        Err("cannot promote a rollout that is aborted".into())
    );
}

#[test]
fn state_and_command_names_round_trip() {
    for &s in State::ALL {
        assert_eq!(State::parse(s.as_str()), Ok(s));
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
    for &c in Command::ALL {
        assert_eq!(Command::parse(c.as_str()), Ok(c));
    }
    assert_eq!(
        Command::parse("rollback").unwrap_err().to_string(),
        "unknown rollout command `rollback` (expected one of pause, resume, promote, abort)"
    );
}

#[test]
fn an_outside_change_pauses_a_progressing_rollout_only() {
    let (mut p, _) = started(config(ttft_gate(150)));
    let t = p.interrupt("split changed".into()).unwrap();
    assert_eq!((t.to, t.apply), (State::Paused, None));
    assert_eq!(p.interrupt("again".into()), None);
}

#[test]
fn new_steps_go_on_from_the_current_weight() {
    let (mut p, t0) = started(config(ttft_gate(150)));
    let good = view(100, 100, 200);
    p.evaluate(t0 + Duration::from_secs(30), &obs(&good, &good));
    assert_eq!(p.weight(), 5);
    let mut c = p.config().clone();
    c.steps = vec![2, 10, 30, 100];
    p.reconfigure(&c);
    assert_eq!((p.step(), p.weight()), (1, 5));
    let t = p
        .evaluate(t0 + Duration::from_secs(60), &obs(&good, &good))
        .1
        .unwrap();
    assert_eq!((t.apply, t.step), (Some(10), 2));
}

/// Fleet mode: figures read elsewhere are judged by the same rules — the
/// request count as samples, stable's for relative gates, a gate with no
/// figure not judged.
#[test]
fn figures_from_prometheus_are_judged_like_windows() {
    let gates = Gates::from([
        (Gate::TtftP95, 150.0),
        (Gate::P99VsStable, 1.25),
        (Gate::ErrorRate, 1.0),
    ]);
    let (mut p, t0) = started(config(gates));
    let figure = |value, samples, stable_samples| crate::rollout::Figure {
        value: Some(value),
        samples,
        stable_samples,
    };
    let mut figures = crate::rollout::Figures::new();
    figures.insert(Gate::TtftP95, figure(437.5, 99, None));
    figures.insert(Gate::P99VsStable, figure(1.1, 120, Some(80)));
    let (readings, t) = p.evaluate(t0, &Observation::Figures(&figures));
    assert_eq!(t, None);
    let judged: Vec<_> = readings.iter().map(|r| (r.gate, r.ok)).collect();
    // 99 < min_requests 100; stable has 80; error_rate has no figure.
    assert_eq!(
        judged,
        [
            (Gate::TtftP95, None),
            (Gate::ErrorRate, None),
            (Gate::P99VsStable, None)
        ]
    );
    figures.insert(Gate::TtftP95, figure(437.5, 120, None));
    figures.insert(Gate::P99VsStable, figure(1.1, 120, Some(300)));
    let (readings, _) = p.evaluate(t0, &Observation::Figures(&figures));
    assert_eq!(
        readings[0].describe(),
        "ttft_p95 437.5ms > 150ms (120 samples)"
    );
    assert_eq!(readings[2].ok, Some(true));
    let (_, t) = p.evaluate(t0, &Observation::Figures(&figures));
    assert_eq!(t.unwrap().to, State::RolledBack);
}
