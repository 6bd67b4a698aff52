//! One rollout's task: every `interval` on tokio's clock it gathers what
//! the gates read (this instance's windows and observers, or Prometheus:
//! see `source`), evaluates the policy, and carries out what comes back — a
//! weight change (one snapshot swap here, or a call to every target's
//! control API in fleet mode: see `fleet`), an entry in the rollout's
//! history and in the audit log, the metrics. Operators' commands from the
//! API are carried out by the same `Cell::act` (in `evaluate`), under the same lock, so a
//! command and a tick never interleave. Fleet mode's side of the task
//! (pushing weights, resolving DNS targets, reconciling) is in `fleet_task`.

mod evaluate;
mod fleet_task;
mod steps;

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_filters::RolloutMetrics;
use tokio::sync::Notify;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

use super::fleet::{DiscoveryStatus, Pusher, Targets};
use super::gates::{GateReading, Observation};
use super::live::{apply_weight, drift, leave_config};
use super::policy::{Command, Policy, State, Transition};
use super::source::{Gathered, Signals, Sources};
use super::status::{CoverageStatus, RolloutEvent, RolloutStatus, SourceStatus, StepFigures};
use crate::config::{OnRestart, RawRollout, RolloutConfig, RolloutSource};
use crate::feedback::{self, Breach};
use crate::shared::Shared;
use crate::state::SavedController;

use crate::store::SnapshotStore;

/// Validation refuses 0; this keeps a tiny interval from spinning.
const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// Transitions kept per rollout; the audit log keeps them all too.
const HISTORY: usize = 200;

/// What every rollout of one sluice shares.
pub(crate) struct Env {
    pub store: Arc<SnapshotStore>,
    pub shared: Shared,
    pub signals: Arc<dyn Signals>,
}

impl Env {
    fn metrics(&self) -> &RolloutMetrics {
        &self.shared.metrics.rollout
    }
}

/// One rollout's state, shared by its task and the API.
pub(crate) struct Cell {
    pub name: String,
    created: Instant,
    inner: Mutex<Inner>,
    /// Fleet mode: wakes the task to apply an operator's weight to the
    /// targets at once rather than at the next evaluation.
    wake: Notify,
    /// Set once the rollout finished and took itself out of the config:
    /// from then on it belongs to the registry's history, whatever the
    /// config lists.
    done: AtomicBool,
}

struct Inner {
    policy: Policy,
    readings: Vec<GateReading>,
    events: VecDeque<RolloutEvent>,
    /// A canary weight a transition set that is not applied yet (retried
    /// every tick; in fleet mode, until every target has it).
    want: Option<u32>,
    /// Fleet mode: each target, and whether it has `want`.
    targets: Targets,
    /// Fleet mode with DNS targets: the last answer, or why there is none.
    discovery: Option<DiscoveryStatus>,
    /// Fleet mode: the last evaluation's failed queries.
    source_errors: BTreeMap<String, String>,
    /// The definition as written, for the saved state of a finished one.
    raw: Option<RawRollout>,
    /// The `seq` of the next event in the history (see `EventLineage`):
    /// events ever made, those that fell off the history included.
    seq: usize,
    /// The current step's coverage, as of the last evaluation.
    coverage: Option<CoverageStatus>,
    /// Each step reached, by its 1-based number: the last evaluation there.
    step_history: BTreeMap<usize, StepFigures>,
}

impl Cell {
    pub(super) fn new(env: &Env, config: &RolloutConfig, now: Instant) -> Cell {
        let raw = written(env, &config.name);
        Cell::with_policy(env, Policy::new(config.clone()), raw, now)
    }

    /// A rollout back from its saved state at `now` (see `state`); a
    /// finished one goes to the history as it is.
    pub(super) fn restored(
        env: &Env,
        config: &RolloutConfig,
        saved: &SavedController,
        now: Instant,
    ) -> Cell {
        let policy = Policy::restored(
            config.clone(),
            saved.state,
            saved.step,
            saved.weight,
            saved.breaches,
            now,
        );
        let raw = saved
            .finished
            .clone()
            .or_else(|| written(env, &config.name));
        // Times in the history go on from the last one saved.
        let last = saved.events.last().map_or(0, |e| e.at_ms);
        let created = now.checked_sub(Duration::from_millis(last)).unwrap_or(now);
        let cell = Cell::with_policy(env, policy, raw, created);
        {
            let mut inner = cell.lock();
            inner.events = saved.events.iter().cloned().collect();
            inner.seq = saved.events.last().map_or(saved.events.len(), |e| {
                e.lineage.as_ref().map_or(saved.events.len(), |l| l.seq + 1)
            });
            while inner.events.len() > HISTORY {
                inner.events.pop_front();
            }
        }
        cell.done.store(saved.finished.is_some(), Ordering::Release);
        cell
    }

    fn with_policy(env: &Env, policy: Policy, raw: Option<RawRollout>, created: Instant) -> Cell {
        let config = policy.config().clone();
        publish(env.metrics(), &config.name, &policy);
        // Exported at 0 from the start, so that `increase()` sees the first.
        env.metrics()
            .rollbacks
            .with_label_values(&[config.name.as_str()])
            .inc_by(0);
        if config.is_fleet() {
            env.metrics()
                .drift
                .with_label_values(&[config.name.as_str()])
                .inc_by(0);
        }
        Cell {
            name: config.name.clone(),
            created,
            inner: Mutex::new(Inner {
                policy,
                readings: Vec::new(),
                events: VecDeque::new(),
                want: None,
                targets: Targets::new(&config.targets),
                discovery: config.discovery.as_ref().map(DiscoveryStatus::new),
                source_errors: BTreeMap::new(),
                raw,
                seq: 0,
                coverage: None,
                step_history: BTreeMap::new(),
            }),
            wake: Notify::new(),
            done: AtomicBool::new(false),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Right after a restart that restored it: pauses it as `on_restart:
    /// pause` says, or notes in its history that it goes on. A final one
    /// whose weight may not have been applied applies it again and leaves
    /// the config at its next tick.
    pub(super) fn restart(&self, env: &Env, now: Instant) {
        let mut inner = self.lock();
        let state = inner.policy.state();
        if state.is_final() {
            if !self.is_done() && !inner.policy.config().is_fleet() {
                inner.want = Some(inner.policy.weight());
            }
            return;
        }
        let paused = match inner.policy.config().on_restart {
            OnRestart::Pause => inner.policy.pause_at_restart(),
            OnRestart::Continue => None,
        };
        let t = paused.unwrap_or_else(|| Transition {
            from: state,
            to: state,
            step: inner.policy.step(),
            weight: inner.policy.weight(),
            apply: None,
            reason: "sluice restarted; goes on from the saved state".into(),
            evidence: Vec::new(),
        });
        self.act(env, "state", &mut inner, t, now);
    }

    /// What the state file keeps of it.
    pub(super) fn saved(&self) -> SavedController {
        let inner = self.lock();
        let c = inner.policy.config();
        SavedController {
            name: c.name.clone(),
            route: c.route.clone(),
            stable: c.stable.clone(),
            canary: c.canary.clone(),
            state: inner.policy.state(),
            step: inner.policy.step(),
            weight: inner.policy.weight(),
            breaches: inner.policy.breaches(),
            finished: self.is_done().then(|| inner.raw.clone()).flatten(),
            events: inner.events.iter().cloned().collect(),
        }
    }

    pub(super) fn status(&self, with_events: bool) -> RolloutStatus {
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
            source: c.source.as_ref().map(|s| match s {
                RolloutSource::Prometheus { url, .. } => SourceStatus {
                    prometheus: url.clone(),
                    errors: inner.source_errors.clone(),
                },
            }),
            targets: inner.targets.status(),
            discovery: inner.discovery.clone(),
            plan: c.plan.clone(),
            coverage: inner.coverage.clone(),
            step_history: inner.step_history.values().cloned().collect(),
            events: with_events.then(|| inner.events.iter().cloned().collect()),
        }
    }

    /// The rollout (as configured now) and its events as artefacts.
    pub(super) fn lineage(&self, config: &crate::config::Config) -> Vec<sluice_filters::Artifact> {
        let inner = self.lock();
        let mut made: Vec<sluice_filters::Artifact> = Vec::new();
        if let Some(r) = crate::lineage::rollout_in(config, inner.policy.config()) {
            made.push(r.with_attr("state", inner.policy.state().as_str().into()));
        }
        for e in &inner.events {
            if let Some(l) = &e.lineage {
                made.push(crate::lineage::event_artifact(&l.rollout, l.seq, e));
            }
        }
        made
    }

    pub(super) fn state(&self) -> State {
        self.lock().policy.state()
    }

    /// Whether it finished and left the config (see [`Cell::finish`]).
    pub(super) fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }

    /// Carries out an operator's command; `Err` says why it is not allowed.
    pub(super) fn command(&self, env: &Env, command: Command, now: Instant) -> Result<(), String> {
        let mut inner = self.lock();
        let t = inner.policy.command(command, now)?;
        self.act(env, "api", &mut inner, t, now);
        if inner.policy.config().is_fleet() {
            self.wake.notify_one();
        }
        // Promoted or aborted: the route is free as the answer goes out.
        self.finish(env, "api", &inner);
        Ok(())
    }
}

/// Runs one rollout until it is final, leaves the config, or `cancel`.
pub(crate) async fn run(env: Arc<Env>, cell: Arc<Cell>, cancel: CancellationToken) {
    if let Some(c) = env.store.load().config.rollout(&cell.name) {
        announce(c);
    }
    let sources = Sources::new();
    let pusher = Pusher::new();
    let mut fleet = fleet_task::Clock::default();
    loop {
        let Some(config) = env.store.load().config.rollout(&cell.name).cloned() else {
            return;
        };
        let gathered = tokio::select! {
            () = cancel.cancelled() => return,
            g = sources.of(&config).gather(&env, &config) => g,
        };
        let Some(next) = cell.tick(&env, Instant::now(), &gathered) else {
            return;
        };
        let due = Instant::now() + next;
        // Until the next evaluation: apply a pending weight to the targets
        // (again at each wake by an operator's command), resolve DNS
        // targets and reconcile every target when their time comes. A
        // lookup runs beside the rest: a slow DNS server must not hold up
        // a rollback.
        loop {
            tokio::select! {
                () = cancel.cancelled() => return,
                () = cell.push(&env, &pusher) => {}
            }
            let (resolve_at, reconcile_at) = fleet.next(&config);
            let next = tokio::select! {
                () = cancel.cancelled() => return,
                () = tokio::time::sleep_until(due) => break,
                () = cell.wake.notified() => fleet_task::Next::Push,
                () = fleet_task::at(resolve_at) => fleet_task::Next::Lookup,
                found = fleet_task::finished(&mut fleet.lookup) => fleet_task::Next::Found(found),
                () = fleet_task::at(reconcile_at) => fleet_task::Next::Reconcile,
            };
            match next {
                fleet_task::Next::Push => {}
                fleet_task::Next::Lookup => fleet.start_lookup(),
                fleet_task::Next::Found((dns, found)) => {
                    fleet.resolved(&env, &cell, &config, &dns, found);
                }
                fleet_task::Next::Reconcile => {
                    fleet.reconciling(&config);
                    tokio::select! {
                        () = cancel.cancelled() => return,
                        () = cell.reconcile(&env, &pusher) => {}
                    }
                }
            }
        }
    }
}

/// The live config's definition of rollout `name`, as written.
fn written(env: &Env, name: &str) -> Option<RawRollout> {
    let snapshot = env.store.load();
    snapshot
        .config
        .raw
        .rollouts
        .iter()
        .find(|r| r.name == name)
        .cloned()
}

/// Says where a fleet rollout reads and writes, and what it lacks.
fn announce(c: &RolloutConfig) {
    if let Some(RolloutSource::Prometheus { url, .. }) = &c.source {
        info!(rollout = %c.name, %url, "rollout gates read from Prometheus");
    }
    if let Some(dns) = &c.discovery {
        info!(rollout = %c.name, dns = %dns.label(), "rollout weights applied through the control APIs a DNS name resolves to");
    } else if c.is_fleet() {
        info!(rollout = %c.name, targets = c.targets.len(), "rollout weights applied through the targets' control APIs");
    }
    if c.is_fleet() && std::env::var_os(&c.target_token_env).is_none() {
        warn!(rollout = %c.name, variable = %c.target_token_env, "rollout token variable not set; every target will refuse until it is");
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

fn publish(m: &RolloutMetrics, name: &str, policy: &Policy) {
    m.weight
        .with_label_values(&[name])
        .set(i64::from(policy.weight()));
    for &s in State::ALL {
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
    let _ = m.drift.remove_label_values(&[name]);
    let _ = m.coverage.remove_label_values(&[name]);
    for &s in State::ALL {
        let _ = m.state.remove_label_values(&[name, s.as_str()]);
    }
}
