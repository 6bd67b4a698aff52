//! What the data plane records into and the control plane reads: the
//! metric families, the stats windows, the audit log, the mirror's
//! differing pairs, the recorder and the watched runtimes. Built once by the control plane and handed out as
//! clones (each part is an `Arc`), so that every user names the part it
//! needs instead of reaching it through the snapshot store.

use std::sync::Arc;

use sluice_filters::Metrics;

use crate::connections::OpenConnections;
use crate::events::EventLog;
use crate::feedback::FeedbackQueue;
use crate::mirror::MirrorDiffs;
use crate::recorder::Recorder;
use crate::reloads::ConfigReloads;
use crate::runtimes::Runtimes;
use crate::state::StateSignal;
use crate::stats::Stats;
use crate::upstream_metrics::KvCacheReadings;

#[derive(Clone)]
pub struct Shared {
    /// Every Prometheus family `/metrics` serves.
    pub metrics: Arc<Metrics>,
    /// The live windows `/v1/stats`, the rollout gates and `halt_if` read.
    pub stats: Arc<Stats>,
    /// The audit log of `/v1/events`.
    pub events: Arc<EventLog>,
    /// Recent shadow answers that differed from the primary's.
    pub mirror_diffs: Arc<MirrorDiffs>,
    /// The running traffic recording, if any.
    pub recorder: Arc<Recorder>,
    /// Asks for the run-time state to be saved (`runtime.state_dir`).
    pub(crate) state: Arc<StateSignal>,
    /// The tokio runtimes whose live tasks `/metrics` reports.
    pub runtimes: Arc<Runtimes>,
    /// Breaches on their way to `feedback.dir`.
    pub(crate) feedback: Arc<FeedbackQueue>,
    /// The live clusters' upstream connections `/metrics` reports.
    pub(crate) connections: Arc<OpenConnections>,
    /// Each scraped endpoint's latest KV-cache ratio (the upstream scrape
    /// writes it, each request reads its endpoint's).
    pub kv_cache: Arc<KvCacheReadings>,
    /// `sluice_config_reloads_total`: whole configs loaded after the start.
    pub(crate) reloads: Arc<ConfigReloads>,
}

impl Shared {
    /// Fresh parts, the metric families registered.
    pub fn new() -> Result<Shared, prometheus::Error> {
        let metrics = Arc::new(Metrics::new()?);
        Ok(Shared {
            recorder: Recorder::new(metrics.registry())?,
            runtimes: Runtimes::new(metrics.registry())?,
            connections: OpenConnections::new(metrics.registry())?,
            reloads: ConfigReloads::new(metrics.registry())?,
            metrics,
            stats: Stats::new(),
            events: Arc::new(EventLog::default()),
            mirror_diffs: Arc::new(MirrorDiffs::default()),
            state: Arc::default(),
            feedback: Arc::default(),
            kv_cache: Arc::default(),
        })
    }
}
