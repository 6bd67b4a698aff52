//! The live snapshot and the one way to change it: every change (API, file
//! reload, SIGHUP) edits a copy of the config as written, validates the whole
//! of it, builds a new snapshot and swaps it in, or changes nothing and says
//! why. Writers are serialised; readers never wait. The store holds nothing
//! else: the parts a change is counted and logged in are [`Shared`], which
//! it keeps a clone of for that alone.

use std::sync::{Arc, Mutex};

use arc_swap::ArcSwap;
use tokio::sync::watch;
use tracing::{info, warn};

use crate::config::{Config, ConfigError, ConfigErrors, RawConfig};
use crate::shared::Shared;
use crate::snapshot::Snapshot;

pub struct SnapshotStore {
    current: ArcSwap<Snapshot>,
    /// Serialises writers so that no change is lost between load and swap.
    write: Mutex<()>,
    /// Where snapshots resolve their handles and changes are counted and
    /// logged.
    shared: Shared,
    /// The live snapshot's version, for tasks that follow changes (rollouts).
    changes: watch::Sender<u64>,
    /// The config as last loaded whole (the file at start, a reload,
    /// `PUT /v1/config`): what the saved state is an overlay of.
    base: ArcSwap<RawConfig>,
}

impl SnapshotStore {
    pub fn new(config: Config, shared: &Shared) -> Arc<SnapshotStore> {
        let base = config.raw.clone();
        SnapshotStore::with_base(config, base, shared)
    }

    /// A store whose live config (`config`) is `base` with run-time changes
    /// laid over it (a restored state).
    pub(crate) fn with_base(
        config: Config,
        base: RawConfig,
        shared: &Shared,
    ) -> Arc<SnapshotStore> {
        let snapshot = Snapshot::build(Arc::new(config), 1, None, &shared.metrics, &shared.stats);
        shared.connections.watch(&snapshot);
        shared.metrics.snapshot_version.set(1);
        shared.events.push("startup", "load config", 1, Vec::new());
        Arc::new(SnapshotStore {
            current: ArcSwap::from_pointee(snapshot),
            write: Mutex::new(()),
            shared: shared.clone(),
            changes: watch::Sender::new(1),
            base: ArcSwap::from_pointee(base),
        })
    }

    /// Counts a whole config loaded after the start (a file reload,
    /// `PUT /v1/config`) in `sluice_config_reloads_total`.
    pub(crate) fn count_reload(&self, source: &str, applied: bool) {
        self.shared.reloads.count(source, applied);
    }

    /// The config as last loaded whole, without the run-time changes.
    pub(crate) fn base(&self) -> Arc<RawConfig> {
        self.base.load_full()
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
        self.apply_config(source, action, |old| {
            let mut raw = old.raw.clone();
            edit(&mut raw)?;
            let config = raw.validate()?;
            needs_no_restart(old, &config)?;
            Ok(config)
        })
    }

    /// The one serialised apply path: `next` builds the new config from the
    /// live one (validating what it changed) and the snapshot built on it is
    /// swapped in. Callers that can validate without the live config do it
    /// before (see [`SnapshotStore::replace`]), to keep this section short.
    pub(crate) fn apply_config(
        &self,
        source: &str,
        action: &str,
        next: impl FnOnce(&Config) -> Result<Config, ConfigErrors>,
    ) -> Result<Arc<Snapshot>, ConfigErrors> {
        let _guard = self.write.lock().unwrap_or_else(|p| p.into_inner());
        let old = self.current.load_full();
        let result = next(&old.config).map(|config| {
            Snapshot::build(
                Arc::new(config),
                old.version + 1,
                Some(&old),
                &self.shared.metrics,
                &self.shared.stats,
            )
        });
        match result {
            Ok(snapshot) => {
                let snapshot = Arc::new(snapshot);
                self.current.store(snapshot.clone());
                self.shared.connections.watch(&snapshot);
                self.changes.send_replace(snapshot.version);
                let metrics = &self.shared.metrics;
                metrics.snapshot_version.set(snapshot.version as i64);
                metrics
                    .config_changes
                    .with_label_values(&[source, "applied"])
                    .inc();
                self.shared
                    .events
                    .push(source, action, snapshot.version, Vec::new());
                info!(
                    source,
                    action = %escaped(action),
                    version = snapshot.version,
                    "config change applied"
                );
                Ok(snapshot)
            }
            Err(errors) => {
                self.rejected(source, action, old.version, &errors);
                Err(errors)
            }
        }
    }

    fn rejected(&self, source: &str, action: &str, version: u64, errors: &ConfigErrors) {
        self.shared
            .metrics
            .config_changes
            .with_label_values(&[source, "rejected"])
            .inc();
        let lines: Vec<String> = errors.0.iter().map(ToString::to_string).collect();
        warn!(
            source,
            action = %escaped(action),
            errors = %escaped(&errors.to_string()),
            "config change rejected"
        );
        self.shared.events.push(source, action, version, lines);
    }

    /// Replaces the whole config (file reload, `PUT /v1/config`). The new
    /// config is validated before the writers' lock is taken: it does not
    /// depend on the live one but for what needs a restart.
    pub fn replace(&self, source: &str, raw: RawConfig) -> Result<Arc<Snapshot>, ConfigErrors> {
        let action = "replace config";
        match raw.validate() {
            Ok(config) => self.apply_config(source, action, move |old| {
                needs_no_restart(old, &config)?;
                // Under the writers' lock, with the swap: the run-time
                // changes are gone with the config they were made on.
                self.base.store(Arc::new(config.raw.clone()));
                Ok(config)
            }),
            Err(errors) => {
                self.rejected(source, action, self.load().version, &errors);
                Err(errors)
            }
        }
    }
}

/// Text as one log line: control characters (a newline in an id a client
/// sent) are written escaped, so that no request can forge a line.
pub(crate) fn escaped(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
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
