//! Shadow traffic's state in the control plane: each route's mirror policy
//! as the data plane reads it (built once with the snapshot), and the ring
//! of recent differing pairs that `GET /v1/mirror/diffs` shows. The sender
//! that holds the sockets lives in the proxy.

mod diffs;

pub use diffs::{DiffLeg, DiffRecord, MirrorDiffs, DIFF_CAPACITY};

use std::sync::Arc;

use sluice_filters::{hash_bytes, mix64, Metrics, MirrorRouteMetrics, MirrorSampler};

use crate::config::MirrorConfig;
use crate::snapshot::ClusterRuntime;

/// A route's mirror policy, resolved for the data plane.
pub struct MirrorRuntime {
    pub route: String,
    pub config: MirrorConfig,
    /// The shadow cluster, shared with the snapshot's cluster list.
    pub shadow: Arc<ClusterRuntime>,
    pub sampler: MirrorSampler,
    pub metrics: MirrorRouteMetrics,
}

impl MirrorRuntime {
    pub(crate) fn build(
        route: &str,
        config: &MirrorConfig,
        shadow: Arc<ClusterRuntime>,
        version: u64,
        metrics: &Metrics,
    ) -> MirrorRuntime {
        // A fresh start of the sampling sequence per route and version.
        let seed = mix64(hash_bytes(route.as_bytes()) ^ version);
        MirrorRuntime {
            route: route.to_string(),
            config: config.clone(),
            shadow,
            sampler: MirrorSampler::new(config.percent, config.copies, seed),
            metrics: metrics.mirror.route(route),
        }
    }
}

impl std::fmt::Debug for MirrorRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorRuntime")
            .field("route", &self.route)
            .field("config", &self.config)
            .finish()
    }
}
