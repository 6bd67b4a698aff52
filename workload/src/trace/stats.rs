//! What a trace looks like as a load: arrival rate and burstiness, prompt
//! and answer lengths, sessions. Pure: rows in, figures out.
//!
//! - `iat_cv`: the coefficient of variation of inter-arrival times (1 for a
//!   Poisson process, 0 for a fixed rate, above 1 for bursts).
//! - `idc_*`: the index of dispersion of counts, variance / mean of the
//!   number of arrivals per window of 1 s, 10 s and 60 s (1 for Poisson at
//!   every scale; growing with the window for long-range burstiness).
//! - `zero_iat_share`: inter-arrival times that are exactly 0. Quantised
//!   timestamps (Mooncake's 3 s buckets) would make a faithful replay fire
//!   artificial bursts, so above 1% the stats say so.

use std::collections::HashMap;

use serde::Serialize;
use sluice_filters::TraceLine;

/// Result-file version of [`TraceStats`].
const STATS_VERSION: u32 = 1;

/// Above this share of zero inter-arrival times the trace is called
/// quantised: a continuous arrival process recorded to the microsecond at
/// 1,000 requests/s has about 0.1%.
pub(crate) const QUANTISED_ZERO_SHARE: f64 = 0.01;

/// `sluice trace stats --json`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TraceStats {
    pub v: u32,
    pub requests: u64,
    /// From the first arrival to the last.
    pub duration_s: f64,
    /// Requests per second: 1 / the mean inter-arrival time.
    pub mean_rate: Option<f64>,
    pub iat_mean_ms: Option<f64>,
    pub iat_cv: Option<f64>,
    pub zero_iat_share: Option<f64>,
    /// The largest step all arrivals are a multiple of (from the first).
    pub timestamp_grid_ms: Option<f64>,
    /// The most requests that arrive at one same instant.
    pub max_same_instant: u64,
    pub quantised: bool,
    pub idc_1s: Option<f64>,
    pub idc_10s: Option<f64>,
    pub idc_60s: Option<f64>,
    pub input_tokens: Option<Lengths>,
    pub output_tokens: Option<Lengths>,
    pub sessions: u64,
    pub turns_per_session: Option<Lengths>,
    pub warnings: Vec<String>,
}

/// The distribution of a count (tokens, turns); nearest-rank percentiles.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Lengths {
    pub count: u64,
    pub mean: f64,
    pub p50: u64,
    pub p90: u64,
    pub p99: u64,
    pub max: u64,
}

impl Lengths {
    fn of(mut values: Vec<u64>) -> Option<Lengths> {
        if values.is_empty() {
            return None;
        }
        values.sort_unstable();
        let n = values.len();
        let rank = |q: f64| values[((q * n as f64).ceil() as usize).clamp(1, n) - 1];
        Some(Lengths {
            count: n as u64,
            mean: values.iter().map(|v| *v as f64).sum::<f64>() / n as f64,
            p50: rank(0.50),
            p90: rank(0.90),
            p99: rank(0.99),
            max: values[n - 1],
        })
    }
}

/// Collects rows as they are read; only what the figures need is kept.
#[derive(Debug, Default)]
pub struct StatsBuilder {
    arrivals: Vec<u64>,
    input: Vec<u64>,
    output: Vec<u64>,
    turns: HashMap<String, u64>,
}

impl StatsBuilder {
    pub fn add(&mut self, line: &TraceLine) {
        self.arrivals.push(line.arrival_us);
        self.input.extend(line.input_tokens);
        self.output.extend(line.output_tokens);
        if let Some(session) = &line.session_id {
            *self.turns.entry(session.clone()).or_default() += 1;
        }
    }

    pub fn finish(self) -> Result<TraceStats, String> {
        let StatsBuilder {
            mut arrivals,
            input,
            output,
            turns,
        } = self;
        if arrivals.is_empty() {
            return Err("no requests".to_owned());
        }
        arrivals.sort_unstable();
        let first = arrivals[0];
        let duration_us = arrivals[arrivals.len() - 1] - first;
        let iats: Vec<u64> = arrivals.windows(2).map(|w| w[1] - w[0]).collect();
        let iat = Moments::of(iats.iter().map(|d| *d as f64));
        let zero_share = (!iats.is_empty())
            .then(|| iats.iter().filter(|d| **d == 0).count() as f64 / iats.len() as f64);
        let grid = grid_us(&arrivals);
        let quantised = zero_share.is_some_and(|z| z > QUANTISED_ZERO_SHARE);
        let max_same_instant = longest_tie(&arrivals);
        let warnings: Vec<String> = quantised_warning(&arrivals).into_iter().collect();
        let window = |seconds: u64| dispersion(&arrivals, seconds * 1_000_000);
        Ok(TraceStats {
            v: STATS_VERSION,
            requests: arrivals.len() as u64,
            duration_s: duration_us as f64 / 1e6,
            mean_rate: iat.mean.filter(|m| *m > 0.0).map(|m| 1e6 / m),
            iat_mean_ms: iat.mean.map(|m| m / 1000.0),
            iat_cv: iat.cv(),
            zero_iat_share: zero_share,
            timestamp_grid_ms: (grid > 0).then(|| grid as f64 / 1000.0),
            max_same_instant,
            quantised,
            idc_1s: window(1),
            idc_10s: window(10),
            idc_60s: window(60),
            input_tokens: Lengths::of(input),
            output_tokens: Lengths::of(output),
            sessions: turns.len() as u64,
            turns_per_session: Lengths::of(turns.into_values().collect()),
            warnings,
        })
    }
}

impl TraceStats {
    pub fn of<'a>(lines: impl IntoIterator<Item = &'a TraceLine>) -> Result<TraceStats, String> {
        let mut builder = StatsBuilder::default();
        lines.into_iter().for_each(|line| builder.add(line));
        builder.finish()
    }
}

/// Mean and population standard deviation.
struct Moments {
    mean: Option<f64>,
    sd: f64,
}

impl Moments {
    fn of(values: impl Iterator<Item = f64> + Clone) -> Moments {
        let n = values.clone().count();
        if n == 0 {
            return Moments {
                mean: None,
                sd: 0.0,
            };
        }
        let mean = values.clone().sum::<f64>() / n as f64;
        let var = values.map(|v| (v - mean).powi(2)).sum::<f64>() / n as f64;
        Moments {
            mean: Some(mean),
            sd: var.sqrt(),
        }
    }

    fn cv(&self) -> Option<f64> {
        self.mean.filter(|m| *m > 0.0).map(|m| self.sd / m)
    }
}

/// Variance / mean of the arrivals per window of `width` µs, over the whole
/// windows from the first arrival (the partial last one left out, as it
/// would count low); `None` under two windows. The windows are walked, not
/// stored: one arrival years after the rest (a timestamp in µs read as ns)
/// makes billions of windows, for which a table of counts was once
/// allocated whole (found by the `trace` fuzzer).
pub(crate) fn dispersion(sorted: &[u64], width: u64) -> Option<f64> {
    let first = *sorted.first()?;
    let windows = (sorted[sorted.len() - 1] - first) / width;
    if windows < 2 {
        return None;
    }
    // The counts of the windows that have arrivals, in order; the rest are 0.
    let mut counts: Vec<u64> = Vec::new();
    let mut current = None;
    for a in sorted {
        let window = (a - first) / width;
        if window >= windows {
            break;
        }
        match counts.last_mut() {
            Some(c) if current == Some(window) => *c += 1,
            _ => {
                counts.push(1);
                current = Some(window);
            }
        }
    }
    let k = windows as f64;
    let mean = counts.iter().sum::<u64>() as f64 / k;
    if mean == 0.0 {
        return None;
    }
    let empty = (windows - counts.len() as u64) as f64;
    let var = (counts
        .iter()
        .map(|c| (*c as f64 - mean).powi(2))
        .sum::<f64>()
        + empty * mean.powi(2))
        / (k - 1.0);
    Some(var / mean)
}

/// The largest step all arrivals are a multiple of, from the first (µs).
fn grid_us(sorted: &[u64]) -> u64 {
    let first = sorted.first().copied().unwrap_or(0);
    sorted.iter().fold(0, |g, a| gcd(g, a - first))
}

/// The warning of quantised timestamps, for sorted arrivals (µs): `Some`
/// when more than [`QUANTISED_ZERO_SHARE`] of the inter-arrival times are
/// exactly 0. `sluice trace stats` and the replay both say it, in these
/// words.
pub fn quantised_warning(sorted: &[u64]) -> Option<String> {
    let iats = sorted.len().checked_sub(1).filter(|n| *n > 0)?;
    let zeros = sorted.windows(2).filter(|w| w[1] == w[0]).count();
    let share = zeros as f64 / iats as f64;
    (share > QUANTISED_ZERO_SHARE).then(|| {
        format!(
            "{:.1}% of inter-arrival times are exactly 0 (timestamps on a {} ms grid, up to \
             {} requests at one instant): the timestamps look quantised, and a faithful replay \
             would fire artificial bursts",
            share * 100.0,
            grid_us(sorted) as f64 / 1000.0,
            longest_tie(sorted)
        )
    })
}

fn gcd(a: u64, b: u64) -> u64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// The longest run of equal values in a sorted slice.
fn longest_tie(sorted: &[u64]) -> u64 {
    sorted
        .chunk_by(|a, b| a == b)
        .map(|run| run.len() as u64)
        .max()
        .unwrap_or(0)
}

#[cfg(test)]
mod tests;
