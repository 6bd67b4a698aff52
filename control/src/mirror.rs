//! Shadow traffic's state in the control plane: each route's mirror policy
//! as the data plane reads it (built once with the snapshot), and the ring
//! of recent differing pairs that `GET /v1/mirror/diffs` shows. The sender
//! that holds the sockets lives in the proxy.

mod diffs;

pub use diffs::{DiffLeg, DiffRecord, MirrorDiffs, DIFF_CAPACITY};

use std::sync::atomic::{AtomicBool, Ordering};
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
    pub gate: ShadowGate,
}

/// Whether copies are worth collecting. The sender closes the gate while
/// every endpoint of the shadow cluster is down and opens it when the first
/// comes back; while it is closed the request path counts the copies as
/// `shadow_down` and keeps no body and queues no job, so a dead shadow costs
/// the primary one atomic load. A new snapshot starts with it open.
#[derive(Debug, Default)]
pub struct ShadowGate {
    closed: AtomicBool,
}

impl ShadowGate {
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }

    /// Closes the gate; true when this call closed it (and so owns opening it).
    pub fn close(&self) -> bool {
        !self.closed.swap(true, Ordering::Relaxed)
    }

    pub fn open(&self) {
        self.closed.store(false, Ordering::Relaxed);
    }
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
            gate: ShadowGate::default(),
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
