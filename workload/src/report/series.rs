//! The data behind the plots: CDFs read from the histograms, and latency
//! and dispatch lag over time from the `--detailed` rows, binned so that
//! the page stays small whatever the number of requests.

use std::collections::BTreeMap;

use serde::Serialize;

use super::input::{Dist, Row};

/// Points per CDF: a uniform grid of quantiles, plus the tail.
const CDF_GRID: usize = 100;
const TAIL: [f64; 4] = [0.99, 0.995, 0.999, 1.0];
/// Bins of the time series at most.
const MAX_BINS: u64 = 120;

/// A CDF as (ms, share) points, ascending.
pub(crate) fn cdf(d: &Dist) -> Vec<[f64; 2]> {
    let mut qs: Vec<f64> = (0..CDF_GRID).map(|i| i as f64 / CDF_GRID as f64).collect();
    qs.extend(TAIL);
    qs.into_iter()
        .filter_map(|q| d.quantile(q.max(1e-9)).map(|us| [us as f64 / 1000.0, q]))
        .collect()
}

/// A stage's extent on the time axis, s from the run's start.
#[derive(Clone, Debug, Serialize)]
pub struct StageSpan {
    pub stage: usize,
    pub from_s: f64,
    pub to_s: f64,
}

/// Latency and lag over time, by intended send time.
#[derive(Clone, Debug, Serialize)]
pub struct Timeline {
    pub bin_s: f64,
    /// (bin start s, ms)
    pub e2el_p50: Vec<[f64; 2]>,
    pub e2el_p99: Vec<[f64; 2]>,
    pub ttft_p99: Vec<[f64; 2]>,
    pub lag_max: Vec<[f64; 2]>,
    pub stages: Vec<StageSpan>,
}

fn at(sorted: &[u64], q: f64) -> Option<f64> {
    let n = sorted.len();
    let i = ((q * n as f64).ceil() as usize).clamp(1, n.max(1)) - 1;
    sorted.get(i).map(|v| *v as f64 / 1000.0)
}

/// The timeline of the rows; `None` without rows.
pub(crate) fn timeline(rows: &[Row]) -> Option<Timeline> {
    let start = rows.iter().map(|r| r.intended_us).min()?;
    let end = rows.iter().map(|r| r.intended_us).max()?;
    let span = end.saturating_sub(start).max(1);
    // Whole tenths of seconds, at most MAX_BINS of them.
    let bin_us = (span.div_ceil(MAX_BINS)).div_ceil(100_000).max(1) * 100_000;
    let mut bins: BTreeMap<u64, (Vec<u64>, Vec<u64>, u64)> = BTreeMap::new();
    let mut stages: BTreeMap<usize, (u64, u64)> = BTreeMap::new();
    for r in rows {
        let b = (r.intended_us - start) / bin_us;
        let e = bins.entry(b).or_default();
        if r.failure.is_none() {
            e.0.push(r.end_us.saturating_sub(r.intended_us));
            if let Some(f) = r.first_content_us {
                e.1.push(f.saturating_sub(r.intended_us));
            }
        }
        e.2 = e.2.max(r.sent_us.saturating_sub(r.intended_us));
        let s = stages
            .entry(r.stage)
            .or_insert((r.intended_us, r.intended_us));
        s.0 = s.0.min(r.intended_us);
        s.1 = s.1.max(r.intended_us);
    }
    let mut t = Timeline {
        bin_s: bin_us as f64 / 1e6,
        e2el_p50: Vec::new(),
        e2el_p99: Vec::new(),
        ttft_p99: Vec::new(),
        lag_max: Vec::new(),
        stages: stages
            .into_iter()
            .map(|(stage, (a, b))| StageSpan {
                stage,
                from_s: (a - start) as f64 / 1e6,
                to_s: (b - start) as f64 / 1e6,
            })
            .collect(),
    };
    for (b, (mut e2el, mut ttft, lag)) in bins {
        let x = (b * bin_us) as f64 / 1e6;
        e2el.sort_unstable();
        ttft.sort_unstable();
        if let Some(v) = at(&e2el, 0.5) {
            t.e2el_p50.push([x, v]);
        }
        if let Some(v) = at(&e2el, 0.99) {
            t.e2el_p99.push([x, v]);
        }
        if let Some(v) = at(&ttft, 0.99) {
            t.ttft_p99.push([x, v]);
        }
        t.lag_max.push([x, lag as f64 / 1000.0]);
    }
    Some(t)
}
