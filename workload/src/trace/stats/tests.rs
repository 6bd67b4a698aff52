#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sluice_filters::{TraceLine, TRACE_VERSION};

use super::*;

fn line(arrival_us: u64) -> TraceLine {
    TraceLine {
        v: TRACE_VERSION,
        request_id: arrival_us.to_string(),
        arrival_us,
        ..TraceLine::default()
    }
}

/// Arrivals with exponential gaps drawn by `gap` (seconds), to the µs.
fn arrivals(n: usize, seed: u64, mut gap: impl FnMut(&mut StdRng) -> f64) -> Vec<TraceLine> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut t = 0.0;
    (0..n)
        .map(|_| {
            t += gap(&mut rng);
            line((t * 1e6).round() as u64)
        })
        .collect()
}

fn exponential(rng: &mut StdRng, rate: f64) -> f64 {
    -(1.0 - rng.random::<f64>()).ln() / rate
}

fn near(what: &str, got: Option<f64>, want: f64, tolerance: f64) {
    let got = got.unwrap_or_else(|| panic!("{what}: none"));
    assert!(
        (got - want).abs() <= tolerance,
        "{what}: {got}, want {want} ± {tolerance}"
    );
}

#[test]
fn a_poisson_process_has_cv_and_dispersion_one() {
    // 100,000 arrivals at 20/s: 5,000 s. The tolerances are about 4 standard
    // errors: 1/sqrt(n) for the CV, sqrt(2/(k-1)) for k windows of counts.
    let lines = arrivals(100_000, 7, |rng| exponential(rng, 20.0));
    let s = TraceStats::of(&lines).unwrap();
    assert_eq!(s.requests, 100_000);
    near("mean_rate", s.mean_rate, 20.0, 0.3);
    near("iat_cv", s.iat_cv, 1.0, 0.02);
    near("idc_1s", s.idc_1s, 1.0, 0.08);
    near("idc_10s", s.idc_10s, 1.0, 0.25);
    near("idc_60s", s.idc_60s, 1.0, 0.6);
    assert!(!s.quantised && s.warnings.is_empty(), "{s:?}");
    assert!(s.zero_iat_share.unwrap() < 0.001);
}

#[test]
fn a_hyperexponential_process_is_burstier() {
    // Gaps Exp(100/s) or Exp(1/s) with equal odds: mean 0.505 s,
    // E[X²] = 1.0001, so CV = sqrt(1.0001 / 0.505² − 1) = 1.709.
    let lines = arrivals(100_000, 11, |rng| {
        let rate = if rng.random_bool(0.5) { 100.0 } else { 1.0 };
        exponential(rng, rate)
    });
    let s = TraceStats::of(&lines).unwrap();
    near("iat_cv", s.iat_cv, 1.709, 0.08);
    assert!(s.idc_10s.unwrap() > 1.5, "{s:?}");
}

#[test]
fn a_fixed_rate_has_cv_and_dispersion_zero() {
    let lines: Vec<TraceLine> = (0..=6000).map(|i| line(i * 100_000)).collect();
    let s = TraceStats::of(&lines).unwrap();
    assert_eq!(s.duration_s, 600.0);
    near("mean_rate", s.mean_rate, 10.0, 1e-9);
    near("iat_cv", s.iat_cv, 0.0, 1e-9);
    for (what, idc) in [("1s", s.idc_1s), ("10s", s.idc_10s), ("60s", s.idc_60s)] {
        near(what, idc, 0.0, 1e-9);
    }
    assert_eq!(s.timestamp_grid_ms, Some(100.0));
    assert!(!s.quantised);
}

#[test]
fn quantised_timestamps_are_flagged() {
    // Poisson at 20/s, then every arrival floored to its 3 s bucket, as in
    // the Mooncake trace: about 60 requests share each instant.
    let lines: Vec<TraceLine> = arrivals(20_000, 3, |rng| exponential(rng, 20.0))
        .into_iter()
        .map(|l| line(l.arrival_us / 3_000_000 * 3_000_000))
        .collect();
    let s = TraceStats::of(&lines).unwrap();
    assert!(s.quantised);
    assert!(s.zero_iat_share.unwrap() > 0.95, "{s:?}");
    assert_eq!(s.timestamp_grid_ms, Some(3000.0));
    assert!(s.max_same_instant > 40, "{s:?}");
    assert_eq!(s.warnings.len(), 1);
    assert!(
        s.warnings[0].contains("on a 3000 ms grid") && s.warnings[0].contains("artificial bursts"),
        "{}",
        s.warnings[0]
    );
}

#[test]
fn lengths_and_sessions() {
    let lines: Vec<TraceLine> = (1..=100u64)
        .map(|i| TraceLine {
            input_tokens: Some(i),
            output_tokens: (i % 2 == 0).then_some(i * 10),
            session_id: Some(["a", "b", "b", "c", "c", "c"][(i % 6) as usize].to_owned())
                .filter(|_| i <= 6),
            ..line(i * 1000)
        })
        .collect();
    let s = TraceStats::of(&lines).unwrap();
    let input = s.input_tokens.unwrap();
    assert_eq!(
        (
            input.count,
            input.mean,
            input.p50,
            input.p90,
            input.p99,
            input.max
        ),
        (100, 50.5, 50, 90, 99, 100)
    );
    let output = s.output_tokens.unwrap();
    assert_eq!((output.count, output.p50, output.max), (50, 500, 1000));
    assert_eq!(s.sessions, 3);
    let turns = s.turns_per_session.unwrap();
    assert_eq!((turns.p50, turns.max, turns.mean), (2, 3, 2.0));
    assert_eq!(TraceStats::of(&[]).unwrap_err(), "no requests");
    let one = TraceStats::of(&lines[..1]).unwrap();
    assert_eq!((one.iat_cv, one.mean_rate, one.idc_1s), (None, None, None));
}

/// Variance / mean of the counts per whole window, from a table of every
/// window: the definition, to check the walk against.
fn dispersion_by_table(sorted: &[u64], width: u64) -> Option<f64> {
    let first = sorted[0];
    let windows = ((sorted[sorted.len() - 1] - first) / width) as usize;
    if windows < 2 {
        return None;
    }
    let mut counts = vec![0u64; windows];
    for a in sorted {
        if let Some(c) = counts.get_mut(((a - first) / width) as usize) {
            *c += 1;
        }
    }
    let k = windows as f64;
    let mean = counts.iter().sum::<u64>() as f64 / k;
    let var = counts
        .iter()
        .map(|c| (*c as f64 - mean).powi(2))
        .sum::<f64>()
        / (k - 1.0);
    Some(var / mean)
}

#[test]
fn dispersion_walks_the_windows_as_the_table_counts_them() {
    let mut rng = StdRng::seed_from_u64(19);
    for _ in 0..200 {
        let n = rng.random_range(1..60);
        let mut sorted: Vec<u64> = (0..n).map(|_| rng.random_range(0..50_000_000)).collect();
        sorted.sort_unstable();
        let width = rng.random_range(1..5) * 1_000_000;
        let (walked, table) = (
            dispersion(&sorted, width),
            dispersion_by_table(&sorted, width),
        );
        match (walked, table) {
            (Some(w), Some(t)) => assert!((w - t).abs() <= 1e-9 * t.abs().max(1.0), "{w} vs {t}"),
            other => assert_eq!(other.0, other.1),
        }
    }
}

/// Found by the `trace` fuzzer: one arrival 30 years after the rest made a
/// billion 1 s windows, and the stats allocated a count for each (8 GB).
/// Three arrivals in the first window of 10^9: variance / mean is 3.
#[test]
fn an_arrival_years_later_costs_no_table_of_windows() {
    let lines: Vec<TraceLine> = [0, 1, 2, 1_000_000_000_000_000].map(line).to_vec();
    let s = TraceStats::of(&lines).unwrap();
    near("idc_1s", s.idc_1s, 3.0, 1e-6);
}
