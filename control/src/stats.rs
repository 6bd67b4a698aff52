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
#[derive(Clone, Copy, Debug)]
pub struct Sample {
    pub key: StatsKey,
    pub status: u16,
    pub latency: Duration,
}

struct Bucket {
    second: u64,
    requests: u64,
    errors: u64,
    latency_us: Histogram<u64>,
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
                let mut merged = new_histogram()?;
                let (mut requests, mut errors) = (0, 0);
                for b in ring.iter().filter(|b| b.second + WINDOW_SECONDS > second) {
                    requests += b.requests;
                    errors += b.errors;
                    merged.add(&b.latency_us).ok()?;
                }
                if requests == 0 {
                    return None;
                }
                let ms = |q: f64| merged.value_at_quantile(q) as f64 / 1000.0;
                Some(StatsRow {
                    route,
                    cluster,
                    version,
                    requests,
                    rps: requests as f64 / span,
                    errors,
                    error_rate: errors as f64 / requests as f64,
                    latency_ms: LatencySummary {
                        p50: ms(0.50),
                        p95: ms(0.95),
                        p99: ms(0.99),
                    },
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
            let Some(h) = new_histogram() else { return };
            ring.push(Bucket {
                second: u64::MAX,
                requests: 0,
                errors: 0,
                latency_us: h,
            });
        }
        let b = &mut ring[slot];
        if b.second != second {
            b.second = second;
            b.requests = 0;
            b.errors = 0;
            b.latency_us.reset();
        }
        b.requests += 1;
        if s.status >= 500 {
            b.errors += 1;
        }
        let us = (s.latency.as_micros() as u64).clamp(1, MAX_MICROS);
        // In range by the clamp above.
        let _ = b.latency_us.record(us);
    }
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
        tokio::time::advance(Duration::from_secs(11)).await;
        assert!(stats.rows().is_empty());
        cancel.cancel();
        task.await.unwrap();
    }
}
