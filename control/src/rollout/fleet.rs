//! Fleet mode's writing half: a rollout with `targets` applies each weight
//! change through every target's control API (`PUT /v1/routes/{route}/split`
//! with the bearer token from `target_token_env`), and the change counts as
//! applied only once every target has answered 200. Targets that failed are
//! listed in the rollout's status and in the audit log, and are retried at
//! every evaluation until all have it.
//!
//! The targets are listed, or found in DNS (`discovery`): the addresses of
//! a name, resolved again every `refresh`; an address that appears gets the
//! rollout's weight at once. Every `reconcile_interval` the targets that
//! took the weight are read again, and one found with another split (a pod
//! restarted with its config's weights, an operator's hand) is set back and
//! counted as drift. `push` makes the calls, bounded in number and time.

mod discovery;
mod push;

use serde::Serialize;

pub use discovery::DiscoveryStatus;
pub(crate) use discovery::{Discovery, Resolution};
pub(crate) use push::{Applied, Job, Pusher};

/// One target as the status shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetStatus {
    pub url: String,
    /// The canary weight it last accepted (`None`: none yet).
    pub weight: Option<u32>,
    /// It still has to take the rollout's weight.
    pub pending: bool,
    /// Attempts in a row that failed.
    pub failures: u32,
    /// Why the last attempt failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Times the reconcile loop found it with another split and set it back.
    #[serde(skip_serializing_if = "is_zero")]
    pub drift: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// Every target of one rollout, in config order.
#[derive(Debug, Default)]
pub(crate) struct Targets {
    list: Vec<TargetStatus>,
}

/// What one round of applying changed.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Round {
    /// Targets that failed this round.
    pub failed: usize,
    /// `url: error` of those that had not failed before: a target down
    /// for an hour is reported once, not at every retry.
    pub first_failures: Vec<String>,
    /// Reconcile rounds: the targets that had drifted and were set back.
    pub drifted: Vec<String>,
}

impl Targets {
    pub(super) fn new(urls: &[String]) -> Targets {
        let mut t = Targets::default();
        t.follow(urls);
        t
    }

    /// Follows a changed `targets` list: kept targets keep their state,
    /// new ones are pending. `true` when a target was added.
    pub(super) fn follow(&mut self, urls: &[String]) -> bool {
        if self.list.iter().map(|t| &t.url).eq(urls.iter()) {
            return false;
        }
        let mut old = std::mem::take(&mut self.list);
        let mut added = false;
        for url in urls {
            let kept = old
                .iter()
                .position(|t| &t.url == url)
                .map(|i| old.remove(i));
            added |= kept.is_none();
            self.list.push(kept.unwrap_or_else(|| TargetStatus {
                url: url.clone(),
                weight: None,
                pending: true,
                failures: 0,
                error: None,
                drift: 0,
            }));
        }
        added
    }

    /// A new weight to apply: every target has to take it, even one that
    /// has it already (resume re-sets a weight moved by hand).
    pub(super) fn want(&mut self) {
        for t in &mut self.list {
            t.pending = true;
        }
    }

    /// The targets still to take the weight.
    pub(super) fn due(&self) -> Vec<String> {
        self.urls(true)
    }

    /// The targets that took the weight: the reconcile loop checks them.
    pub(super) fn settled(&self) -> Vec<String> {
        self.urls(false)
    }

    fn urls(&self, pending: bool) -> Vec<String> {
        self.list
            .iter()
            .filter(|t| t.pending == pending)
            .map(|t| t.url.clone())
            .collect()
    }

    pub(super) fn len(&self) -> usize {
        self.list.len()
    }

    /// Records a round that applied `weight`. A target that took it stays
    /// pending when the rollout wants another weight by now (`want`).
    pub(super) fn record(
        &mut self,
        weight: u32,
        want: Option<u32>,
        results: Vec<(String, Result<Applied, String>)>,
    ) -> Round {
        let mut round = Round::default();
        for (url, result) in results {
            let Some(t) = self.list.iter_mut().find(|t| t.url == url) else {
                continue;
            };
            if t.took(&mut round, weight, result).is_some() {
                t.pending = t.pending && want != Some(weight);
            }
        }
        round
    }

    /// Records a reconcile round that checked settled targets against
    /// `weight`: one that had to be written had drifted. A target that has
    /// become pending meanwhile (the rollout moved on) is left to `record`.
    pub(super) fn reconciled(
        &mut self,
        weight: u32,
        results: Vec<(String, Result<Applied, String>)>,
    ) -> Round {
        let mut round = Round::default();
        for (url, result) in results {
            let Some(t) = self.list.iter_mut().find(|t| t.url == url && !t.pending) else {
                continue;
            };
            if t.took(&mut round, weight, result) == Some(Applied::Written) {
                t.drift += 1;
                round.drifted.push(url);
            }
        }
        round
    }

    pub(super) fn status(&self) -> Vec<TargetStatus> {
        self.list.clone()
    }
}

impl TargetStatus {
    /// One call's result on this target, counted in `round`; what the
    /// call did, `None` when it failed.
    fn took(
        &mut self,
        round: &mut Round,
        weight: u32,
        result: Result<Applied, String>,
    ) -> Option<Applied> {
        match result {
            Ok(applied) => {
                self.weight = Some(weight);
                self.failures = 0;
                self.error = None;
                Some(applied)
            }
            Err(e) => {
                self.failures += 1;
                round.failed += 1;
                if self.failures == 1 {
                    round.first_failures.push(format!("{}: {e}", self.url));
                }
                self.error = Some(e);
                None
            }
        }
    }
}

#[cfg(test)]
mod tests;
