//! One rollout's task: every `interval` on tokio's clock it reads the
//! canary's and stable's windows and the observers, evaluates the policy,
//! and carries out what comes back — a weight change through the store (one
//! snapshot swap), an entry in the rollout's history and in the audit log,
//! the metrics. Operators' commands from the API are carried out by the same
//! [`act`], under the same lock, so a command and a tick never interleave.

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_filters::RolloutMetrics;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::gates::{measures, GateReading, Observation};
use super::policy::{Command, Policy, State, Transition};
use super::status::{RolloutEvent, RolloutStatus};
use crate::config::{Config, ConfigError, ConfigErrors, RawConfig, RolloutConfig};
use crate::observers::Observers;
use crate::stats::{Measure, WindowView};
use crate::store::SnapshotStore;

/// Validation refuses 0; this keeps a tiny interval from spinning.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Transitions kept per rollout; the audit log keeps them all too.
const HISTORY: usize = 200;

/// What the gates read besides the stats windows: the observers in a
/// running sluice, set values in tests.
pub trait Signals: Send + Sync {
    /// Percent of memory used on the fullest GPU.
    fn gpu_memory_percent(&self) -> Option<f64>;
    /// Requests waiting at `cluster`'s model servers.
    fn upstream_waiting(&self, cluster: &str) -> Option<f64>;
}

impl Signals for Observers {
    fn gpu_memory_percent(&self) -> Option<f64> {
        self.gpu.as_ref()?.memory_used_percent_max()
    }

    fn upstream_waiting(&self, cluster: &str) -> Option<f64> {
        self.upstreams.as_ref()?.latest(cluster)?.waiting
    }
}

/// What every rollout of one sluice shares.
pub(crate) struct Env {
    pub store: Arc<SnapshotStore>,
    pub signals: Arc<dyn Signals>,
}

impl Env {
    fn metrics(&self) -> &RolloutMetrics {
        &self.store.metrics.rollout
    }
}

/// One rollout's state, shared by its task and the API.
pub(crate) struct Cell {
    pub name: String,
    created: Instant,
    inner: Mutex<Inner>,
}

struct Inner {
    policy: Policy,
    readings: Vec<GateReading>,
    events: VecDeque<RolloutEvent>,
    /// A canary weight a transition set that is not applied yet (retried
    /// every tick).
    want: Option<u32>,
}

impl Cell {
    pub fn new(env: &Env, config: &RolloutConfig, now: Instant) -> Cell {
        let policy = Policy::new(config.clone());
        publish(env.metrics(), &config.name, &policy);
        // Exported at 0 from the start, so that `increase()` sees the first.
        env.metrics()
            .rollbacks
            .with_label_values(&[config.name.as_str()])
            .inc_by(0);
        Cell {
            name: config.name.clone(),
            created: now,
            inner: Mutex::new(Inner {
                policy,
                readings: Vec::new(),
                events: VecDeque::new(),
                want: None,
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn status(&self, with_events: bool) -> RolloutStatus {
        let inner = self.lock();
        let c = inner.policy.config();
        RolloutStatus {
            name: c.name.clone(),
            route: c.route.clone(),
            stable: c.stable.clone(),
            canary: c.canary.clone(),
            state: inner.policy.state(),
            step: inner.policy.step(),
            steps: c.steps.clone(),
            weight: inner.policy.weight(),
            breaches: inner.policy.breaches(),
            gates: inner
                .readings
                .iter()
                .map(|r| (r.gate.as_str(), r.clone()))
                .collect::<BTreeMap<_, _>>(),
            events: with_events.then(|| inner.events.iter().cloned().collect()),
        }
    }

    /// Carries out an operator's command; `Err` says why it is not allowed.
    pub fn command(&self, env: &Env, command: Command, now: Instant) -> Result<(), String> {
        let mut inner = self.lock();
        let t = inner.policy.command(command, now)?;
        self.act(env, "api", &mut inner, t, now);
        Ok(())
    }

    /// One evaluation. `None` when the task should end: the rollout left
    /// the config, or reached a final state with its weight applied.
    pub fn tick(&self, env: &Env, now: Instant) -> Option<Duration> {
        // Lock first: a command applied between a load and the lock would
        // look like someone else's change of the weights.
        let mut inner = self.lock();
        let snapshot = env.store.load();
        let config = snapshot.config.rollout(&self.name)?.clone();
        inner.policy.reconfigure(&config);
        if let Some(w) = inner.want {
            let action = format!("rollout {}: weight {w} (retry)", self.name);
            if apply_weight(env, "rollout", &config, w, &action) {
                inner.want = None;
            }
        } else if inner.policy.state() == State::Progressing {
            if let Some(reason) = drift(&snapshot.config, &config, inner.policy.weight()) {
                if let Some(t) = inner.policy.interrupt(reason) {
                    self.act(env, "rollout", &mut inner, t, now);
                }
            }
        }
        let (canary, stable) = views(env, &snapshot.config, &config);
        let obs = Observation {
            canary: &canary,
            stable: &stable,
            gpu_memory_percent: env.signals.gpu_memory_percent(),
            upstream_waiting: env.signals.upstream_waiting(&config.canary),
        };
        let (readings, transition) = inner.policy.evaluate(now, &obs);
        inner.readings = readings;
        if let Some(t) = transition {
            self.act(env, "rollout", &mut inner, t, now);
        }
        if inner.policy.state().is_final() && inner.want.is_none() {
            return None;
        }
        Some(config.interval.max(MIN_INTERVAL))
    }

    /// Carries out one transition: the weight (one snapshot swap), the
    /// audit log (`source`: `rollout` for its own decisions, `api` for an
    /// operator's), the history, the metrics.
    fn act(&self, env: &Env, source: &str, inner: &mut Inner, t: Transition, now: Instant) {
        let action = action(&self.name, &t);
        info!(
            rollout = %self.name,
            from = t.from.as_str(),
            to = t.to.as_str(),
            step = t.step,
            weight = t.weight,
            reason = %t.reason,
            "rollout transition"
        );
        match t.apply {
            Some(w) => {
                inner.want = Some(w);
                if apply_weight(env, source, inner.policy.config(), w, &action) {
                    inner.want = None;
                }
            }
            None => env
                .store
                .events
                .push(source, &action, env.store.load().version, Vec::new()),
        }
        if t.to == State::RolledBack {
            env.metrics()
                .rollbacks
                .with_label_values(&[self.name.as_str()])
                .inc();
        }
        if inner.events.len() == HISTORY {
            inner.events.pop_front();
        }
        inner.events.push_back(RolloutEvent {
            at_ms: now.saturating_duration_since(self.created).as_millis() as u64,
            time_ms: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64),
            from: t.from,
            to: t.to,
            step: t.step,
            weight: t.weight,
            reason: t.reason,
            evidence: t.evidence,
        });
        publish(env.metrics(), &self.name, &inner.policy);
    }
}

/// Runs one rollout until it is final, leaves the config, or `cancel`.
pub(crate) async fn run(env: Arc<Env>, cell: Arc<Cell>, cancel: CancellationToken) {
    if let Some(c) = env.store.load().config.rollout(&cell.name) {
        if c.source.is_some() || !c.targets.is_empty() {
            warn!(
                rollout = %cell.name,
                "fleet mode (source, targets) is not in this build; gates read this instance's stats"
            );
        }
    }
    loop {
        let Some(next) = cell.tick(&env, Instant::now()) else {
            return;
        };
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(next) => {}
        }
    }
}

/// `rollout chat-v2: step 2 → weight 5 (held 30s ...)`.
fn action(name: &str, t: &Transition) -> String {
    let what = match (t.to, t.apply) {
        (State::Progressing, Some(w)) => format!("step {} → weight {w}", t.step),
        (to, Some(w)) => format!("{} → weight {w}", to.as_str()),
        (to, None) => to.as_str().to_string(),
    };
    format!("rollout {name}: {what} ({})", t.reason)
}

/// The canary and stable windows, keyed by each cluster's version label,
/// with the distributions the gates read.
fn views(env: &Env, live: &Config, c: &RolloutConfig) -> (WindowView, WindowView) {
    let (canary, stable) = measures(&c.gates);
    let view = |cluster: &str, measures: &[Measure]| {
        let version = live.cluster(cluster).map_or("", |x| x.version.as_str());
        let key = env.store.stats.key(&c.route, cluster, version);
        env.store.stats.view_only(key, c.window, measures)
    };
    (view(&c.canary, &canary), view(&c.stable, &stable))
}

/// The live weights of the rollout's clusters, if they are not what it set.
fn drift(live: &Config, c: &RolloutConfig, weight: u32) -> Option<String> {
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
fn apply_weight(env: &Env, source: &str, c: &RolloutConfig, weight: u32, action: &str) -> bool {
    let live = env.store.load();
    if drift(&live.config, c, weight).is_none() && live.config.route(&c.route).is_some() {
        env.store
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

fn publish(m: &RolloutMetrics, name: &str, policy: &Policy) {
    m.weight
        .with_label_values(&[name])
        .set(i64::from(policy.weight()));
    for s in State::ALL {
        m.state
            .with_label_values(&[name, s.as_str()])
            .set(i64::from(s == policy.state()));
    }
}

/// Drops a rollout's series once it has left the config.
pub(crate) fn forget(env: &Env, name: &str) {
    let m = env.metrics();
    let _ = m.weight.remove_label_values(&[name]);
    let _ = m.rollbacks.remove_label_values(&[name]);
    for s in State::ALL {
        let _ = m.state.remove_label_values(&[name, s.as_str()]);
    }
}
