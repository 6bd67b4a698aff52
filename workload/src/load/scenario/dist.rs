//! A number drawn per use: fixed, a uniform range (`2s-8s`, `2-5`), a
//! lognormal by its median, or the quantiles a fitted model writes.

use rand::Rng;
use rand_distr::{Distribution, StandardNormal};
use sluice_filters::parse_duration;
use statrs::function::erf::{erfc, erfc_inv};

use super::raw::{RawScalar, RawValue};

#[derive(Clone, Debug, PartialEq)]
pub enum Dist {
    Fixed(f64),
    /// Uniform on [lo, hi].
    Uniform {
        lo: f64,
        hi: f64,
    },
    /// ln x is normal (mu, sigma); the median is e^mu.
    Lognormal {
        mu: f64,
        sigma: f64,
    },
    /// Linear between the values at [`QUANTILE_PROBS`] (a model's
    /// `turns` and empirical think time).
    Quantiles([f64; 8]),
    /// A model's token lengths: with probability `cap_share` the cap (a
    /// point mass), else a lognormal truncated to [min, max].
    Lengths {
        mu: f64,
        sigma: f64,
        min: f64,
        max: f64,
        cap: f64,
        cap_share: f64,
    },
}

/// Draws of a truncated lognormal before it falls back to the nearest end.
const MAX_REJECTIONS: usize = 64;

/// The cumulative probabilities of [`Dist::Quantiles`]' values: min, p10,
/// p25, p50, p75, p90, p99, max.
pub const QUANTILE_PROBS: [f64; 8] = [0.0, 0.10, 0.25, 0.50, 0.75, 0.90, 0.99, 1.0];

impl Dist {
    pub fn sample(&self, rng: &mut impl Rng) -> f64 {
        match self {
            Dist::Fixed(v) => *v,
            Dist::Uniform { lo, hi } => lo + (hi - lo) * rng.random::<f64>(),
            Dist::Lognormal { mu, sigma } => {
                let z: f64 = StandardNormal.sample(rng);
                (mu + sigma * z).exp()
            }
            Dist::Quantiles(_) => self.quantile(rng.random::<f64>()),
            Dist::Lengths {
                mu,
                sigma,
                min,
                max,
                cap,
                cap_share,
            } => {
                if rng.random::<f64>() < *cap_share {
                    return *cap;
                }
                let mut x = mu.exp();
                for _ in 0..MAX_REJECTIONS {
                    let z: f64 = StandardNormal.sample(rng);
                    x = (mu + sigma * z).exp();
                    if (*min..=*max).contains(&x) {
                        break;
                    }
                }
                x.clamp(*min, *max)
            }
        }
    }

    /// The value at cumulative probability `u` in [0, 1] (the inverse
    /// CDF): the mapping a copula needs. A [`Dist::Lengths`] cap is the
    /// top `cap_share` of the probability, as it sits at the top.
    pub fn quantile(&self, u: f64) -> f64 {
        let u = u.clamp(0.0, 1.0);
        match self {
            Dist::Fixed(v) => *v,
            Dist::Uniform { lo, hi } => lo + (hi - lo) * u,
            Dist::Lognormal { mu, sigma } => (mu + sigma * normal_quantile(u)).exp(),
            Dist::Quantiles(q) => {
                // The segment [p_i, p_i+1) that holds u; the last for u ~ 1.
                let i = QUANTILE_PROBS[1..]
                    .iter()
                    .position(|p| u < *p)
                    .unwrap_or(QUANTILE_PROBS.len() - 2);
                let (p0, p1) = (QUANTILE_PROBS[i], QUANTILE_PROBS[i + 1]);
                q[i] + (q[i + 1] - q[i]) * (u - p0) / (p1 - p0)
            }
            Dist::Lengths {
                mu,
                sigma,
                min,
                max,
                cap,
                cap_share,
            } => {
                if u >= 1.0 - cap_share {
                    return *cap;
                }
                let u = u / (1.0 - cap_share);
                let at = |x: f64| normal_cdf((x.ln() - mu) / sigma);
                let (a, b) = (at(*min), at(*max));
                (mu + sigma * normal_quantile(a + u * (b - a)))
                    .exp()
                    .clamp(*min, *max)
            }
        }
    }
}

/// Φ(z), the standard normal CDF.
fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// Φ⁻¹(u); ±∞ at 0 and 1.
fn normal_quantile(u: f64) -> f64 {
    -std::f64::consts::SQRT_2 * erfc_inv(2.0 * u)
}

/// One draw of two values from their marginals `a` and `b` joined by a
/// Gaussian copula of normal correlation `rho` (in [-1, 1]): two standard
/// normals with that correlation, each mapped through Φ and its marginal's
/// [`Dist::quantile`]. Their Spearman correlation is (6/π) asin(rho/2).
pub(crate) fn correlated_pair(a: &Dist, b: &Dist, rho: f64, rng: &mut impl Rng) -> (f64, f64) {
    let rho = rho.clamp(-1.0, 1.0);
    let z1: f64 = StandardNormal.sample(rng);
    let e: f64 = StandardNormal.sample(rng);
    let z2 = rho * z1 + (1.0 - rho * rho).sqrt() * e;
    (a.quantile(normal_cdf(z1)), b.quantile(normal_cdf(z2)))
}

/// What a value is written in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `250ms`, read as seconds.
    Duration,
    /// A plain number (turns, tokens), at least 1.
    Count,
}

fn scalar(text: &str, kind: Kind) -> Result<f64, String> {
    match kind {
        Kind::Duration => parse_duration(text).map(|d| d.as_secs_f64()),
        Kind::Count => match text.trim().parse::<f64>() {
            Ok(v) if v.is_finite() && v >= 1.0 => Ok(v),
            _ => Err(format!("`{text}` is not a number >= 1")),
        },
    }
}

fn number(v: f64, kind: Kind) -> Result<f64, String> {
    match kind {
        Kind::Duration => Err(format!("`{v}` has no unit (use us, ms, s, m or h)")),
        Kind::Count if v.is_finite() && v >= 1.0 => Ok(v),
        Kind::Count => Err(format!("`{v}` is not a number >= 1")),
    }
}

/// `x`, `lo-hi` or `{lognormal: {median, sigma}}`.
pub(crate) fn read(raw: &RawValue, kind: Kind) -> Result<Dist, String> {
    match raw {
        RawValue::Number(v) => number(*v, kind).map(Dist::Fixed),
        RawValue::Text(text) => match text.split_once('-') {
            Some((lo, hi)) => {
                let (lo, hi) = (scalar(lo, kind)?, scalar(hi, kind)?);
                if lo > hi {
                    return Err(format!(
                        "`{text}`: the range's low end is above its high end"
                    ));
                }
                Ok(Dist::Uniform { lo, hi })
            }
            None => scalar(text, kind).map(Dist::Fixed),
        },
        RawValue::Lognormal { lognormal } => {
            let median = match &lognormal.median {
                RawScalar::Number(v) => number(*v, kind),
                RawScalar::Text(t) => scalar(t, kind),
            }
            .map_err(|e| format!("lognormal.median: {e}"))?;
            if median.is_nan() || median <= 0.0 {
                return Err("lognormal.median: must be > 0".to_owned());
            }
            let sigma = lognormal.sigma;
            if !(sigma.is_finite() && sigma > 0.0) {
                return Err(format!(
                    "lognormal.sigma: must be a finite number > 0, found {sigma}"
                ));
            }
            Ok(Dist::Lognormal {
                mu: median.ln(),
                sigma,
            })
        }
    }
}
