//! The experiments' control loop: halts an experiment whose route's error
//! rate passed `halt_if`, notes halts and expiries in the audit log, and
//! keeps `sluice_faults_active` current. TTL is not enforced here (the data
//! plane checks it on every decision); this loop only reports it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use tracing::info;

use super::{FaultRuntime, FaultState};
use crate::feedback::{self, Breach};
use crate::shared::Shared;
use crate::stats::{Stats, WindowView};
use crate::store::SnapshotStore;

/// How often `halt_if` is evaluated.
const INTERVAL: Duration = Duration::from_millis(100);
/// Requests in the window before an error rate is judged: one failure of
/// the first request is not a rate.
pub(super) const HALT_MIN_REQUESTS: u64 = 5;

pub(crate) async fn run_fault_loop(
    store: Arc<SnapshotStore>,
    shared: Shared,
    cancel: CancellationToken,
) {
    let mut tick = tokio::time::interval(INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = cancel.cancelled() => return,
            _ = tick.tick() => evaluate(&store, &shared, tokio::time::Instant::now().into_std()),
        }
    }
}

/// One pass over the live experiments.
pub(crate) fn evaluate(store: &SnapshotStore, shared: &Shared, now: Instant) {
    let snapshot = store.load();
    let mut active = 0;
    for f in &snapshot.faults {
        match f.state_at(now) {
            FaultState::Active => {
                if let Some(rate) = breached(f, &shared.stats) {
                    if f.halt() {
                        let id = &f.experiment.id;
                        info!(fault = %id, error_rate = rate, "fault experiment halted");
                        let action =
                            format!("halt fault {id}: route error rate {rate:.1}% passed halt_if");
                        shared
                            .events
                            .push("faults", &action, snapshot.version, Vec::new());
                        let bound = f.experiment.halt_if.map_or(0.0, |h| h.error_rate);
                        let at_us = crate::state::wall_ms() as i64 * 1000;
                        if let Some(breach) =
                            Breach::of_fault(&snapshot.config, &f.experiment, rate, bound, at_us)
                        {
                            feedback::report(shared, store, breach);
                        }
                    }
                } else {
                    active += 1;
                }
            }
            FaultState::Expired => {
                if !f
                    .expiry_noted
                    .swap(true, std::sync::atomic::Ordering::AcqRel)
                {
                    let action = format!("expire fault {} (ttl ended)", f.experiment.id);
                    shared
                        .events
                        .push("faults", &action, snapshot.version, Vec::new());
                }
            }
            FaultState::Halted => {}
        }
    }
    shared.metrics.faults.active.set(active);
}

/// The route's error rate when it passed the experiment's bound.
fn breached(f: &FaultRuntime, stats: &Stats) -> Option<f64> {
    let halt = f.experiment.halt_if?;
    let mut view = WindowView::default();
    for key in &f.halt_keys {
        view.merge_only(&stats.view_only(*key, halt.window, &[]), &[]);
    }
    if view.requests < HALT_MIN_REQUESTS {
        return None;
    }
    view.error_percent().filter(|rate| *rate > halt.error_rate)
}
