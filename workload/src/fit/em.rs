//! A mixture of two Weibulls by expectation–maximisation: the E step takes
//! each gap's responsibilities, the M step a weighted maximum-likelihood
//! Weibull per component (a Newton step of the shape from the last one,
//! then its scale in closed form). Several seeded starts run on a
//! subsample; the best goes on over a ten times larger one and then over
//! the whole sample, each until the log-likelihood changes by less than
//! [`TOLERANCE`] (relative).

use rand::rngs::SmallRng;
use rand::seq::index::sample as pick;
use rand::{Rng, SeedableRng};
use sluice_filters::WeibullComponent;

use super::dist::LnWeibull;
use super::gof::Sample;
use super::single::weibull_steps;

/// Stop when |ΔL| / |L| falls below this.
pub(crate) const TOLERANCE: f64 = 1e-7;
/// Seeded starts tried on the subsample.
const STARTS: usize = 6;
/// Values of the subsample the starts run on.
const SUBSAMPLE: usize = 10_000;
const START_ROUNDS: usize = 25;
const MAX_ROUNDS: usize = 300;
/// Newton steps of each component's shape per M step: one is enough from
/// the last round's shape, and each costs a pass over the sample.
const M_STEPS: usize = 1;
/// The starts' seed: a fit is reproducible.
const SEED: u64 = 0x05ee_df17;

/// The fitted components (heaviest first) and the log-likelihood, or
/// `None` under 10 values or when every start degenerates.
pub(crate) fn weibull_mixture(sample: &Sample) -> Option<(Vec<WeibullComponent>, f64)> {
    if sample.len() < 10 {
        return None;
    }
    let mut rng = SmallRng::seed_from_u64(SEED);
    let sub: Vec<f64> = if sample.len() > SUBSAMPLE {
        pick(&mut rng, sample.len(), SUBSAMPLE)
            .into_iter()
            .map(|i| sample.ln_x[i])
            .collect()
    } else {
        sample.ln_x.clone()
    };
    let mut sorted = sub.clone();
    sorted.sort_unstable_by(f64::total_cmp);
    let mut best: Option<(Mixture, f64)> = None;
    for start in 0..STARTS {
        // Split the sorted subsample at a seeded quantile (the first start at
        // the median) and fit a Weibull to each side.
        let q = if start == 0 {
            0.5
        } else {
            rng.random_range(0.15..0.85)
        };
        let cut = ((sorted.len() as f64 * q) as usize).clamp(2, sorted.len() - 2);
        let (Some(low), Some(high)) = (
            weibull_steps(&sorted[..cut], None, 1.0, 50),
            weibull_steps(&sorted[cut..], None, 1.0, 50),
        ) else {
            continue;
        };
        let init = Mixture {
            weight: 1.0 - q,
            a: high,
            b: low,
        };
        if let Some((fit, loglik)) = run(&sub, init, START_ROUNDS) {
            if best.as_ref().is_none_or(|(_, l)| loglik > *l) {
                best = Some((fit, loglik));
            }
        }
    }
    let (mut init, _) = best?;
    // Most of the way on a larger subsample, so that few rounds are left
    // for the whole.
    if sample.len() > 10 * SUBSAMPLE {
        let middle: Vec<f64> = pick(&mut rng, sample.len(), 10 * SUBSAMPLE)
            .into_iter()
            .map(|i| sample.ln_x[i])
            .collect();
        if let Some((fit, _)) = run(&middle, init, MAX_ROUNDS) {
            init = fit;
        }
    }
    let (fit, loglik) = run(&sample.ln_x, init, MAX_ROUNDS)?;
    let mut components = vec![
        WeibullComponent {
            weight: fit.weight,
            shape: fit.a.0,
            scale: fit.a.1,
        },
        WeibullComponent {
            weight: 1.0 - fit.weight,
            shape: fit.b.0,
            scale: fit.b.1,
        },
    ];
    components.sort_by(|x, y| y.weight.total_cmp(&x.weight));
    Some((components, loglik))
}

/// Weight of `a`, and (shape, scale) of each component.
#[derive(Clone, Copy, Debug)]
struct Mixture {
    weight: f64,
    a: (f64, f64),
    b: (f64, f64),
}

/// EM rounds from `m` until the tolerance or `rounds`; the fit and its
/// log-likelihood (of the last E step).
fn run(ln_x: &[f64], mut m: Mixture, rounds: usize) -> Option<(Mixture, f64)> {
    let mut resp = vec![0.0; ln_x.len()];
    let mut last = f64::NEG_INFINITY;
    for _ in 0..rounds {
        let loglik = expect(ln_x, &m, &mut resp);
        if !loglik.is_finite() {
            return None;
        }
        let converged = ((loglik - last) / loglik).abs() < TOLERANCE;
        last = loglik;
        if converged {
            break;
        }
        let weight = resp.iter().sum::<f64>() / ln_x.len() as f64;
        if !(weight > 1e-9 && weight < 1.0 - 1e-9) {
            return None;
        }
        let a = weibull_steps(ln_x, Some(&resp), m.a.0, M_STEPS)?;
        resp.iter_mut().for_each(|r| *r = 1.0 - *r);
        let b = weibull_steps(ln_x, Some(&resp), m.b.0, M_STEPS)?;
        m = Mixture { weight, a, b };
    }
    Some((m, last))
}

/// Fills `resp` with each value's responsibility of component `a`; returns
/// the log-likelihood.
fn expect(ln_x: &[f64], m: &Mixture, resp: &mut [f64]) -> f64 {
    let a = LnWeibull::new(m.weight, m.a.0, m.a.1);
    let b = LnWeibull::new(1.0 - m.weight, m.b.0, m.b.1);
    let mut loglik = 0.0;
    for (l, r) in ln_x.iter().zip(resp.iter_mut()) {
        let (la, lb) = (a.at(*l), b.at(*l));
        // One exp: the smaller term relative to the larger.
        let (top, e) = if la >= lb {
            (la, (lb - la).exp())
        } else {
            (lb, (la - lb).exp())
        };
        loglik += top + e.ln_1p();
        *r = if la >= lb {
            1.0 / (1.0 + e)
        } else {
            e / (1.0 + e)
        };
    }
    loglik
}
