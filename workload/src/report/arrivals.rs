//! The inter-arrival plot's data: the gaps between the run's arrivals (the
//! intended start of each journey, as the schedule drew them) as an
//! empirical CDF, the fitted trace's own quantiles when the fit kept them,
//! and each candidate's CDF, all on one log-spaced grid so that the page
//! stays small whatever the number of requests.

use std::collections::BTreeMap;

use serde::Serialize;
use sluice_filters::Arrival;

use super::attach::AttachedFit;
use super::input::Row;
use crate::fit::{arrival_cdf, params_text};

/// Points of each curve.
pub(crate) const GRID: usize = 80;
/// The grid starts at this quantile of the gaps (the run's, the trace's):
/// bursty gaps of a few µs would otherwise stretch the log axis over
/// decades where the CDFs are all but 0.
const LOW_QUANTILE: f64 = 0.01;
/// Without gaps, the grid runs to this quantile of the best candidate.
const HIGH_QUANTILE: f64 = 0.999;

/// One candidate's curve and figures.
#[derive(Clone, Debug, Serialize)]
pub struct CandidateCurve {
    pub kind: &'static str,
    /// `shape=0.5 scale=0.2s`, as `sluice fit --compare` writes them.
    pub params: String,
    /// The one the fit picked (lowest BIC).
    pub best: bool,
    /// The fit's figures against the trace, when it has them.
    pub bic: Option<f64>,
    pub ks: Option<f64>,
    pub kl: Option<f64>,
    /// The KS statistic sup |F_run − F| against this run's gaps.
    pub ks_run: Option<f64>,
    /// (ms, F(x)) on the grid.
    pub points: Vec<[f64; 2]>,
}

/// The inter-arrival times of the run against the attached fit.
#[derive(Clone, Debug, Serialize)]
pub struct Arrivals {
    /// Where the fit comes from.
    pub source: String,
    /// What the fit's arrivals are: `requests` or `session starts`.
    pub of: &'static str,
    pub best: String,
    /// The run's gaps above 0 and those of exactly 0 (left out, as the fit
    /// leaves them out).
    pub gaps: u64,
    pub zero_gaps: u64,
    /// (ms, share of the run's gaps ≤ x) on the grid; empty without rows.
    pub run: Vec<[f64; 2]>,
    /// (ms, q): the fitted trace's quantiles, when the fit kept them.
    pub trace: Option<Vec<[f64; 2]>>,
    pub candidates: Vec<CandidateCurve>,
    /// What the reader should know (no rows, a shard's gaps).
    pub notes: Vec<String>,
}

/// The journeys' intended starts (µs), ascending: a journey's arrival is
/// the earliest intended send of its rows (its first request; later turns
/// of a session are not arrivals).
pub(crate) fn arrival_times(rows: &[Row]) -> Vec<u64> {
    let mut first: BTreeMap<u64, u64> = BTreeMap::new();
    for r in rows {
        let t = first.entry(r.index).or_insert(r.intended_us);
        *t = (*t).min(r.intended_us);
    }
    let mut times: Vec<u64> = first.into_values().collect();
    times.sort_unstable();
    times
}

/// The share of `sorted` at or below `x`.
fn ecdf(sorted: &[f64], x: f64) -> f64 {
    sorted.partition_point(|v| *v <= x) as f64 / sorted.len().max(1) as f64
}

/// sup |F_n − F| over a sorted sample (ties taken together: F_n jumps once
/// at each distinct value).
pub(crate) fn ks_statistic(sorted: &[f64], a: &Arrival) -> Option<f64> {
    let n = sorted.len() as f64;
    if sorted.is_empty() {
        return None;
    }
    let mut d: f64 = 0.0;
    let mut i = 0;
    while i < sorted.len() {
        let x = sorted[i];
        let j = sorted[i..].partition_point(|v| *v <= x) + i;
        let f = arrival_cdf(a, x);
        d = d
            .max((j as f64 / n - f).abs())
            .max((f - i as f64 / n).abs());
        i = j;
    }
    Some(d)
}

/// The x where `a`'s CDF reaches `p`, by bisection on ln x (seconds).
fn inverse(a: &Arrival, p: f64) -> f64 {
    let (mut lo, mut hi) = (1e-9f64.ln(), 1e9f64.ln());
    for _ in 0..100 {
        let mid = 0.5 * (lo + hi);
        if arrival_cdf(a, mid.exp()) < p {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    hi.exp()
}

/// `n` points from `lo` to `hi` (both > 0), evenly spaced in log.
pub(crate) fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let (a, b) = (lo.ln(), hi.ln());
    (0..n)
        .map(|i| (a + (b - a) * i as f64 / (n - 1).max(1) as f64).exp())
        .collect()
}

/// The plot's data. `rows` are the run's `--detailed` rows; `shard` its
/// `shard` (`i/n`).
pub(crate) fn arrivals(fit: &AttachedFit, rows: Option<&[Row]>, shard: &str) -> Arrivals {
    let mut notes = Vec::new();
    let times = rows.map(arrival_times).unwrap_or_default();
    let diffs: Vec<u64> = times.windows(2).map(|w| w[1] - w[0]).collect();
    let zero_gaps = diffs.iter().filter(|g| **g == 0).count() as u64;
    let mut gaps: Vec<f64> = diffs
        .iter()
        .filter(|g| **g > 0)
        .map(|g| *g as f64 / 1e6)
        .collect();
    gaps.sort_unstable_by(f64::total_cmp);
    match rows {
        None => notes.push(
            "this run has no per-request rows (run `sluice load --detailed`): the candidates \
             are drawn without the run's gaps"
                .to_owned(),
        ),
        Some(_) if gaps.is_empty() => notes.push(format!(
            "this run has {} arrivals: no gap between two of them to draw",
            times.len()
        )),
        Some(_) => {}
    }
    // `sluice load merge` keeps the rows of the first file it is given.
    if let Some(n) = shard.strip_prefix("merged ").filter(|_| rows.is_some()) {
        notes.push(format!(
            "this file merges {n} shards and keeps the per-request rows of one of them, one \
             arrival in {n}: its gaps are about {n} times the model's"
        ));
    }
    if let Some((_, n)) = shard.split_once('/').filter(|(_, n)| *n != "1") {
        notes.push(format!(
            "this file is shard {shard}: it holds one arrival in {n} of the schedule, so its \
             gaps are about {n} times the model's (merge the shards first)"
        ));
    }
    let trace: Option<Vec<[f64; 2]>> = fit
        .quantiles
        .as_ref()
        .map(|q| q.iter().map(|p| [p[1] * 1000.0, p[0]]).collect());
    // The range: the run's gaps and the trace's, from their 1st percentile
    // to their largest, else the best candidate's 1st to 99.9th percentile.
    let mut lo = f64::INFINITY;
    let mut hi: f64 = 0.0;
    if let (Some(first), Some(last)) = (gaps.first(), gaps.last()) {
        let at = ((LOW_QUANTILE * gaps.len() as f64) as usize).min(gaps.len() - 1);
        lo = gaps.get(at).copied().unwrap_or(*first);
        hi = *last;
    }
    for p in fit.quantiles.iter().flatten().filter(|p| p[1] > 0.0) {
        if p[0] >= LOW_QUANTILE {
            lo = lo.min(p[1]);
        }
        hi = hi.max(p[1]);
    }
    // The first of the best kind (a fit has one of each kind).
    let best_at = fit
        .candidates
        .iter()
        .position(|c| c.arrival.kind() == fit.best)
        .unwrap_or(0);
    let best = fit.candidates.get(best_at);
    if !(lo.is_finite() && hi > lo) {
        if let Some(b) = best {
            lo = inverse(&b.arrival, LOW_QUANTILE);
            hi = inverse(&b.arrival, HIGH_QUANTILE);
        }
    }
    if !(lo.is_finite() && lo > 0.0 && hi > lo) {
        lo = hi.max(1e-3) / 10.0;
        hi = lo * 100.0;
    }
    let grid = log_grid(lo, hi, GRID);
    let run = if gaps.is_empty() {
        Vec::new()
    } else {
        grid.iter().map(|x| [x * 1000.0, ecdf(&gaps, *x)]).collect()
    };
    let candidates = fit
        .candidates
        .iter()
        .enumerate()
        .map(|(i, c)| CandidateCurve {
            kind: c.arrival.kind(),
            params: params_text(&c.arrival),
            best: i == best_at,
            bic: c.bic,
            ks: c.ks,
            kl: c.kl,
            ks_run: ks_statistic(&gaps, &c.arrival),
            points: grid
                .iter()
                .map(|x| [x * 1000.0, arrival_cdf(&c.arrival, *x)])
                .collect(),
        })
        .collect();
    Arrivals {
        source: fit.source.clone(),
        of: fit.of,
        best: fit.best.clone(),
        gaps: gaps.len() as u64,
        zero_gaps,
        run,
        trace,
        candidates,
        notes,
    }
}

/// A note when the run's own model is none of a given fit's candidates:
/// the two may come from different traces (or the model was edited).
pub(crate) fn mismatch(given: &AttachedFit, own: &AttachedFit) -> Option<String> {
    let used = &own
        .candidates
        .iter()
        .find(|c| c.arrival.kind() == own.best)?
        .arrival;
    (!given.candidates.iter().any(|c| &c.arrival == used)).then(|| {
        format!(
            "the run's model ({}: {} {}) is none of the candidates of {}: they may come from \
             different traces, or the model was edited",
            own.source,
            used.kind(),
            params_text(used),
            given.source
        )
    })
}

#[cfg(test)]
mod tests;
