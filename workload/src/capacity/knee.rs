//! The throughput knee: the offered rate where token throughput stops
//! following the load. Both axes are normalised to their largest value.
//! The derivative is smoothed: at each stage, the slope of a least-squares
//! line through it and up to two stages on its left, against the same on
//! its right, over the distance between the two lines' centres. The knee is
//! the stage that bends most of those whose second derivative falls below
//! the bound: the corner itself (windows that straddle it bend less). The
//! first stage below the bound is kept beside it: on a real server a gentle
//! bend before saturation (CPU contention, batching) passes −0.3 already,
//! so "first below" would put the knee well before saturation.
//!
//! The bound is tight (−0.3: the normalised slope falling by 0.03 over a
//! tenth of the load range), so stage-to-stage noise in throughput reads as
//! a bend beyond about a third of a percent on twelve stages (the test):
//! stages must be long enough for their throughput to be that steady, and
//! the report draws the curve for the eye to check.

/// The default bound on the normalised second derivative.
pub const DEFAULT_KNEE_BOUND: f64 = -0.3;

/// Stages on each side of a stage that its slopes are fitted over.
const WINDOW: usize = 2;

/// The curve, smoothed, with each stage's second derivative.
#[derive(Clone, Debug, PartialEq)]
pub struct Knee {
    /// The offered rate (req/s) of the knee's stage: of the stages whose
    /// second derivative is below the bound, the one that bends most;
    /// `None` when the curve never bends that much in the probed range.
    pub rate: Option<f64>,
    /// The first stage below the bound (the literal rule), which
    /// a gentle bend before saturation can put well before the knee.
    pub first_below: Option<f64>,
    /// Per stage, in order of offered rate: the normalised second
    /// derivative (`None` at the two ends).
    pub second_derivative: Vec<Option<f64>>,
}

/// The knee of `(offered req/s, token throughput)` stages. Stages of equal
/// offered rate are averaged first. Fewer than three distinct rates give
/// no knee.
pub fn knee(stages: &[(f64, f64)], bound: f64) -> Knee {
    let mut points: Vec<(f64, f64)> = stages
        .iter()
        .copied()
        .filter(|(x, y)| x.is_finite() && y.is_finite() && *x > 0.0)
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    let points = average_ties(&points);
    let n = points.len();
    let (x_max, y_max) = points
        .iter()
        .fold((0.0_f64, 0.0_f64), |(a, b), p| (a.max(p.0), b.max(p.1)));
    if n < 3 || y_max <= 0.0 {
        return Knee {
            rate: None,
            first_below: None,
            second_derivative: vec![None; n],
        };
    }
    let x: Vec<f64> = points.iter().map(|p| p.0 / x_max).collect();
    let y: Vec<f64> = points.iter().map(|p| p.1 / y_max).collect();
    let mut second = vec![None; n];
    for i in 1..n - 1 {
        let (lo, hi) = (i.saturating_sub(WINDOW), (i + WINDOW).min(n - 1));
        let (left, left_x) = lsq_slope(&x[lo..=i], &y[lo..=i]);
        let (right, right_x) = lsq_slope(&x[i..=hi], &y[i..=hi]);
        second[i] = Some((right - left) / (right_x - left_x));
    }
    let first_below = second.iter().position(|d| d.is_some_and(|d| d < bound));
    // The sharpest bend of all the stages below the bound: a server bends
    // a little before it saturates (CPU contention, batching), enough for
    // −0.3, and the knee is where it stops following the load.
    let sharpest = (0..n)
        .filter(|&i| second[i].is_some_and(|d| d < bound))
        .min_by(|&a, &b| {
            second[a]
                .unwrap_or(0.0)
                .total_cmp(&second[b].unwrap_or(0.0))
        });
    let rate = sharpest.map(|i| points[i].0);
    let first_below = first_below.map(|i| points[i].0);
    Knee {
        rate,
        first_below,
        second_derivative: second,
    }
}

/// The least-squares slope through the points, and their mean `x`.
fn lsq_slope(x: &[f64], y: &[f64]) -> (f64, f64) {
    let n = x.len() as f64;
    let (mx, my) = (x.iter().sum::<f64>() / n, y.iter().sum::<f64>() / n);
    let sxy: f64 = x.iter().zip(y).map(|(a, b)| (a - mx) * (b - my)).sum();
    let sxx: f64 = x.iter().map(|a| (a - mx) * (a - mx)).sum();
    (sxy / sxx, mx)
}

fn average_ties(sorted: &[(f64, f64)]) -> Vec<(f64, f64)> {
    let mut out: Vec<(f64, f64, f64)> = Vec::new();
    for &(x, y) in sorted {
        match out.last_mut() {
            Some(last) if last.0 == x => {
                last.1 += y;
                last.2 += 1.0;
            }
            _ => out.push((x, y, 1.0)),
        }
    }
    out.into_iter().map(|(x, y, n)| (x, y / n)).collect()
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A server that serves `capacity` req/s of 100 tokens and no more.
    fn saturating(rates: &[f64], capacity: f64) -> Vec<(f64, f64)> {
        rates
            .iter()
            .map(|&r| (r, 100.0 * r.min(capacity)))
            .collect()
    }

    #[test]
    fn the_knee_of_a_saturating_server_is_its_capacity() {
        let rates: Vec<f64> = (1..=12).map(|i| 5.0 * f64::from(i)).collect();
        let k = knee(&saturating(&rates, 40.0), DEFAULT_KNEE_BOUND);
        assert_eq!(k.rate, Some(40.0));
        // Straight before it: a second derivative of 0.
        assert!(k.second_derivative[3].unwrap().abs() < 1e-9);
    }

    #[test]
    fn a_capacity_between_stages_gives_the_stage_below_it() {
        let rates = [4.0, 8.0, 16.0, 24.0, 32.0, 48.0, 64.0];
        let k = knee(&saturating(&rates, 28.0), DEFAULT_KNEE_BOUND);
        assert_eq!(k.rate, Some(24.0));
    }

    #[test]
    fn a_third_of_a_percent_of_noise_leaves_it_at_the_capacity() {
        let rates: Vec<f64> = (1..=12).map(|i| 5.0 * f64::from(i)).collect();
        for seed in 0..50 {
            let mut stages = saturating(&rates, 40.0);
            let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
            for s in &mut stages {
                s.1 *= 1.0 + rng.random_range(-0.003..0.003);
            }
            assert_eq!(
                knee(&stages, DEFAULT_KNEE_BOUND).rate,
                Some(40.0),
                "seed {seed}"
            );
        }
    }

    #[test]
    fn a_gentle_bend_before_saturation_is_not_the_knee() {
        // Throughput per request falls 1% a stage from 8 req/s (contention),
        // then saturates at 15: the first stage below −0.3 is early, the
        // knee is at 15.
        let rates = [4.0, 8.0, 12.0, 13.0, 14.0, 15.0, 16.0, 18.0];
        let stages: Vec<(f64, f64)> = rates
            .iter()
            .map(|&r: &f64| {
                let per = 60.0 * (1.0 - 0.01 * (r - 8.0).max(0.0));
                (r, r.min(15.0) * per)
            })
            .collect();
        let k = knee(&stages, DEFAULT_KNEE_BOUND);
        assert_eq!(k.rate, Some(15.0), "{k:?}");
        assert!(k.first_below.unwrap() < 15.0, "{k:?}");
    }

    #[test]
    fn a_server_that_keeps_up_has_no_knee() {
        let rates: Vec<f64> = (1..=8).map(f64::from).collect();
        let k = knee(&saturating(&rates, 100.0), DEFAULT_KNEE_BOUND);
        assert_eq!(k.rate, None);
        assert_eq!(knee(&[(1.0, 1.0), (2.0, 2.0)], -0.3).rate, None);
    }

    #[test]
    fn repeated_rates_are_averaged() {
        let stages = [
            (10.0, 1000.0),
            (20.0, 1900.0),
            (20.0, 2100.0),
            (30.0, 2000.0),
            (40.0, 2000.0),
        ];
        let k = knee(&stages, DEFAULT_KNEE_BOUND);
        assert_eq!(k.second_derivative.len(), 4);
        assert_eq!(k.rate, Some(20.0));
    }
}
