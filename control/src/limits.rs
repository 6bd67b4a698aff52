//! The rate limits' live state: one [`KeyState`] per descriptor key of a
//! route, kept across snapshot swaps while the route's `limits` stay the same.
//! The arithmetic is `sluice_filters::limit`; the proxy admits and settles.
//!
//! Each key's state sits behind its own `parking_lot` mutex, held only for
//! the few float operations of one decision; the map of keys is read-locked
//! on the hot path and write-locked only when a new key first appears.
//!
//! A route with `limits.store` shares its budgets with a fleet: a key also
//! holds leases ([`FleetKey`]) that admission spends without waiting for the
//! store, and that the sync task ([`sync`]) settles with it.

mod fleet;
mod sync;

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_filters::{
    Cost, Decision, FleetKey, KeyState, LimitKind, LimitRouteMetrics, Metrics, Settled,
    STREAM_RETRY_MS,
};

use crate::config::LimitsConfig;
use fleet::{Fleet, Mode};

pub(crate) use sync::run_limit_sync;
pub use sync::SCRIPT as LIMIT_STORE_SCRIPT;

/// Keys beyond this many are not kept: their requests share one overflow
/// budget, so that a flood of distinct header values cannot grow memory
/// without bound.
pub const MAX_KEYS: usize = 100_000;
const OVERFLOW_KEY: &str = "\u{1f}overflow";

pub struct RouteLimits {
    pub config: LimitsConfig,
    pub metrics: LimitRouteMetrics,
    keys: RwLock<HashMap<String, Arc<Mutex<KeyEntry>>>>,
    /// With `limits.store`: the store's health and the fleet's size.
    fleet: Option<Fleet>,
}

/// One key's budgets: the local buckets, and with a store the leases.
struct KeyEntry {
    local: KeyState,
    fleet: Option<FleetKey>,
    /// Syncs since this key was last used; the sync task stops syncing a
    /// key idle for a minute (its lease has gone back to the pool by then).
    idle_syncs: u32,
}

/// An admitted request's hold on its budget, settled when the answer ends.
pub struct Admission {
    state: Arc<Mutex<KeyEntry>>,
    pub reserved: Cost,
    /// Admitted from a fleet lease (else by the local buckets alone).
    leased: bool,
}

impl RouteLimits {
    pub fn new(route: &str, config: LimitsConfig, metrics: &Metrics) -> Self {
        RouteLimits {
            metrics: metrics.limits.route(route, &config.descriptor_label()),
            fleet: config
                .store
                .clone()
                .map(|store| Fleet::new(route, store, metrics)),
            config,
            keys: RwLock::new(HashMap::new()),
        }
    }

    fn state(&self, key: &str, now_ms: u64) -> Arc<Mutex<KeyEntry>> {
        if let Some(s) = self.keys.read().get(key) {
            return s.clone();
        }
        let mut keys = self.keys.write();
        let key = if keys.len() >= MAX_KEYS {
            OVERFLOW_KEY
        } else {
            key
        };
        keys.entry(key.to_string())
            .or_insert_with(|| {
                Arc::new(Mutex::new(KeyEntry {
                    local: KeyState::new(&self.config.limits, now_ms),
                    fleet: None,
                    idle_syncs: 0,
                }))
            })
            .clone()
    }

    /// Decides on one request of `key` reserving `reserved`; counts the
    /// decision and the tokens reserved.
    pub fn admit(&self, key: &str, reserved: Cost, now_ms: u64) -> (Decision, Option<Admission>) {
        let limits = &self.config.limits;
        let mode = self.fleet.as_ref().map_or(Mode::Local, Fleet::mode);
        if let Mode::Closed { retry_after_ms } = mode {
            self.metrics.limited.inc();
            return (Decision::StoreUnavailable { retry_after_ms }, None);
        }
        let state = self.state(key, now_ms);
        let decision = {
            let mut entry = state.lock();
            entry.idle_syncs = 0;
            match mode {
                Mode::Fleet { peers, sync_ms } => {
                    let entry = &mut *entry;
                    let leases = entry
                        .fleet
                        .get_or_insert_with(|| FleetKey::new(limits, peers));
                    if entry.local.streams_full(limits) {
                        Decision::Limited {
                            kind: LimitKind::ConcurrentStreams,
                            retry_after_ms: STREAM_RETRY_MS,
                            headers: leases.headers(limits),
                        }
                    } else {
                        let d = leases.admit(limits, reserved, sync_ms);
                        if matches!(d, Decision::Allowed(_)) {
                            entry.local.charge(limits, reserved, now_ms);
                        }
                        d
                    }
                }
                _ => entry.local.admit(limits, reserved, now_ms),
            }
        };
        match decision {
            Decision::Allowed(_) => {
                self.metrics.allowed.inc();
                self.metrics.charged.inc_by(reserved.total());
                let leased = matches!(mode, Mode::Fleet { .. });
                (
                    decision,
                    Some(Admission {
                        state,
                        reserved,
                        leased,
                    }),
                )
            }
            Decision::Limited { .. } | Decision::StoreUnavailable { .. } => {
                self.metrics.limited.inc();
                (decision, None)
            }
        }
    }

    /// Ends an admitted request with what it cost.
    pub fn settle(&self, admission: Admission, actual: Cost, now_ms: u64) -> Settled {
        let limits = &self.config.limits;
        let reserved = admission.reserved;
        let settled = {
            let mut entry = admission.state.lock();
            entry.idle_syncs = 0;
            if admission.leased {
                if let Some(leases) = &mut entry.fleet {
                    leases.settle(limits, reserved, actual);
                }
            }
            entry.local.settle(limits, reserved, actual, now_ms)
        };
        self.metrics.charged.inc_by(settled.extra);
        self.metrics.refunded.inc_by(settled.refunded);
        settled
    }
}

#[cfg(test)]
mod tests;
