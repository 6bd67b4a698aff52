//! The per-request context: the snapshot the request started with, and what
//! has been decided for it so far.

use std::sync::Arc;
use std::time::Instant;

use sluice_control::{ClusterRuntime, Snapshot};
use sluice_filters::Failure;

use crate::lifecycle::InflightGuard;

pub struct RequestCtx {
    /// Loaded once; the request finishes on it even if a swap happens.
    pub snapshot: Arc<Snapshot>,
    pub started: Instant,
    pub request_id: String,
    /// Index into `snapshot.routes`.
    pub route: Option<usize>,
    /// Index into the route's targets.
    pub target: Option<usize>,
    /// Index into the cluster's endpoints of the current attempt.
    pub endpoint: Option<usize>,
    /// Bit set of endpoints this request already tried.
    pub tried: u64,
    /// Set when the proxy answered (or aborted) the request itself.
    pub failure: Option<Failure>,
    _inflight: InflightGuard,
}

impl RequestCtx {
    pub fn new(inflight: InflightGuard, snapshot: Arc<Snapshot>) -> Self {
        Self {
            snapshot,
            started: Instant::now(),
            request_id: String::new(),
            route: None,
            target: None,
            endpoint: None,
            tried: 0,
            failure: None,
            _inflight: inflight,
        }
    }

    pub fn cluster(&self) -> Option<&Arc<ClusterRuntime>> {
        let route = self.snapshot.routes.get(self.route?)?;
        let target = route.targets.get(self.target?)?;
        self.snapshot.clusters.get(target.cluster)
    }

    pub fn route_name(&self) -> Option<&str> {
        Some(self.snapshot.routes.get(self.route?)?.name.as_str())
    }
}
