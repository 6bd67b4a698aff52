//! The rate over time, as ServeGen's per-window records: arrivals per
//! window, the CV of the inter-arrival times in it, and the gamma shape
//! fitted to them. The rates are the curve a replay follows.

use serde::Serialize;

use super::round::sig;
use super::single::gamma_from;

/// Gaps a window needs for its gamma shape; under it, `null`.
pub(crate) const MIN_WINDOW_SAMPLES: usize = 30;

/// One window, from the first arrival on.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Window {
    pub start_s: f64,
    pub requests: u64,
    /// Arrivals per second in the window.
    pub rate: f64,
    /// Of the gaps that end in the window.
    pub iat_cv: Option<f64>,
    /// The gamma shape by maximum likelihood on the window's positive gaps,
    /// with at least [`MIN_WINDOW_SAMPLES`] of them.
    pub gamma_shape: Option<f64>,
}

/// The windows of `width_us` over `sorted` arrivals (µs): the whole ones,
/// and a last partial one when it spans at least half a window (its rate
/// over the part it spans). A trace shorter than half a window has one,
/// its rate over the trace's span.
pub(crate) fn windows(sorted: &[u64], width_us: u64) -> Vec<Window> {
    let (Some(first), Some(last)) = (sorted.first(), sorted.last()) else {
        return Vec::new();
    };
    let span = last - first;
    let width = width_us.max(1);
    let whole = span / width;
    let tail = span % width;
    let count = whole + u64::from(tail * 2 >= width || whole == 0);
    let Ok(count) = usize::try_from(count) else {
        return Vec::new();
    };
    let mut acc: Vec<Acc> = vec![Acc::default(); count];
    for (i, a) in sorted.iter().enumerate() {
        let Some(w) = usize::try_from((a - first) / width)
            .ok()
            .and_then(|w| acc.get_mut(w))
        else {
            continue;
        };
        w.requests += 1;
        if let Some(prev) = i.checked_sub(1).map(|p| sorted[p]) {
            w.add((a - prev) as f64 / 1e6);
        }
    }
    acc.into_iter()
        .enumerate()
        .map(|(i, w)| {
            let start_us = i as u64 * width;
            let covered = if start_us + width <= span {
                width
            } else {
                (span - start_us).max(1)
            };
            w.finish(start_us as f64 / 1e6, covered as f64 / 1e6)
        })
        .collect()
}

#[derive(Clone, Debug, Default)]
struct Acc {
    requests: u64,
    gaps: u64,
    sum: f64,
    sum_sq: f64,
    positive: usize,
    positive_sum: f64,
    positive_ln_sum: f64,
}

impl Acc {
    fn add(&mut self, gap: f64) {
        self.gaps += 1;
        self.sum += gap;
        self.sum_sq += gap * gap;
        if gap > 0.0 {
            self.positive += 1;
            self.positive_sum += gap;
            self.positive_ln_sum += gap.ln();
        }
    }

    fn finish(self, start_s: f64, covered_s: f64) -> Window {
        let n = self.gaps as f64;
        let iat_cv = (self.gaps >= 2 && self.sum > 0.0).then(|| {
            let mean = self.sum / n;
            let var = (self.sum_sq / n - mean * mean).max(0.0);
            sig(var.sqrt() / mean)
        });
        let p = self.positive as f64;
        let gamma_shape = (self.positive >= MIN_WINDOW_SAMPLES)
            .then(|| gamma_from(self.positive_sum / p, self.positive_ln_sum / p))
            .flatten()
            .map(|(k, _)| sig(k));
        Window {
            start_s,
            requests: self.requests,
            rate: sig(self.requests as f64 / covered_s),
            iat_cv,
            gamma_shape,
        }
    }
}
