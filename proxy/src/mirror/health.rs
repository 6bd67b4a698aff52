//! The sender's own view of its clusters' endpoints: a
//! [`filters::EndpointSet`](EndpointSet) per cluster, on the sender's clock,
//! apart from the proxy's. A copy that fails under the sender's idle CPU
//! priority says little about an endpoint the primary uses, so it must not
//! eject that endpoint for the primary (noise copies go to the primary's
//! cluster); and what the primary learns is not needed here either.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sluice_control::ClusterConfig;
use sluice_filters::{EndpointSet, MirrorResult};

/// A down endpoint is not tried for this long: its copies count as
/// `connect_error` at once, so a dead shadow costs no syscalls.
pub(super) const DOWN_FOR: Duration = Duration::from_secs(1);
/// An endpoint is down after a failed connect, or after this many exchanges
/// in a row that broke (reset, garbage), like an outlier ejection.
const ERRORS_TO_DOWN: u32 = 5;

/// One cluster's endpoints as the sender sees them.
pub(super) struct Endpoints {
    addrs: Vec<SocketAddr>,
    pub set: EndpointSet,
    errors_in_a_row: Vec<AtomicU32>,
}

/// Every cluster the sender has sent to, by name.
#[derive(Clone)]
pub(super) struct Health {
    clusters: Arc<Mutex<HashMap<String, Arc<Endpoints>>>>,
    started: Instant,
}

impl Health {
    pub(super) fn new() -> Health {
        Health {
            clusters: Arc::new(Mutex::new(HashMap::new())),
            started: Instant::now(),
        }
    }

    /// The sender's clock, in the milliseconds `EndpointSet` keeps.
    pub(super) fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// The cluster's endpoints; started over when its list changed. Touched
    /// by the sender's tasks only, never across an await.
    pub(super) fn of(&self, cluster: &ClusterConfig) -> Arc<Endpoints> {
        let mut clusters = self.clusters.lock().unwrap_or_else(|p| p.into_inner());
        let same = |e: &Endpoints| {
            e.addrs.len() == cluster.endpoints.len()
                && e.addrs
                    .iter()
                    .zip(&cluster.endpoints)
                    .all(|(a, b)| *a == b.addr)
        };
        if let Some(e) = clusters.get(&cluster.name).filter(|e| same(e)) {
            return e.clone();
        }
        let n = cluster.endpoints.len();
        let fresh = Arc::new(Endpoints {
            addrs: cluster.endpoints.iter().map(|e| e.addr).collect(),
            set: EndpointSet::new(n),
            errors_in_a_row: (0..n).map(|_| AtomicU32::new(0)).collect(),
        });
        clusters.insert(cluster.name.clone(), fresh.clone());
        fresh
    }

    /// Keeps an exchange's outcome with endpoint `i` (`None` = answered). A
    /// refused connect was ejected by the client already; a timeout says the
    /// shadow is slow, not broken: `max_in_flight` bounds what that costs.
    pub(super) fn record(&self, endpoints: &Endpoints, i: usize, failure: Option<MirrorResult>) {
        let Some(errors) = endpoints.errors_in_a_row.get(i) else {
            return;
        };
        match failure {
            None => {
                errors.store(0, Ordering::Relaxed);
                endpoints.set.restore(i);
            }
            Some(MirrorResult::Error) => {
                if errors.fetch_add(1, Ordering::Relaxed) + 1 >= ERRORS_TO_DOWN {
                    errors.store(0, Ordering::Relaxed);
                    endpoints
                        .set
                        .eject(i, self.now_ms(), DOWN_FOR.as_millis() as u64);
                }
            }
            Some(
                MirrorResult::Ok
                | MirrorResult::ConnectError
                | MirrorResult::ConnectTimeout
                | MirrorResult::Timeout
                | MirrorResult::QueueFull
                | MirrorResult::BodyTooLarge
                | MirrorResult::Rate
                | MirrorResult::InFlight
                | MirrorResult::ShadowDown
                | MirrorResult::Overflow,
            ) => {}
        }
    }

    /// When every endpoint of `cluster` is down: how long until the first
    /// is due back.
    pub(super) fn all_down_for(&self, cluster: &ClusterConfig) -> Option<Duration> {
        let now = self.now_ms();
        let back = self.of(cluster).set.all_ejected_until(now)?;
        Some(Duration::from_millis(back.saturating_sub(now)))
    }
}
