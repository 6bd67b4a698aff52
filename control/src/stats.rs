//! Live per-(route, cluster) statistics for `GET /v1/stats` and the rollout
//! gates: the data plane hands each finished request to a bounded channel
//! (never blocking, never locking); one aggregator task folds them into
//! one-second buckets of hdrhistograms as they arrive. `/v1/stats` merges the
//! last ten; a rollout merges its own window (up to a minute) of the keys it
//! watches, which then keep that much history.

mod window;

pub use window::{Measure, WindowView, MAX_TOKEN_POINTS};

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::Serialize;
use serde_with::skip_serializing_none;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use window::Ring;

/// Seconds of history in the window of `GET /v1/stats`.
pub const WINDOW_SECONDS: u64 = 10;
/// The longest window a rollout may ask for.
pub const MAX_WINDOW_SECONDS: u64 = 60;
const CHANNEL_CAPACITY: usize = 65_536;
/// How often the aggregator folds what the data plane sent: well under the
/// rollout controller's interval, far over a request's cost.
pub(crate) const FOLD_INTERVAL: Duration = Duration::from_millis(20);

/// Identifies a (route, cluster, version) triple; resolved at snapshot build.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct StatsKey(u32);

/// One finished request.
#[derive(Clone, Debug)]
pub struct Sample {
    pub key: StatsKey,
    pub status: u16,
    pub latency: Duration,
    /// Token timing, for answers the token meter read.
    pub tokens: Option<TokenSample>,
    /// Load traffic (`sluice load` from a trusted peer): kept apart, so that
    /// a rollout with `gates.exclude_load` can leave it out.
    pub load: bool,
    /// A gRPC call's outcome; `None` for any other request.
    pub grpc: Option<GrpcOutcome>,
}

/// How a gRPC call ended, for `grpc_success_rate_min`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GrpcOutcome {
    /// The `grpc-status` it ended with (from the answer, or sluice's own).
    Status(u32),
    /// None came (a broken stream): counted as UNKNOWN (2), as gRPC
    /// clients report it.
    NoStatus,
}

impl GrpcOutcome {
    /// The code it counts as: 0..=16, UNKNOWN for anything else.
    pub fn code(self) -> usize {
        match self {
            GrpcOutcome::Status(c) if c <= sluice_filters::GRPC_MAX_STATUS => c as usize,
            GrpcOutcome::Status(_) | GrpcOutcome::NoStatus => 2,
        }
    }
}

/// The token timing of one streamed (or metered) answer.
#[derive(Clone, Debug, Default)]
pub struct TokenSample {
    pub ttft: Option<Duration>,
    pub tpot: Option<Duration>,
    /// Every gap between content chunks.
    pub gaps: Vec<Duration>,
    pub output_tokens: u64,
    pub input_tokens: u64,
    /// USD by the cluster's per-token price table (what went into
    /// `sluice_cost_usd_total`); `None` for a model without a price.
    pub cost_usd: Option<f64>,
}

#[derive(Default)]
struct Windows {
    /// Per key: rings of one-second buckets, [`WINDOW_SECONDS`] long unless
    /// a rollout asked for more.
    rings: HashMap<StatsKey, Rings>,
}

/// One key's rings: users' traffic, and load traffic once some arrives.
struct Rings {
    user: Ring,
    load: Option<Ring>,
}

impl Rings {
    fn new(seconds: u64) -> Rings {
        Rings {
            user: Ring::new(seconds),
            load: None,
        }
    }

    fn add(&mut self, second: u64, s: &Sample) {
        if s.load {
            let seconds = self.user.seconds();
            self.load
                .get_or_insert_with(|| Ring::new(seconds))
                .add(second, s);
        } else {
            self.user.add(second, s);
        }
    }

    fn seconds(&self) -> u64 {
        self.user.seconds()
    }

    fn grow(&mut self, seconds: u64) {
        self.user.grow(seconds);
        if let Some(load) = &mut self.load {
            load.grow(seconds);
        }
    }

    fn view(&self, now: u64, seconds: u64, measures: &[Measure], load: bool) -> WindowView {
        let mut view = self.user.view(now, seconds, measures);
        if let Some(ring) = self.load.as_ref().filter(|_| load) {
            view.merge_only(&ring.view(now, seconds, measures), measures);
        }
        view
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

#[skip_serializing_none]
#[derive(Clone, Debug, Serialize)]
pub struct StatsRow {
    pub route: String,
    pub cluster: String,
    pub version: String,
    pub requests: u64,
    pub rps: f64,
    pub errors: u64,
    pub error_rate: f64,
    pub latency_ms: LatencySummary,
    /// Time to first token; absent when no metered answer had one.
    pub ttft_ms: Option<LatencySummary>,
    /// Gap between content chunks.
    pub gap_ms: Option<LatencySummary>,
    /// Time per output token after the first.
    pub tpot_ms: Option<LatencySummary>,
    pub output_tokens: u64,
    pub output_tokens_per_second: f64,
}

fn summary(view: &WindowView, measure: Measure) -> Option<LatencySummary> {
    Some(LatencySummary {
        p50: view.quantile_ms(measure, 0.50)?,
        p95: view.quantile_ms(measure, 0.95)?,
        p99: view.quantile_ms(measure, 0.99)?,
    })
}

pub struct Stats {
    started: Instant,
    tx: mpsc::Sender<Sample>,
    rx: Mutex<Option<mpsc::Receiver<Sample>>>,
    names: Mutex<Vec<(String, String, String)>>,
    windows: Mutex<Windows>,
    dropped: AtomicU64,
}

impl Stats {
    pub fn new() -> Arc<Stats> {
        let (tx, rx) = mpsc::channel(CHANNEL_CAPACITY);
        Arc::new(Stats {
            started: Instant::now(),
            tx,
            rx: Mutex::new(Some(rx)),
            names: Mutex::default(),
            windows: Mutex::default(),
            dropped: AtomicU64::new(0),
        })
    }

    /// The key of a (route, cluster, version) triple; the same triple always
    /// gets the same key, so windows survive snapshot swaps.
    pub fn key(&self, route: &str, cluster: &str, version: &str) -> StatsKey {
        let mut names = self.names.lock().unwrap_or_else(|p| p.into_inner());
        let triple = (route.to_string(), cluster.to_string(), version.to_string());
        let index = match names.iter().position(|n| *n == triple) {
            Some(i) => i,
            None => {
                names.push(triple);
                names.len() - 1
            }
        };
        StatsKey(index as u32)
    }

    /// Called once per request by the data plane: never blocks. A full
    /// channel drops the sample and counts it.
    pub fn record(&self, sample: Sample) {
        if self.tx.try_send(sample).is_err() {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Folds samples into the windows until `cancel`. Run exactly once.
    pub async fn run_aggregator(self: Arc<Self>, cancel: CancellationToken) {
        let Some(mut rx) = self.rx.lock().unwrap_or_else(|p| p.into_inner()).take() else {
            return;
        };
        let mut batch = Vec::with_capacity(1024);
        // Polled on a timer instead of awaited: a receiver waiting on the
        // channel makes every sender wake it, a futex write and a context
        // switch per request on the data plane (measured: ~0.8 per request).
        // Nobody waits here, so `try_send` stays a few atomics.
        let mut tick = tokio::time::interval(FOLD_INTERVAL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                _ = tick.tick() => {}
            }
            loop {
                while batch.len() < 4096 {
                    match rx.try_recv() {
                        Ok(sample) => batch.push(sample),
                        Err(_) => break,
                    }
                }
                if batch.is_empty() {
                    break;
                }
                let second = self.started.elapsed().as_secs();
                let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
                for s in batch.drain(..) {
                    w.rings
                        .entry(s.key)
                        .or_insert_with(|| Rings::new(WINDOW_SECONDS))
                        .add(second, &s);
                }
            }
        }
    }

    /// The window summary per key that saw traffic in the last ten seconds.
    pub fn rows(&self) -> Vec<StatsRow> {
        let now = self.started.elapsed();
        let second = now.as_secs();
        // Before ten seconds have passed, rates are over the time so far.
        let span = now.as_secs_f64().clamp(1.0, WINDOW_SECONDS as f64);
        let names = self.names.lock().unwrap_or_else(|p| p.into_inner()).clone();
        let w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let mut rows: Vec<StatsRow> = w
            .rings
            .iter()
            .filter_map(|(key, ring)| {
                let (route, cluster, version) = names.get(key.0 as usize)?.clone();
                let m = ring.view(second, WINDOW_SECONDS, &Measure::ALL, true);
                if m.requests == 0 {
                    return None;
                }
                Some(StatsRow {
                    route,
                    cluster,
                    version,
                    requests: m.requests,
                    rps: m.requests as f64 / span,
                    errors: m.errors,
                    error_rate: m.errors as f64 / m.requests as f64,
                    latency_ms: summary(&m, Measure::Latency)?,
                    ttft_ms: summary(&m, Measure::Ttft),
                    gap_ms: summary(&m, Measure::Gap),
                    tpot_ms: summary(&m, Measure::Tpot),
                    output_tokens: m.output_tokens,
                    output_tokens_per_second: m.output_tokens as f64 / span,
                })
            })
            .collect();
        rows.sort_by(|a, b| (&a.route, &a.cluster).cmp(&(&b.route, &b.cluster)));
        rows
    }

    /// The requests of `key` over the last `window` (whole seconds, the
    /// current partial one included; at most [`MAX_WINDOW_SECONDS`]). From
    /// the first call on, `key` keeps that much history.
    pub fn view(&self, key: StatsKey, window: Duration) -> WindowView {
        self.view_only(key, window, &Measure::ALL)
    }

    /// As [`Stats::view`], with only `measures` of the distributions (the
    /// counts always): what a rollout's gates read, four times a second.
    pub fn view_only(&self, key: StatsKey, window: Duration, measures: &[Measure]) -> WindowView {
        self.view_of(key, window, measures, true)
    }

    /// The requests of every key of `keys` over the last `window`, merged:
    /// a cluster's traffic over every route that sends it there.
    pub fn view_merged(
        &self,
        keys: &[StatsKey],
        window: Duration,
        measures: &[Measure],
    ) -> WindowView {
        let mut view = WindowView::default();
        for key in keys {
            view.merge_only(&self.view_of(*key, window, measures, true), measures);
        }
        view
    }

    /// As [`Stats::view_only`], with load traffic left out unless `load`
    /// (`gates.exclude_load`).
    pub fn view_of(
        &self,
        key: StatsKey,
        window: Duration,
        measures: &[Measure],
        load: bool,
    ) -> WindowView {
        let seconds =
            (window.as_secs() + u64::from(window.subsec_nanos() > 0)).clamp(1, MAX_WINDOW_SECONDS);
        let now = self.started.elapsed().as_secs();
        let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
        let ring = w
            .rings
            .entry(key)
            .or_insert_with(|| Rings::new(WINDOW_SECONDS.max(seconds)));
        if ring.seconds() < seconds {
            ring.grow(seconds);
        }
        ring.view(now, seconds, measures, load)
    }
}

#[cfg(test)]
mod tests;
