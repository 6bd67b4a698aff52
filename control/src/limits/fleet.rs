//! A fleet-wide route's view of its store: healthy (decide from the leases),
//! or not (yet) reachable (decide as `on_unavailable` says), and the number
//! of sluices sharing the budgets. The sync task writes it; admission reads
//! two atomics.

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use sluice_filters::{LimitStoreMetrics, Metrics};
use tracing::{info, warn};

use crate::config::{LimitStore, OnUnavailable};

const STARTING: u8 = 0;
const UP: u8 = 1;
const DOWN: u8 = 2;

/// How a request of the route is decided now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mode {
    /// By the local buckets alone: no store, or an unreachable one with
    /// `on_unavailable: open`.
    Local,
    /// From the leases, with `peers` sluices sharing the budgets.
    Fleet { peers: u64, sync_ms: u64 },
    /// Refused: an unreachable store with `on_unavailable: closed`.
    Closed { retry_after_ms: u64 },
}

pub(super) struct Fleet {
    pub(super) route: String,
    pub(super) store: LimitStore,
    health: AtomicU8,
    peers: AtomicU64,
    metrics: LimitStoreMetrics,
}

impl Fleet {
    pub(super) fn new(route: &str, store: LimitStore, metrics: &Metrics) -> Self {
        let metrics = metrics.limits.store(route);
        metrics.up.set(0);
        Fleet {
            route: route.to_owned(),
            store,
            health: AtomicU8::new(STARTING),
            peers: AtomicU64::new(1),
            metrics,
        }
    }

    pub(super) fn sync_ms(&self) -> u64 {
        self.store.sync_interval.as_millis() as u64
    }

    /// Before the first sync, and after a failed one, the route decides as
    /// `on_unavailable` says.
    pub(super) fn mode(&self) -> Mode {
        if self.health.load(Ordering::Acquire) == UP {
            return Mode::Fleet {
                peers: self.peers(),
                sync_ms: self.sync_ms(),
            };
        }
        match self.store.on_unavailable {
            OnUnavailable::Open => Mode::Local,
            OnUnavailable::Closed => Mode::Closed {
                retry_after_ms: self.sync_ms().max(1_000),
            },
        }
    }

    pub(super) fn peers(&self) -> u64 {
        self.peers.load(Ordering::Relaxed).max(1)
    }

    /// Whether the last sync failed.
    pub(super) fn is_down(&self) -> bool {
        self.health.load(Ordering::Acquire) == DOWN
    }

    /// A sync succeeded, counting `peers` sluices.
    pub(super) fn synced(&self, peers: u64) {
        self.peers.store(peers.max(1), Ordering::Relaxed);
        self.metrics.peers.set(peers as i64);
        self.metrics.up.set(1);
        if self.health.swap(UP, Ordering::AcqRel) == DOWN {
            info!(route = %self.route, peers, "rate limit store reachable again: fleet-wide budgets");
        }
    }

    /// A sync failed: local decisions from now on, counted once per fall.
    pub(super) fn failed(&self, error: &str) {
        self.metrics.up.set(0);
        if self.health.swap(DOWN, Ordering::AcqRel) != DOWN {
            self.metrics.fallbacks.inc();
            warn!(
                route = %self.route,
                error,
                on_unavailable = ?self.store.on_unavailable,
                "rate limit store unavailable: falling back"
            );
        }
    }
}
