//! Goodness of fit: the log-likelihood, AIC and BIC, the Kolmogorov–Smirnov
//! statistic, and the KL divergence of the empirical histogram from the
//! model's, as defined in [`KL_DEFINITION`].

use sluice_filters::Arrival;

use super::dist::{cdf, log_likelihood};

/// Bins of the KL divergence.
pub(crate) const KL_BINS: usize = 50;
/// Added to every bin's empirical count.
pub(crate) const KL_PSEUDOCOUNT: f64 = 0.5;

/// What `kl` means, for `--help` and the docs.
pub const KL_DEFINITION: &str = "KL = sum_i p_i ln(p_i / q_i) over 50 bins with log-spaced edges \
from the 0.1st to the 99.9th percentile of the inter-arrival times; p_i = (count_i + 0.5) / \
(n_in + 25), the empirical share with a pseudocount of 0.5 per bin (n_in: the samples inside the \
range); q_i = (F(e_{i+1}) - F(e_i)) / (F(e_50) - F(e_0)), the model's mass of the bin from its CDF F, \
renormalised to the range (floored at 1e-12). In nats; 0 for a perfect fit.";

/// A sample of positive values, with what every fit needs of it.
#[derive(Debug)]
pub(crate) struct Sample {
    pub(crate) x: Vec<f64>,
    pub(crate) ln_x: Vec<f64>,
    /// `x` sorted ascending.
    pub(crate) sorted: Vec<f64>,
}

impl Sample {
    /// Every value must be finite and > 0.
    pub(crate) fn new(x: Vec<f64>) -> Sample {
        let ln_x = x.iter().map(|v| v.ln()).collect();
        let mut sorted = x.clone();
        sorted.sort_unstable_by(f64::total_cmp);
        Sample { x, ln_x, sorted }
    }

    pub(crate) fn len(&self) -> usize {
        self.x.len()
    }

    pub(crate) fn mean(&self) -> f64 {
        self.x.iter().sum::<f64>() / self.len() as f64
    }

    pub(crate) fn mean_ln(&self) -> f64 {
        self.ln_x.iter().sum::<f64>() / self.len() as f64
    }

    /// The nearest-rank quantile.
    pub(crate) fn quantile(&self, q: f64) -> f64 {
        let n = self.sorted.len();
        let rank = ((q * n as f64).ceil() as usize).clamp(1, n);
        self.sorted[rank - 1]
    }
}

/// The figures of one candidate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Fitness {
    pub(crate) loglik: f64,
    pub(crate) aic: f64,
    pub(crate) bic: f64,
    pub(crate) ks: f64,
    pub(crate) kl: Option<f64>,
}

pub(crate) fn fitness(a: &Arrival, sample: &Sample) -> Fitness {
    let loglik = log_likelihood(a, &sample.x, &sample.ln_x);
    let k = a.parameters() as f64;
    let n = sample.len() as f64;
    Fitness {
        loglik,
        aic: 2.0 * k - 2.0 * loglik,
        bic: k * n.ln() - 2.0 * loglik,
        ks: ks(a, &sample.sorted),
        kl: kl(a, sample),
    }
}

/// sup |F_n(x) - F(x)| over the sorted sample.
pub(crate) fn ks(a: &Arrival, sorted: &[f64]) -> f64 {
    let n = sorted.len() as f64;
    sorted
        .iter()
        .enumerate()
        .map(|(i, x)| {
            let f = cdf(a, *x);
            ((i + 1) as f64 / n - f).max(f - i as f64 / n)
        })
        .fold(0.0, f64::max)
}

/// See [`KL_DEFINITION`]; `None` when the range is empty (every value the
/// same).
pub(crate) fn kl(a: &Arrival, sample: &Sample) -> Option<f64> {
    let (lo, hi) = (sample.quantile(0.001), sample.quantile(0.999));
    if hi <= lo {
        return None;
    }
    let (ln_lo, ln_hi) = (lo.ln(), hi.ln());
    let width = (ln_hi - ln_lo) / KL_BINS as f64;
    let edges: Vec<f64> = (0..=KL_BINS)
        .map(|i| match i {
            0 => lo,
            i if i == KL_BINS => hi,
            i => (ln_lo + width * i as f64).exp(),
        })
        .collect();
    let mut counts = [0u64; KL_BINS];
    let start = sample.sorted.partition_point(|x| *x < lo);
    for x in sample.sorted[start..].iter().take_while(|x| **x <= hi) {
        let bin = (((x.ln() - ln_lo) / width) as usize).min(KL_BINS - 1);
        counts[bin] += 1;
    }
    let inside: u64 = counts.iter().sum();
    let cdfs: Vec<f64> = edges.iter().map(|e| cdf(a, *e)).collect();
    let mass = cdfs[KL_BINS] - cdfs[0];
    if mass.is_nan() || mass <= 0.0 {
        return Some(f64::INFINITY);
    }
    let total = inside as f64 + KL_PSEUDOCOUNT * KL_BINS as f64;
    let kl = counts
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let p = (*c as f64 + KL_PSEUDOCOUNT) / total;
            let q = ((cdfs[i + 1] - cdfs[i]) / mass).max(1e-12);
            p * (p / q).ln()
        })
        .sum();
    Some(kl)
}
