//! Live per-(route, cluster) statistics for `GET /v1/stats`: the data plane
//! hands each finished request to a bounded channel (never blocking, never
//! locking); one aggregator task folds them into one-second buckets of
//! hdrhistograms, of which the last ten make the window.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Seconds of history in the window.
pub const WINDOW_SECONDS: u64 = 10;
const CHANNEL_CAPACITY: usize = 65_536;
/// Latencies are kept in microseconds up to ten minutes.
const MAX_MICROS: u64 = 600_000_000;

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
}

/// The token timing of one streamed (or metered) answer.
#[derive(Clone, Debug, Default)]
pub struct TokenSample {
    pub ttft: Option<Duration>,
    pub tpot: Option<Duration>,
    /// Every gap between content chunks.
    pub gaps: Vec<Duration>,
    pub output_tokens: u64,
}

struct Bucket {
    second: u64,
    requests: u64,
    errors: u64,
    output_tokens: u64,
    latency_us: Histogram<u64>,
    ttft_us: Histogram<u64>,
    gap_us: Histogram<u64>,
    tpot_us: Histogram<u64>,
}

impl Bucket {
    fn new() -> Option<Bucket> {
        Some(Bucket {
            second: u64::MAX,
            requests: 0,
            errors: 0,
            output_tokens: 0,
            latency_us: new_histogram()?,
            ttft_us: new_histogram()?,
            gap_us: new_histogram()?,
            tpot_us: new_histogram()?,
        })
    }

    fn reset(&mut self, second: u64) {
        self.second = second;
        self.requests = 0;
        self.errors = 0;
        self.output_tokens = 0;
        self.latency_us.reset();
        self.ttft_us.reset();
        self.gap_us.reset();
        self.tpot_us.reset();
    }
}

#[derive(Default)]
struct Windows {
    /// Per key: a ring of WINDOW_SECONDS buckets indexed by second.
    rings: HashMap<StatsKey, Vec<Bucket>>,
}

#[derive(Clone, Debug, Serialize)]
pub struct LatencySummary {
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

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
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ttft_ms: Option<LatencySummary>,
    /// Gap between content chunks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gap_ms: Option<LatencySummary>,
    /// Time per output token after the first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tpot_ms: Option<LatencySummary>,
    pub output_tokens: u64,
    pub output_tokens_per_second: f64,
}

fn summary(h: &Histogram<u64>) -> Option<LatencySummary> {
    if h.is_empty() {
        return None;
    }
    let ms = |q: f64| h.value_at_quantile(q) as f64 / 1000.0;
    Some(LatencySummary {
        p50: ms(0.50),
        p95: ms(0.95),
        p99: ms(0.99),
    })
}

/// The buckets of one key merged over the window.
struct Merged {
    requests: u64,
    errors: u64,
    output_tokens: u64,
    latency_us: Histogram<u64>,
    ttft_us: Histogram<u64>,
    gap_us: Histogram<u64>,
    tpot_us: Histogram<u64>,
}

impl Merged {
    fn of<'a>(buckets: impl Iterator<Item = &'a Bucket>) -> Option<Merged> {
        let mut m = Merged {
            requests: 0,
            errors: 0,
            output_tokens: 0,
            latency_us: new_histogram()?,
            ttft_us: new_histogram()?,
            gap_us: new_histogram()?,
            tpot_us: new_histogram()?,
        };
        for b in buckets {
            m.requests += b.requests;
            m.errors += b.errors;
            m.output_tokens += b.output_tokens;
            m.latency_us.add(&b.latency_us).ok()?;
            m.ttft_us.add(&b.ttft_us).ok()?;
            m.gap_us.add(&b.gap_us).ok()?;
            m.tpot_us.add(&b.tpot_us).ok()?;
        }
        Some(m)
    }
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
        loop {
            tokio::select! {
                _ = cancel.cancelled() => return,
                n = rx.recv_many(&mut batch, 1024) => {
                    if n == 0 {
                        return;
                    }
                    let second = self.started.elapsed().as_secs();
                    let mut w = self.windows.lock().unwrap_or_else(|p| p.into_inner());
                    for s in batch.drain(..) {
                        w.add(second, s);
                    }
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
                let m = Merged::of(ring.iter().filter(|b| b.second + WINDOW_SECONDS > second))?;
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
                    latency_ms: summary(&m.latency_us)?,
                    ttft_ms: summary(&m.ttft_us),
                    gap_ms: summary(&m.gap_us),
                    tpot_ms: summary(&m.tpot_us),
                    output_tokens: m.output_tokens,
                    output_tokens_per_second: m.output_tokens as f64 / span,
                })
            })
            .collect();
        rows.sort_by(|a, b| (&a.route, &a.cluster).cmp(&(&b.route, &b.cluster)));
        rows
    }
}

fn new_histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_MICROS, 2).ok()
}

impl Windows {
    fn add(&mut self, second: u64, s: Sample) {
        let ring = self.rings.entry(s.key).or_default();
        let slot = (second % WINDOW_SECONDS) as usize;
        while ring.len() <= slot {
            let Some(b) = Bucket::new() else { return };
            ring.push(b);
        }
        let b = &mut ring[slot];
        if b.second != second {
            b.reset(second);
        }
        b.requests += 1;
        if s.status >= 500 {
            b.errors += 1;
        }
        record(&mut b.latency_us, s.latency);
        if let Some(t) = &s.tokens {
            b.output_tokens += t.output_tokens;
            if let Some(ttft) = t.ttft {
                record(&mut b.ttft_us, ttft);
            }
            if let Some(tpot) = t.tpot {
                record(&mut b.tpot_us, tpot);
            }
            for gap in &t.gaps {
                record(&mut b.gap_us, *gap);
            }
        }
    }
}

fn record(h: &mut Histogram<u64>, d: Duration) {
    let us = (d.as_micros() as u64).clamp(1, MAX_MICROS);
    // In range by the clamp above.
    let _ = h.record(us);
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn window_reports_rates_errors_and_percentiles_then_forgets() {
        let stats = Stats::new();
        let cancel = CancellationToken::new();
        let task = tokio::spawn(stats.clone().run_aggregator(cancel.clone()));
        let key = stats.key("chat", "a", "v1");
        assert_eq!(stats.key("chat", "a", "v1"), key);
        tokio::time::advance(Duration::from_secs(10)).await;
        for i in 0..100u64 {
            stats.record(Sample {
                key,
                status: if i < 5 { 503 } else { 200 },
                latency: Duration::from_millis(i + 1),
                tokens: (i < 10).then(|| TokenSample {
                    ttft: Some(Duration::from_millis(100 + i)),
                    tpot: Some(Duration::from_millis(20)),
                    gaps: vec![Duration::from_millis(10); 4],
                    output_tokens: 5,
                }),
            });
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
        let rows = stats.rows();
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!((r.requests, r.errors), (100, 5));
        assert!((r.rps - 10.0).abs() < 0.01);
        assert!((r.error_rate - 0.05).abs() < 1e-9);
        assert!((49.0..=51.0).contains(&r.latency_ms.p50), "{r:?}");
        assert!((98.0..=100.5).contains(&r.latency_ms.p99), "{r:?}");
        let ttft = r.ttft_ms.clone().unwrap();
        assert!((104.0..=106.0).contains(&ttft.p50), "{r:?}");
        assert!(
            (9.9..=10.1).contains(&r.gap_ms.clone().unwrap().p99),
            "{r:?}"
        );
        assert_eq!(r.output_tokens, 50);
        assert!((r.output_tokens_per_second - 5.0).abs() < 0.01);
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(stats.rows().is_empty());
        cancel.cancel();
        task.await.unwrap();
    }
}
