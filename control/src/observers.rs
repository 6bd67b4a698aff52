//! The control plane's watchers of what lies outside sluice: the GPUs and
//! the model servers' own metrics. Built once at start (their metric
//! families registered before anything is served), run as control tasks,
//! read by the control API and, later, by the rollout gates.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::config::GpuConfig;
use crate::gpu::GpuWatcher;
use crate::store::SnapshotStore;
use crate::upstream_metrics::{KvCacheReadings, UpstreamScraper};

/// `None` where a watcher is not running (the API then says so).
#[derive(Clone, Default)]
pub struct Observers {
    pub gpu: Option<Arc<GpuWatcher>>,
    pub upstreams: Option<Arc<UpstreamScraper>>,
}

impl Observers {
    /// Both watchers, their families registered in `registry`; the
    /// upstream scrape publishes its KV-cache readings to `kv_cache`. The
    /// GPU settings are read once: changing them needs a restart.
    pub fn new(
        gpu: GpuConfig,
        registry: &prometheus::Registry,
        kv_cache: Arc<KvCacheReadings>,
    ) -> Result<Observers, prometheus::Error> {
        Ok(Observers {
            gpu: Some(GpuWatcher::new(gpu, registry)?),
            upstreams: Some(UpstreamScraper::publishing(registry, kv_cache)?),
        })
    }

    /// Starts each watcher on `tracker`; they end on `cancel`.
    pub fn spawn(
        &self,
        tracker: &TaskTracker,
        store: &Arc<SnapshotStore>,
        cancel: &CancellationToken,
    ) {
        if let Some(gpu) = &self.gpu {
            tracker.spawn(gpu.clone().run(cancel.clone()));
        }
        if let Some(upstreams) = &self.upstreams {
            tracker.spawn(upstreams.clone().run(store.clone(), cancel.clone()));
        }
    }
}
