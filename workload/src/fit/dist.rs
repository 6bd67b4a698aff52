//! The densities and distribution functions of the arrival kinds, with the
//! special functions they need beyond statrs (the trigamma function).

use sluice_filters::Arrival;
use statrs::function::erf::erfc;
use statrs::function::gamma::{checked_gamma_lr, ln_gamma};

const LN_SQRT_2PI: f64 = 0.918_938_533_204_672_8;

/// Σ ln f(x_i) over values x > 0, with `ln_x` their logarithms (the fits
/// keep them, to pay for each once); a density's constants are taken once,
/// not per value.
pub(crate) fn log_likelihood(a: &Arrival, x: &[f64], ln_x: &[f64]) -> f64 {
    let n = x.len() as f64;
    match a {
        Arrival::Exponential { rate } => n * rate.ln() - rate * x.iter().sum::<f64>(),
        Arrival::Gamma { shape, scale } => {
            let c = ln_gamma(*shape) + shape * scale.ln();
            let sum: f64 = x
                .iter()
                .zip(ln_x)
                .map(|(x, l)| (shape - 1.0) * l - x / scale)
                .sum();
            sum - n * c
        }
        Arrival::Weibull { shape, scale } => {
            let w = LnWeibull::new(1.0, *shape, *scale);
            ln_x.iter().map(|l| w.at(*l)).sum()
        }
        Arrival::Lognormal { mu, sigma } => {
            let c = sigma.ln() + LN_SQRT_2PI;
            ln_x.iter()
                .map(|l| {
                    let z = (l - mu) / sigma;
                    -l - c - 0.5 * z * z
                })
                .sum()
        }
        Arrival::WeibullMixture { components } => {
            let parts: Vec<LnWeibull> = components
                .iter()
                .map(|c| LnWeibull::new(c.weight, c.shape, c.scale))
                .collect();
            ln_x.iter()
                .map(|l| log_sum_exp(parts.iter().map(|p| p.at(*l))))
                .sum()
        }
    }
}

/// ln(w f(x)) of a Weibull with weight w, as a function of ln x, its
/// constants taken once.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LnWeibull {
    c: f64,
    shape: f64,
    ln_scale: f64,
}

impl LnWeibull {
    pub(crate) fn new(weight: f64, shape: f64, scale: f64) -> LnWeibull {
        LnWeibull {
            c: weight.ln() + shape.ln() - scale.ln(),
            shape,
            ln_scale: scale.ln(),
        }
    }

    #[inline]
    pub(crate) fn at(&self, ln_x: f64) -> f64 {
        let z = ln_x - self.ln_scale;
        self.c + (self.shape - 1.0) * z - (self.shape * z).exp()
    }
}

/// P(X <= x).
pub(crate) fn cdf(a: &Arrival, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    match a {
        Arrival::Exponential { rate } => -(-rate * x).exp_m1(),
        Arrival::Gamma { shape, scale } => gamma_cdf(*shape, *scale, x),
        Arrival::Weibull { shape, scale } => weibull_cdf(*shape, *scale, x),
        Arrival::Lognormal { mu, sigma } => normal_cdf((x.ln() - mu) / sigma),
        Arrival::WeibullMixture { components } => components
            .iter()
            .map(|c| c.weight * weibull_cdf(c.shape, c.scale, x))
            .sum(),
    }
}

fn gamma_cdf(shape: f64, scale: f64, x: f64) -> f64 {
    match x / scale {
        z if z.is_finite() && z > 0.0 => checked_gamma_lr(shape, z).unwrap_or(f64::NAN),
        z if z > 0.0 => 1.0,
        _ => 0.0,
    }
}

fn weibull_cdf(shape: f64, scale: f64, x: f64) -> f64 {
    -(-(x / scale).powf(shape)).exp_m1()
}

/// Φ(z), the standard normal CDF, accurate in both tails.
pub(crate) fn normal_cdf(z: f64) -> f64 {
    0.5 * erfc(-z / std::f64::consts::SQRT_2)
}

/// ln Σ exp(t), without overflow.
pub(crate) fn log_sum_exp(terms: impl Iterator<Item = f64> + Clone) -> f64 {
    let max = terms.clone().fold(f64::NEG_INFINITY, f64::max);
    if !max.is_finite() {
        return max;
    }
    max + terms.map(|t| (t - max).exp()).sum::<f64>().ln()
}

/// ψ'(x), the trigamma function, for x > 0: the recurrence ψ'(x) = ψ'(x+1)
/// + 1/x² up to x >= 10, then the asymptotic series (error below 1e-12).
pub(crate) fn trigamma(mut x: f64) -> f64 {
    let mut sum = 0.0;
    while x < 10.0 {
        sum += 1.0 / (x * x);
        x += 1.0;
    }
    let inv = 1.0 / x;
    let inv2 = inv * inv;
    sum + inv
        + inv2 / 2.0
        + inv * inv2 * (1.0 / 6.0 - inv2 * (1.0 / 30.0 - inv2 * (1.0 / 42.0 - inv2 * (1.0 / 30.0))))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;
    use sluice_filters::WeibullComponent;

    #[test]
    fn trigamma_matches_known_values() {
        // ψ'(1) = π²/6, ψ'(1/2) = π²/2.
        let pi2 = std::f64::consts::PI.powi(2);
        assert!((trigamma(1.0) - pi2 / 6.0).abs() < 1e-10);
        assert!((trigamma(0.5) - pi2 / 2.0).abs() < 1e-10);
        assert!((trigamma(100.0) - 0.010_050_166_663_333_571).abs() < 1e-12);
    }

    #[test]
    fn densities_integrate_to_their_cdf() {
        let kinds = [
            Arrival::Exponential { rate: 2.0 },
            Arrival::Gamma {
                shape: 0.5,
                scale: 1.5,
            },
            Arrival::Weibull {
                shape: 0.7,
                scale: 0.4,
            },
            Arrival::Lognormal {
                mu: -0.5,
                sigma: 0.8,
            },
            Arrival::WeibullMixture {
                components: vec![
                    WeibullComponent {
                        weight: 0.6,
                        shape: 0.8,
                        scale: 1.0,
                    },
                    WeibullComponent {
                        weight: 0.4,
                        shape: 2.5,
                        scale: 0.05,
                    },
                ],
            },
        ];
        for a in &kinds {
            // Midpoint rule in ln x from 0.2 to 3: ∫ f(x) dx = ∫ f(e^u) e^u du.
            let (lo, hi, steps) = (0.2f64.ln(), 3f64.ln(), 20_000);
            let h = (hi - lo) / steps as f64;
            let integral: f64 = (0..steps)
                .map(|i| {
                    let u = lo + (i as f64 + 0.5) * h;
                    (log_likelihood(a, &[u.exp()], &[u]) + u).exp() * h
                })
                .sum();
            let expected = cdf(a, 3.0) - cdf(a, 0.2);
            assert!(
                (integral - expected).abs() < 1e-6,
                "{a:?}: {integral} vs {expected}"
            );
        }
    }
}
