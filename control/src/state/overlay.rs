//! The pure half of the state: what a live snapshot saves ([`capture`]),
//! and the config a saved state gives when laid over the config file
//! ([`overlay`]), checked whole before anything of it is used.

use std::collections::BTreeMap;

use crate::config::{Config, ConfigError, ConfigErrors, RawConfig, RolloutConfig};
use crate::fault::FaultState;
use crate::snapshot::Snapshot;

use super::file::{digest, SavedController, SavedFault, StateFile, VERSION};

/// What a state file restores, checked whole.
#[derive(Debug)]
pub(crate) struct Restored {
    /// The config file with the state laid over it, validated.
    pub config: Config,
    /// Experiments `halt_if` had stopped: they come back stopped.
    pub halted: Vec<String>,
    /// The controllers of the rollouts in `config`.
    pub controllers: Vec<SavedController>,
    /// Finished rollouts, for the history, with their definitions.
    pub finished: Vec<(SavedController, RolloutConfig)>,
    /// Experiments whose expiry passed while sluice was down: dropped.
    pub expired: Vec<String>,
    /// Finished rollouts left out of the history: their definition no
    /// longer fits the config (its route or clusters are gone).
    pub forgotten: Vec<String>,
    /// The config file is not the one the state was made on; the state
    /// wins all the same.
    pub file_changed: bool,
}

/// The state of the live `snapshot` at wall-clock `now_ms`, as an overlay
/// of `base` (the config as last loaded whole). `now` is the monotonic
/// instant of `now_ms`, for the experiments' time left.
pub(crate) fn capture(
    snapshot: &Snapshot,
    base: &RawConfig,
    controllers: Vec<SavedController>,
    now: std::time::Instant,
    now_ms: u64,
) -> StateFile {
    let live = &snapshot.config.raw;
    let splits = live
        .routes
        .iter()
        .filter(|r| {
            base.routes
                .iter()
                .find(|b| b.name == r.name)
                .is_none_or(|b| b.split != r.split)
        })
        .map(|r| (r.name.clone(), r.split.clone()))
        .collect();
    // `snapshot.faults` is in `faults:` order.
    let faults = live
        .faults
        .iter()
        .zip(&snapshot.faults)
        .map(|(spec, runtime)| SavedFault {
            spec: spec.clone(),
            expires_ms: now_ms.saturating_add(runtime.time_left_at(now).as_millis() as u64),
            halted: runtime.state_at(now) == FaultState::Halted,
        })
        .collect();
    StateFile {
        v: VERSION,
        saved_ms: now_ms,
        config_digest: digest(base),
        splits,
        faults,
        rollouts: live.rollouts.clone(),
        controllers,
    }
}

/// The config `file` with `state` laid over it at wall-clock `now_ms`:
/// its splits, its rollouts, its experiments that have not expired (each
/// with the time it had left as its `ttl`). Every part is checked, and
/// the whole config validated, before anything is returned: a state that
/// does not fit is refused whole.
pub(crate) fn overlay(
    file: &RawConfig,
    state: &StateFile,
    now_ms: u64,
) -> Result<Restored, ConfigErrors> {
    let mut raw = file.clone();
    let mut errors = Vec::new();
    for (route, split) in &state.splits {
        match raw.routes.iter_mut().find(|r| r.name == *route) {
            Some(r) => r.split = split.clone(),
            None => errors.push(ConfigError::new(
                format!("splits.{route}"),
                format!("the config has no route `{route}`"),
            )),
        }
    }
    if !errors.is_empty() {
        return Err(ConfigErrors(errors));
    }
    let mut expired = Vec::new();
    let mut halted = Vec::new();
    raw.faults = Vec::new();
    for saved in &state.faults {
        let id = saved.spec.id.clone().unwrap_or_default();
        if saved.expires_ms <= now_ms {
            expired.push(id);
            continue;
        }
        if saved.halted {
            halted.push(id);
        }
        let mut spec = saved.spec.clone();
        spec.ttl = Some(format!("{}ms", saved.expires_ms - now_ms));
        raw.faults.push(spec);
    }
    raw.rollouts = state.rollouts.clone();
    let config = raw.validate()?;

    let target = |c: &SavedController| (c.route.clone(), c.stable.clone(), c.canary.clone());
    let running: BTreeMap<&str, &RolloutConfig> = config
        .rollouts
        .iter()
        .map(|r| (r.name.as_str(), r))
        .collect();
    let mut controllers = Vec::new();
    let mut finished = Vec::new();
    let mut forgotten = Vec::new();
    for c in &state.controllers {
        match &c.finished {
            Some(definition) => match finished_config(&config.raw, definition) {
                Some(rollout) => finished.push((c.clone(), rollout)),
                None => forgotten.push(c.name.clone()),
            },
            None => {
                let same = running.get(c.name.as_str()).is_some_and(|r| {
                    (r.route.clone(), r.stable.clone(), r.canary.clone()) == target(c)
                });
                if same {
                    controllers.push(c.clone());
                }
            }
        }
    }
    Ok(Restored {
        file_changed: digest(file) != state.config_digest,
        config,
        halted,
        controllers,
        finished,
        expired,
        forgotten,
    })
}

/// A finished rollout's definition, validated against the config it comes
/// back in (alone: its route is free by now). `None` when it no longer fits.
fn finished_config(
    raw: &RawConfig,
    definition: &crate::config::RawRollout,
) -> Option<RolloutConfig> {
    let mut alone = raw.clone();
    alone.faults = Vec::new();
    alone.rollouts = vec![definition.clone()];
    alone.validate().ok()?.rollouts.into_iter().next()
}
