//! Token lengths: a lognormal truncated to `[min, max]`, fitted by maximum
//! likelihood on the truncated density (not by clamping), with a
//! `max_tokens` cap as a point mass of its own; and the Spearman
//! correlation of prompt and answer lengths.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::dist::normal_cdf;
use super::optimize::nelder_mead;
use super::round::sig;

/// A length at or above the 90th percentile (a cap sits at the top) with at
/// least this share of the values is a cap.
pub(crate) const CAP_SHARE: f64 = 0.01;
/// Values the lognormal needs, besides the cap.
pub(crate) const MIN_LENGTHS: usize = 10;
/// Above this |Spearman correlation| the model samples correlated pairs.
pub(crate) const CORRELATED: f64 = 0.1;

/// Token lengths: ln(tokens) is normal (`mu`, `sigma`) truncated to
/// `[min, max]`; with a `cap`, that share is exactly `cap.tokens` and the
/// lognormal covers the rest.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenLengths {
    pub mu: f64,
    pub sigma: f64,
    pub min: u64,
    pub max: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<Cap>,
}

/// A `max_tokens` cap: `share` of the values are exactly `tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cap {
    pub tokens: u64,
    pub share: f64,
}

/// `what` names the lengths in the warnings (`output_tokens`); values of 0
/// are left out (a lognormal has none) and counted in a warning.
pub(crate) fn fit_lengths(
    values: &[u64],
    what: &str,
    warnings: &mut Vec<String>,
) -> Option<TokenLengths> {
    let zeros = values.iter().filter(|v| **v == 0).count();
    if zeros > 0 {
        warnings.push(format!(
            "{what}: {zeros} values of 0 tokens are left out of the fit"
        ));
    }
    let mut sorted: Vec<u64> = values.iter().copied().filter(|v| *v > 0).collect();
    sorted.sort_unstable();
    let n = sorted.len();
    if n == 0 {
        return None;
    }
    let p90 = sorted[((0.9 * n as f64).ceil() as usize).clamp(1, n) - 1];
    let mut counts: HashMap<u64, usize> = HashMap::new();
    for v in &sorted {
        *counts.entry(*v).or_default() += 1;
    }
    // The most frequent length at or above the 90th percentile, when it
    // holds the share of a cap.
    let cap = counts
        .iter()
        .filter(|(v, _)| **v >= p90)
        .max_by_key(|(v, c)| (**c, **v))
        .filter(|(_, c)| **c as f64 >= CAP_SHARE * n as f64)
        .map(|(v, c)| Cap {
            tokens: *v,
            share: sig(*c as f64 / n as f64),
        });
    let rest: Vec<f64> = sorted
        .iter()
        .filter(|v| cap.is_none_or(|c| **v != c.tokens))
        .map(|v| *v as f64)
        .collect();
    let distinct = counts.len() - usize::from(cap.is_some());
    if rest.len() < MIN_LENGTHS || distinct < 2 {
        warnings.push(format!(
            "{what}: {} values besides a cap, {distinct} distinct: too few to fit a lognormal",
            rest.len()
        ));
        return None;
    }
    if let Some(c) = cap {
        warnings.push(format!(
            "{what}: {}% of the values are exactly {} tokens (a max_tokens cap): a point mass \
             of its own, the lognormal fitted to the rest",
            sig(c.share * 100.0),
            c.tokens
        ));
    }
    let (min, max) = (1, sorted[n - 1]);
    let (mu, sigma) = truncated_lognormal(&rest, min as f64, max as f64)?;
    Some(TokenLengths {
        mu: sig(mu),
        sigma: sig(sigma),
        min,
        max,
        cap,
    })
}

/// (mu, sigma) maximizing the likelihood of `x` under a lognormal
/// truncated to `[lo, hi]`: Nelder–Mead on (mu, ln sigma), from the
/// untruncated fit. The likelihood needs only n, Σ ln x and Σ (ln x)².
pub(crate) fn truncated_lognormal(x: &[f64], lo: f64, hi: f64) -> Option<(f64, f64)> {
    let n = x.len() as f64;
    let s1: f64 = x.iter().map(|v| v.ln()).sum();
    let s2: f64 = x.iter().map(|v| v.ln().powi(2)).sum();
    let (ln_lo, ln_hi) = (lo.ln(), hi.ln());
    let mean = s1 / n;
    let sd = (s2 / n - mean * mean).max(0.0).sqrt();
    if sd.is_nan() || sd <= 0.0 {
        return None;
    }
    let nll = |[mu, ln_sigma]: [f64; 2]| {
        let sigma = ln_sigma.exp();
        let mass = normal_mass((ln_lo - mu) / sigma, (ln_hi - mu) / sigma);
        n * ln_sigma + (s2 - 2.0 * mu * s1 + n * mu * mu) / (2.0 * sigma * sigma) + n * mass.ln()
    };
    let [mu, ln_sigma] = nelder_mead(nll, [mean, sd.ln()], 0.1);
    let sigma = ln_sigma.exp();
    (mu.is_finite() && sigma.is_finite() && sigma > 0.0).then_some((mu, sigma))
}

/// Φ(b) - Φ(a), from the side where it does not cancel.
fn normal_mass(a: f64, b: f64) -> f64 {
    if a > 0.0 {
        normal_cdf(-a) - normal_cdf(-b)
    } else {
        normal_cdf(b) - normal_cdf(a)
    }
}

/// The Spearman rank correlation of the pairs (ties take their mean rank);
/// `None` under three pairs or when one side is constant.
pub(crate) fn spearman(pairs: &[(u64, u64)]) -> Option<f64> {
    if pairs.len() < 3 {
        return None;
    }
    let a = ranks(pairs.iter().map(|p| p.0));
    let b = ranks(pairs.iter().map(|p| p.1));
    let n = a.len() as f64;
    let (ma, mb) = (a.iter().sum::<f64>() / n, b.iter().sum::<f64>() / n);
    let (mut cov, mut va, mut vb) = (0.0, 0.0, 0.0);
    for (x, y) in a.iter().zip(&b) {
        cov += (x - ma) * (y - mb);
        va += (x - ma).powi(2);
        vb += (y - mb).powi(2);
    }
    (va > 0.0 && vb > 0.0).then(|| cov / (va * vb).sqrt())
}

fn ranks(values: impl Iterator<Item = u64>) -> Vec<f64> {
    let values: Vec<u64> = values.collect();
    let mut order: Vec<usize> = (0..values.len()).collect();
    order.sort_unstable_by_key(|i| values[*i]);
    let mut ranks = vec![0.0; values.len()];
    let mut start = 0;
    while start < order.len() {
        let mut end = start;
        while end + 1 < order.len() && values[order[end + 1]] == values[order[start]] {
            end += 1;
        }
        let mean = (start + end) as f64 / 2.0 + 1.0;
        for i in &order[start..=end] {
            ranks[*i] = mean;
        }
        start = end + 1;
    }
    ranks
}

/// The Gaussian copula's correlation for a Spearman correlation:
/// ρ = 2 sin(π ρ_s / 6).
pub(crate) fn copula_rho(spearman: f64) -> f64 {
    2.0 * (std::f64::consts::PI * spearman / 6.0).sin()
}
