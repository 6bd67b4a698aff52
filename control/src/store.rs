//! The live snapshot and the one way to change it: every change (API, file
//! reload, SIGHUP) edits a copy of the config as written, validates the whole
//! of it, builds a new snapshot and swaps it in, or changes nothing and says
//! why. Writers are serialised; readers never wait.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use sluice_filters::Metrics;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::{Config, ConfigError, ConfigErrors, RawConfig};
use crate::events::EventLog;
use crate::mirror::MirrorDiffs;
use crate::snapshot::Snapshot;
use crate::stats::Stats;

pub struct SnapshotStore {
    current: ArcSwap<Snapshot>,
    /// Serialises writers so that no change is lost between load and swap.
    write: Mutex<()>,
    pub metrics: Metrics,
    pub stats: Arc<Stats>,
    pub events: EventLog,
    /// Recent shadow answers that differed from the primary's.
    pub mirror_diffs: MirrorDiffs,
    /// The live snapshot's version, for tasks that follow changes (rollouts).
    changes: watch::Sender<u64>,
}

impl SnapshotStore {
    pub fn new(config: Config, metrics: Metrics, stats: Arc<Stats>) -> Arc<SnapshotStore> {
        let snapshot = Snapshot::build(Arc::new(config), 1, None, &metrics, &stats);
        metrics.snapshot_version.set(1);
        let store = SnapshotStore {
            current: ArcSwap::from_pointee(snapshot),
            write: Mutex::new(()),
            metrics,
            stats,
            events: EventLog::default(),
            mirror_diffs: MirrorDiffs::default(),
            changes: watch::Sender::new(1),
        };
        store.events.push("startup", "load config", 1, Vec::new());
        Arc::new(store)
    }

    /// The live snapshot. The data plane calls this once per request and
    /// keeps the `Arc` for the request's whole life.
    pub fn load(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Wakes on every applied change with the new version.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changes.subscribe()
    }

    /// Applies `edit` to a copy of the live config as written, validates the
    /// result and swaps it in. On any error the live snapshot is untouched.
    pub fn apply(
        &self,
        source: &str,
        action: &str,
        edit: impl FnOnce(&mut RawConfig) -> Result<(), ConfigErrors>,
    ) -> Result<Arc<Snapshot>, ConfigErrors> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.current.load_full();
        let result = self.next_snapshot(&old, edit);
        match result {
            Ok(snapshot) => {
                let snapshot = Arc::new(snapshot);
                self.current.store(snapshot.clone());
                self.changes.send_replace(snapshot.version);
                self.metrics.snapshot_version.set(snapshot.version as i64);
                self.metrics
                    .config_changes
                    .with_label_values(&[source, "applied"])
                    .inc();
                self.events
                    .push(source, action, snapshot.version, Vec::new());
                info!(
                    source,
                    action,
                    version = snapshot.version,
                    "config change applied"
                );
                Ok(snapshot)
            }
            Err(errors) => {
                self.metrics
                    .config_changes
                    .with_label_values(&[source, "rejected"])
                    .inc();
                let lines: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
                warn!(source, action, errors = %errors, "config change rejected");
                self.events.push(source, action, old.version, lines);
                Err(errors)
            }
        }
    }

    /// Replaces the whole config (file reload, `PUT /v1/config`).
    pub fn replace(&self, source: &str, raw: RawConfig) -> Result<Arc<Snapshot>, ConfigErrors> {
        self.apply(source, "replace config", move |current| {
            *current = raw;
            Ok(())
        })
    }

    fn next_snapshot(
        &self,
        old: &Snapshot,
        edit: impl FnOnce(&mut RawConfig) -> Result<(), ConfigErrors>,
    ) -> Result<Snapshot, ConfigErrors> {
        let mut raw = old.config.raw.clone();
        edit(&mut raw)?;
        let config = raw.validate()?;
        needs_no_restart(&old.config, &config)?;
        Ok(Snapshot::build(
            Arc::new(config),
            old.version + 1,
            Some(old),
            &self.metrics,
            &self.stats,
        ))
    }
}

/// Sockets are bound at start: listeners, the admin address and the runtime
/// cannot change without a restart, so a change to them is refused rather
/// than half-applied.
fn needs_no_restart(old: &Config, new: &Config) -> Result<(), ConfigErrors> {
    let mut errors = Vec::new();
    let restart = "cannot change at run time; restart sluice to apply";
    if old.listeners != new.listeners {
        errors.push(ConfigError::new("listeners", restart));
    }
    if old.admin != new.admin {
        errors.push(ConfigError::new("admin", restart));
    }
    if old.runtime != new.runtime {
        errors.push(ConfigError::new("runtime", restart));
    }
    if old.telemetry != new.telemetry {
        errors.push(ConfigError::new("telemetry", restart));
    }
    if old.gpu != new.gpu {
        errors.push(ConfigError::new("gpu", restart));
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ConfigErrors(errors))
    }
}

#[cfg(test)]
mod tests;
