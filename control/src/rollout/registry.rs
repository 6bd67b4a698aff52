//! Every rollout of the live config, each run by its own controller task.
//! Rollouts live in the config (`rollouts:`), so the registry follows the
//! store: a rollout that appears (at boot, by `POST /v1/rollouts`, by a
//! reload) starts; one that leaves stops, its weights left where they are.
//! A changed definition is taken in place by the running controller; a
//! change of route, stable or canary is a new rollout and starts again.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::warn;

use super::controller::{self, Cell, Env};
use super::policy::Command;
use super::source::Signals;
use super::status::RolloutStatus;
use crate::config::{ConfigError, ConfigErrors, RawRollout, RolloutConfig};
use crate::observers::Observers;
use crate::shared::Shared;
use crate::store::SnapshotStore;

/// Why a registry call did nothing.
#[derive(Debug, PartialEq, thiserror::Error)]
pub enum RolloutError {
    #[error("unknown rollout `{0}`")]
    Unknown(String),
    #[error("rollout `{0}` already exists")]
    Exists(String),
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

pub struct Rollouts {
    env: Arc<Env>,
    entries: Mutex<BTreeMap<String, Entry>>,
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

    fn lock(&self) -> MutexGuard<'_, BTreeMap<String, Entry>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
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
    /// what it no longer has. Needs a tokio runtime to start controllers.
    pub fn reconcile(&self) {
        let snapshot = self.env.store.load();
        let mut entries = self.lock();
        entries.retain(|name, e| {
            let keep = snapshot
                .config
                .rollout(name)
                .is_some_and(|c| target(c) == e.target);
            if !keep {
                e.cancel.cancel();
                controller::forget(&self.env, name);
            }
            keep
        });
        if self.stop.is_cancelled() {
            return;
        }
        for c in &snapshot.config.rollouts {
            if entries.contains_key(&c.name) {
                continue;
            }
            if tokio::runtime::Handle::try_current().is_err() {
                warn!(rollout = %c.name, "rollout not started: no runtime");
                continue;
            }
            let cell = Arc::new(Cell::new(&self.env, c, Instant::now()));
            let cancel = self.stop.child_token();
            self.tracker.spawn(controller::run(
                self.env.clone(),
                cell.clone(),
                cancel.clone(),
            ));
            entries.insert(
                c.name.clone(),
                Entry {
                    cell,
                    target: target(c),
                    cancel,
                },
            );
        }
    }

    fn cell(&self, name: &str) -> Result<Arc<Cell>, RolloutError> {
        self.lock()
            .get(name)
            .map(|e| e.cell.clone())
            .ok_or_else(|| RolloutError::Unknown(name.to_string()))
    }

    /// Every rollout, by name, without their histories.
    pub fn list(&self) -> Vec<RolloutStatus> {
        let cells: Vec<Arc<Cell>> = self.lock().values().map(|e| e.cell.clone()).collect();
        cells.iter().map(|c| c.status(false)).collect()
    }

    pub fn status(&self, name: &str) -> Result<RolloutStatus, RolloutError> {
        Ok(self.cell(name)?.status(true))
    }

    /// Adds `rollout` to the live config (so `GET /v1/config` shows it and
    /// a reload of a file without it removes it) and starts it.
    pub fn add(&self, rollout: RawRollout) -> Result<RolloutStatus, RolloutError> {
        let name = rollout.name.clone();
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
            Err(errors) => Err(RolloutError::Invalid(relative(errors, index))),
            Ok(_) => {
                self.reconcile();
                self.status(&name)
            }
        }
    }

    /// Removes a rollout from the live config, which stops it; the weights
    /// stay where it left them.
    pub fn remove(&self, name: &str) -> Result<(), RolloutError> {
        let mut missing = false;
        let result = self
            .env
            .store
            .apply("api", &format!("remove rollout {name}"), |raw| {
                let before = raw.rollouts.len();
                raw.rollouts.retain(|r| r.name != name);
                missing = raw.rollouts.len() == before;
                match missing {
                    true => Err(ConfigErrors(vec![ConfigError::new(
                        "name",
                        format!("unknown rollout `{name}`"),
                    )])),
                    false => Ok(()),
                }
            });
        match result {
            Err(_) if missing => Err(RolloutError::Unknown(name.to_string())),
            Err(errors) => Err(RolloutError::Invalid(errors)),
            Ok(_) => {
                self.reconcile();
                Ok(())
            }
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

/// Error paths of the config with the rollout at `index` in it, made
/// relative to that rollout (`rollouts[3].gates.ttft_p95` → `gates.ttft_p95`).
fn relative(errors: ConfigErrors, index: usize) -> ConfigErrors {
    let prefix = format!("rollouts[{index}]");
    ConfigErrors(
        errors
            .0
            .into_iter()
            .map(|mut e| {
                if e.path == prefix {
                    e.path = String::new();
                } else if let Some(rest) = e.path.strip_prefix(&format!("{prefix}.")) {
                    e.path = rest.to_string();
                }
                e
            })
            .collect(),
    )
}
