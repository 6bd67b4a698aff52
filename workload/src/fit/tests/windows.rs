//! The rate over time and the data-quality warnings, on traces whose
//! answers are known.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Distribution, Exp};
use sluice_filters::{TraceLine, TRACE_VERSION};

use super::super::lengths::{copula_rho, spearman};
use super::super::{FitBuilder, FitOptions, Fitted, Source};
use super::near;

fn fit(arrivals_us: &[u64], window_s: u64) -> Fitted {
    let mut builder = FitBuilder::default();
    for (i, a) in arrivals_us.iter().enumerate() {
        let line = TraceLine {
            v: TRACE_VERSION,
            request_id: format!("r{i}"),
            arrival_us: *a,
            ..TraceLine::default()
        };
        builder.add(&line).unwrap();
    }
    let source = Source {
        trace: "t".into(),
        sha256: "0".repeat(64),
        requests: 0,
        fitted_at: "2026-12-02T15:00:00.000000Z".into(),
    };
    let options = FitOptions {
        window: std::time::Duration::from_secs(window_s),
    };
    builder.finish("t", &options, source).unwrap()
}

/// Poisson arrivals at `rates[i]` per second for `seconds` each, in turn.
fn piecewise(rates: &[f64], seconds: f64) -> Vec<u64> {
    let mut rng = StdRng::seed_from_u64(21);
    let mut out = Vec::new();
    for (i, rate) in rates.iter().enumerate() {
        let end = (i + 1) as f64 * seconds;
        let mut t = i as f64 * seconds;
        let gap = Exp::new(*rate).unwrap();
        loop {
            t += gap.sample(&mut rng);
            if t >= end {
                break;
            }
            out.push((t * 1e6) as u64);
        }
    }
    out
}

#[test]
fn windows_follow_the_rate_and_keep_it_in_the_model() {
    let fitted = fit(&piecewise(&[50.0, 50.0, 10.0, 10.0], 60.0), 60);
    assert_eq!(fitted.windows.len(), 4);
    for (w, rate) in fitted.windows.iter().zip([50.0, 50.0, 10.0, 10.0]) {
        near("rate", w.rate, rate, 0.1);
        near("iat cv", w.iat_cv.unwrap(), 1.0, 0.1);
        near("gamma shape", w.gamma_shape.unwrap(), 1.0, 0.15);
    }
    let curve = fitted.model.arrival.rate_curve.as_ref().unwrap();
    assert_eq!(curve.window_s, 60.0);
    let rates: Vec<f64> = fitted.windows.iter().map(|w| w.rate).collect();
    assert_eq!(curve.rates, rates);
    // Poisson within a window, but the rate changes: the dispersion of the
    // counts grows with the window.
    let (a, b, c) = (
        fitted.idc_1s.unwrap(),
        fitted.idc_10s.unwrap(),
        fitted.idc_60s.unwrap(),
    );
    assert!(1.0 < a && a < b && b < c, "{a} {b} {c}");
}

#[test]
fn a_window_with_few_gaps_has_no_shape() {
    // 20 arrivals in the first minute, then 2,000 in the next.
    let fitted = fit(&piecewise(&[1.0 / 3.0, 2000.0 / 60.0], 60.0), 60);
    assert_eq!(fitted.windows[0].gamma_shape, None);
    assert!(fitted.windows[1].gamma_shape.is_some());
}

#[test]
fn quantised_and_few_samples_are_warned_of() {
    // 60 requests on a 1 s grid, three per second.
    let arrivals: Vec<u64> = (0..60).map(|i| (i / 3) * 1_000_000).collect();
    let fitted = fit(&arrivals, 60);
    assert_eq!(
        fitted.warnings[..2],
        [
            "67.8% of inter-arrival times are exactly 0: the timestamps look quantised; the \
             fit is of the 19 gaps above 0, so it understates the bursts",
            "only 19 inter-arrival times: too few samples for a close fit (the mixture needs \
             hundreds)",
        ]
    );
    assert_eq!(fitted.zero_iat_share, 0.678);
}

#[test]
fn spearman_and_the_copula() {
    let up: Vec<(u64, u64)> = (1..100).map(|i| (i, i * i)).collect();
    assert_eq!(spearman(&up), Some(1.0));
    let down: Vec<(u64, u64)> = (1..100).map(|i| (i, 1000 - i)).collect();
    assert_eq!(spearman(&down), Some(-1.0));
    // Ties take the mean rank: (1,1), (2,1), (3,2) has ranks (1,2,3) and
    // (1.5,1.5,3): r = 1.5 / sqrt(2 × 1.5).
    let tied = [(1, 1), (2, 1), (3, 2)];
    near("tied", spearman(&tied).unwrap(), 1.5 / 3f64.sqrt(), 1e-12);
    assert_eq!(spearman(&[(1, 1), (2, 1), (3, 1)]), None);
    near("rho(0.5)", copula_rho(0.5), 0.517_638_090_205_041_5, 1e-12);
    near("rho(1)", copula_rho(1.0), 1.0, 1e-12);
}
