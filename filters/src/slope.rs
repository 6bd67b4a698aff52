//! P99 latency sensitivity: how many milliseconds each output token adds
//! to the P99 E2E of a set of answers, by a robust regression (Theil–Sen
//! over the P99s of equal-count bins of output length). The raw slope is
//! the server's per-token cost (its TPOT); the signal is its growth under
//! load, the excess over the slope of the calm baseline (the readable slope
//! at the lowest rate seen). One definition for both halves: `sluice
//! capacity` reads it per stage, the proxy's adaptive shedding per window.

use rand::Rng;

/// The default bound on the P99 cost per output token over its calm
/// baseline, ms per token.
pub const DEFAULT_EXCESS_BOUND_MS: f64 = 0.8;

/// Requests per bin at least. Below 100 the nearest-rank P99 of a bin is
/// its largest value, so this makes it the worst of at least 20.
const MIN_PER_BIN: usize = 20;
/// Bins at least: fewer give a slope from one or two points' noise.
const MIN_BINS: usize = 3;
/// Answered model requests a stage needs for a slope.
pub const SLOPE_MIN_REQUESTS: usize = MIN_PER_BIN * MIN_BINS;
/// Bins at most.
const MAX_BINS: usize = 10;

/// One point of the P99-against-tokens curve: a bin's P99 E2E and the
/// output length of the request that had it.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
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
/// e2e_ms)` requests. `None` with fewer than three bins' worth of requests or
/// a single output length (no slope to read).
pub fn p99_token_slope(requests: &[(u64, f64)]) -> Option<TokenSlope> {
    let mut sorted: Vec<(u64, f64)> = requests
        .iter()
        .copied()
        .filter(|(_, ms)| ms.is_finite())
        .collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0).then(a.1.total_cmp(&b.1)));
    let bins = (sorted.len() / MIN_PER_BIN).min(MAX_BINS);
    if bins < MIN_BINS {
        return None;
    }
    let mut out = Vec::with_capacity(bins);
    for b in 0..bins {
        let mut part = sorted[b * sorted.len() / bins..(b + 1) * sorted.len() / bins].to_vec();
        part.sort_by(|a, b| a.1.total_cmp(&b.1));
        // The bin's P99 request: its E2E, at its own length. The bin's
        // median length would pair the P99 with a shorter answer than the
        // one that made it, and bias the slope by the bin's width.
        let rank = ((0.99 * part.len() as f64).ceil() as usize).clamp(1, part.len()) - 1;
        let (tokens, ms) = part[rank];
        out.push(TokenBin {
            tokens: tokens as f64,
            p99_ms: ms,
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

/// Bootstrap resamples behind a slope's interval.
const RESAMPLES: usize = 200;

/// The 90% percentile-bootstrap interval of [`p99_token_slope`] over
/// `requests`: the requests resampled with replacement (by `rng`: a seeded
/// one makes a result file reproducible), the slope read again each time. A stage's P99s
/// come from the worst of 20 requests a bin, so a few queueing outliers
/// can swing the slope by more than the signal's bound: the interval says
/// whether it can be read at all. `None` when fewer than half the
/// resamples give a slope.
pub fn slope_interval<R: Rng>(requests: &[(u64, f64)], rng: &mut R) -> Option<(f64, f64)> {
    if requests.is_empty() {
        return None;
    }
    let mut slopes = Vec::with_capacity(RESAMPLES);
    let mut sample = Vec::with_capacity(requests.len());
    for _ in 0..RESAMPLES {
        sample.clear();
        sample.extend((0..requests.len()).map(|_| requests[rng.random_range(0..requests.len())]));
        if let Some(fit) = p99_token_slope(&sample) {
            slopes.push(fit.ms_per_token);
        }
    }
    if slopes.len() < RESAMPLES / 2 {
        return None;
    }
    slopes.sort_by(f64::total_cmp);
    let at =
        |q: f64| slopes[((q * (slopes.len() - 1) as f64).round() as usize).min(slopes.len() - 1)];
    Some((at(0.05), at(0.95)))
}

/// Whether a slope whose 90% interval is `interval` can be read against
/// `bound` (the excess's, ms per token): the interval is no wider than
/// twice the bound. A wider one means a few queueing outliers set the
/// slope, and the signal is left out rather than read as load.
pub fn slope_readable(interval: Option<(f64, f64)>, bound: f64) -> bool {
    interval.is_some_and(|(low, high)| high - low <= 2.0 * bound)
}

/// A readable slope and the rate (requests or arrivals a second) it was
/// read at.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlopeAt {
    pub rate: f64,
    pub ms_per_token: f64,
}

/// The calm baseline of a set of readable slopes: the one read at the
/// lowest rate (the first of equal rates). A running baseline folds each
/// new reading in with [`SlopeAt::calmer`].
pub fn calm_baseline(readings: impl IntoIterator<Item = SlopeAt>) -> Option<SlopeAt> {
    readings
        .into_iter()
        .fold(None, |base, r| Some(SlopeAt::calmer(base, r)))
}

impl SlopeAt {
    /// Of the baseline so far and a new reading, the one at the lower rate.
    pub fn calmer(base: Option<SlopeAt>, reading: SlopeAt) -> SlopeAt {
        match base {
            Some(b) if b.rate <= reading.rate => b,
            _ => reading,
        }
    }
}

/// The excess P99 cost per output token: `slope` over the calm
/// baseline's, ms per token.
pub fn token_cost_excess(slope: f64, baseline: SlopeAt) -> f64 {
    slope - baseline.ms_per_token
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
pub fn median(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => 0.5 * (v[n / 2 - 1] + v[n / 2]),
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rand::SeedableRng;

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
    fn the_interval_is_tight_on_a_steady_server_and_wide_under_queueing() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        // 400 requests of a mock with 5 ms a token and 30 ms of jitter:
        // the interval holds the truth and is narrow.
        let steady: Vec<(u64, f64)> = (0..400)
            .map(|_| {
                let tokens: u64 = rng.random_range(16..=256);
                let jitter: f64 = rng.random_range(0.0..30.0);
                (tokens, 40.0 + 5.0 * tokens as f64 + jitter)
            })
            .collect();
        let seeded = || rand::rngs::StdRng::seed_from_u64(1);
        let (low, high) = slope_interval(&steady, &mut seeded()).unwrap();
        assert!(low <= 5.0 && 5.0 <= high, "{low}..{high}");
        assert!(high - low < 0.8, "{low}..{high}");
        // 70 requests of a two-slot server near saturation: the same
        // 5 ms a token, plus a queueing wait (exponential, mean 800 ms)
        // that has nothing to do with the length. The slope of one sample
        // can land anywhere; its interval says so.
        let queued: Vec<(u64, f64)> = (0..70)
            .map(|_| {
                let tokens: u64 = rng.random_range(8..=40);
                let wait = -800.0 * (1.0 - rng.random::<f64>()).ln();
                (tokens, 40.0 + 5.0 * tokens as f64 + wait)
            })
            .collect();
        let (low, high) = slope_interval(&queued, &mut seeded()).unwrap();
        assert!(high - low > 20.0, "{low}..{high}");
        assert_eq!(
            slope_interval(&queued, &mut seeded()),
            Some((low, high)),
            "seeded"
        );
        assert_eq!(slope_interval(&queued[..30], &mut seeded()), None);
        assert!(slope_readable(Some((low, low + 1.6)), 0.8));
        assert!(!slope_readable(Some((low, high)), 0.8));
        assert!(!slope_readable(None, 0.8));
    }

    #[test]
    fn too_few_requests_or_one_length_give_no_slope() {
        assert_eq!(p99_token_slope(&[(10, 5.0); 59]), None);
        assert_eq!(p99_token_slope(&[(10, 5.0); 400]), None);
    }

    #[test]
    fn the_calm_baseline_is_the_slope_at_the_lowest_rate() {
        let at = |rate, ms_per_token| SlopeAt { rate, ms_per_token };
        let base = calm_baseline([at(8.0, 5.1), at(4.0, 5.0), at(4.0, 7.0), at(16.0, 9.0)]);
        assert_eq!(base, Some(at(4.0, 5.0)));
        assert_eq!(calm_baseline([]), None);
        assert_eq!(token_cost_excess(5.9, at(4.0, 5.0)), 5.9 - 5.0);
        // A running baseline keeps its reading until a calmer one comes.
        assert_eq!(
            SlopeAt::calmer(Some(at(4.0, 5.0)), at(6.0, 2.0)),
            at(4.0, 5.0)
        );
        assert_eq!(
            SlopeAt::calmer(Some(at(4.0, 5.0)), at(3.0, 6.0)),
            at(3.0, 6.0)
        );
    }

    #[test]
    fn median_by_hand() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
