//! The counts and histograms of a set of requests ([`WindowView`]), and the
//! ring of one-second buckets per key that windows are merged from.

use std::time::Duration;

use hdrhistogram::Histogram;

use sluice_filters::{GrpcCodes, GRPC_MAX_STATUS};

use super::Sample;

/// One count per gRPC status code.
const GRPC_CODES: usize = GRPC_MAX_STATUS as usize + 1;

/// Latencies are kept in microseconds up to ten minutes.
const MAX_MICROS: u64 = 600_000_000;
/// `(output tokens, E2E)` points kept per one-second bucket: the P99 token
/// slope's input. Beyond it a second's later answers are not kept (the
/// slope reads bins of output length, which a second's first 512 answers
/// fill as well as all of them).
pub const MAX_TOKEN_POINTS: usize = 512;

/// What a set of requests looked like: one second's bucket, or a window
/// merged from several. Histograms are in microseconds and allocated on
/// first use, so a cluster that streams no tokens pays for no token
/// histograms.
#[derive(Clone, Debug, Default)]
pub struct WindowView {
    pub requests: u64,
    /// Answers with a 5xx status.
    pub errors: u64,
    pub output_tokens: u64,
    pub input_tokens: u64,
    /// Requests the meter counted input or output tokens of.
    pub token_requests: u64,
    /// Of those, the requests the cluster's per-token table priced, their
    /// tokens and what they cost.
    pub priced_requests: u64,
    pub priced_tokens: u64,
    pub cost_usd: f64,
    /// Requests that contributed at least one gap between chunks.
    pub gap_requests: u64,
    /// gRPC calls by the status code they ended with (0..=16).
    pub grpc_codes: [u64; GRPC_CODES],
    /// `(output tokens, E2E ms)` of answers with output tokens, at most
    /// [`MAX_TOKEN_POINTS`] a second; merged only for
    /// [`Measure::TokenPoints`].
    pub token_points: Vec<(u64, f64)>,
    latency_us: Option<Histogram<u64>>,
    ttft_us: Option<Histogram<u64>>,
    gap_us: Option<Histogram<u64>>,
    tpot_us: Option<Histogram<u64>>,
}

/// Which distribution of a [`WindowView`] to read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Measure {
    /// Whole request, arrival to last byte.
    Latency,
    /// Time to first token.
    Ttft,
    /// Every gap between content chunks.
    Gap,
    /// Time per output token after the first.
    Tpot,
    /// The `(output tokens, E2E)` points of the P99 token slope. Not a
    /// histogram, and not in [`Measure::ALL`]: only shedding reads it.
    TokenPoints,
}

impl Measure {
    pub const ALL: [Measure; 4] = [Measure::Latency, Measure::Ttft, Measure::Gap, Measure::Tpot];
}

impl WindowView {
    /// Counts one finished request in.
    pub fn add(&mut self, s: &Sample) {
        self.requests += 1;
        if s.status >= 500 {
            self.errors += 1;
        }
        record(&mut self.latency_us, s.latency);
        if let Some(g) = s.grpc {
            self.grpc_codes[g.code()] += 1;
        }
        if let Some(t) = &s.tokens {
            self.output_tokens += t.output_tokens;
            self.input_tokens += t.input_tokens;
            let tokens = t.input_tokens + t.output_tokens;
            if tokens > 0 {
                self.token_requests += 1;
                if let Some(usd) = t.cost_usd {
                    self.priced_requests += 1;
                    self.priced_tokens += tokens;
                    self.cost_usd += usd;
                }
            }
            if let Some(ttft) = t.ttft {
                record(&mut self.ttft_us, ttft);
            }
            if let Some(tpot) = t.tpot {
                record(&mut self.tpot_us, tpot);
            }
            if !t.gaps.is_empty() {
                self.gap_requests += 1;
            }
            if t.output_tokens > 0 && self.token_points.len() < MAX_TOKEN_POINTS {
                self.token_points
                    .push((t.output_tokens, s.latency.as_secs_f64() * 1000.0));
            }
            for gap in &t.gaps {
                record(&mut self.gap_us, *gap);
            }
        }
    }

    /// Adds `other`'s requests to these.
    pub fn merge(&mut self, other: &WindowView) {
        self.merge_only(other, &Measure::ALL);
    }

    /// Adds `other`'s counts, and of its distributions only `measures`:
    /// merging a histogram walks all of it, and a gate reads one or two.
    pub fn merge_only(&mut self, other: &WindowView, measures: &[Measure]) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.output_tokens += other.output_tokens;
        self.input_tokens += other.input_tokens;
        self.token_requests += other.token_requests;
        self.priced_requests += other.priced_requests;
        self.priced_tokens += other.priced_tokens;
        self.cost_usd += other.cost_usd;
        self.gap_requests += other.gap_requests;
        for (mine, theirs) in self.grpc_codes.iter_mut().zip(other.grpc_codes) {
            *mine += theirs;
        }
        for &m in measures {
            match self.histogram_mut(m) {
                Some(h) => merge(h, other.histogram(m)),
                None => self.token_points.extend_from_slice(&other.token_points),
            }
        }
    }

    /// Empties the view and keeps its histograms' memory for reuse.
    fn clear(&mut self) {
        self.requests = 0;
        self.errors = 0;
        self.output_tokens = 0;
        self.input_tokens = 0;
        self.token_requests = 0;
        self.priced_requests = 0;
        self.priced_tokens = 0;
        self.cost_usd = 0.0;
        self.gap_requests = 0;
        self.grpc_codes = [0; GRPC_CODES];
        self.token_points.clear();
        for h in [
            &mut self.latency_us,
            &mut self.ttft_us,
            &mut self.gap_us,
            &mut self.tpot_us,
        ]
        .into_iter()
        .flatten()
        {
            h.reset();
        }
    }

    /// The `q` quantile (0..=1) of `measure` in milliseconds; `None` with no
    /// value recorded.
    pub fn quantile_ms(&self, measure: Measure, q: f64) -> Option<f64> {
        let h = self.histogram(measure)?;
        if h.is_empty() {
            return None;
        }
        Some(h.value_at_quantile(q) as f64 / 1000.0)
    }

    /// How many values of `measure` were recorded (gaps: one per gap).
    pub fn count(&self, measure: Measure) -> u64 {
        self.histogram(measure).map_or(0, Histogram::len)
    }

    /// Input and output tokens together.
    pub fn tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens
    }

    /// gRPC calls, whatever their status.
    pub fn grpc_calls(&self) -> u64 {
        self.grpc_codes.iter().sum()
    }

    /// Percent of gRPC calls whose status is not one of `failures`; `None`
    /// with no gRPC call.
    pub fn grpc_success_percent(&self, failures: GrpcCodes) -> Option<f64> {
        let calls = self.grpc_calls();
        let failed: u64 = failures.codes().map(|c| self.grpc_codes[c as usize]).sum();
        (calls > 0).then(|| (calls - failed) as f64 * 100.0 / calls as f64)
    }

    /// Percent of requests answered 5xx; `None` with no request.
    pub fn error_percent(&self) -> Option<f64> {
        (self.requests > 0).then(|| self.errors as f64 * 100.0 / self.requests as f64)
    }

    fn histogram_mut(&mut self, measure: Measure) -> Option<&mut Option<Histogram<u64>>> {
        match measure {
            Measure::Latency => Some(&mut self.latency_us),
            Measure::Ttft => Some(&mut self.ttft_us),
            Measure::Gap => Some(&mut self.gap_us),
            Measure::Tpot => Some(&mut self.tpot_us),
            Measure::TokenPoints => None,
        }
    }

    fn histogram(&self, measure: Measure) -> Option<&Histogram<u64>> {
        match measure {
            Measure::Latency => self.latency_us.as_ref(),
            Measure::Ttft => self.ttft_us.as_ref(),
            Measure::Gap => self.gap_us.as_ref(),
            Measure::Tpot => self.tpot_us.as_ref(),
            Measure::TokenPoints => None,
        }
    }
}

fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_MICROS, 2).ok()
}

fn record(h: &mut Option<Histogram<u64>>, d: Duration) {
    if h.is_none() {
        *h = new_histogram();
    }
    if let Some(h) = h {
        let us = (d.as_micros() as u64).clamp(1, MAX_MICROS);
        // In range by the clamp above.
        let _ = h.record(us);
    }
}

fn merge(into: &mut Option<Histogram<u64>>, from: Option<&Histogram<u64>>) {
    let Some(from) = from.filter(|h| !h.is_empty()) else {
        return;
    };
    if into.is_none() {
        *into = new_histogram();
    }
    if let Some(into) = into {
        // Same bounds on both sides: adding cannot fail.
        let _ = into.add(from);
    }
}

struct Bucket {
    /// The second since the stats began that this bucket holds.
    second: u64,
    view: WindowView,
}

/// One key's last `len` seconds: bucket `s % len` holds second `s` until a
/// later second reuses it.
pub(super) struct Ring {
    buckets: Vec<Bucket>,
    len: usize,
}

impl Ring {
    pub(super) fn new(seconds: u64) -> Ring {
        Ring {
            buckets: Vec::new(),
            len: seconds.max(1) as usize,
        }
    }

    pub(super) fn seconds(&self) -> u64 {
        self.len as u64
    }

    pub(super) fn add(&mut self, second: u64, s: &Sample) {
        let slot = (second % self.len as u64) as usize;
        while self.buckets.len() <= slot {
            self.buckets.push(Bucket {
                second: u64::MAX,
                view: WindowView::default(),
            });
        }
        let b = &mut self.buckets[slot];
        if b.second != second {
            b.second = second;
            b.view.clear();
        }
        b.view.add(s);
    }

    /// The requests of the `seconds` seconds up to and including `now`
    /// (the current, partial second counts).
    pub(super) fn view(&self, now: u64, seconds: u64, measures: &[Measure]) -> WindowView {
        let mut view = WindowView::default();
        for b in &self.buckets {
            if b.second <= now && b.second + seconds > now {
                view.merge_only(&b.view, measures);
            }
        }
        view
    }

    /// Keeps `seconds` of history from now on, moving each bucket to its
    /// slot in the longer ring.
    pub(super) fn grow(&mut self, seconds: u64) {
        if seconds as usize <= self.len {
            return;
        }
        let old = std::mem::take(&mut self.buckets);
        self.len = seconds as usize;
        for b in old.into_iter().filter(|b| b.second != u64::MAX) {
            let slot = (b.second % seconds) as usize;
            while self.buckets.len() <= slot {
                self.buckets.push(Bucket {
                    second: u64::MAX,
                    view: WindowView::default(),
                });
            }
            self.buckets[slot] = b;
        }
    }
}
