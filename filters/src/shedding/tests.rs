#![allow(clippy::unwrap_used)]

use super::*;

fn policy() -> ShedPolicy {
    ShedPolicy {
        bounds: Signals {
            ttft_p95: Some(500.0),
            queue: Some(16.0),
            ..Signals::default()
        },
        max_level: 2,
        steps: 1,
        hold_ms: 5_000,
        recovery: 0.8,
    }
}

fn ttft(ms: f64) -> Signals {
    Signals {
        ttft_p95: Some(ms),
        ..Signals::default()
    }
}

/// Steps `readings` one a second from `start_ms`; the level (in steps)
/// after each.
fn run(shedder: &mut Shedder, readings: &[Signals], start_ms: u64) -> Vec<u16> {
    readings
        .iter()
        .enumerate()
        .map(|(i, r)| {
            shedder.step(&policy(), r, start_ms + 1_000 * i as u64);
            shedder.units()
        })
        .collect()
}

#[test]
fn a_breach_raises_one_level_per_evaluation_up_to_the_highest() {
    let mut s = Shedder::default();
    let levels = run(&mut s, &[ttft(900.0); 4], 0);
    assert_eq!(levels, [1, 2, 2, 2]);
}

#[test]
fn a_level_comes_down_one_at_a_time_after_a_calm_hold() {
    let mut s = Shedder::default();
    run(&mut s, &[ttft(900.0); 2], 0);
    assert_eq!(s.units(), 2);
    // Calm from t = 2 s: the first restore 5 s later (t = 7 s), the next
    // after another 5 s (t = 12 s).
    let levels = run(&mut s, &[ttft(100.0); 11], 2_000);
    assert_eq!(levels, [2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 0]);
}

#[test]
fn the_hysteresis_band_holds_the_level_and_restarts_the_hold() {
    let mut s = Shedder::default();
    run(&mut s, &[ttft(900.0)], 0);
    // 450 ms is under the 500 ms bound but over 0.8 × 500: the level holds
    // however long it lasts.
    let levels = run(&mut s, &[ttft(450.0); 10], 1_000);
    assert_eq!(levels, [1; 10]);
    // Calm for 4 s, back in the band, calm again: the hold starts over.
    let mut readings = vec![ttft(300.0); 4];
    readings.push(ttft(420.0));
    readings.extend([ttft(300.0); 6]);
    let levels = run(&mut s, &readings, 11_000);
    assert_eq!(levels, [1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 0]);
}

#[test]
fn a_breach_soon_after_a_restore_doubles_the_hold_up_to_eight_times() {
    let mut s = Shedder::default();
    let p = ShedPolicy {
        max_level: 1,
        ..policy()
    };
    let at = |s: &mut Shedder, ms: f64, t: u64| {
        s.step(&p, &ttft(ms), t);
        s.units()
    };
    assert_eq!(at(&mut s, 900.0, 0), 1);
    assert_eq!(at(&mut s, 100.0, 1_000), 1);
    assert_eq!(at(&mut s, 100.0, 6_000), 0);
    // Overloaded again 1 s after the restore: the next hold is 10 s, then
    // 20 s, 40 s, and no longer than 8 × 5 s.
    let mut t = 7_000;
    for hold in [10_000, 20_000, 40_000, 40_000] {
        assert_eq!(at(&mut s, 900.0, t), 1);
        assert_eq!(s.hold_ms(&p), hold);
        assert_eq!(at(&mut s, 100.0, t + 1_000), 1);
        assert_eq!(at(&mut s, 100.0, t + 1_000 + hold - 1), 1);
        assert_eq!(at(&mut s, 100.0, t + 1_000 + hold), 0);
        t += 1_000 + hold + 1_000;
    }
    // A breach long after the last restore starts from `hold` again.
    assert_eq!(at(&mut s, 900.0, t + 60_000), 1);
    assert_eq!(s.hold_ms(&p), 5_000);
}

#[test]
fn nothing_to_read_counts_as_calm_and_any_signal_breaches() {
    let mut s = Shedder::default();
    let queue = Signals {
        ttft_p95: Some(100.0),
        queue: Some(40.0),
        ..Signals::default()
    };
    let change = s.step(&policy(), &queue, 0).unwrap();
    assert_eq!((change.from, change.to), (0.0, 1.0));
    assert_eq!(
        change.describe(),
        "shedding level 0 -> 1: ttft_p95 100ms <= 500ms; queue 40 > 16"
    );
    // A signal that is not watched (GPU memory here) is never read.
    let gpu = Signals {
        gpu_memory: Some(99.0),
        ..Signals::default()
    };
    assert_eq!(s.step(&policy(), &gpu, 1_000), None);
    let change = s.step(&policy(), &Signals::default(), 6_000).unwrap();
    assert_eq!((change.from, change.to), (1.0, 0.0));
    assert_eq!(
        change.describe(),
        "shedding level 1 -> 0: ttft_p95 n/a vs 500ms; queue n/a vs 16"
    );
}

#[test]
fn judging_lists_every_watched_signal_with_its_bound() {
    let all = ShedPolicy {
        bounds: Signals {
            token_cost_excess_p99: Some(0.8),
            ttft_p95: Some(2_000.0),
            queue: Some(16.0),
            gpu_memory: Some(95.0),
        },
        ..policy()
    };
    let readings = Signals {
        token_cost_excess_p99: Some(1.25),
        ttft_p95: Some(1_700.0),
        queue: None,
        gpu_memory: Some(50.0),
    };
    let (verdict, evidence) = judge(&all, &readings);
    assert_eq!(verdict, Verdict::Breached);
    let text: Vec<String> = evidence.iter().map(Evidence::describe).collect();
    assert_eq!(
        text,
        [
            "token_cost_excess_p99 1.25ms/token > 0.8ms/token",
            "ttft_p95 1700ms <= 2000ms",
            "queue n/a vs 16",
            "gpu_memory 50% <= 95%",
        ]
    );
    let (verdict, _) = judge(
        &all,
        &Signals {
            ttft_p95: Some(1_700.0),
            ..Signals::default()
        },
    );
    assert_eq!(verdict, Verdict::Holding);
    assert_eq!(judge(&all, &Signals::default()).0, Verdict::Calm);
    // A NaN is no reading, not a breach.
    assert_eq!(judge(&all, &ttft(f64::NAN)).0, Verdict::Calm);
}

#[test]
fn the_lowest_priorities_are_shed_first_and_the_highest_never() {
    let levels = ["interactive", "standard", "batch"].map(String::from);
    let rank = |v: Option<&str>| priority_rank(&levels, v.map(str::as_bytes), 2);
    assert_eq!(rank(Some("interactive")), 0);
    assert_eq!(rank(Some("batch")), 2);
    // Unknown or missing: the default.
    assert_eq!(rank(Some("Interactive")), 2);
    assert_eq!(rank(None), 2);
    // Whole levels (one step a level): any random number decides alike.
    for random in [0, u64::MAX / 2, u64::MAX] {
        let shed = |rank: usize, level: u16| is_shed(rank, levels.len(), level, 1, random);
        assert!(!shed(2, 0) && !shed(1, 0) && !shed(0, 0));
        assert!(shed(2, 1) && !shed(1, 1) && !shed(0, 1));
        assert!(shed(2, 2) && shed(1, 2) && !shed(0, 2));
    }
}

#[test]
fn a_level_in_steps_sheds_a_share_of_the_boundary_priority() {
    // Four steps a level, three priorities: 0..=8 steps.
    let share = |rank: usize, units: u16| shed_share(rank, 3, units, 4);
    assert_eq!(
        [0, 1, 2, 3, 4, 5].map(|u| share(2, u)),
        [0.0, 0.25, 0.5, 0.75, 1.0, 1.0]
    );
    assert_eq!([4, 5, 6, 8].map(|u| share(1, u)), [0.0, 0.25, 0.5, 1.0]);
    assert_eq!(share(0, 8), 0.0);
    // The random number picks which requests of the share: the lowest
    // quarter of the range at 0.25.
    assert!(is_shed(2, 3, 1, 4, 0));
    assert!(is_shed(2, 3, 1, 4, u64::MAX / 4 - (1 << 12)));
    assert!(!is_shed(2, 3, 1, 4, u64::MAX / 4 + (1 << 12)));
    assert!(!is_shed(2, 3, 1, 4, u64::MAX));
    // Over evenly spread random numbers (midpoints of 1000 bins), the share.
    let shed = (0..1000u64)
        .filter(|i| is_shed(2, 3, 3, 4, (2 * i + 1) * (u64::MAX / 2000)))
        .count();
    assert_eq!(shed, 750);
}

#[test]
fn a_breach_takes_a_whole_level_and_a_restore_gives_back_one_step() {
    let p = ShedPolicy {
        steps: 4,
        ..policy()
    };
    let mut s = Shedder::default();
    let change = s.step(&p, &ttft(900.0), 0).unwrap();
    assert_eq!((change.from, change.to, change.units), (0.0, 1.0, 4));
    // Calm: a step every 5 s, 0.75, 0.5 ...
    let change = s.step(&p, &ttft(100.0), 1_000);
    assert_eq!(change, None);
    let change = s.step(&p, &ttft(100.0), 6_000).unwrap();
    assert_eq!((change.from, change.to, change.units), (1.0, 0.75, 3));
    assert_eq!(
        change.describe(),
        "shedding level 1 -> 0.75: ttft_p95 100ms <= 500ms; queue n/a vs 16"
    );
    s.step(&p, &ttft(100.0), 11_000).unwrap();
    assert_eq!(s.units(), 2);
    // ... until the probe overloads: back to the whole level at once, and
    // a breach within the hold of the restore doubles the next hold.
    let change = s.step(&p, &ttft(900.0), 12_000).unwrap();
    assert_eq!((change.from, change.to), (0.5, 1.0));
    assert_eq!(s.hold_ms(&p), 10_000);
    // Breached at level 1 of 2: level 2 next, whole.
    let change = s.step(&p, &ttft(900.0), 13_000).unwrap();
    assert_eq!((change.from, change.to, change.units), (1.0, 2.0, 8));
}

#[test]
fn the_refusal_is_an_openai_error() {
    let body: serde_json::Value = serde_json::from_str(&shed_body("batch", 2_000)).unwrap();
    assert_eq!(
        body,
        serde_json::json!({"error": {
            "message": "The service is overloaded and sheds `batch` traffic for now. Please try again in 2s.",
            "type": "server_error",
            "param": null,
            "code": "overloaded",
        }})
    );
}
