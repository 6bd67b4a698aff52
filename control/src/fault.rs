//! Live fault experiments: the per-experiment state the data plane reads and
//! writes (when it started, faulted requests now, injected so far, halted)
//! and the loop that halts experiments whose route's error rate passed
//! `halt_if`, notes expiries in the audit log and sets `sluice_faults_active`.
//! The experiments themselves are part of the config (`faults:`), so every
//! change goes through [`SnapshotStore::apply`]; the state lives beside the
//! snapshot and is carried over to the next one for an unchanged experiment.

mod halt;

pub(crate) use halt::run_fault_loop;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus::IntCounter;
use sluice_filters::{Experiment, FaultClock, FaultTarget, Metrics, RequestView, Skip};

use crate::stats::StatsKey;

/// One experiment and its live state.
#[derive(Debug)]
pub struct FaultRuntime {
    pub experiment: Experiment,
    started: Instant,
    injected: AtomicU64,
    active: AtomicU32,
    /// Set when `halt_if` tripped.
    halted: AtomicBool,
    /// Set when the experiment left the config: faults in progress (a TCP
    /// connection's toxic, a paced stream) stop at their next step.
    removed: AtomicBool,
    /// Set once the expiry was noted in the audit log.
    pub(crate) expiry_noted: AtomicBool,
    counter: IntCounter,
    /// The stats keys of the route `halt_if` reads.
    pub(crate) halt_keys: Vec<StatsKey>,
}

/// Held while a request is being faulted: counts toward `max_active`.
#[derive(Debug)]
pub struct FaultGuard {
    runtime: Arc<FaultRuntime>,
}

/// An experiment's state as the API shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FaultState {
    Active,
    Expired,
    Halted,
}

impl FaultRuntime {
    pub fn new(experiment: Experiment, metrics: &Metrics, halt_keys: Vec<StatsKey>) -> Self {
        let counter = metrics
            .faults
            .injected
            .with_label_values(&[experiment.id.as_str(), experiment.action.name()]);
        FaultRuntime {
            experiment,
            started: tokio::time::Instant::now().into_std(),
            injected: AtomicU64::new(0),
            active: AtomicU32::new(0),
            halted: AtomicBool::new(false),
            removed: AtomicBool::new(false),
            expiry_noted: AtomicBool::new(false),
            counter,
            halt_keys,
        }
    }

    /// Decides for one request or connection and, when it fires, counts the
    /// injection and holds a place among `max_active` until the guard drops.
    /// A target the experiment does not match costs no clock read and no
    /// random number.
    pub fn try_fire<R: RequestView>(
        self: &Arc<Self>,
        target: &FaultTarget<'_, R>,
        random: impl FnOnce() -> u64,
    ) -> Result<FaultGuard, Skip> {
        if !self.experiment.matcher.matches(target) {
            return Err(Skip::NoMatch);
        }
        self.try_fire_at(target, random(), tokio::time::Instant::now().into_std())
    }

    pub fn try_fire_at<R: RequestView>(
        self: &Arc<Self>,
        target: &FaultTarget<'_, R>,
        random: u64,
        now: Instant,
    ) -> Result<FaultGuard, Skip> {
        self.experiment.decide(target, self.clock(now), random)?;
        let before = self.active.fetch_add(1, Ordering::AcqRel);
        if self.experiment.max_active.is_some_and(|max| before >= max) {
            // Another request took the last place between the load and here.
            self.active.fetch_sub(1, Ordering::AcqRel);
            return Err(Skip::AtMaxActive);
        }
        self.injected.fetch_add(1, Ordering::Relaxed);
        self.counter.inc();
        Ok(FaultGuard {
            runtime: self.clone(),
        })
    }

    fn clock(&self, now: Instant) -> FaultClock {
        FaultClock {
            elapsed: now.saturating_duration_since(self.started),
            active: self.active.load(Ordering::Acquire),
            halted: self.halted.load(Ordering::Acquire) || self.removed.load(Ordering::Acquire),
        }
    }

    /// Whether a fault already under way should go on: false once the
    /// experiment expired, halted or was removed.
    pub fn still_on(&self) -> bool {
        self.state_at(tokio::time::Instant::now().into_std()) == FaultState::Active
            && !self.removed.load(Ordering::Acquire)
    }

    pub fn state_at(&self, now: Instant) -> FaultState {
        if self.halted.load(Ordering::Acquire) {
            FaultState::Halted
        } else if self.time_left_at(now).is_zero() {
            FaultState::Expired
        } else {
            FaultState::Active
        }
    }

    pub fn time_left_at(&self, now: Instant) -> Duration {
        self.experiment
            .time_left(now.saturating_duration_since(self.started))
    }

    pub fn injected(&self) -> u64 {
        self.injected.load(Ordering::Relaxed)
    }

    /// Requests being faulted now.
    pub fn active(&self) -> u32 {
        self.active.load(Ordering::Acquire)
    }

    /// Stops the experiment; true the first time.
    pub(crate) fn halt(&self) -> bool {
        !self.halted.swap(true, Ordering::AcqRel)
    }

    pub(crate) fn mark_removed(&self) {
        self.removed.store(true, Ordering::Release);
    }
}

impl FaultGuard {
    pub fn runtime(&self) -> &Arc<FaultRuntime> {
        &self.runtime
    }
}

impl Drop for FaultGuard {
    fn drop(&mut self) {
        self.runtime.active.fetch_sub(1, Ordering::AcqRel);
    }
}

/// An id for an experiment added without one: `f-` and 8 hex digits.
pub fn new_fault_id() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    format!(
        "f-{:08x}",
        sluice_filters::mix64(nanos ^ n.rotate_left(32)) as u32
    )
}

#[cfg(test)]
mod tests;
