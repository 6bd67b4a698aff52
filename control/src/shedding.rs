//! Adaptive shedding's live part: each route's level, published through an
//! atomic that the proxy reads with no lock ([`RouteShedding`]), and the
//! control task that reads the signals of the route's clusters every
//! `interval`, steps the level (`sluice_filters::Shedder`) and writes every
//! change to the audit log with its evidence.
//!
//! The signals: TTFT p95 and the P99 cost per output token over its calm
//! baseline, from this instance's stats windows of every route that sends
//! traffic to the route's clusters; the model servers' queue gauge (the
//! upstream scraper's `waiting`, summed over the clusters); the fullest
//! GPU's memory. A window is read back to the last level change at most,
//! so that a change is judged on what followed it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU16, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rand::SeedableRng;
use serde_json::json;
use sluice_filters::{
    is_shed, p99_token_slope, priority_rank, slope_interval, slope_readable, token_cost_excess,
    LevelChange, Metrics, Shedder, SheddingRouteMetrics, Signals, SlopeAt,
};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::info;

use crate::config::SheddingConfig;
use crate::observers::Observers;
use crate::shared::Shared;
use crate::snapshot::Snapshot;
use crate::stats::{Measure, StatsKey, WindowView};
use crate::store::SnapshotStore;

/// How often the route list is re-read when no route is due sooner.
const RECHECK: Duration = Duration::from_secs(1);
/// The seed of the slope's bootstrap: the same window reads the same.
const SLOPE_SEED: u64 = 0x5ed_5107e;

/// One route's shedding: its rule, its handles and the live level (in
/// restore steps). Kept across snapshot swaps while the route's `shedding`
/// is unchanged.
pub struct RouteShedding {
    pub config: SheddingConfig,
    pub metrics: SheddingRouteMetrics,
    units: AtomicU16,
}

impl RouteShedding {
    pub fn new(route: &str, config: SheddingConfig, metrics: &Metrics) -> RouteShedding {
        let metrics = metrics.shedding.route(route, &config.levels);
        metrics.level.set(0.0);
        RouteShedding {
            config,
            metrics,
            units: AtomicU16::new(0),
        }
    }

    /// The level now in restore steps: 0 sheds nothing.
    pub fn units(&self) -> u16 {
        self.units.load(Ordering::Relaxed)
    }

    /// The level now: how many of the lowest priorities are shed (0.75:
    /// three quarters of the lowest).
    pub fn level(&self) -> f64 {
        self.config.policy().level(self.units())
    }

    fn set_units(&self, units: u16) {
        self.units.store(units, Ordering::Relaxed);
        self.metrics.level.set(self.config.policy().level(units));
    }

    /// The rank (0 highest) of a request whose priority reads `value`.
    pub fn rank(&self, value: Option<&[u8]>) -> usize {
        priority_rank(&self.config.levels, value, self.config.default)
    }

    /// Whether a request of `rank` is shed at the level now (`random`,
    /// uniform over `u64`, picks the shed share of a partly shed
    /// priority); counts it.
    pub fn sheds(&self, rank: usize, random: u64) -> bool {
        let (levels, steps) = (self.config.levels.len(), self.config.restore_steps);
        let shed = is_shed(rank, levels, self.units(), steps, random);
        if shed {
            if let Some(c) = self.metrics.shed.get(rank) {
                c.inc();
            }
        }
        shed
    }
}

/// The loop's own state of one route.
struct RouteState {
    runtime: Arc<RouteShedding>,
    shedder: Shedder,
    /// The last level change (or when the route was first seen).
    changed_at: Instant,
    due: Instant,
    /// The readable token slope at the lowest rate seen.
    baseline: Option<SlopeAt>,
}

/// Reads the signals and steps each shedding route's level until `cancel`.
pub(crate) async fn run_shedding(
    store: Arc<SnapshotStore>,
    shared: Shared,
    observers: Observers,
    cancel: CancellationToken,
) {
    let started = Instant::now();
    let mut routes: HashMap<String, RouteState> = HashMap::new();
    loop {
        let snapshot = store.load();
        let now = Instant::now();
        // Routes gone, or whose rule changed (a new runtime, level 0), start over.
        routes.retain(|name, state| {
            snapshot
                .route(name)
                .and_then(|r| r.shedding.as_ref())
                .is_some_and(|s| Arc::ptr_eq(s, &state.runtime))
        });
        for route in &snapshot.routes {
            let Some(runtime) = &route.shedding else {
                continue;
            };
            let state = routes
                .entry(route.name.clone())
                .or_insert_with(|| RouteState {
                    runtime: runtime.clone(),
                    shedder: Shedder::default(),
                    changed_at: now,
                    due: now,
                    baseline: None,
                });
            if now < state.due {
                continue;
            }
            state.due = now + runtime.config.interval;
            let readings = read_signals(&snapshot, &route.name, state, &shared, &observers, now);
            let now_ms = u64::try_from(now.duration_since(started).as_millis()).unwrap_or(u64::MAX);
            let policy = runtime.config.policy();
            if let Some(change) = state.shedder.step(&policy, &readings, now_ms) {
                state.changed_at = now;
                runtime.set_units(change.units);
                record(&shared, &snapshot, &route.name, &change);
            }
        }
        let next = routes
            .values()
            .map(|s| s.due)
            .min()
            .map_or(now + RECHECK, |d| d.min(now + RECHECK));
        tokio::select! {
            _ = cancel.cancelled() => return,
            _ = tokio::time::sleep_until(next) => {}
        }
    }
}

/// The event and the log line of a level change.
fn record(shared: &Shared, snapshot: &Snapshot, route: &str, change: &LevelChange) {
    let action = format!("route {route}: {}", change.describe());
    info!(route, from = change.from, to = change.to, evidence = %action, "shedding level changed");
    shared.events.push_with_evidence(
        "shedding",
        &action,
        snapshot.version,
        json!({
            "route": route,
            "from": change.from,
            "to": change.to,
            "signals": change.evidence,
        }),
    );
}

/// One evaluation's readings of `route`'s signals.
fn read_signals(
    snapshot: &Snapshot,
    route: &str,
    state: &mut RouteState,
    shared: &Shared,
    observers: &Observers,
    now: Instant,
) -> Signals {
    let config = &state.runtime.config;
    let bounds = config.bounds;
    let clusters: Vec<&str> = snapshot
        .route(route)
        .map(|r| {
            r.targets
                .iter()
                .filter_map(|t| snapshot.clusters.get(t.cluster))
                .map(|c| c.config.name.as_str())
                .collect()
        })
        .unwrap_or_default();
    let mut readings = Signals::default();
    if bounds.ttft_p95.is_some() || bounds.token_cost_excess_p99.is_some() {
        // Back to the last change at most, in whole seconds.
        let since = now.duration_since(state.changed_at);
        let window = config.window.min(since).max(Duration::from_secs(1));
        let mut measures = vec![Measure::Ttft];
        if bounds.token_cost_excess_p99.is_some() {
            measures.push(Measure::TokenPoints);
        }
        let keys = cluster_keys(snapshot, &clusters);
        let view = shared.stats.view_merged(&keys, window, &measures);
        if bounds.ttft_p95.is_some() && view.count(Measure::Ttft) >= config.min_requests {
            readings.ttft_p95 = view.quantile_ms(Measure::Ttft, 0.95);
        }
        if let Some(bound) = bounds.token_cost_excess_p99 {
            readings.token_cost_excess_p99 = token_cost(&view, window, bound, &mut state.baseline);
        }
    }
    if bounds.queue.is_some() {
        let upstreams = observers.upstreams.as_ref();
        let waiting: Vec<f64> = clusters
            .iter()
            .filter_map(|c| upstreams?.latest(c)?.waiting)
            .collect();
        readings.queue = (!waiting.is_empty()).then(|| waiting.iter().sum());
    }
    if bounds.gpu_memory.is_some() {
        readings.gpu_memory = observers
            .gpu
            .as_ref()
            .and_then(|g| g.memory_used_percent_max());
    }
    readings
}

/// The stats keys of every route target that sends traffic to `clusters`.
fn cluster_keys(snapshot: &Snapshot, clusters: &[&str]) -> Vec<StatsKey> {
    let mut keys: Vec<StatsKey> = Vec::new();
    for r in &snapshot.routes {
        for t in &r.targets {
            let name = snapshot
                .clusters
                .get(t.cluster)
                .map(|c| c.config.name.as_str());
            if name.is_some_and(|n| clusters.contains(&n)) && !keys.contains(&t.stats) {
                keys.push(t.stats);
            }
        }
    }
    keys
}

/// The window's P99 cost per output token over the calm baseline (the
/// readable slope at the lowest answer rate seen, this one included), as
/// `sluice capacity` reads it per stage. `None` while the slope cannot be
/// read against `bound`.
fn token_cost(
    view: &WindowView,
    window: Duration,
    bound: f64,
    baseline: &mut Option<SlopeAt>,
) -> Option<f64> {
    let points = &view.token_points;
    let slope = p99_token_slope(points)?.ms_per_token;
    let mut rng = rand::rngs::StdRng::seed_from_u64(SLOPE_SEED);
    if !slope_readable(slope_interval(points, &mut rng), bound) {
        return None;
    }
    let reading = SlopeAt {
        rate: points.len() as f64 / window.as_secs_f64().max(1.0),
        ms_per_token: slope,
    };
    let base = SlopeAt::calmer(*baseline, reading);
    *baseline = Some(base);
    Some(token_cost_excess(slope, base))
}

#[cfg(test)]
mod tests;
