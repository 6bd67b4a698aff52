//! The rate limits' live state: one [`KeyState`] per descriptor key of a
//! route, kept across snapshot swaps while the route's `limits` stay the same.
//! The arithmetic is `sluice_filters::limit`; the proxy admits and settles.
//!
//! Each key's state sits behind its own `parking_lot` mutex, held only for
//! the few float operations of one decision; the map of keys is read-locked
//! on the hot path and write-locked only when a new key first appears.

use std::collections::HashMap;
use std::sync::Arc;

use parking_lot::{Mutex, RwLock};
use sluice_filters::{Cost, Decision, KeyState, LimitRouteMetrics, Metrics, Settled};

use crate::config::LimitsConfig;

/// Keys beyond this many are not kept: their requests share one overflow
/// budget, so that a flood of distinct header values cannot grow memory
/// without bound.
pub const MAX_KEYS: usize = 100_000;
const OVERFLOW_KEY: &str = "\u{1f}overflow";

pub struct RouteLimits {
    pub config: LimitsConfig,
    pub metrics: LimitRouteMetrics,
    keys: RwLock<HashMap<String, Arc<Mutex<KeyState>>>>,
}

/// An admitted request's hold on its budget, settled when the answer ends.
pub struct Admission {
    state: Arc<Mutex<KeyState>>,
    pub reserved: Cost,
}

impl RouteLimits {
    pub fn new(route: &str, config: LimitsConfig, metrics: &Metrics) -> Self {
        RouteLimits {
            metrics: metrics.limits.route(route, &config.descriptor_label()),
            config,
            keys: RwLock::new(HashMap::new()),
        }
    }

    fn state(&self, key: &str, now_ms: u64) -> Arc<Mutex<KeyState>> {
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
            .or_insert_with(|| Arc::new(Mutex::new(KeyState::new(&self.config.limits, now_ms))))
            .clone()
    }

    /// Decides on one request of `key` reserving `reserved`; counts the
    /// decision and the tokens reserved.
    pub fn admit(&self, key: &str, reserved: Cost, now_ms: u64) -> (Decision, Option<Admission>) {
        let state = self.state(key, now_ms);
        let decision = state.lock().admit(&self.config.limits, reserved, now_ms);
        match decision {
            Decision::Allowed(_) => {
                self.metrics.allowed.inc();
                self.metrics.charged.inc_by(reserved.total());
                (decision, Some(Admission { state, reserved }))
            }
            Decision::Limited { .. } => {
                self.metrics.limited.inc();
                (decision, None)
            }
        }
    }

    /// Ends an admitted request with what it cost.
    pub fn settle(&self, admission: Admission, actual: Cost, now_ms: u64) -> Settled {
        let settled =
            admission
                .state
                .lock()
                .settle(&self.config.limits, admission.reserved, actual, now_ms);
        self.metrics.charged.inc_by(settled.extra);
        self.metrics.refunded.inc_by(settled.refunded);
        settled
    }
}
