//! The baseline diff: each headline metric of a group side by side with
//! the baseline's, its delta and percent, and whether the change is beyond
//! noise by the test that fits it (a bootstrap interval for a quantile, a
//! two-proportion test for a share, a Poisson rate test for a throughput).

use serde::Serialize;

use super::input::{Dist, Group, HIST_MEASURES};
use super::stats::{self, bootstrap_quantile_diff, two_proportions, two_rates, Interval, LEVEL};

/// The headline metrics of the run-wide diff, by default.
pub const DEFAULT_METRICS: [&str; 13] = [
    "median_ttft_ms",
    "p99_ttft_ms",
    "median_itl_ms",
    "p99_itl_ms",
    "median_tpot_ms",
    "p99_tpot_ms",
    "median_e2el_ms",
    "p99_e2el_ms",
    "p99_dispatch_lag_ms",
    "request_throughput",
    "output_throughput",
    "error_rate",
    "queued_share",
];

/// The quantiles a metric may name, by prefix.
const QUANTILES: [(&str, f64); 5] = [
    ("median", 0.5),
    ("p90", 0.9),
    ("p95", 0.95),
    ("p99", 0.99),
    ("p999", 0.999),
];

/// The metrics named by something else than a quantile.
const OTHERS: [&str; 6] = [
    "request_throughput",
    "output_throughput",
    "error_rate",
    "hit_ratio",
    "queued_share",
    "late_share",
];

/// What a metric is, and so how it is tested.
#[derive(Clone, Debug, PartialEq)]
pub enum Metric {
    /// `p99_ttft_ms`: the measure and the quantile.
    Quantile(String, &'static str, f64),
    /// A count per second of the run (`request_throughput`).
    Rate(&'static str),
    /// A share of requests, in percent (`error_rate`).
    Share(&'static str),
}

impl Metric {
    /// A metric by its name, or what the known names are.
    pub fn parse(name: &str) -> Result<Metric, String> {
        for (prefix, q) in QUANTILES {
            let Some(rest) = name.strip_prefix(prefix).and_then(|r| r.strip_prefix('_')) else {
                continue;
            };
            let Some(measure) = rest.strip_suffix("_ms") else {
                continue;
            };
            if let Some(m) = HIST_MEASURES.iter().find(|m| **m == measure) {
                return Ok(Metric::Quantile(name.to_owned(), m, q));
            }
        }
        match OTHERS.iter().find(|o| **o == name) {
            Some(n) if n.ends_with("throughput") => Ok(Metric::Rate(n)),
            Some(n) => Ok(Metric::Share(n)),
            None => Err(format!(
                "unknown metric `{name}` (known: {{median,p90,p95,p99,p999}}_{{{}}}_ms, {})",
                HIST_MEASURES.join(","),
                OTHERS.join(", ")
            )),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Metric::Quantile(n, _, _) => n,
            Metric::Rate(n) | Metric::Share(n) => n,
        }
    }

    /// Throughputs and the hit ratio are better higher.
    pub fn higher_is_better(&self) -> bool {
        matches!(self, Metric::Rate(_)) || self.name() == "hit_ratio"
    }

    pub fn unit(&self) -> &'static str {
        match self {
            Metric::Quantile(..) => "ms",
            Metric::Rate("request_throughput") => "req/s",
            Metric::Rate(_) => "tok/s",
            Metric::Share(_) => "%",
        }
    }

    /// (numerator, denominator) of a share.
    fn share_counts(&self, g: &Group) -> Option<(u64, u64)> {
        match self {
            Metric::Share("error_rate") => Some((g.failed, g.requests)),
            Metric::Share("hit_ratio") => Some((g.cache_hits, g.cache_hits + g.cache_misses)),
            Metric::Share("queued_share") => Some((g.queued, g.requests)),
            Metric::Share("late_share") => Some((g.late, g.requests)),
            _ => None,
        }
        .filter(|(_, n)| *n > 0)
    }

    /// The metric's value on a group of a run of `duration_s`.
    pub fn value(&self, g: &Group, duration_s: f64) -> Option<f64> {
        match self {
            Metric::Quantile(_, m, q) => g.dist(m)?.quantile(*q).map(|us| us as f64 / 1000.0),
            Metric::Rate(_) => {
                let c = self.rate_count(g);
                (duration_s > 0.0).then(|| c as f64 / duration_s)
            }
            Metric::Share(_) => self
                .share_counts(g)
                .map(|(k, n)| 100.0 * k as f64 / n as f64),
        }
    }

    fn rate_count(&self, g: &Group) -> u64 {
        match self {
            Metric::Rate("request_throughput") => g.completed,
            _ => g.output_tokens,
        }
    }
}

/// One metric, run against baseline.
#[derive(Clone, Debug, Serialize)]
pub struct MetricDiff {
    pub metric: String,
    pub unit: &'static str,
    pub higher_is_better: bool,
    pub baseline: Option<f64>,
    pub run: Option<f64>,
    pub delta: Option<f64>,
    /// Of the baseline; absent when the baseline is 0.
    pub percent: Option<f64>,
    /// The test: `bootstrap`, `two-proportion z`, `poisson rate z`.
    pub test: &'static str,
    /// The bootstrap's interval of the delta, in the metric's unit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ci: Option<Interval>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    pub beyond_noise: bool,
    /// `regressed`, `improved`, `small` (beyond noise, under the minimum
    /// change), `within noise`, or `n/a`.
    pub verdict: &'static str,
}

/// A group and the length of its run.
#[derive(Clone, Copy)]
pub(crate) struct Side<'a> {
    pub group: &'a Group,
    pub duration_s: f64,
}

/// The smallest change a verdict reports: `pct` of the baseline, and for
/// times (ms) also `ms`, so that a sub-millisecond move of a tiny figure
/// (a dispatch lag of 0.1 ms becoming 0.4 ms is +300%) is `small`, not a
/// regression.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct MinChange {
    pub(crate) pct: f64,
    pub(crate) ms: f64,
}

/// `metric` on `run` against `base`; a change counts when it is beyond
/// noise and at least the minimum change.
pub(crate) fn compare(metric: &Metric, run: Side, base: Side, min: MinChange) -> MetricDiff {
    let r = metric.value(run.group, run.duration_s);
    let b = metric.value(base.group, base.duration_s);
    let delta = r.zip(b).map(|(r, b)| r - b);
    let percent = delta
        .zip(b)
        .and_then(|(d, b)| (b != 0.0).then(|| 100.0 * d / b));
    let (test, ci, p_value) = match metric {
        Metric::Quantile(name, m, q) => {
            let ci = run
                .group
                .dist(m)
                .zip(base.group.dist(m))
                .and_then(|(x, y)| boot(x, y, *q, name))
                .map(|i| Interval {
                    low: i.low / 1000.0,
                    high: i.high / 1000.0,
                });
            ("bootstrap", ci, None)
        }
        Metric::Rate(_) => (
            "poisson rate z",
            None,
            // On completed requests for both throughputs: tokens come in
            // lumps of a request's length, far from Poisson events.
            two_rates(
                run.group.completed,
                run.duration_s,
                base.group.completed,
                base.duration_s,
            ),
        ),
        Metric::Share(_) => {
            let p = metric
                .share_counts(run.group)
                .zip(metric.share_counts(base.group))
                .and_then(|((k1, n1), (k2, n2))| two_proportions(k1, n1, k2, n2));
            ("two-proportion z", None, p)
        }
    };
    let beyond_noise =
        ci.is_some_and(|i| i.excludes_zero()) || p_value.is_some_and(|p| p < 1.0 - LEVEL);
    let big_in_ms = match metric {
        Metric::Quantile(..) => delta.is_some_and(|d| d.abs() >= min.ms),
        _ => true,
    };
    let big = big_in_ms
        && match (percent, delta) {
            (Some(p), _) => p.abs() >= min.pct,
            (None, Some(d)) => d != 0.0,
            (None, None) => false,
        };
    let worse = delta.is_some_and(|d| {
        if metric.higher_is_better() {
            d < 0.0
        } else {
            d > 0.0
        }
    });
    let verdict = match (delta.is_some(), beyond_noise, big, worse) {
        (false, ..) => "n/a",
        (true, true, true, true) => "regressed",
        (true, true, true, false) => "improved",
        (true, true, false, _) => "small",
        (true, false, ..) => "within noise",
    };
    MetricDiff {
        metric: metric.name().to_owned(),
        unit: metric.unit(),
        higher_is_better: metric.higher_is_better(),
        baseline: b,
        run: r,
        delta,
        percent,
        test,
        ci,
        p_value,
        beyond_noise,
        verdict,
    }
}

/// The bootstrap with a seed of its own per metric, so that adding a
/// metric leaves the others' intervals as they were.
fn boot(x: &Dist, y: &Dist, q: f64, name: &str) -> Option<Interval> {
    let salt = name.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3)
    });
    bootstrap_quantile_diff(x, y, q, stats::RESAMPLES, stats::SEED ^ salt)
}

/// Mann–Whitney on a measure's whole distribution.
#[derive(Clone, Debug, Serialize)]
pub struct DistDiff {
    pub measure: &'static str,
    #[serde(flatten)]
    pub test: stats::MannWhitney,
    pub beyond_noise: bool,
}

/// Mann–Whitney of each measure both groups have.
pub(crate) fn distributions(run: &Group, base: &Group) -> Vec<DistDiff> {
    ["ttft", "itl", "tpot", "e2el", "dispatch_lag"]
        .into_iter()
        .filter_map(|m| {
            let t = stats::mann_whitney(run.dist(m)?, base.dist(m)?)?;
            Some(DistDiff {
                measure: m,
                beyond_noise: t.p < 1.0 - LEVEL,
                test: t,
            })
        })
        .collect()
}
