//! Early stop: a stage is over-saturated when its backlog grows without
//! bound, which no longer stage would fix. Like guidellm's over-saturation
//! test, it reads the linear trend of the requests in flight and of TTFT
//! over the stage: both must rise with confidence (the slope's lower
//! bound, `z` standard errors below it, above zero) and the in-flight
//! count must grow by a material amount over the window, so a stable
//! stage's jitter never stops it.

/// Points a trend needs before it is judged.
pub(crate) const MIN_POINTS: usize = 10;
/// Standard errors below the slope that must still be above zero.
pub(crate) const Z: f64 = 3.0;
/// The in-flight growth over the window that counts as material: this
/// share of the mean in flight, and at least [`MIN_GROWTH_REQUESTS`].
const MIN_GROWTH_SHARE: f64 = 0.25;
const MIN_GROWTH_REQUESTS: f64 = 2.0;

/// A least-squares line through `(t, value)` points.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Trend {
    /// Units of value per unit of t.
    pub slope: f64,
    /// Its standard error.
    pub se: f64,
    pub mean: f64,
    /// From the first point's t to the last's.
    pub span: f64,
}

/// The trend, or `None` with fewer than [`MIN_POINTS`] or no spread in t.
pub fn trend(points: &[(f64, f64)]) -> Option<Trend> {
    let n = points.len();
    if n < MIN_POINTS {
        return None;
    }
    let nf = n as f64;
    let mt = points.iter().map(|p| p.0).sum::<f64>() / nf;
    let mv = points.iter().map(|p| p.1).sum::<f64>() / nf;
    let stt: f64 = points.iter().map(|p| (p.0 - mt).powi(2)).sum();
    if stt <= 0.0 {
        return None;
    }
    let slope = points.iter().map(|p| (p.0 - mt) * (p.1 - mv)).sum::<f64>() / stt;
    let rss: f64 = points
        .iter()
        .map(|p| (p.1 - mv - slope * (p.0 - mt)).powi(2))
        .sum();
    let se = (rss / (nf - 2.0) / stt).sqrt();
    let span = points[n - 1].0 - points[0].0;
    Some(Trend {
        slope,
        se,
        mean: mv,
        span,
    })
}

impl Trend {
    /// Rising with confidence: the slope `z` standard errors down is still
    /// above zero.
    pub fn rising(&self, z: f64) -> bool {
        self.slope - z * self.se > 0.0
    }
}

/// Whether a stage is over-saturated, from samples of the requests in
/// flight and of TTFT (ms), each `(seconds into the stage, value)`.
pub fn over_saturated(in_flight: &[(f64, f64)], ttft_ms: &[(f64, f64)]) -> bool {
    let (Some(q), Some(t)) = (trend(in_flight), trend(ttft_ms)) else {
        return false;
    };
    let growth = q.slope * q.span;
    let material = growth >= (MIN_GROWTH_SHARE * q.mean).max(MIN_GROWTH_REQUESTS);
    q.rising(Z) && t.rising(Z) && material
}

/// How long a stage may go without one TTFT while its backlog grows
/// before it counts as stalled, s.
pub(crate) const STALL_S: f64 = 5.0;

/// A stage whose backlog grows materially with confidence while no
/// answer has begun for [`STALL_S`]: over-saturated with no TTFT to show
/// it (a server that stopped answering). `last_ttft_at`: when the last
/// first token came, s into the stage.
pub fn stalled(in_flight: &[(f64, f64)], last_ttft_at: Option<f64>, now: f64) -> bool {
    let Some(q) = trend(in_flight) else {
        return false;
    };
    let quiet = now - last_ttft_at.unwrap_or(0.0) >= STALL_S;
    let growth = q.slope * q.span;
    quiet && q.rising(Z) && growth >= (MIN_GROWTH_SHARE * q.mean).max(MIN_GROWTH_REQUESTS)
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
mod tests {
    use rand::{Rng, SeedableRng};
    use rand_distr::{Distribution, Normal, Poisson};

    use super::*;

    #[test]
    fn a_line_with_noise_has_its_slope_and_a_known_standard_error() {
        // y = 3 + 2t + N(0, 1) on t = 0..100: se = 1/sqrt(Σ(t − mean)²).
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let noise = Normal::new(0.0, 1.0).unwrap();
        let points: Vec<(f64, f64)> = (0..100)
            .map(|i| {
                let t = f64::from(i);
                (t, 3.0 + 2.0 * t + noise.sample(&mut rng))
            })
            .collect();
        let tr = trend(&points).unwrap();
        let want_se = 1.0 / (83_325.0_f64).sqrt();
        assert!((tr.slope - 2.0).abs() < 4.0 * want_se, "{tr:?}");
        assert!((tr.se / want_se - 1.0).abs() < 0.2, "{tr:?}");
        assert_eq!(tr.span, 99.0);
    }

    /// A stage sampled every 0.5 s for 30 s: in flight Poisson around a
    /// mean that grows by `growth` a second, TTFT around 200 ms plus 20 ms
    /// per request in flight.
    type Series = Vec<(f64, f64)>;

    fn stage(seed: u64, mean: f64, growth: f64) -> (Series, Series) {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        let (mut q, mut ttft) = (Vec::new(), Vec::new());
        for i in 0..60 {
            let t = f64::from(i) * 0.5;
            let level = mean + growth * t;
            let n: f64 = Poisson::new(level).unwrap().sample(&mut rng);
            q.push((t, n));
            ttft.push((t, 200.0 + 20.0 * n + rng.random_range(-30.0..30.0)));
        }
        (q, ttft)
    }

    #[test]
    fn a_stable_stage_is_never_stopped() {
        for seed in 0..200 {
            let (q, ttft) = stage(seed, 12.0, 0.0);
            assert!(!over_saturated(&q, &ttft), "seed {seed}");
        }
    }

    #[test]
    fn a_growing_backlog_is_stopped() {
        // 2 requests a second more in flight: 60 more over the stage.
        for seed in 0..50 {
            let (q, ttft) = stage(seed, 12.0, 2.0);
            assert!(over_saturated(&q, &ttft), "seed {seed}");
        }
    }

    #[test]
    fn a_backlog_that_rises_a_little_is_not_material() {
        // From 100 to 103 in flight over 30 s: rising, but by 3%.
        let q: Vec<(f64, f64)> = (0..60)
            .map(|i| (f64::from(i) * 0.5, 100.0 + 0.1 * f64::from(i) * 0.5))
            .collect();
        let ttft: Vec<(f64, f64)> = q.iter().map(|&(t, n)| (t, 20.0 * n)).collect();
        assert!(trend(&q).unwrap().rising(Z));
        assert!(!over_saturated(&q, &ttft));
    }

    #[test]
    fn a_server_that_stops_answering_is_stalled() {
        // Two requests a second pile up from t = 0 and no first token
        // comes after t = 1.
        let q: Vec<(f64, f64)> = (0..20)
            .map(|i| (f64::from(i) * 0.5, f64::from(i)))
            .collect();
        assert!(stalled(&q, Some(1.0), 9.5));
        // Answers still beginning: not stalled (the TTFT trend judges it).
        assert!(!stalled(&q, Some(9.0), 9.5));
        // A flat backlog without answers (a quiet stage) is not stalled.
        let flat: Vec<(f64, f64)> = (0..20).map(|i| (f64::from(i) * 0.5, 3.0)).collect();
        assert!(!stalled(&flat, None, 9.5));
    }

    #[test]
    fn too_few_points_are_not_judged() {
        let q: Vec<(f64, f64)> = (0..9)
            .map(|i| (f64::from(i), f64::from(i) * 10.0))
            .collect();
        assert!(!over_saturated(&q, &q));
        assert_eq!(trend(&[(1.0, 1.0); 12]), None);
    }
}
