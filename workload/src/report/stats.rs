//! The statistics of the baseline diff: a seeded percentile bootstrap of
//! the difference of two quantiles, resampled from the HDR histograms'
//! bucket counts (so it needs no `--detailed` rows), Mann–Whitney U with
//! the normal approximation, tie-corrected, on the same buckets, and the
//! two-sample tests of a proportion and of a Poisson rate.

use rand::rngs::StdRng;
use rand::SeedableRng;
use rand_distr::{Binomial, Distribution};
use serde::Serialize;
use statrs::function::erf::erfc;

use super::input::Dist;

/// Bootstrap resamples per quantile.
pub const RESAMPLES: usize = 1000;
/// The confidence of every interval, and 1 − the level of every test.
pub const LEVEL: f64 = 0.95;
/// The bootstrap's seed: the same files give the same report.
pub const SEED: u64 = 0x5eed_1e55;

/// A two-sided interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Interval {
    pub low: f64,
    pub high: f64,
}

impl Interval {
    pub fn excludes_zero(&self) -> bool {
        self.low > 0.0 || self.high < 0.0
    }
}

/// Standard normal upper tail, two-sided: P(|Z| ≥ |z|).
pub(crate) fn two_sided_p(z: f64) -> f64 {
    erfc(z.abs() / std::f64::consts::SQRT_2).min(1.0)
}

/// One bootstrap resample's `q` quantile: a multinomial draw of `total`
/// values over the buckets, made bucket by bucket with binomials on what is
/// left, and stopped as soon as the quantile's rank is reached.
fn resampled_quantile(d: &Dist, q: f64, rng: &mut StdRng) -> Option<u64> {
    let n = d.total;
    let target = ((q * n as f64 + 0.5) as u64).clamp(1, n.max(1));
    let mut left_n = n;
    let mut left_mass = n;
    let mut seen = 0;
    for (v, c) in &d.buckets {
        if left_n == 0 || left_mass == 0 {
            break;
        }
        let p = (*c as f64 / left_mass as f64).min(1.0);
        let drawn = if p >= 1.0 {
            left_n
        } else {
            Binomial::new(left_n, p).ok()?.sample(rng)
        };
        seen += drawn;
        left_n -= drawn;
        left_mass -= c;
        if seen >= target {
            return Some(*v);
        }
    }
    d.buckets.last().map(|b| b.0)
}

/// The percentile-bootstrap interval (at [`LEVEL`]) of
/// `quantile(run) − quantile(base)`, each resampled on its own, in the
/// histograms' unit; `None` when either is empty.
pub fn bootstrap_quantile_diff(
    run: &Dist,
    base: &Dist,
    q: f64,
    resamples: usize,
    seed: u64,
) -> Option<Interval> {
    if run.total == 0 || base.total == 0 || resamples == 0 {
        return None;
    }
    let mut rng = StdRng::seed_from_u64(seed);
    let mut diffs: Vec<f64> = Vec::with_capacity(resamples);
    for _ in 0..resamples {
        let a = resampled_quantile(run, q, &mut rng)? as f64;
        let b = resampled_quantile(base, q, &mut rng)? as f64;
        diffs.push(a - b);
    }
    diffs.sort_by(f64::total_cmp);
    let tail = (1.0 - LEVEL) / 2.0;
    let at = |p: f64| {
        let i = ((p * resamples as f64).floor() as usize).min(resamples - 1);
        diffs[i]
    };
    Some(Interval {
        low: at(tail),
        high: at(1.0 - tail),
    })
}

/// Mann–Whitney U of the run (x) against the baseline (y).
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct MannWhitney {
    /// U of x: the number of pairs with x > y, ties counted half.
    pub u: f64,
    pub z: f64,
    /// Two-sided, normal approximation with the tie correction and a
    /// continuity correction of ½.
    pub p: f64,
    /// U / (n_x·n_y): P(x > y) + ½·P(x = y); 0.5 when alike.
    pub effect: f64,
}

/// Mann–Whitney U on two distributions given as (value, count) buckets:
/// equal values are ties, ranked by their mid-rank.
pub fn mann_whitney(x: &Dist, y: &Dist) -> Option<MannWhitney> {
    let (n1, n2) = (x.total as f64, y.total as f64);
    if x.total == 0 || y.total == 0 {
        return None;
    }
    let (mut i, mut j) = (0, 0);
    let mut below = 0.0;
    let mut rank_sum = 0.0;
    let mut ties = 0.0;
    while i < x.buckets.len() || j < y.buckets.len() {
        let vx = x.buckets.get(i).map(|b| b.0);
        let vy = y.buckets.get(j).map(|b| b.0);
        let v = match (vx, vy) {
            (Some(a), Some(b)) => a.min(b),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (None, None) => break,
        };
        let mut a = 0.0;
        if vx == Some(v) {
            a = x.buckets[i].1 as f64;
            i += 1;
        }
        let mut b = 0.0;
        if vy == Some(v) {
            b = y.buckets[j].1 as f64;
            j += 1;
        }
        let t = a + b;
        rank_sum += a * (below + (t + 1.0) / 2.0);
        ties += t * t * t - t;
        below += t;
    }
    let u = rank_sum - n1 * (n1 + 1.0) / 2.0;
    let big_n = n1 + n2;
    let mean = n1 * n2 / 2.0;
    let var = n1 * n2 / 12.0 * ((big_n + 1.0) - ties / (big_n * (big_n - 1.0)));
    let (z, p) = if var > 0.0 {
        let d = u - mean;
        let corrected = (d.abs() - 0.5).max(0.0).copysign(d);
        let z = corrected / var.sqrt();
        (z, two_sided_p(z))
    } else {
        (0.0, 1.0)
    };
    Some(MannWhitney {
        u,
        z,
        p,
        effect: u / (n1 * n2),
    })
}

/// Two-sided p of "the same proportion": `k1` of `n1` against `k2` of `n2`
/// (pooled two-proportion z-test).
pub fn two_proportions(k1: u64, n1: u64, k2: u64, n2: u64) -> Option<f64> {
    if n1 == 0 || n2 == 0 {
        return None;
    }
    let (p1, p2) = (k1 as f64 / n1 as f64, k2 as f64 / n2 as f64);
    let pooled = (k1 + k2) as f64 / (n1 + n2) as f64;
    let se = (pooled * (1.0 - pooled) * (1.0 / n1 as f64 + 1.0 / n2 as f64)).sqrt();
    Some(if se > 0.0 {
        two_sided_p((p1 - p2) / se)
    } else {
        1.0
    })
}

/// Two-sided p of "the same Poisson rate": `c1` events in `t1` against `c2`
/// in `t2`, by the conditional binomial test (c1 given c1 + c2), normal
/// approximation.
pub fn two_rates(c1: u64, t1: f64, c2: u64, t2: f64) -> Option<f64> {
    if t1 <= 0.0 || t2 <= 0.0 || c1 + c2 == 0 {
        return None;
    }
    let n = (c1 + c2) as f64;
    let p = t1 / (t1 + t2);
    let sd = (n * p * (1.0 - p)).sqrt();
    Some(if sd > 0.0 {
        two_sided_p((c1 as f64 - n * p) / sd)
    } else {
        1.0
    })
}

#[cfg(test)]
mod tests;
