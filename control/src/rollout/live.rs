//! What a rollout writes to this instance's live config: its weights (one
//! snapshot swap), and, once finished, its own removal from `rollouts:`;
//! and the check that nobody else moved its weights.

use tracing::warn;

use super::controller::Env;
use crate::config::{Config, ConfigError, ConfigErrors, RawConfig, RolloutConfig};
use crate::store::SnapshotStore;

/// The live weights of the rollout's clusters, if they are not what it set.
pub(super) fn drift(live: &Config, c: &RolloutConfig, weight: u32) -> Option<String> {
    let route = live.route(&c.route)?;
    let of = |name: &str| route.split.iter().find(|(n, _)| n == name).map(|(_, w)| *w);
    let (stable, canary) = (of(&c.stable)?, of(&c.canary)?);
    (stable != 100 - weight || canary != weight).then(|| {
        format!(
            "the split of route {} was changed outside the rollout ({}: {stable}, {}: {canary}; \
             the rollout set {} and {weight})",
            c.route,
            c.stable,
            c.canary,
            100 - weight
        )
    })
}

/// Sets the canary to `weight` and stable to `100 - weight` in one swap;
/// other clusters of the split keep theirs. A split already there is not
/// swapped again, but still logged. `false` when the store refused.
pub(super) fn apply_weight(
    env: &Env,
    source: &str,
    c: &RolloutConfig,
    weight: u32,
    action: &str,
) -> bool {
    let live = env.store.load();
    if drift(&live.config, c, weight).is_none() && live.config.route(&c.route).is_some() {
        env.shared
            .events
            .push(source, action, live.version, Vec::new());
        return true;
    }
    let result = env.store.apply(source, action, |raw: &mut RawConfig| {
        let route = raw
            .routes
            .iter_mut()
            .find(|r| r.name == c.route)
            .ok_or_else(|| {
                ConfigErrors(vec![ConfigError::new(
                    "route",
                    format!("unknown route `{}`", c.route),
                )])
            })?;
        route.split.insert(c.stable.clone(), 100 - weight);
        route.split.insert(c.canary.clone(), weight);
        Ok(())
    });
    match result {
        Ok(_) => true,
        Err(errors) => {
            warn!(rollout = %c.name, weight, errors = %errors, "rollout weight not applied; retrying");
            false
        }
    }
}

/// Takes the rollout `name` out of the live config's `rollouts:` (one
/// audited change, `source` and `action` as the audit log shows them).
/// `Ok(false)` when the config has no such rollout.
pub(super) fn leave_config(
    store: &SnapshotStore,
    source: &str,
    action: &str,
    name: &str,
) -> Result<bool, ConfigErrors> {
    let mut missing = false;
    let result = store.apply(source, action, |raw| {
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
        Ok(_) => Ok(true),
        Err(_) if missing => Ok(false),
        Err(errors) => Err(errors),
    }
}
