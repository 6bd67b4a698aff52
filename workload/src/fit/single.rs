//! Maximum-likelihood fits of the one-component kinds: exponential and
//! lognormal in closed form, gamma and Weibull by Newton's method.

use statrs::function::gamma::digamma;

use super::dist::trigamma;
use super::gof::Sample;

/// Newton steps before a fit gives up on converging further.
const MAX_NEWTON: usize = 100;
const NEWTON_TOLERANCE: f64 = 1e-10;

/// The rate, per second.
pub(crate) fn exponential(sample: &Sample) -> f64 {
    1.0 / sample.mean()
}

/// (mu, sigma) of ln x.
pub(crate) fn lognormal(sample: &Sample) -> (f64, f64) {
    let mu = sample.mean_ln();
    let var = sample.ln_x.iter().map(|l| (l - mu).powi(2)).sum::<f64>() / sample.len() as f64;
    (mu, var.sqrt())
}

/// (shape, scale) from the sufficient statistics: the mean and the mean of
/// ln x.
pub(crate) fn gamma(sample: &Sample) -> Option<(f64, f64)> {
    gamma_from(sample.mean(), sample.mean_ln())
}

/// Solves ln k - ψ(k) = ln(mean) - mean(ln x) for the shape k (Newton in
/// k, from Minka's closed-form start); the scale is mean / k. `None` when
/// every value is the same (s = 0: the shape is infinite).
pub(crate) fn gamma_from(mean: f64, mean_ln: f64) -> Option<(f64, f64)> {
    let s = mean.ln() - mean_ln;
    if !s.is_finite() || s <= 1e-12 {
        return None;
    }
    let mut k = (3.0 - s + ((s - 3.0).powi(2) + 24.0 * s).sqrt()) / (12.0 * s);
    for _ in 0..MAX_NEWTON {
        let f = k.ln() - digamma(k) - s;
        let df = 1.0 / k - trigamma(k);
        let mut next = k - f / df;
        if next.is_nan() || next <= 0.0 {
            next = k / 2.0;
        }
        let done = ((next - k) / k).abs() < NEWTON_TOLERANCE;
        k = next;
        if done {
            break;
        }
    }
    (k.is_finite() && k > 0.0).then(|| (k, mean / k))
}

/// (shape, scale) of the Weibull maximizing Σ w_i ln f(x_i): with
/// `weights` `None`, every w_i = 1. `start` is a first guess of the shape.
pub(crate) fn weibull(sample: &Sample, weights: Option<&[f64]>, start: f64) -> Option<(f64, f64)> {
    weibull_steps(&sample.ln_x, weights, start, MAX_NEWTON)
}

/// Newton on g(k) = Σ w e^{k u} u / Σ w e^{k u} - 1/k = 0, u = ln x - c
/// with c the weighted mean of ln x (g is increasing in k); the powers are
/// taken relative to the largest u so that none overflows. At most `steps`
/// steps: the EM takes a few per round, from the last round's shape.
pub(crate) fn weibull_steps(
    ln_x: &[f64],
    weights: Option<&[f64]>,
    start: f64,
    steps: usize,
) -> Option<(f64, f64)> {
    let w = |i: usize| weights.map_or(1.0, |w| w[i]);
    let total: f64 = (0..ln_x.len()).map(w).sum();
    if total.is_nan() || total <= 0.0 {
        return None;
    }
    let c = ln_x.iter().enumerate().map(|(i, l)| w(i) * l).sum::<f64>() / total;
    let top = ln_x.iter().fold(f64::NEG_INFINITY, |m, l| m.max(*l)) - c;
    let sums = |k: f64| {
        let (mut a0, mut a1, mut a2) = (0.0, 0.0, 0.0);
        for (i, l) in ln_x.iter().enumerate() {
            let u = l - c;
            let e = w(i) * (k * (u - top)).exp();
            a0 += e;
            a1 += e * u;
            a2 += e * u * u;
        }
        (a0, a1 / a0, a2 / a0)
    };
    let mut k = start.max(1e-3);
    for _ in 0..steps {
        let (_, m1, m2) = sums(k);
        let g = m1 - 1.0 / k;
        let dg = m2 - m1 * m1 + 1.0 / (k * k);
        let mut next = k - g / dg;
        if !next.is_finite() || next <= 0.0 {
            next = k / 2.0;
        }
        let done = ((next - k) / k).abs() < NEWTON_TOLERANCE;
        k = next;
        if done {
            break;
        }
    }
    let (a0, _, _) = sums(k);
    // λ^k = Σ w x^k / Σ w, with x^k = e^{k c} e^{k top} e^{k (u - top)}.
    let ln_scale = c + top + (a0 / total).ln() / k;
    let scale = ln_scale.exp();
    (k.is_finite() && k > 0.0 && scale.is_finite() && scale > 0.0).then_some((k, scale))
}
