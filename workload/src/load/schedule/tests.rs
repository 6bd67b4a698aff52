#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use super::*;

fn steady(process: Process, rate: f64, secs: u64, seed: u64) -> Plan {
    Plan {
        process,
        segments: vec![Segment {
            span: Duration::from_secs(secs),
            from: rate,
            to: rate,
            stage: 0,
        }],
        warmup: Duration::ZERO,
        seed,
    }
}

fn poisson(rate: f64) -> Process {
    Process::Renewal(Arrival::Exponential { rate })
}

/// The scenario's `gamma {rate, burstiness}`.
fn gamma_process(rate: f64, burstiness: f64) -> Process {
    Process::Renewal(Arrival::Gamma {
        shape: burstiness,
        scale: 1.0 / (rate * burstiness),
    })
}

fn gaps_s(s: &Schedule) -> Vec<f64> {
    s.arrivals
        .windows(2)
        .map(|w| (w[1].at_us - w[0].at_us) as f64 / 1e6)
        .collect()
}

fn cv(x: &[f64]) -> f64 {
    let n = x.len() as f64;
    let mean = x.iter().sum::<f64>() / n;
    let var = x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    var.sqrt() / mean
}

#[test]
fn the_same_seed_gives_the_same_schedule_and_another_seed_another() {
    let a = steady(gamma_process(20.0, 0.5), 20.0, 60, 7)
        .schedule()
        .unwrap();
    let b = steady(gamma_process(20.0, 0.5), 20.0, 60, 7)
        .schedule()
        .unwrap();
    let c = steady(gamma_process(20.0, 0.5), 20.0, 60, 8)
        .schedule()
        .unwrap();
    assert_eq!(a, b);
    assert_ne!(a.arrivals, c.arrivals);
    assert!(a.arrivals.windows(2).all(|w| w[0].at_us <= w[1].at_us));
    assert!(a.arrivals.iter().all(|x| x.at_us <= 60_000_000));
    assert_eq!(a.span_us, 60_000_000);
}

#[test]
fn shards_together_are_exactly_the_whole_and_never_overlap() {
    let whole = steady(poisson(50.0), 50.0, 100, 3).schedule().unwrap();
    let mut union: Vec<Intended> = Vec::new();
    for i in 0..4 {
        let part = whole.shard(Shard { index: i, count: 4 });
        assert!(part.arrivals.iter().all(|a| a.index % 4 == u64::from(i)));
        // Each shard carries a quarter of the load, to one arrival.
        assert!(part.arrivals.len().abs_diff(whole.arrivals.len() / 4) <= 1);
        union.extend(part.arrivals);
    }
    let n = union.len();
    union.sort();
    union.dedup();
    assert_eq!(union.len(), n, "shards overlap");
    let mut all = whole.arrivals.clone();
    all.sort();
    assert_eq!(union, all);
    assert_eq!(whole.shard(Shard::WHOLE), whole);
}

#[test]
fn shard_text_reads_i_of_n() {
    assert_eq!("1/4".parse::<Shard>(), Ok(Shard { index: 1, count: 4 }));
    assert_eq!(Shard { index: 1, count: 4 }.to_string(), "1/4");
    for bad in ["4/4", "1", "a/2", "0/0"] {
        assert_eq!(
            bad.parse::<Shard>(),
            Err(format!(
                "`{bad}` is not a shard like 0/4 (i/n, i counted from 0, i < n)"
            ))
        );
    }
}

#[test]
fn the_mean_rate_is_the_one_asked_for_within_three_percent() {
    // 20 000 arrivals expected in each case: the count's sd is about
    // sqrt(20000) / sqrt(shape), under 1.5% here.
    for (name, process) in [
        ("poisson", poisson(20.0)),
        ("gamma", gamma_process(20.0, 0.5)),
        ("constant", Process::Constant),
        (
            "weibull",
            Process::Renewal(Arrival::Weibull {
                shape: 0.7,
                scale: 1.0,
            }),
        ),
        (
            "lognormal",
            Process::Renewal(Arrival::Lognormal {
                mu: -1.0,
                sigma: 0.8,
            }),
        ),
    ] {
        let s = steady(process, 20.0, 1000, 11).schedule().unwrap();
        let n = s.arrivals.len() as f64;
        assert!((n / 20_000.0 - 1.0).abs() < 0.03, "{name}: {n} arrivals");
    }
}

#[test]
fn gamma_gaps_have_cv_one_over_sqrt_shape() {
    for shape in [0.25, 0.5, 1.0, 4.0] {
        let s = steady(gamma_process(20.0, shape), 20.0, 1000, 5)
            .schedule()
            .unwrap();
        let got = cv(&gaps_s(&s));
        let want = 1.0 / f64::sqrt(shape);
        assert!(
            (got / want - 1.0).abs() < 0.08,
            "shape {shape}: cv {got}, want {want}"
        );
    }
    let constant = steady(Process::Constant, 20.0, 10, 5).schedule().unwrap();
    assert_eq!(constant.arrivals.len(), 200);
    assert!(gaps_s(&constant).iter().all(|g| (g - 0.05).abs() < 2e-6));
}

fn ramp_plan(process: Process, seed: u64) -> Plan {
    Plan {
        process,
        segments: vec![
            Segment {
                span: Duration::from_secs(100),
                from: 10.0,
                to: 10.0,
                stage: 0,
            },
            Segment {
                span: Duration::from_secs(200),
                from: 10.0,
                to: 40.0,
                stage: 1,
            },
            Segment {
                span: Duration::from_secs(100),
                from: 40.0,
                to: 0.0,
                stage: 2,
            },
        ],
        warmup: Duration::from_secs(10),
        seed,
    }
}

/// Arrivals in [a, b) seconds.
fn count(s: &Schedule, a: f64, b: f64) -> usize {
    s.arrivals
        .iter()
        .filter(|x| (a * 1e6) as u64 <= x.at_us && x.at_us < (b * 1e6) as u64)
        .count()
}

#[test]
fn ramps_give_the_integral_of_the_rate_in_every_window() {
    // λ(t) = 10 + 30 (t - 100) / 200 on [100, 300): ∫ over [100 + 20j, 120 + 20j)
    // = 20 (10 + 30 (20j + 10) / 200), and the ramp down 40 → 0 over 100 s.
    let want = |a: f64, b: f64| -> f64 {
        let rate = |t: f64| match t {
            t if t < 100.0 => 10.0,
            t if t < 300.0 => 10.0 + 30.0 * (t - 100.0) / 200.0,
            t => 40.0 * (1.0 - (t - 300.0) / 100.0),
        };
        // The midpoint rule is exact on a linear piece.
        (b - a) * rate((a + b) / 2.0)
    };
    let constant = ramp_plan(Process::Constant, 1).schedule().unwrap();
    let random = ramp_plan(poisson(1.0), 1).schedule().unwrap();
    for j in 0..20 {
        let (a, b) = (20.0 * j as f64, 20.0 * (j + 1) as f64);
        let w = want(a, b);
        // A constant process follows the integral to one arrival.
        let c = count(&constant, a, b) as f64;
        assert!((c - w).abs() <= 1.0, "[{a}, {b}): {c} for {w}");
        // Poisson, within 5 sd.
        let p = count(&random, a, b) as f64;
        assert!((p - w).abs() <= 5.0 * w.sqrt(), "[{a}, {b}): {p} for {w}");
    }
    // Stages by segment: 1000, 5000 and 2000 arrivals.
    let by_stage = |s: &Schedule, k: usize| s.arrivals.iter().filter(|x| x.stage == k).count();
    assert_eq!(
        [0, 1, 2].map(|k| by_stage(&constant, k).abs_diff([1000, 5000, 2000][k]) <= 1),
        [true; 3]
    );
    // Warm-up: the first 10 s, 100 arrivals (the 100th falls on its end).
    let warm = constant.arrivals.iter().filter(|x| x.warmup).count();
    assert!(warm.abs_diff(100) <= 1, "{warm}");
    assert!(constant
        .arrivals
        .iter()
        .all(|x| x.warmup == (x.at_us < 10_000_000)));
}

#[test]
fn a_zero_rate_window_has_no_arrivals_and_bad_rates_are_refused() {
    let plan = Plan {
        process: poisson(1.0),
        segments: [5.0, 0.0, 20.0]
            .iter()
            .map(|r| Segment {
                span: Duration::from_secs(100),
                from: *r,
                to: *r,
                stage: 0,
            })
            .collect(),
        warmup: Duration::ZERO,
        seed: 2,
    };
    let s = plan.schedule().unwrap();
    assert_eq!(count(&s, 100.0, 200.0), 0);
    let (first, last) = (count(&s, 0.0, 100.0) as f64, count(&s, 200.0, 300.0) as f64);
    assert!((first - 500.0).abs() < 5.0 * 500f64.sqrt(), "{first}");
    assert!((last - 2000.0).abs() < 5.0 * 2000f64.sqrt(), "{last}");
    let mut bad = plan.clone();
    bad.segments[1].to = f64::NAN;
    assert_eq!(
        bad.schedule().unwrap_err().to_string(),
        "the rate NaN is not a finite number >= 0"
    );
    let huge = steady(Process::Constant, 1e6, 20, 0).schedule();
    assert_eq!(huge, Err(ScheduleError::TooMany));
}

#[test]
fn mean_gaps_of_every_kind() {
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9 * b.abs().max(1.0);
    assert!(close(mean_gap_s(&Arrival::Exponential { rate: 4.0 }), 0.25));
    assert!(close(
        mean_gap_s(&Arrival::Gamma {
            shape: 0.5,
            scale: 0.1
        }),
        0.05
    ));
    // Γ(1 + 1/2) = √π / 2.
    assert!(close(
        mean_gap_s(&Arrival::Weibull {
            shape: 2.0,
            scale: 1.0
        }),
        std::f64::consts::PI.sqrt() / 2.0
    ));
    assert!(close(
        mean_gap_s(&Arrival::Lognormal {
            mu: 0.0,
            sigma: 1.0
        }),
        0.5f64.exp()
    ));
    assert_eq!(Process::Constant.rate(), None);
    assert!(close(poisson(8.0).rate().unwrap(), 8.0));
}
