//! Snapshots of known live counters over a scenario of two stages: the
//! stage, the arrivals due and the rates by hand, and the `LoadRun` pushed.
#![allow(clippy::unwrap_used)]

use std::path::Path;

use sluice_workload::{Failure, Outcome, Scenario};

use super::*;

/// 10/s for 2 s, then a ramp from 10/s to 30/s over 2 s: Λ(t) = 10t on
/// the first stage and 20 + 10u + 5u² at u = t − 2 s on the second.
fn scenario() -> Scenario {
    let text = "scenario: chat\n\
        target: { base_url: 'http://127.0.0.1:9' }\n\
        workload: { arrival: { kind: constant, rate: 10 }, stages: [ { rate: 10, for: 2s }, { rate: 30, ramp: 2s } ], seed: 1 }\n\
        steps:\n\
        \x20 - { name: answer, service: llm, model: m, prompt: hi, max_tokens: 4, thresholds: { ttft_p99: 50ms } }\n\
        thresholds: { ttft_p95: 100ms, error_rate: 1% }\n";
    Scenario::from_yaml(text, Path::new("."), &|_| None).unwrap()
}

/// 19 answers with a TTFT of 40 ms from the intended start, 1 timeout.
fn live() -> Live {
    let live = Live::default();
    for k in 0..20 {
        let o = Outcome {
            intended_us: k * 100_000,
            sent_us: k * 100_000 + 200,
            first_content_us: Some(k * 100_000 + 40_000),
            end_us: k * 100_000 + 60_000,
            failure: (k == 7).then_some(Failure::Timeout),
            ..Outcome::default()
        };
        live.measures.observe(&o);
    }
    for (counter, n) in [
        (&live.sent, 24),
        (&live.done, 20),
        (&live.failed, 1),
        (&live.in_flight, 4),
        (&live.waiting, 1),
        (&live.queued, 2),
        (&live.started, 25),
        (&live.journeys, 5),
    ] {
        counter.store(n, Ordering::Release);
    }
    live
}

fn meta() -> RunMeta {
    RunMeta {
        run_id: "load-00000000000000ab".into(),
        scenario: "chat".into(),
        shard: "0/1".into(),
        mode: "open",
        started_at: "2026-12-03T08:00:00Z".into(),
    }
}

#[test]
fn the_stage_and_the_arrivals_due_follow_the_schedule() {
    let s = scenario();
    let schedule = s.plan.schedule().unwrap();
    let shape = Shape::new(&s, &schedule.arrivals, schedule.span_us, false);
    let live = Live::default();
    let at = |ms: u64| shape.at(&live, Some(ms * 1000));
    // (ms, stage, due): 10 by 1.05 s; Λ(3.05 s) = 20 + 10.5 + 5.5125 = 36.01.
    let cases = [
        (0, Some(0), 0),
        (1_050, Some(0), 10),
        (2_050, Some(1), 20),
        (3_050, Some(1), 36),
        (4_000, None, 60),
        (9_000, None, 60),
    ];
    for (ms, stage, due) in cases {
        let snap = at(ms);
        assert_eq!((snap.stage, snap.due), (stage, Some(due)), "at {ms} ms");
        assert_eq!((snap.stages, snap.span_us), (2, 4_000_000));
    }
    // In the setup the clock has not started: the first stage, nothing due.
    let setup = shape.at(&live, None);
    assert_eq!(
        (setup.elapsed_us, setup.stage, setup.due),
        (None, Some(0), Some(0))
    );
    // A closed loop has no schedule to offer.
    let closed = Shape::new(&s, &schedule.arrivals, schedule.span_us, true);
    assert_eq!(closed.at(&live, Some(3_050_000)).due, None);
}

#[test]
fn rates_are_the_counts_between_two_snapshots_over_their_time() {
    let before = Snapshot {
        elapsed_us: Some(2_000_000),
        due: Some(40),
        ended: 38,
        ..Snapshot::default()
    };
    let now = Snapshot {
        elapsed_us: Some(4_000_000),
        due: Some(80),
        ended: 77,
        ..Snapshot::default()
    };
    let want = Rates {
        offered: Some(20.0),
        achieved: 19.5,
    };
    assert_eq!(Rates::between(&before, &now), want);
    // From the start (the first push), and with no time between them.
    let first = Rates::between(&Snapshot::default(), &now);
    assert_eq!(
        first,
        Rates {
            offered: Some(20.0),
            achieved: 19.25
        }
    );
    let none = Rates::between(&now, &now);
    assert_eq!(
        none,
        Rates {
            offered: Some(0.0),
            achieved: 0.0
        }
    );
    let closed = Snapshot {
        due: None,
        ..now.clone()
    };
    assert_eq!(Rates::between(&before, &closed).offered, None);
}

#[test]
fn a_snapshot_becomes_the_load_run_pushed_then_the_final_one() {
    let s = scenario();
    let schedule = s.plan.schedule().unwrap();
    let shape = Shape::new(&s, &schedule.arrivals, schedule.span_us, false);
    let snap = shape.at(&live(), Some(2_500_000));
    // 40 ms lies in the log-linear bucket [39.936, 40.960) ms: its middle.
    assert_eq!(snap.ttft_p95_ms, Some(40.448));
    assert_eq!(snap.error_rate, Some(5.0));
    assert_eq!(snap.ended, 20);
    let rates = Rates {
        offered: Some(12.5),
        achieved: 10.0,
    };
    let run = load_run(&meta(), &snap, rates, "2026-12-03T08:00:03Z".into());
    let threshold = |name: &str, step: Option<&str>, bound, value, passed| LoadRunThreshold {
        name: name.into(),
        step: step.map(str::to_owned),
        bound,
        value,
        passed,
    };
    let want = LoadRun {
        run_id: "load-00000000000000ab".into(),
        scenario: "chat".into(),
        state: LoadRunState::Running,
        shard: "0/1".into(),
        mode: "open".into(),
        stage: Some(1),
        stages: 2,
        offered_rate: Some(12.5),
        achieved_rate: 10.0,
        sent: 24,
        done: 20,
        failed: 1,
        in_flight: 4,
        queued: 2,
        ttft_p95_ms: Some(40.448),
        error_rate: Some(5.0),
        // In the order the result lists them; the error rate fails already,
        // and the step's is measured at the end.
        thresholds: vec![
            threshold("error_rate", None, 1.0, Some(5.0), false),
            threshold("ttft_p95", None, 100.0, Some(40.448), true),
            threshold("ttft_p99", Some("answer"), 50.0, None, true),
        ],
        passed: false,
        elapsed_s: 2.5,
        duration_s: 4.0,
        started_at: "2026-12-03T08:00:00Z".into(),
        updated_at: "2026-12-03T08:00:03Z".into(),
    };
    assert_eq!(run, want);
    assert_eq!(run.check(), Ok(()));

    // The last push takes the result's verdicts and says how it ended.
    let result = |step: Option<&str>, name, bound, value, passed| ThresholdResult {
        name,
        step: step.map(str::to_owned),
        bound,
        value,
        passed,
    };
    let settled = Settled {
        thresholds: vec![
            result(None, "ttft_p95", 100.0, Some(40.1), true),
            result(None, "error_rate", 1.0, Some(5.0), false),
            result(Some("answer"), "ttft_p99", 50.0, Some(40.2), true),
        ],
        passed: false,
        interrupted: false,
    };
    let mut done = run.clone();
    settled.settle(&mut done);
    assert_eq!(done.state, LoadRunState::Done);
    assert_eq!(
        done.thresholds[2],
        threshold("ttft_p99", Some("answer"), 50.0, Some(40.2), true)
    );
    assert_eq!(done.thresholds[0].value, Some(40.1));
    assert!(!done.passed);
    let mut cut = run;
    Settled {
        interrupted: true,
        ..settled
    }
    .settle(&mut cut);
    assert_eq!(cut.state, LoadRunState::Interrupted);
}
