//! Fleet mode's side of a rollout's task: applying a wanted weight to the
//! targets that lack it (`push`), following a DNS name's answers
//! (`Clock::start_lookup`, `Clock::resolved`), and every
//! `reconcile_interval` reading every target
//! that took the weight and setting back the ones that drifted
//! (`reconcile`). Calls go out without the cell's lock held: one may take
//! its whole timeout.

use std::future::Future;
use std::pin::Pin;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::time::Instant;
use tracing::{info, warn};

use super::super::fleet::{Discovery, DiscoveryStatus, Job, Pusher, Resolution};
use super::{Cell, Env, Inner};
use crate::config::{DnsTargets, RolloutConfig};

/// A DNS lookup in flight: the definition it is for, and its answer.
pub(super) type Lookup = Pin<Box<dyn Future<Output = Found> + Send>>;
pub(super) type Found = (DnsTargets, Result<Vec<String>, String>);

/// What woke the task between two evaluations.
pub(super) enum Next {
    /// An operator's command: push at once.
    Push,
    /// Time to resolve the name again.
    Lookup,
    /// A lookup answered.
    Found(Found),
    /// Time to reconcile.
    Reconcile,
}

/// Drifted targets named in one audit entry; the rest are counted.
const NAMED_IN_EVENT: usize = 5;

/// When the task next resolves and reconciles, and its resolver.
#[derive(Default)]
pub(super) struct Clock {
    discovery: Option<Discovery>,
    /// The next lookup; `None` while one is in flight, or without DNS.
    resolve_at: Option<Instant>,
    reconcile_at: Option<Instant>,
    pub lookup: Option<Lookup>,
}

/// The answer of the lookup in flight; never ends without one.
pub(super) async fn finished(lookup: &mut Option<Lookup>) -> Found {
    match lookup {
        Some(running) => {
            let found = running.await;
            *lookup = None;
            found
        }
        None => std::future::pending().await,
    }
}

/// Sleeps until `deadline`; never ends without one.
pub(super) async fn at(deadline: Option<Instant>) {
    match deadline {
        Some(d) => tokio::time::sleep_until(d).await,
        None => std::future::pending().await,
    }
}

impl Clock {
    /// The next lookup (DNS targets only; at once for a new name) and the
    /// next reconcile (fleet mode only; one interval after the start).
    pub(super) fn next(&mut self, config: &RolloutConfig) -> (Option<Instant>, Option<Instant>) {
        if !config.is_fleet() {
            *self = Clock::default();
            return (None, None);
        }
        let now = Instant::now();
        match &config.discovery {
            None => {
                self.discovery = None;
                self.resolve_at = None;
                self.lookup = None;
            }
            Some(dns) => {
                if self.discovery.as_ref().map(|d| &d.targets) != Some(dns) {
                    // A lookup for the old definition is of no use.
                    self.discovery = Some(Discovery::new(dns));
                    self.resolve_at = Some(now);
                    self.lookup = None;
                }
            }
        }
        let reconcile_at = *self
            .reconcile_at
            .get_or_insert(now + config.reconcile_interval);
        (self.resolve_at, Some(reconcile_at))
    }

    /// Starts a lookup of the name, for [`finished`] to wait on.
    pub(super) fn start_lookup(&mut self) {
        let Some(discovery) = &self.discovery else {
            return;
        };
        let discovery = discovery.clone();
        self.resolve_at = None;
        self.lookup = Some(Box::pin(async move {
            let found = discovery.resolve().await;
            (discovery.targets, found)
        }));
    }

    /// Follows a lookup's answer and sets the next lookup.
    pub(super) fn resolved(
        &mut self,
        env: &Env,
        cell: &Cell,
        config: &RolloutConfig,
        dns: &DnsTargets,
        found: Result<Vec<String>, String>,
    ) {
        if config.discovery.as_ref() != Some(dns) {
            // The definition changed while the lookup ran.
            self.resolve_at = Some(Instant::now());
            return;
        }
        cell.discovered(env, dns, found);
        self.resolve_at = Some(Instant::now() + dns.refresh);
    }

    /// A reconcile starts now: the next one is an interval away.
    pub(super) fn reconciling(&mut self, config: &RolloutConfig) {
        self.reconcile_at = Some(Instant::now() + config.reconcile_interval);
    }
}

impl Inner {
    /// A target was `added` to the list: it gets the rollout's weight at
    /// once, if the rollout has set one.
    pub(super) fn added(&mut self, added: bool) {
        if added && self.policy.step() > 0 && self.want.is_none() {
            self.want = Some(self.policy.weight());
        }
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

impl Cell {
    /// Follows one lookup of `dns`: new addresses are targets (pending,
    /// woken at once), gone ones are dropped; a failed lookup keeps them all
    /// and says why, once per run of failures.
    pub(super) fn discovered(
        &self,
        env: &Env,
        dns: &DnsTargets,
        result: Result<Vec<String>, String>,
    ) {
        let mut inner = self.lock();
        let status = inner
            .discovery
            .get_or_insert_with(|| DiscoveryStatus::new(dns));
        if status.dns != dns.label() || status.resolver != dns.resolver.map(|r| r.to_string()) {
            *status = DiscoveryStatus::new(dns);
        }
        let version = env.store.load().version;
        match status.record(result, now_ms()) {
            Resolution::Found { urls, recovered } => {
                let before = inner.targets.len();
                let added = inner.targets.follow(&urls);
                let now = inner.targets.len();
                if recovered {
                    info!(rollout = %self.name, dns = %dns.label(), targets = now, "DNS targets resolve again");
                }
                if added || now != before || recovered {
                    let action = format!(
                        "rollout {}: DNS {} resolves to {now} target(s) (was {before})",
                        self.name,
                        dns.label()
                    );
                    env.shared
                        .events
                        .push("rollout", &action, version, Vec::new());
                }
                inner.added(added);
                if added {
                    self.wake.notify_one();
                }
            }
            Resolution::Kept { first, error } => {
                if first {
                    let kept = inner.targets.len();
                    warn!(rollout = %self.name, dns = %dns.label(), error = %error, kept, "DNS targets not resolved; keeping the last ones");
                    let action = format!(
                        "rollout {}: DNS {} not resolved; keeping the last {kept} target(s)",
                        self.name,
                        dns.label()
                    );
                    env.shared
                        .events
                        .push("rollout", &action, version, vec![error]);
                }
            }
        }
    }

    /// Fleet mode: applies the wanted weight to the targets that do not
    /// have it yet, outside the lock (a call may take its timeout), then
    /// records the round. The weight counts as applied once every target
    /// has it. Does nothing without targets or without a weight to apply.
    pub(super) async fn push(&self, env: &Env, pusher: &Pusher) {
        let job = {
            let inner = self.lock();
            let c = inner.policy.config();
            let due = inner.targets.due();
            match inner.want {
                Some(w) if c.is_fleet() && !due.is_empty() => Job::new(c, due, w),
                _ => return,
            }
        };
        let results = pusher.push(&job).await;
        let mut inner = self.lock();
        let want = inner.want;
        let round = inner.targets.record(job.weight, want, results);
        let total = inner.targets.len();
        let version = env.store.load().version;
        if !round.first_failures.is_empty() {
            warn!(rollout = %self.name, weight = job.weight, failed = %round.first_failures.join("; "), "rollout weight not applied on every target; retrying");
            let action = format!(
                "rollout {}: weight {} not applied on {} of {total} target(s); retrying",
                self.name, job.weight, round.failed
            );
            env.shared
                .events
                .push("rollout", &action, version, round.first_failures);
        }
        if want == Some(job.weight) && inner.targets.due().is_empty() {
            inner.want = None;
            info!(rollout = %self.name, weight = job.weight, targets = total, "rollout weight applied on every target");
            let action = format!(
                "rollout {}: weight {} applied on all {total} target(s)",
                self.name, job.weight
            );
            env.shared
                .events
                .push("rollout", &action, version, Vec::new());
        }
    }

    /// Fleet mode, every `reconcile_interval`: reads every target that
    /// took the rollout's weight and writes it again where the split is
    /// another (a restarted pod, a hand on its API); each such target
    /// counts in `sluice_fleet_drift_total`. Nothing before the rollout
    /// has set a weight.
    pub(super) async fn reconcile(&self, env: &Env, pusher: &Pusher) {
        let job = {
            let inner = self.lock();
            let c = inner.policy.config();
            let settled = inner.targets.settled();
            if !c.is_fleet() || inner.policy.step() == 0 || settled.is_empty() {
                return;
            }
            Job::new(c, settled, inner.policy.weight())
        };
        let started = Instant::now();
        let results = pusher.push(&job).await;
        let mut inner = self.lock();
        let round = inner.targets.reconciled(job.weight, results);
        let version = env.store.load().version;
        if !round.drifted.is_empty() {
            let drifted = round.drifted.len();
            env.metrics()
                .drift
                .with_label_values(&[self.name.as_str()])
                .inc_by(drifted as u64);
            warn!(rollout = %self.name, weight = job.weight, drifted, "fleet targets had drifted; set back");
            let mut named = round.drifted[..drifted.min(NAMED_IN_EVENT)].join(", ");
            if drifted > NAMED_IN_EVENT {
                named.push_str(&format!(" and {} more", drifted - NAMED_IN_EVENT));
            }
            let action = format!(
                "rollout {}: {drifted} target(s) had drifted from weight {}, set back: {named}",
                self.name, job.weight
            );
            env.shared
                .events
                .push("rollout", &action, version, Vec::new());
        }
        if !round.first_failures.is_empty() {
            warn!(rollout = %self.name, failed = %round.first_failures.join("; "), "fleet targets not reconciled");
            let action = format!(
                "rollout {}: {} of {} target(s) not reconciled",
                self.name,
                round.failed,
                job.urls.len()
            );
            env.shared
                .events
                .push("rollout", &action, version, round.first_failures);
        }
        tracing::debug!(rollout = %self.name, targets = job.urls.len(), took_ms = started.elapsed().as_millis() as u64, "fleet reconciled");
    }
}
