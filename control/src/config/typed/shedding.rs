//! `routes[].shedding`, validated.

use std::time::Duration;

use sluice_filters::{Descriptor, ShedPolicy, Signals};

pub(crate) const DEFAULT_SHED_WINDOW: Duration = Duration::from_secs(10);
pub(crate) const DEFAULT_SHED_INTERVAL: Duration = Duration::from_secs(1);
pub(crate) const DEFAULT_SHED_HOLD: Duration = Duration::from_secs(5);
pub(crate) const DEFAULT_RECOVERY_PERCENT: f64 = 80.0;
pub(crate) const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(2);
pub(crate) const DEFAULT_SHED_MIN_REQUESTS: u64 = 20;
pub(crate) const DEFAULT_RESTORE_STEPS: u8 = 4;
/// More steps than this would make a restore last too many holds.
pub(crate) const MAX_RESTORE_STEPS: u64 = 20;
/// Where a request's priority is read unless the config says.
pub(crate) const DEFAULT_PRIORITY_HEADER: &str = "x-priority";

/// A route's `shedding:` block.
#[derive(Clone, Debug, PartialEq)]
pub struct SheddingConfig {
    /// `header:NAME` or `model`.
    pub descriptor: Descriptor,
    /// Priorities, highest first (at least two, distinct).
    pub levels: Vec<String>,
    /// Index into `levels` of a request without a known priority.
    pub default: usize,
    /// ms, ms per token, requests, percent; at least one set.
    pub bounds: Signals,
    pub window: Duration,
    pub interval: Duration,
    pub hold: Duration,
    /// A share in (0, 1].
    pub recovery: f64,
    /// Steps a level is restored in, 1..=20.
    pub restore_steps: u8,
    pub retry_after: Duration,
    pub min_requests: u64,
}

impl SheddingConfig {
    /// What the level state machine needs.
    pub fn policy(&self) -> ShedPolicy {
        ShedPolicy {
            bounds: self.bounds,
            max_level: u8::try_from(self.levels.len().saturating_sub(1)).unwrap_or(u8::MAX),
            steps: self.restore_steps,
            hold_ms: u64::try_from(self.hold.as_millis()).unwrap_or(u64::MAX),
            recovery: self.recovery,
        }
    }
}
