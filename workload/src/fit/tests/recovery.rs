//! Each fit recovers the parameters of its own kind within 10% on 20,000
//! seeded samples; BIC and KL tell a bursty mixture from Poisson.

use rand_distr::{Exp, Gamma, LogNormal, Weibull};
use sluice_filters::Arrival;

use super::super::arrival::fit_arrivals;
use super::super::em::weibull_mixture;
use super::super::gof::Sample;
use super::super::lengths::{fit_lengths, truncated_lognormal};
use super::super::single;
use super::{draws, near};

const N: usize = 20_000;

/// 70% Weibull(shape 0.8, scale 1 s), 30% Weibull(shape 2.5, scale 50 ms),
/// shuffled by drawing the component per value.
pub(super) fn mixture_sample(n: usize, seed: u64) -> Vec<f64> {
    let pick = draws(rand_distr::Uniform::new(0.0, 1.0).unwrap(), n, seed);
    let slow = draws(Weibull::new(1.0, 0.8).unwrap(), n, seed + 1);
    let fast = draws(Weibull::new(0.05, 2.5).unwrap(), n, seed + 2);
    (0..n)
        .map(|i| if pick[i] < 0.7 { slow[i] } else { fast[i] })
        .collect()
}

#[test]
fn gamma_shape_half() {
    let x = draws(Gamma::new(0.5, 2.0).unwrap(), N, 1);
    let (shape, scale) = single::gamma(&Sample::new(x)).unwrap();
    near("shape", shape, 0.5, 0.1);
    near("scale", scale, 2.0, 0.1);
}

#[test]
fn weibull_shape_0_6() {
    // rand_distr's Weibull::new(scale, shape).
    let x = draws(Weibull::new(1.5, 0.6).unwrap(), N, 2);
    let (shape, scale) = single::weibull(&Sample::new(x), None, 1.0).unwrap();
    near("shape", shape, 0.6, 0.1);
    near("scale", scale, 1.5, 0.1);
}

#[test]
fn two_weibull_mixture() {
    let sample = Sample::new(mixture_sample(N, 3));
    let (c, _) = weibull_mixture(&sample).unwrap();
    assert_eq!(c.len(), 2);
    near("weight 0", c[0].weight, 0.7, 0.1);
    near("shape 0", c[0].shape, 0.8, 0.1);
    near("scale 0", c[0].scale, 1.0, 0.1);
    near("weight 1", c[1].weight, 0.3, 0.1);
    near("shape 1", c[1].shape, 2.5, 0.1);
    near("scale 1", c[1].scale, 0.05, 0.1);
}

#[test]
fn mixture_beats_poisson_by_bic_and_kl() {
    let fit = fit_arrivals(mixture_sample(N, 4), "requests").unwrap();
    assert_eq!(fit.best.kind(), "weibull_mixture");
    let kl = |kind: &str| {
        fit.candidates
            .iter()
            .find(|c| c.arrival.kind() == kind)
            .and_then(|c| c.kl)
            .unwrap()
    };
    let (mixture, poisson) = (kl("weibull_mixture"), kl("exponential"));
    for c in &fit.candidates {
        eprintln!(
            "{}: bic {:.1} kl {:?} ks {:.4}",
            c.arrival.kind(),
            c.bic,
            c.kl,
            c.ks
        );
    }
    assert!(
        mixture <= poisson / 4.0,
        "KL mixture {mixture} vs Poisson {poisson}"
    );
    assert_eq!(fit.candidates.len(), 5);
    assert!(fit.warnings.is_empty(), "{:?}", fit.warnings);
}

#[test]
fn poisson_is_exponential_or_gamma_near_one() {
    let fit = fit_arrivals(draws(Exp::new(10.0).unwrap(), N, 5), "requests").unwrap();
    eprintln!("Poisson trace: best {:?}", fit.best);
    match fit.best {
        Arrival::Exponential { rate } => near("rate", rate, 10.0, 0.1),
        Arrival::Gamma { shape, .. } => near("shape", shape, 1.0, 0.1),
        other => panic!("BIC picked {other:?} for a Poisson process"),
    }
}

#[test]
fn truncated_lognormal_with_a_five_percent_cap() {
    // ln(tokens) ~ N(5, 1), rounded up; the 5% above exp(5 + 1.645) are cut
    // at that cap, as max_tokens would cut them.
    let cap = (5.0f64 + 1.6449).exp().round();
    let tokens: Vec<u64> = draws(LogNormal::new(5.0, 1.0).unwrap(), N, 6)
        .into_iter()
        .map(|x| x.ceil().min(cap) as u64)
        .collect();
    let mut warnings = Vec::new();
    let fit = fit_lengths(&tokens, "output_tokens", &mut warnings).unwrap();
    near("mu", fit.mu, 5.0, 0.1);
    near("sigma", fit.sigma, 1.0, 0.1);
    let c = fit.cap.unwrap();
    assert_eq!((c.tokens, fit.max, fit.min), (cap as u64, cap as u64, 1));
    near("cap share", c.share, 0.05, 0.1);
    assert_eq!(
        warnings,
        [
            "output_tokens: 5.14% of the values are exactly 769 tokens (a max_tokens cap): a \
          point mass of its own, the lognormal fitted to the rest"
        ]
    );
    // Fitting the rest as if it were not truncated is off by more than 10%.
    let rest: Vec<f64> = tokens
        .iter()
        .filter(|t| **t != cap as u64)
        .map(|t| (*t as f64).ln())
        .collect();
    let mean = rest.iter().sum::<f64>() / rest.len() as f64;
    let sd = (rest.iter().map(|l| (l - mean).powi(2)).sum::<f64>() / rest.len() as f64).sqrt();
    assert!(sd < 0.9, "the naive sigma {sd} would pass too");
}

#[test]
fn truncation_below_is_accounted_for() {
    // A continuous lognormal(0.5, 1) kept only within [1, 20].
    let x: Vec<f64> = draws(LogNormal::new(0.5, 1.0).unwrap(), 3 * N, 7)
        .into_iter()
        .filter(|x| (1.0..=20.0).contains(x))
        .take(N)
        .collect();
    let (mu, sigma) = truncated_lognormal(&x, 1.0, 20.0).unwrap();
    near("mu", mu, 0.5, 0.1);
    near("sigma", sigma, 1.0, 0.1);
}

#[test]
fn lognormal_arrivals_pick_lognormal() {
    let fit = fit_arrivals(draws(LogNormal::new(-2.0, 1.5).unwrap(), N, 8), "requests").unwrap();
    let Arrival::Lognormal { mu, sigma } = fit.best else {
        panic!("picked {:?}", fit.best)
    };
    near("mu", mu, -2.0, 0.1);
    near("sigma", sigma, 1.5, 0.1);
}
