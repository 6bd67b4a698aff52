//! Feedback scenarios: when a rollout breaches (rolls back, or pauses on a
//! breached gate) or a fault experiment halts itself, the recorded traffic
//! of the route in the window before it is saved under `feedback.dir` as a
//! scenario that `sluice load --feedback` replays (`manifest.json` and
//! `trace.jsonl`, both schemas in `sluice_filters::feedback`).
//!
//! The rollout controller and the fault loop only describe the breach
//! ([`Breach`]) and hand it over with a `try_send` on a bounded queue: they
//! never wait for a disk. One task on the control runtime takes the
//! breaches one by one, waits [`SETTLE`] so that the requests that ended at
//! the breach reach the recorder's ring, cuts the window out of the ring
//! and writes the files on a blocking thread (`write`).

mod write;

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_filters::{ContentId, FeedbackLineage, TriggerKind};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use crate::config::{ClusterKind, Config, RolloutConfig};
use crate::lineage::{cluster_id, event_artifact, rollout_artifact};
use crate::rollout::{GateReading, RolloutEvent};
use crate::shared::Shared;
use crate::store::SnapshotStore;

pub(crate) use write::write_scenario;

/// Breaches waiting to be written; more are dropped, logged and audited.
const QUEUE: usize = 64;
/// How long after a breach its window is cut: the requests that ended at
/// the breach are written to the recorder's ring by its writer thread
/// within a few milliseconds. Requests still in flight by then are not in
/// the trace.
pub(crate) const SETTLE: Duration = Duration::from_secs(1);

/// Creates `dir` if needed and checks that a file can be written there (a
/// probe file, written, synced and removed).
pub(crate) fn prepare(dir: &Path) -> std::io::Result<()> {
    crate::state::prepare_dir(dir)
}

/// What broke, as the rollout controller or the fault loop saw it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Breach {
    pub kind: TriggerKind,
    /// When, µs since the epoch: the window ends here.
    pub at_us: i64,
    pub route: String,
    pub rollout: Option<String>,
    pub fault: Option<String>,
    /// The cluster that broke (a rollout's canary, a fault's cluster).
    pub cluster: Option<String>,
    pub version: Option<String>,
    /// The cluster is a cache: its misses are the cause.
    pub cache_cluster: bool,
    pub gate: String,
    pub value: Option<f64>,
    pub bound: f64,
    pub unit: String,
    pub reason: String,
    /// Used as the error rate (a fraction) when no request was recorded.
    pub error_rate_hint: Option<f64>,
    pub lineage: FeedbackLineage,
    /// The lineage parents of the scenario: the breach's rollout event, or
    /// for a fault halt the clusters it hit.
    pub parents: Vec<ContentId>,
}

impl Breach {
    /// A rollout's breach: `event` is the transition just recorded, the
    /// `seq`-th of its history (0-based).
    pub(crate) fn of_rollout(
        config: &Config,
        rollout: &RolloutConfig,
        seq: usize,
        event: &RolloutEvent,
    ) -> Breach {
        let cluster = |name: &str| config.clusters.iter().find(|c| c.name == name);
        let (stable, canary) = (cluster(&rollout.stable), cluster(&rollout.canary));
        let ids = stable.zip(canary).map(|(s, c)| {
            let canary_id = cluster_id(c);
            let rollout_id = rollout_artifact(rollout, cluster_id(s), canary_id.clone()).id;
            let event_id = event_artifact(&rollout_id, seq, event).id;
            (canary_id, rollout_id, event_id)
        });
        let first = event.evidence.first();
        let error_rate = event
            .evidence
            .iter()
            .find(|r| r.gate == crate::config::Gate::ErrorRate)
            .and_then(|r| r.value)
            .map(|percent| percent / 100.0);
        Breach {
            kind: TriggerKind::RolloutBreach,
            at_us: i64::try_from(event.time_ms).unwrap_or(0) * 1000,
            route: rollout.route.clone(),
            rollout: Some(rollout.name.clone()),
            fault: None,
            cluster: Some(rollout.canary.clone()),
            version: canary.map(|c| c.version.clone()),
            cache_cluster: canary.is_some_and(|c| c.kind == ClusterKind::Cache),
            gate: first.map_or_else(String::new, |r| r.gate.as_str().to_owned()),
            value: first.and_then(|r| r.value),
            bound: first.map_or(0.0, |r| r.bound),
            unit: first.map_or_else(String::new, |r| r.unit.as_str().to_owned()),
            reason: event.reason.clone(),
            error_rate_hint: error_rate,
            lineage: FeedbackLineage {
                cluster: ids.as_ref().map(|i| i.0.clone()),
                rollout: ids.as_ref().map(|i| i.1.clone()),
                event: ids.as_ref().map(|i| i.2.clone()),
            },
            parents: ids.map(|i| vec![i.2]).unwrap_or_default(),
        }
    }
}

impl Breach {
    /// A fault experiment's halt: its route's error rate `rate` (percent)
    /// passed `halt_if` (`bound`, percent) at `at_us`. The clusters it hit
    /// (its `cluster`, or else every cluster of its route) are the
    /// scenario's lineage parents.
    pub(crate) fn of_fault(
        config: &Config,
        experiment: &sluice_filters::Experiment,
        rate: f64,
        bound: f64,
        at_us: i64,
    ) -> Option<Breach> {
        let route = experiment.matcher.route.clone()?;
        let named = experiment.matcher.cluster.as_deref();
        let hit: Vec<&crate::config::ClusterConfig> = match named {
            Some(name) => config.clusters.iter().filter(|c| c.name == name).collect(),
            None => config
                .routes
                .iter()
                .find(|r| r.name == route)
                .map(|r| {
                    r.split
                        .iter()
                        .filter_map(|(name, _)| config.clusters.iter().find(|c| &c.name == name))
                        .collect()
                })
                .unwrap_or_default(),
        };
        let one = named.and_then(|_| hit.first().copied());
        Some(Breach {
            kind: TriggerKind::FaultHalt,
            at_us,
            route,
            rollout: None,
            fault: Some(experiment.id.clone()),
            cluster: one.map(|c| c.name.clone()),
            version: one.map(|c| c.version.clone()),
            cache_cluster: one.is_some_and(|c| c.kind == ClusterKind::Cache),
            gate: "halt_if.error_rate".to_owned(),
            value: Some(rate),
            bound,
            unit: "%".to_owned(),
            reason: format!("route error rate {rate:.1}% passed halt_if ({bound}%)"),
            error_rate_hint: Some(rate / 100.0),
            lineage: FeedbackLineage {
                cluster: one.map(cluster_id),
                rollout: None,
                event: None,
            },
            parents: hit.into_iter().map(cluster_id).collect(),
        })
    }
}

/// Whether a transition is a breach: from `progressing`, to `rolled_back`
/// or `paused`, with breached gates as its evidence (an operator's pause
/// or abort, or a drift, has none).
pub(crate) fn is_breach(event: &RolloutEvent) -> bool {
    use crate::rollout::State;
    event.from == State::Progressing
        && matches!(event.to, State::RolledBack | State::Paused)
        && event.evidence.iter().any(GateReading::breached)
}

/// The queue between the breaches and the writer task.
pub(crate) struct FeedbackQueue {
    tx: mpsc::Sender<Breach>,
    rx: Mutex<Option<mpsc::Receiver<Breach>>>,
}

impl Default for FeedbackQueue {
    fn default() -> FeedbackQueue {
        let (tx, rx) = mpsc::channel(QUEUE);
        FeedbackQueue {
            tx,
            rx: Mutex::new(Some(rx)),
        }
    }
}

impl FeedbackQueue {
    /// Hands a breach to the writer without waiting; `false` when the
    /// queue is full (or the writer is gone) and the breach is dropped.
    pub(crate) fn report(&self, breach: Breach) -> bool {
        self.tx.try_send(breach).is_ok()
    }

    pub(crate) fn take(&self) -> Option<mpsc::Receiver<Breach>> {
        self.rx.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// Hands `breach` over when the live config has `feedback:`; a full queue
/// is logged and audited, never waited on.
pub(crate) fn report(shared: &Shared, store: &SnapshotStore, breach: Breach) {
    let snapshot = store.load();
    if snapshot.config.feedback.is_none() {
        return;
    }
    let what = breach
        .rollout
        .clone()
        .or(breach.fault.clone())
        .unwrap_or_default();
    if !shared.feedback.report(breach) {
        warn!(trigger = %what, "feedback queue full; scenario not saved");
        shared.events.push(
            "feedback",
            &format!("save feedback scenario of {what}"),
            snapshot.version,
            vec!["the feedback queue is full".into()],
        );
    }
}

/// Writes each breach reported as a scenario under the live config's
/// `feedback.dir`, one at a time, until `cancel`. A changed `feedback.dir`
/// is prepared (created, checked writable) when first seen; a failure is
/// logged and audited.
pub(crate) async fn run_feedback(
    store: Arc<SnapshotStore>,
    shared: Shared,
    cancel: CancellationToken,
) {
    let Some(mut rx) = shared.feedback.take() else {
        return;
    };
    let mut prepared = store.load().config.feedback.as_ref().map(|f| f.dir.clone());
    loop {
        let breach = tokio::select! {
            () = cancel.cancelled() => return,
            b = rx.recv() => match b { Some(b) => b, None => return },
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(SETTLE) => {}
        }
        let snapshot = store.load();
        let Some(config) = snapshot.config.feedback.clone() else {
            continue;
        };
        let what = breach
            .rollout
            .clone()
            .or(breach.fault.clone())
            .unwrap_or_default();
        let mut errors = Vec::new();
        if prepared.as_ref() != Some(&config.dir) {
            match prepare(&config.dir) {
                Ok(()) => prepared = Some(config.dir.clone()),
                Err(e) => errors.push(format!(
                    "feedback.dir: cannot create or write {}: {e}",
                    config.dir.display()
                )),
            }
        }
        let cut = shared.recorder.recent().window(
            &breach.route,
            breach.at_us - i64::try_from(config.before.as_micros()).unwrap_or(i64::MAX),
            breach.at_us,
        );
        let recording = shared.recorder.is_recording();
        let created_us = crate::state::wall_ms() as i64 * 1000;
        let result = match errors.is_empty() {
            true => {
                let b = breach.clone();
                tokio::task::spawn_blocking(move || {
                    write_scenario(&config, &b, cut, recording, created_us)
                })
                .await
                .map_err(std::io::Error::other)
                .and_then(|r| r)
                .map_err(|e| {
                    vec![format!(
                        "feedback.dir: cannot write the scenario into {}: {e}",
                        prepared.as_deref().unwrap_or(Path::new("")).display()
                    )]
                })
            }
            false => Err(errors),
        };
        match result {
            Ok(w) => {
                info!(id = %w.id, trigger = %what, route = %breach.route, requests = w.requests, dir = %w.path.display(), "feedback scenario saved");
                let action = format!(
                    "feedback {}: {} of {what} saved, {} request(s) of route {} in {}",
                    w.id,
                    breach.kind.as_str(),
                    w.requests,
                    breach.route,
                    w.path.display()
                );
                shared
                    .events
                    .push("feedback", &action, snapshot.version, Vec::new());
            }
            Err(errors) => {
                warn!(trigger = %what, errors = %errors.join("; "), "feedback scenario not saved");
                let action = format!("save feedback scenario of {what}");
                shared
                    .events
                    .push("feedback", &action, snapshot.version, errors);
            }
        }
    }
}

#[cfg(test)]
mod tests;
