//! P99 latency sensitivity: how many milliseconds each output token adds
//! to a stage's P99 E2E, by a robust regression (Theil–Sen over the P99s
//! of equal-count bins of output length). The raw slope is the server's
//! per-token cost (its TPOT); the signal is its growth under load, the
//! excess over the slope at the lowest probed rate.

/// Requests per bin at least: a P99 of fewer is the bin's maximum.
const MIN_PER_BIN: usize = 20;
/// Bins at most.
const MAX_BINS: usize = 10;

/// One point of the P99-against-tokens curve: a bin's median output length
/// and its P99 E2E.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TokenBin {
    pub tokens: f64,
    pub p99_ms: f64,
}

/// The stage's bins and the fitted line through their P99s.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenSlope {
    pub bins: Vec<TokenBin>,
    /// ms per output token.
    pub ms_per_token: f64,
    /// ms at zero tokens (the median intercept).
    pub intercept_ms: f64,
}

/// The slope of P99 E2E against output tokens over `(output_tokens,
/// e2e_ms)` requests. `None` with fewer than two bins' worth of requests or
/// a single output length (no slope to read).
pub fn p99_token_slope(requests: &[(u64, f64)]) -> Option<TokenSlope> {
    let mut sorted: Vec<(u64, f64)> = requests
        .iter()
        .copied()
        .filter(|(_, ms)| ms.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let bins = (sorted.len() / MIN_PER_BIN).min(MAX_BINS);
    if bins < 2 {
        return None;
    }
    let mut out = Vec::with_capacity(bins);
    for b in 0..bins {
        let part = &sorted[b * sorted.len() / bins..(b + 1) * sorted.len() / bins];
        let tokens: Vec<f64> = part.iter().map(|r| r.0 as f64).collect();
        let mut ms: Vec<f64> = part.iter().map(|r| r.1).collect();
        ms.sort_by(f64::total_cmp);
        out.push(TokenBin {
            tokens: median(&tokens),
            p99_ms: nearest_rank(&ms, 0.99),
        });
    }
    let points: Vec<(f64, f64)> = out.iter().map(|b| (b.tokens, b.p99_ms)).collect();
    let (slope, intercept) = theil_sen(&points)?;
    Some(TokenSlope {
        bins: out,
        ms_per_token: slope,
        intercept_ms: intercept,
    })
}

/// Theil–Sen: the median of the slopes of every pair with distinct `x`,
/// and the median of `y − slope·x`. Up to 29% of the points may be wild
/// without moving it. `None` when no two points differ in `x`.
pub fn theil_sen(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let mut slopes = Vec::new();
    for (i, a) in points.iter().enumerate() {
        for b in &points[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0));
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let slope = median(&slopes);
    let rests: Vec<f64> = points.iter().map(|p| p.1 - slope * p.0).collect();
    Some((slope, median(&rests)))
}

/// The median (the mean of the middle two for an even count); `values`
/// need not be sorted. 0 when empty.
pub(crate) fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

/// The nearest-rank quantile of sorted values (HDR's and the summary's
/// rule: the smallest value with at least `q` of the values at or below).
pub(crate) fn nearest_rank(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    #[test]
    fn theil_sen_ignores_a_wild_quarter() {
        let mut points: Vec<(f64, f64)> = (0..20)
            .map(|i| (f64::from(i), 2.0 + 0.5 * f64::from(i)))
            .collect();
        for p in points.iter_mut().step_by(4) {
            p.1 += 1000.0;
        }
        let (slope, intercept) = theil_sen(&points).unwrap();
        assert!((slope - 0.5).abs() < 1e-9, "{slope}");
        assert!((intercept - 2.0).abs() < 1e-9, "{intercept}");
    }

    #[test]
    fn the_slope_of_a_mock_is_its_inter_token_latency() {
        // The queueing mock's E2E: 40 ms to the first token, 5 ms a token
        // after it, and up to 30 ms of queueing that does not depend on
        // the length. Bins of equal width carry the same offset from the
        // spread inside a bin and from the queueing, so the slope is 5 ms.
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let requests: Vec<(u64, f64)> = (0..4000)
            .map(|_| {
                let tokens: u64 = rng.random_range(16..=512);
                let queue: f64 = rng.random_range(0.0..30.0);
                (tokens, 40.0 + 5.0 * (tokens - 1) as f64 + queue)
            })
            .collect();
        let fit = p99_token_slope(&requests).unwrap();
        assert_eq!(fit.bins.len(), MAX_BINS);
        assert!(
            (fit.ms_per_token - 5.0).abs() < 0.15,
            "{}",
            fit.ms_per_token
        );
        // Every bin's P99 lies on the line (bins of equal width in tokens).
        for b in &fit.bins {
            let line = fit.intercept_ms + fit.ms_per_token * b.tokens;
            assert!((b.p99_ms - line).abs() < 15.0, "{b:?} against {line}");
        }
    }

    #[test]
    fn too_few_requests_or_one_length_give_no_slope() {
        assert_eq!(p99_token_slope(&[(10, 5.0); 39]), None);
        assert_eq!(p99_token_slope(&[(10, 5.0); 400]), None);
    }

    #[test]
    fn nearest_rank_and_median_by_hand() {
        let v: Vec<f64> = (1..=100).map(f64::from).collect();
        assert_eq!(nearest_rank(&v, 0.99), 99.0);
        assert_eq!(nearest_rank(&v, 1.0), 100.0);
        assert_eq!(nearest_rank(&v, 0.0), 1.0);
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
