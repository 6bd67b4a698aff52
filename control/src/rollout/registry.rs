//! Every rollout of the live config, each run by its own controller task,
//! and the finished ones (`history`). Rollouts live in the config
//! (`rollouts:`), so the registry follows the store: a rollout that appears
//! (at boot, by `POST /v1/rollouts`, by a reload) starts; one that leaves
//! stops, its weights left where they are. A changed definition is taken
//! in place by the running controller; a change of route, stable or canary
//! is a new rollout and starts again. A rollout that finishes takes itself
//! out of the config and moves to the history; the config listing it
//! again (a reload of the file it came from) does not start it again
//! until it is deleted.

mod history;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use super::controller::{self, Cell, Env};
use super::live::leave_config;
use super::policy::{Command, State};
use super::source::Signals;
use super::status::RolloutStatus;
use crate::config::{ConfigError, ConfigErrors, RawRollout, RolloutConfig};
use crate::observers::Observers;
use crate::shared::Shared;
use crate::state::SavedController;
use crate::store::SnapshotStore;
use history::History;

/// Why a registry call did nothing.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RolloutError {
    #[error("unknown rollout `{0}`")]
    Unknown(String),
    #[error("rollout `{0}` already exists")]
    Exists(String),
    /// The name is held by a finished rollout in the history.
    #[error("rollout `{0}` has finished ({1}); delete it to reuse the name")]
    Finished(String, State),
    /// The rollout (or the config with it) does not validate; paths are
    /// relative to the rollout.
    #[error("{0}")]
    Invalid(ConfigErrors),
    /// The command is not allowed in the rollout's state.
    #[error("{0}")]
    NotAllowed(String),
}

struct Entry {
    cell: Arc<Cell>,
    /// (route, stable, canary): what makes it the same rollout.
    target: (String, String, String),
    cancel: CancellationToken,
}

#[derive(Default)]
struct Registry {
    /// The rollouts of the live config, by name.
    live: BTreeMap<String, Entry>,
    finished: History,
    /// Saved controllers (see `state`) for the first reconcile to start
    /// from; what it does not take is dropped then.
    restore: BTreeMap<String, SavedController>,
}

pub struct Rollouts {
    env: Arc<Env>,
    entries: Mutex<Registry>,
    tracker: TaskTracker,
    /// Ends every controller when [`Rollouts::run`] ends.
    stop: CancellationToken,
}

fn target(c: &RolloutConfig) -> (String, String, String) {
    (c.route.clone(), c.stable.clone(), c.canary.clone())
}

impl Rollouts {
    /// Gates read the GPU and model-server load from `observers`.
    pub fn new(store: Arc<SnapshotStore>, shared: Shared, observers: Observers) -> Arc<Rollouts> {
        Rollouts::with_signals(store, shared, Arc::new(observers))
    }

    pub fn with_signals(
        store: Arc<SnapshotStore>,
        shared: Shared,
        signals: Arc<dyn Signals>,
    ) -> Arc<Rollouts> {
        Arc::new(Rollouts {
            env: Arc::new(Env {
                store,
                shared,
                signals,
            }),
            entries: Mutex::default(),
            tracker: TaskTracker::new(),
            stop: CancellationToken::new(),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Registry> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Before [`Rollouts::run`]: the controllers of the live config's
    /// rollouts start from `running` rather than afresh; `finished` go to
    /// the history as they are.
    pub(crate) fn restore(
        &self,
        running: Vec<SavedController>,
        finished: Vec<(SavedController, RolloutConfig)>,
    ) {
        let now = Instant::now();
        let mut registry = self.lock();
        for (saved, config) in finished {
            let cell = Arc::new(Cell::restored(&self.env, &config, &saved, now));
            for name in registry.finished.insert(cell) {
                controller::forget(&self.env, &name);
            }
        }
        registry.restore = running.into_iter().map(|c| (c.name.clone(), c)).collect();
    }

    /// Every controller's state, running and finished, for the state file
    /// (saved ones not started yet included).
    pub(crate) fn saved(&self) -> Vec<SavedController> {
        let registry = self.lock();
        let cells = registry
            .finished
            .cells()
            .chain(registry.live.values().map(|e| &e.cell));
        let mut saved: Vec<SavedController> = cells.map(|c| c.saved()).collect();
        saved.extend(
            registry
                .restore
                .values()
                .filter(|c| !registry.live.contains_key(&c.name))
                .cloned(),
        );
        saved
    }

    /// Runs the rollouts of the live config and follows its changes until
    /// `cancel`; then stops every controller and waits for them.
    pub async fn run(self: Arc<Self>, cancel: CancellationToken) {
        let mut changes = self.env.store.subscribe();
        loop {
            self.reconcile();
            tokio::select! {
                () = cancel.cancelled() => break,
                changed = changes.changed() => {
                    if changed.is_err() {
                        cancel.cancelled().await;
                        break;
                    }
                }
            }
        }
        self.stop.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }

    /// Starts what the live config has and the registry does not; stops
    /// what it no longer has (keeping the finished ones in the history).
    /// Needs a tokio runtime to start controllers.
    pub fn reconcile(&self) {
        let snapshot = self.env.store.load();
        // Finished rollouts the config lists again: taken out once more.
        let mut again = Vec::new();
        {
            let mut registry = self.lock();
            let Registry {
                live,
                finished,
                restore,
            } = &mut *registry;
            live.retain(|name, e| {
                let keep = !e.cell.is_done()
                    && snapshot
                        .config
                        .rollout(name)
                        .is_some_and(|c| target(c) == e.target);
                if !keep {
                    e.cancel.cancel();
                    // A finished one keeps its series until it is deleted:
                    // `increase()` of its rollbacks must see the last one.
                    let forget = match e.cell.is_done() {
                        true => finished.insert(e.cell.clone()),
                        false => vec![name.clone()],
                    };
                    for name in forget {
                        controller::forget(&self.env, &name);
                    }
                }
                keep
            });
            if self.stop.is_cancelled() {
                return;
            }
            for c in &snapshot.config.rollouts {
                if live.contains_key(&c.name) {
                    continue;
                }
                if let Some(cell) = finished.get(&c.name) {
                    again.push((c.name.clone(), cell.state()));
                    continue;
                }
                if tokio::runtime::Handle::try_current().is_err() {
                    warn!(rollout = %c.name, "rollout not started: no runtime");
                    continue;
                }
                let now = Instant::now();
                let cell = match restore.remove(&c.name) {
                    Some(saved)
                        if (
                            saved.route.clone(),
                            saved.stable.clone(),
                            saved.canary.clone(),
                        ) == target(c) =>
                    {
                        let cell = Cell::restored(&self.env, c, &saved, now);
                        cell.restart(&self.env, now);
                        Arc::new(cell)
                    }
                    _ => Arc::new(Cell::new(&self.env, c, now)),
                };
                let cancel = self.stop.child_token();
                self.tracker.spawn(controller::run(
                    self.env.clone(),
                    cell.clone(),
                    cancel.clone(),
                ));
                live.insert(
                    c.name.clone(),
                    Entry {
                        cell,
                        target: target(c),
                        cancel,
                    },
                );
            }
            restore.clear();
        }
        for (name, state) in again {
            let action = format!(
                "rollout {name}: has finished ({state}), not started again; delete it to run it again"
            );
            if let Err(errors) = leave_config(&self.env.store, "rollout", &action, &name) {
                warn!(rollout = %name, errors = %errors, "finished rollout not taken out of the config");
            }
        }
    }

    fn cell(&self, name: &str) -> Result<Arc<Cell>, RolloutError> {
        let registry = self.lock();
        registry
            .live
            .get(name)
            .map(|e| &e.cell)
            .or_else(|| registry.finished.get(name))
            .cloned()
            .ok_or_else(|| RolloutError::Unknown(name.to_string()))
    }

    /// Every rollout, running and finished, by name, without their
    /// histories.
    pub fn list(&self) -> Vec<RolloutStatus> {
        let cells: BTreeMap<String, Arc<Cell>> = {
            let registry = self.lock();
            let finished = registry.finished.cells();
            let live = registry.live.values().map(|e| &e.cell);
            finished
                .chain(live)
                .map(|c| (c.name.clone(), c.clone()))
                .collect()
        };
        cells.values().map(|c| c.status(false)).collect()
    }

    /// Every rollout, running and finished, as lineage artefacts below
    /// the versions its clusters have in `config`, each followed by its
    /// events (those that carry their lineage). A rollout whose cluster
    /// left the config is listed by its events alone.
    pub fn lineage(&self, config: &crate::config::Config) -> Vec<sluice_filters::Artifact> {
        let cells: Vec<Arc<Cell>> = {
            let registry = self.lock();
            let finished = registry.finished.cells();
            let live = registry.live.values().map(|e| &e.cell);
            finished.chain(live).cloned().collect()
        };
        cells.iter().flat_map(|c| c.lineage(config)).collect()
    }

    pub fn status(&self, name: &str) -> Result<RolloutStatus, RolloutError> {
        Ok(self.cell(name)?.status(true))
    }

    /// Adds `rollout` to the live config (so `GET /v1/config` shows it and
    /// a reload of a file without it removes it) and starts it.
    pub fn add(&self, rollout: RawRollout) -> Result<RolloutStatus, RolloutError> {
        let name = rollout.name.clone();
        if let Some(cell) = self.lock().finished.get(&name) {
            return Err(RolloutError::Finished(name, cell.state()));
        }
        let mut exists = false;
        let mut index = 0;
        let result = self
            .env
            .store
            .apply("api", &format!("add rollout {name}"), |raw| {
                if raw.rollouts.iter().any(|r| r.name == name) {
                    exists = true;
                    return Err(ConfigErrors(vec![ConfigError::new(
                        "name",
                        format!("rollout `{name}` already exists"),
                    )]));
                }
                index = raw.rollouts.len();
                raw.rollouts.push(rollout);
                Ok(())
            });
        match result {
            Err(_) if exists => Err(RolloutError::Exists(name)),
            Err(errors) => Err(RolloutError::Invalid(
                errors.relative_to(&format!("rollouts[{index}]")),
            )),
            Ok(_) => {
                self.reconcile();
                self.status(&name)
            }
        }
    }

    /// Removes a rollout: from the live config, which stops it (the
    /// weights stay where it left them), or from the history.
    pub fn remove(&self, name: &str) -> Result<(), RolloutError> {
        let finished = self.lock().finished.remove(name);
        if let Some(cell) = finished {
            controller::forget(&self.env, name);
            let version = self.env.store.load().version;
            let action = format!("remove rollout {name} ({})", cell.state());
            self.env
                .shared
                .events
                .push("api", &action, version, Vec::new());
            return Ok(());
        }
        match leave_config(
            &self.env.store,
            "api",
            &format!("remove rollout {name}"),
            name,
        ) {
            Ok(true) => {
                self.reconcile();
                Ok(())
            }
            Ok(false) => Err(RolloutError::Unknown(name.to_string())),
            Err(errors) => Err(RolloutError::Invalid(errors)),
        }
    }

    /// An operator's command, carried out at once.
    pub fn command(&self, name: &str, command: Command) -> Result<RolloutStatus, RolloutError> {
        let cell = self.cell(name)?;
        cell.command(&self.env, command, Instant::now())
            .map_err(RolloutError::NotAllowed)?;
        Ok(cell.status(true))
    }
}
